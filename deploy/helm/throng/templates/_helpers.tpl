{{/*
Names and labels shared by the chart's templates.
*/}}

{{/* The chart's name (`throng`, or nameOverride). */}}
{{- define "throng.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The full name: fullnameOverride, else the release name when it holds the chart's name, else `<release>-<name>`. */}}
{{- define "throng.fullname" -}}
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

{{/* Labels of every resource. */}}
{{- define "throng.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "throng.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: throng
{{- end -}}

{{/* Selector labels of one component: call with (dict "ctx" $ "component" "edge"). */}}
{{- define "throng.selector" -}}
app.kubernetes.io/name: {{ include "throng.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The image reference. */}}
{{- define "throng.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The Secret holding the passwords (and the ledger URL). */}}
{{- define "throng.secretName" -}}
{{- default (printf "%s-auth" (include "throng.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{/* The origin's base URL as edges and players reach it. */}}
{{- define "throng.originUrl" -}}
{{- if .Values.origin.url -}}
{{- .Values.origin.url | trimSuffix "/" -}}
{{- else -}}
{{- printf "http://%s-origin.%s.svc:%d" (include "throng.fullname" .) .Release.Namespace (int .Values.port) -}}
{{- end -}}
{{- end -}}

{{/* The environment every server gets: passwords from the Secret, the state directory. */}}
{{- define "throng.env" -}}
- name: THRONG_STATE_DIR
  value: /var/lib/throng
- name: THRONG_SOURCE_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "throng.secretName" . }}
      key: source-password
- name: THRONG_ADMIN_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "throng.secretName" . }}
      key: admin-password
- name: THRONG_CLUSTER_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "throng.secretName" . }}
      key: cluster-secret
- name: THRONG_LEDGER_DATABASE
  valueFrom:
    secretKeyRef:
      name: {{ include "throng.secretName" . }}
      key: ledger-database
      optional: true
{{- end -}}

{{/* The probes of every server (docs/operators.md, "Health and drain"). */}}
{{- define "throng.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz/live
    port: http
  periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
  failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
readinessProbe:
  httpGet:
    path: /healthz/ready
    port: http
  periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
  failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
{{- end -}}
