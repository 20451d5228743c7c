{{/*
Names are fixed, as config/default renders them: the manager's flags and
code name the gate's Service, Secret and webhook configuration, the
extender's Service and the ConfigMap, and kube-scheduler's configuration
calls the extender's Service by name. One release per cluster.
*/}}
{{- define "diskschedule.prefix" -}}longhorn-diskschedule-{{- end }}
{{- define "diskschedule.serviceAccount" -}}longhorn-diskschedule-controller-manager{{- end }}

{{/*
Labels Helm's own tools rely on, on every object's metadata (never on
selectors, which are those of config/default).
*/}}
{{- define "diskschedule.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/*
The manager's pods, as config/manager selects them.
*/}}
{{- define "diskschedule.selectorLabels" -}}
app.kubernetes.io/name: diskschedule
app.kubernetes.io/component: manager
{{- end }}

{{/*
The service account every binding names.
*/}}
{{- define "diskschedule.subject" -}}
- kind: ServiceAccount
  name: {{ include "diskschedule.serviceAccount" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/*
What the chart refuses at render time. The manager checks the cluster itself
when it starts: without Longhorn's CRDs it exits, naming what is missing.
*/}}
{{- define "diskschedule.validate" -}}
{{- if .Values.longhorn.installCRDs -}}
{{- fail "longhorn.installCRDs=true: diskschedule never installs Longhorn's CRDs; they belong to Longhorn's own chart. Install Longhorn v1.12 first (helm install longhorn longhorn/longhorn --namespace longhorn-system), then this chart next to it with longhorn.installCRDs=false." -}}
{{- end -}}
{{- if ne .Release.Namespace .Values.longhorn.namespace -}}
{{- fail (printf "diskschedule installs into Longhorn's namespace %q, not %q: run helm install with --namespace %s (when Longhorn runs in another namespace, set longhorn.namespace to it and install there)." .Values.longhorn.namespace .Release.Namespace .Values.longhorn.namespace) -}}
{{- end -}}
{{- end }}

{{/*
The annotations of the pre-delete hook's objects (uninstall/hook.yaml).
*/}}
{{- define "diskschedule.hookAnnotations" -}}
helm.sh/hook: pre-delete
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}
