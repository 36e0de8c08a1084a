{{/* Labels of every object: the name the selectors use, and Helm's bookkeeping. */}}
{{- define "flux-operator.labels" -}}
app.kubernetes.io/name: flux-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
