{{/* Names and labels shared by every template. */}}

{{- define "gpu-operator.labels" -}}
app.kubernetes.io/name: gpu-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "gpu-operator.selectorLabels" -}}
app.kubernetes.io/name: gpu-operator
app.kubernetes.io/component: manager
{{- end -}}

{{/* The operator's image: [repository/]image:version (version defaults to appVersion). */}}
{{- define "gpu-operator.image" -}}
{{- $tag := default .Chart.AppVersion .Values.operator.version -}}
{{- if .Values.operator.repository -}}
{{- printf "%s/%s:%s" .Values.operator.repository .Values.operator.image $tag -}}
{{- else -}}
{{- printf "%s:%s" .Values.operator.image $tag -}}
{{- end -}}
{{- end -}}

{{/*
Refuse a value this operator does not support. files/unsupported-values.yaml lists every key
of NVIDIA's chart we do not implement, with that chart's default: a values file may carry the
key at that default (it changes nothing), any other value fails the install naming the key.
*/}}
{{- define "gpu-operator.checkUnsupported" -}}
{{- $unsupported := .Files.Get "files/unsupported-values.yaml" | fromYaml -}}
{{- range $path, $default := $unsupported -}}
{{- $value := $.Values -}}
{{- $found := true -}}
{{- range $key := splitList "." $path -}}
{{- if and $found (kindIs "map" $value) (hasKey $value $key) -}}
{{- $value = index $value $key -}}
{{- else -}}
{{- $found = false -}}
{{- end -}}
{{- end -}}
{{- if and $found (ne (toJson $value) (toJson $default)) -}}
{{- fail (printf "values: %s is not supported by this operator (only %s, the default of NVIDIA's chart, is accepted); remove it from your values" $path (toJson $default)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
`values` less every key files/unsupported-values.yaml lists under `path` (they are accepted
only at NVIDIA's defaults, and the ClusterPolicy must not carry them), as YAML.
*/}}
{{- define "gpu-operator.prune" -}}
{{- $out := dict -}}
{{- range $key, $value := .values -}}
{{- $path := printf "%s.%s" $.path $key -}}
{{- if not (hasKey $.unsupported $path) -}}
{{- $deeper := false -}}
{{- range $u, $_ := $.unsupported -}}
{{- if hasPrefix (printf "%s." $path) $u -}}
{{- $deeper = true -}}
{{- end -}}
{{- end -}}
{{- if and $deeper (kindIs "map" $value) -}}
{{- $value = include "gpu-operator.prune" (dict "values" $value "path" $path "unsupported" $.unsupported) | fromYaml -}}
{{- end -}}
{{- $_ := set $out $key $value -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
