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
What the chart refuses at render time: Longhorn's CRDs, another namespace
than Longhorn's, a DiskSchedule CRD on the cluster that is not the
add-on's (by its label), a --gate-timeout the webhook's timeout does not
cover. The manager checks the cluster itself when it starts: without
Longhorn's CRDs it exits, naming what is missing.
*/}}
{{- define "diskschedule.validate" -}}
{{- if .Values.longhorn.installCRDs -}}
{{- fail "longhorn.installCRDs=true: diskschedule never installs Longhorn's CRDs; they belong to Longhorn's own chart. Install Longhorn v1.12 first (helm install longhorn longhorn/longhorn --namespace longhorn-system), then this chart next to it with longhorn.installCRDs=false." -}}
{{- end -}}
{{- if ne .Release.Namespace .Values.longhorn.namespace -}}
{{- fail (printf "diskschedule installs into Longhorn's namespace %q, not %q: run helm install with --namespace %s (when Longhorn runs in another namespace, set longhorn.namespace to it and install there)." .Values.longhorn.namespace .Release.Namespace .Values.longhorn.namespace) -}}
{{- end -}}
{{- /* lookup finds nothing under helm template and --dry-run: the manager checks again when it starts. */ -}}
{{- $crd := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" "diskschedules.longhorn.io" -}}
{{- if and $crd (ne (dig "metadata" "labels" "app.kubernetes.io/name" "" $crd) "diskschedule") -}}
{{- fail "the CustomResourceDefinition diskschedules.longhorn.io on the cluster does not carry the label app.kubernetes.io/name=diskschedule, so it is not this add-on's: it may be Longhorn's own (should Longhorn ship a DiskSchedule) or another project's, and the add-on neither shares nor replaces it. Nothing was installed; see docs/operations.md, \"When Longhorn ships its own DiskSchedule CRD\"." -}}
{{- end -}}
{{- $gateMillis := include "diskschedule.gateTimeoutMillis" . -}}
{{- if $gateMillis -}}
{{- $margin := include "diskschedule.gateTimeoutMargin" . | int -}}
{{- if gt (addf (float64 $gateMillis) (mulf $margin 1000)) (mulf .Values.gate.timeoutSeconds 1000) -}}
{{- fail (printf "manager.extraArgs sets --gate-timeout to %vms, which leaves less than %ds of gate.timeoutSeconds=%v: kube-apiserver would give up on the gate before it answers (and, with failurePolicy Fail, refuse Longhorn's write without saying why). Lower --gate-timeout or raise gate.timeoutSeconds to at least the gate's wait plus %ds." $gateMillis $margin .Values.gate.timeoutSeconds $margin) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
The annotations of the pre-delete hook's objects (uninstall/hook.yaml).
*/}}
{{- define "diskschedule.hookAnnotations" -}}
helm.sh/hook: pre-delete
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}

{{/*
The manager pods' affinity: manager.affinity, with the pod anti-affinity
manager.podAntiAffinity names (one manager per node, required or
preferred; none adds nothing) unless manager.affinity has its own.
*/}}
{{- define "diskschedule.managerAffinity" -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "diskschedule.selectorLabels" . | fromYaml)) -}}
{{- $anti := dict -}}
{{- if eq .Values.manager.podAntiAffinity "required" -}}
{{- $anti = dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term) -}}
{{- else if eq .Values.manager.podAntiAffinity "preferred" -}}
{{- $anti = dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term)) -}}
{{- end -}}
{{- $affinity := deepCopy (.Values.manager.affinity | default dict) -}}
{{- if $anti -}}
{{- $affinity = merge $affinity (dict "podAntiAffinity" $anti) -}}
{{- end -}}
{{- if $affinity -}}
{{- toYaml $affinity -}}
{{- end -}}
{{- end }}

{{/*
The margin, in seconds, between the gate's own wait for a decision (the
manager's --gate-timeout, 8s by default: gate.DefaultDecisionTimeout) and
the webhook's timeoutSeconds: kube-apiserver must still be waiting when the
gate answers, or it fails the call (and with failurePolicy Fail refuses
the write) before the gate says why. values.schema.json's minimum for
gate.timeoutSeconds is the default wait plus this margin.
*/}}
{{- define "diskschedule.gateTimeoutMargin" -}}2{{- end }}

{{/*
The manager's --gate-timeout from manager.extraArgs in milliseconds
("--gate-timeout=6s", "-gate-timeout=1m30s", or "--gate-timeout" then
"6s"), or "" when it is not there. Fails on a value that is not a Go
duration.
*/}}
{{- define "diskschedule.gateTimeoutMillis" -}}
{{- $value := "" -}}
{{- $next := false -}}
{{- range .Values.manager.extraArgs -}}
{{- if $next -}}
{{- $value = . -}}
{{- $next = false -}}
{{- else if regexMatch "^--?gate-timeout=" . -}}
{{- $value = regexReplaceAll "^--?gate-timeout=" . "" -}}
{{- else if regexMatch "^--?gate-timeout$" . -}}
{{- $next = true -}}
{{- end -}}
{{- end -}}
{{- if $value -}}
{{- if not (regexMatch "^([0-9]*[.]?[0-9]+(ns|us|µs|ms|s|m|h))+$" $value) -}}
{{- fail (printf "manager.extraArgs: --gate-timeout=%s is not a duration such as 8s or 1500ms" $value) -}}
{{- end -}}
{{- $units := dict "h" 3600000.0 "m" 60000.0 "s" 1000.0 "ms" 1.0 "us" 0.001 "µs" 0.001 "ns" 0.000001 -}}
{{- $millis := 0.0 -}}
{{- range regexFindAll "[0-9]*[.]?[0-9]+(ns|us|µs|ms|s|m|h)" $value -1 -}}
{{- $unit := regexFind "(ns|us|µs|ms|s|m|h)$" . -}}
{{- $number := trimSuffix $unit . | float64 -}}
{{- $millis = addf $millis (mulf $number (get $units $unit)) -}}
{{- end -}}
{{- $millis -}}
{{- end -}}
{{- end }}

{{/*
The volume source of the CA that signs kube-apiserver's webhook client
certificate (gate.clientCA), or "" when none is set. Fails when both a
ConfigMap and a Secret are named.
*/}}
{{- define "diskschedule.gateClientCA" -}}
{{- $ca := .Values.gate.clientCA | default dict -}}
{{- $key := $ca.key | default "ca.crt" -}}
{{- if and $ca.configMap $ca.secret -}}
{{- fail "gate.clientCA names both a ConfigMap and a Secret: name the one that holds the CA of kube-apiserver's webhook client certificate" -}}
{{- else if $ca.configMap -}}
configMap:
  name: {{ $ca.configMap }}
  items:
  - key: {{ $key }}
    path: {{ $key }}
{{- else if $ca.secret -}}
secret:
  secretName: {{ $ca.secret }}
  items:
  - key: {{ $key }}
    path: {{ $key }}
{{- end -}}
{{- end }}
