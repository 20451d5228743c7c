{{/*
The second scheduler's image: scheduler.image, its tag the cluster's own
Kubernetes version (without a provider's suffix, v1.30.5-gke.1014001 is
v1.30.5) unless set.
*/}}
{{- define "diskschedule.schedulerImage" -}}
{{- $tag := .Values.scheduler.image.tag | default (regexReplaceAll "[-+].*$" .Capabilities.KubeVersion.Version "") -}}
{{ .Values.scheduler.image.repository }}:{{ $tag }}
{{- end }}

{{/*
The second scheduler's pods.
*/}}
{{- define "diskschedule.schedulerSelectorLabels" -}}
app.kubernetes.io/name: diskschedule
app.kubernetes.io/component: scheduler
{{- end }}
