{{/*
The second scheduler's image: scheduler.image, kube-scheduler with the
diskschedule plugin compiled in, its tag the manager's (image.tag) unless
set.
*/}}
{{- define "diskschedule.schedulerImage" -}}
{{ .Values.scheduler.image.repository }}:{{ .Values.scheduler.image.tag | default .Values.image.tag }}
{{- end }}

{{/*
The second scheduler's pods.
*/}}
{{- define "diskschedule.schedulerSelectorLabels" -}}
app.kubernetes.io/name: diskschedule
app.kubernetes.io/component: scheduler
{{- end }}
