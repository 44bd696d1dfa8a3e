{{/* Labels shared by every object of the chart. */}}
{{- define "topoalign.labels" -}}
app.kubernetes.io/name: topoalign
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{/* Selector labels of the agent's pods. */}}
{{- define "topoalign.selector" -}}
app.kubernetes.io/name: topoalign
app.kubernetes.io/component: driver
{{- end }}

{{/* The rail source as file text: the value as written when a string, else as YAML. */}}
{{- define "topoalign.rails" -}}
{{- if kindIs "string" .Values.rails -}}
{{ .Values.rails }}
{{- else -}}
{{ toYaml .Values.rails }}
{{- end -}}
{{- end }}
