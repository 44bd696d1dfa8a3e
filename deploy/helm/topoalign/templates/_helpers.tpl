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

{{/* The rail source as file text (the `rails` value is the file's text, a string). */}}
{{- define "topoalign.rails" -}}
{{- if not (kindIs "string" .Values.rails) -}}
{{- fail "rails: give the rail source as text (rails: |, then the file's lines), not a map" -}}
{{- end -}}
{{ .Values.rails }}
{{- end }}
