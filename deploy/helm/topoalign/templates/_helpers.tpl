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

{{/* Whether the driver writes domain labels, checked: on needs a source. */}}
{{- define "topoalign.domainLabels" -}}
{{- $d := (.Values.driver | default dict).domainLabels | default dict -}}
{{- $n := (.Values.driver | default dict).neighbours | default dict -}}
{{- if $d.enabled -}}
{{- if not (or $d.fabricFrom $d.domains $n.lldpFrom $n.ibSysfs) -}}
{{- fail "driver.domainLabels.enabled: give driver.domainLabels.fabricFrom or driver.domainLabels.domains, or a neighbour source (driver.neighbours.lldpFrom, driver.neighbours.ibSysfs)" -}}
{{- end -}}
{{- if and $d.domains (not (kindIs "string" $d.domains)) -}}
{{- fail "driver.domainLabels.domains: give the domain file as text (domains: |, then the file's lines), not a map" -}}
{{- end -}}
true
{{- end -}}
{{- end }}

{{/* The rail source as file text (the `rails` value is the file's text, a string). */}}
{{- define "topoalign.rails" -}}
{{- if not (kindIs "string" .Values.rails) -}}
{{- fail "rails: give the rail source as text (rails: |, then the file's lines), not a map" -}}
{{- end -}}
{{ .Values.rails }}
{{- end }}

{{/* Selector labels of the webhook's pods. */}}
{{- define "topoalign.webhookSelector" -}}
app.kubernetes.io/name: topoalign
app.kubernetes.io/component: webhook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The webhook's name table (its --config file): the lists the values give; the names it
   writes are the ones the DeviceClasses above back (topoalign.dev/gpu-nic-pair, ...). */}}
{{- define "topoalign.webhookNames" -}}
{{- $w := .Values.webhook -}}
{{- $out := dict -}}
{{- range $k := list "gpus" "nics" "sharedRdma" "migPrefixes" "sriovNetworks" -}}
{{- $v := index $w $k -}}
{{- if not (kindIs "slice" ($v | default list)) -}}
{{- fail (printf "webhook.%s: give a list of names" $k) -}}
{{- end -}}
{{- if $v -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- if $out -}}
{{ toYaml $out }}
{{- else -}}
{}
{{- end -}}
{{- end }}
