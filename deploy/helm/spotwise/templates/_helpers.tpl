{{/* Object names, labels and the few computed values the templates share. */}}

{{- define "spotwise.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "spotwise.fullname" -}}
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

{{- define "spotwise.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "spotwise.commonLabels" -}}
helm.sh/chart: {{ include "spotwise.chart" . }}
app.kubernetes.io/part-of: spotwise
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The spotwise servers. */}}
{{- define "spotwise.selectorLabels" -}}
app.kubernetes.io/name: {{ include "spotwise.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end -}}

{{- define "spotwise.labels" -}}
{{ include "spotwise.commonLabels" . }}
{{ include "spotwise.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
{{- end -}}

{{/* The NATS nodes. */}}
{{- define "spotwise.nats.fullname" -}}
{{- printf "%s-nats" (include "spotwise.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "spotwise.nats.headless" -}}
{{- printf "%s-nats-headless" (include "spotwise.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "spotwise.nats.selectorLabels" -}}
app.kubernetes.io/name: nats
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: nats
{{- end -}}

{{- define "spotwise.nats.labels" -}}
{{ include "spotwise.commonLabels" . }}
{{ include "spotwise.nats.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.nats.image.tag | quote }}
{{- end -}}

{{/* The stable DNS name of NATS node $i: <statefulset>-<i>.<headless>.<ns>.svc.<domain>. */}}
{{- define "spotwise.nats.podHost" -}}
{{- $ := index . 0 -}}
{{- $i := index . 1 -}}
{{- printf "%s-%d.%s.%s.svc.%s" (include "spotwise.nats.fullname" $) $i (include "spotwise.nats.headless" $) $.Release.Namespace $.Values.clusterDomain -}}
{{- end -}}

{{/* The servers' --nats-url: every node of the in-chart cluster by its stable name (like compose), or the external URLs. */}}
{{- define "spotwise.natsURL" -}}
{{- if .Values.nats.enabled -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.nats.replicas) -}}
{{- $scheme := ternary "tls" "nats" (not (empty $.Values.nats.tls.secretName)) -}}
{{- $urls = append $urls (printf "%s://%s:4222" $scheme (include "spotwise.nats.podHost" (list $ $i))) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- if not .Values.externalNATS.urls -}}
{{- fail "nats.enabled is false: externalNATS.urls must name the NATS cluster" -}}
{{- end -}}
{{- join "," .Values.externalNATS.urls -}}
{{- end -}}
{{- end -}}

{{/* Replicas of every stream and bucket: streamReplicas, else as many as nodes (at most 5). */}}
{{- define "spotwise.natsReplicas" -}}
{{- if .Values.nats.enabled -}}
{{- if gt (int .Values.nats.streamReplicas) 0 -}}
{{- .Values.nats.streamReplicas -}}
{{- else -}}
{{- min (int .Values.nats.replicas) 5 -}}
{{- end -}}
{{- else -}}
{{- .Values.externalNATS.replicas -}}
{{- end -}}
{{- end -}}

{{- define "spotwise.identitySecret" -}}
{{- default (printf "%s-nats-identity" (include "spotwise.fullname" .)) .Values.natsIdentity.secretName -}}
{{- end -}}

{{- define "spotwise.operatorSecret" -}}
{{- default (printf "%s-nats-operator" (include "spotwise.fullname" .)) .Values.natsIdentity.operatorSecretName -}}
{{- end -}}

{{- define "spotwise.secretEnvName" -}}
{{- if .Values.secretEnv.existingSecret -}}
{{- .Values.secretEnv.existingSecret -}}
{{- else if .Values.secretEnv.values -}}
{{- printf "%s-env" (include "spotwise.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "spotwise.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "spotwise.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "spotwise.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
