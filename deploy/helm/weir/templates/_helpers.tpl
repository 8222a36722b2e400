{{- define "weir.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "weir.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "weir.labels" -}}
{{ include "weir.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The secret the pods read their environment from, if any. */}}
{{- define "weir.secretName" -}}
{{- if .Values.secrets.existingSecret -}}
{{- .Values.secrets.existingSecret -}}
{{- else if .Values.secrets.values -}}
{{- include "weir.fullname" . -}}
{{- end -}}
{{- end -}}

{{/* A StatefulSet in group mode, and for a job whose state is on disk. */}}
{{- define "weir.stateful" -}}
{{- if or (eq .Values.mode "group") (eq .Values.state.backend "pebble") -}}true{{- end -}}
{{- end -}}

{{- define "weir.validate" -}}
{{- if not (has .Values.mode (list "job" "group")) -}}
{{- fail (printf "weir chart: mode %q: want job or group" .Values.mode) -}}
{{- end -}}
{{- if not (has .Values.state.backend (list "memory" "pebble")) -}}
{{- fail (printf "weir chart: state.backend %q: want memory or pebble" .Values.state.backend) -}}
{{- end -}}
{{- if and (eq .Values.mode "group") (lt (int .Values.replicas) 1) -}}
{{- fail (printf "weir chart: replicas %v: want an integer >= 1" .Values.replicas) -}}
{{- end -}}
{{- if and (eq .Values.mode "group") (not .Values.checkpointURL) -}}
{{- fail "weir chart: mode group needs checkpointURL (s3://, gs:// or azblob://: every member must reach it)" -}}
{{- end -}}
{{- if not .Values.pipeline -}}
{{- fail "weir chart: pipeline is empty: want the pipeline file's YAML text" -}}
{{- end -}}
{{- end -}}
