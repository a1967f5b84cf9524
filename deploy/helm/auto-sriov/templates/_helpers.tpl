{{/*
Helm's own labels, on every object's metadata except the CRDs (which are shipped byte for byte
from deploy/base/ and deploy/operator/). Pod templates and selectors never get them: a chart upgrade must not roll a
DaemonSet, and selectors are immutable.
*/}}
{{- define "auto-sriov.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: auto-sriov
{{- end }}

{{/*
An image reference from {repository, tag, digest}: the digest wins, then the tag, then appVersion.
Call with (dict "image" .Values.x.image "root" $).
*/}}
{{- define "auto-sriov.image" -}}
{{- $img := .image -}}
{{- if $img.digest -}}
{{ $img.repository }}@{{ $img.digest }}
{{- else -}}
{{ $img.repository }}:{{ $img.tag | default .root.Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* What every container of ours carries: its image, imagePullPolicy when set, and a termination
message that falls back to the log's tail, so `kubectl describe pod` says why it exited. Same
argument as auto-sriov.image. */}}
{{- define "auto-sriov.container-common" -}}
image: {{ include "auto-sriov.image" . }}
{{- with .image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
terminationMessagePolicy: FallbackToLogsOnError
{{- end }}

{{/* The operator's image: its own when given, else the driver's (which ships sriov-operator). */}}
{{- define "auto-sriov.operator-image" -}}
{{- $img := .Values.operator.image -}}
{{- if not $img.repository -}}
{{- $img = .Values.driver.image -}}
{{- end -}}
{{ include "auto-sriov.container-common" (dict "image" $img "root" .) }}
{{- end }}

{{/* nodeSelector, affinity and tolerations of a Pod spec, each only when set. */}}
{{- define "auto-sriov.placement" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
