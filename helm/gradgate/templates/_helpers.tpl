{{/*
Expand the name of the chart.
*/}}
{{- define "gradgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Create a default fully qualified app name.
Truncated at 63 characters because some Kubernetes name fields are limited to this (DNS names).
If the release name contains the chart name it is used as the full name.
*/}}
{{- define "gradgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Create chart name and version as used by the chart label.
*/}}
{{- define "gradgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Common labels
*/}}
{{- define "gradgate.labels" -}}
helm.sh/chart: {{ include "gradgate.chart" . }}
{{ include "gradgate.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gradgate
{{- end -}}

{{/*
Selector labels
*/}}
{{- define "gradgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gradgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
Names of the gateway's and the controller's objects.
*/}}
{{- define "gradgate.gateway.fullname" -}}
{{- printf "%s-gateway" (include "gradgate.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{- define "gradgate.controller.fullname" -}}
{{- printf "%s-controller" (include "gradgate.fullname" . | trunc 52 | trimSuffix "-") -}}
{{- end -}}

{{/*
Create the name of the service account to use
*/}}
{{- define "gradgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ default (include "gradgate.fullname" .) .Values.serviceAccount.name }}
{{- else -}}
{{ default "default" .Values.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{/*
The image of both components: repository:tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "gradgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The Secret holding the API token, and its key; empty when there is no token.
*/}}
{{- define "gradgate.tokenSecretName" -}}
{{- if .Values.auth.existingSecret -}}
{{- .Values.auth.existingSecret -}}
{{- else if .Values.auth.token -}}
{{- printf "%s-token" (include "gradgate.fullname" . | trunc 57 | trimSuffix "-") -}}
{{- end -}}
{{- end -}}

{{- define "gradgate.tokenSecretKey" -}}
{{- if .Values.auth.existingSecret -}}
{{- .Values.auth.existingSecretKey -}}
{{- else -}}
token
{{- end -}}
{{- end -}}

{{/*
Where the token file is mounted, in both pods.
*/}}
{{- define "gradgate.tokenDir" -}}
/etc/gradgate/token
{{- end -}}

{{/*
Where the controller keeps the policy settings set through its API (policy.settings_file), on
the controller.settings volume.
*/}}
{{- define "gradgate.controller.settingsFile" -}}
/var/lib/gradgate/policy-settings.json
{{- end -}}

{{/*
The gateway's pod annotations as a downward API file, in DPDK mode: Multus's network-status
gives the gateway its DPDK port and address (dpdk.network_status_file).
*/}}
{{- define "gradgate.podinfoDir" -}}
/etc/gradgate/podinfo
{{- end -}}

{{- define "gradgate.podinfoAnnotations" -}}
{{ include "gradgate.podinfoDir" . }}/annotations
{{- end -}}

{{/*
The controller's address as the gateways dial it.
*/}}
{{- define "gradgate.controllerAddress" -}}
{{- if .Values.gateway.controllerAddress -}}
{{- .Values.gateway.controllerAddress -}}
{{- else if .Values.controller.enabled -}}
{{- printf "%s.%s.svc:%d" (include "gradgate.controller.fullname" .) .Release.Namespace (int .Values.controller.port) -}}
{{- else -}}
{{- fail "controller.enabled is false: set gateway.controllerAddress to the controller's host:port" -}}
{{- end -}}
{{- end -}}

{{/*
The pod-level security context of both components: non-root 65532 (group 65532 owns the socket
and reads the token file), the runtime's default seccomp profile.
*/}}
{{- define "gradgate.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
The container security context of both components (but the gateway in DPDK mode): non-root,
no capabilities.
*/}}
{{- define "gradgate.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
seccompProfile:
  type: RuntimeDefault
capabilities:
  drop:
    - ALL
{{- end -}}

{{/*
The liveness and readiness probes: GET PATH on the named port. Call with (list PATH PORT VALUES).
*/}}
{{- define "gradgate.httpProbe" -}}
{{- $path := index . 0 -}}
{{- $port := index . 1 -}}
{{- $probe := index . 2 -}}
httpGet:
  path: {{ $path }}
  port: {{ $port }}
{{ toYaml $probe }}
{{- end -}}
