{{/* The chart's name, at most 63 characters. */}}
{{- define "osb-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's resources' name. */}}
{{- define "osb-gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels that select the pods. */}}
{{- define "osb-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "osb-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "osb-gateway.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "osb-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret the pod's environment comes from. */}}
{{- define "osb-gateway.secretName" -}}
{{- default (include "osb-gateway.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/* The service account. */}}
{{- define "osb-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "osb-gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference: digest wins over tag. */}}
{{- define "osb-gateway.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Refuses values that would lose or split the operation locks. */}}
{{- define "osb-gateway.validate" -}}
{{- if not (has .Values.state.backend (list "bolt" "redis" "postgres")) }}
{{- fail (printf "state.backend must be bolt, redis or postgres, got %q" .Values.state.backend) }}
{{- end }}
{{- if and (eq .Values.state.backend "bolt") (gt (int .Values.replicaCount) 1) }}
{{- fail (printf "replicaCount %d with state.backend bolt: each replica would keep its own lock file; use state.backend redis or postgres for more than one replica" (int .Values.replicaCount)) }}
{{- end }}
{{- if and (eq .Values.state.backend "redis") (empty .Values.state.redis.addrs) }}
{{- fail "state.backend redis needs state.redis.addrs" }}
{{- end }}
{{- if eq .Values.state.backend "postgres" }}
{{- $sec := .Values.state.postgres.urlSecret | default dict }}
{{- if and (empty .Values.state.postgres.urlKey) (empty $sec.name) }}
{{- fail "state.backend postgres needs state.postgres.urlKey (the key of the chart's Secret holding the connection URL) or state.postgres.urlSecret.name (a Secret of its own, key urlSecret.key)" }}
{{- end }}
{{- if and .Values.state.postgres.urlKey $sec.name }}
{{- fail "state.postgres.urlKey and state.postgres.urlSecret.name both name the connection URL: set one of them" }}
{{- end }}
{{- if and $sec.name (empty $sec.key) }}
{{- fail (printf "state.postgres.urlSecret.key: which key of Secret %s holds the connection URL (uri, as PostgreSQL operators name it)?" $sec.name) }}
{{- end }}
{{- end }}
{{- with .Values.state.postgres.urlKey }}
{{- if and (not $.Values.secrets.existingSecret) (not (hasKey ($.Values.secrets.env | default dict) .)) }}
{{- fail (printf "state.postgres.urlKey %s: secrets.env has no such key" .) }}
{{- end }}
{{- end }}
{{- with .Values.state.redis.passwordKey }}
{{- if and (not $.Values.secrets.existingSecret) (not (hasKey ($.Values.secrets.env | default dict) .)) }}
{{- fail (printf "state.redis.passwordKey %s: secrets.env has no such key" .) }}
{{- end }}
{{- end }}
{{- if not .Values.secrets.existingSecret }}
{{- $token := required "admin.token is required (at least 16 characters), or secrets.existingSecret holding OSB_GATEWAY_ADMIN_TOKEN" .Values.admin.token }}
{{- if lt (len $token) 16 }}
{{- fail "admin.token must be at least 16 characters" }}
{{- end }}
{{- end }}
{{- range $k := list "listen" "admin" "state" }}
{{- if hasKey $.Values.config $k }}
{{- if or (ne $k "listen") (hasKey (get $.Values.config "listen") "address") }}
{{- fail (printf "config.%s: the chart sets it from its own values (listen, admin, state); remove it from config" $k) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* gateway.yaml: config with listen.address, admin and state from the values. */}}
{{- define "osb-gateway.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- $listen := merge (dict "address" (printf ":%d" (int .Values.listen.port)) "shutdown_delay" (printf "%ds" (int .Values.listen.shutdownDelaySeconds)) "shutdown_grace" (printf "%ds" (int .Values.listen.shutdownGraceSeconds))) (get $cfg "listen" | default dict) }}
{{- $_ := set $cfg "listen" $listen }}
{{- $_ := set $cfg "admin" (dict "address" (printf ":%d" (int .Values.admin.port)) "token" "${OSB_GATEWAY_ADMIN_TOKEN}") }}
{{- if eq .Values.state.backend "bolt" }}
{{- $_ := set $cfg "state" (dict "backend" "bolt" "path" "/var/lib/osb-gateway/osb-gateway.db") }}
{{- else if eq .Values.state.backend "postgres" }}
{{- $pg := dict "url" (printf "${%s}" (include "osb-gateway.postgresURLVar" .)) "max_conns" (int .Values.state.postgres.maxConns) "statement_timeout" .Values.state.postgres.statementTimeout "connect_timeout" .Values.state.postgres.connectTimeout }}
{{- $_ := set $cfg "state" (dict "backend" "postgres" "postgres" $pg) }}
{{- else }}
{{- $redis := dict "addrs" .Values.state.redis.addrs "key_prefix" .Values.state.redis.keyPrefix "tls" .Values.state.redis.tls }}
{{- with .Values.state.redis.masterName }}{{ $_ := set $redis "master_name" . }}{{ end }}
{{- with .Values.state.redis.username }}{{ $_ := set $redis "username" . }}{{ end }}
{{- with .Values.state.redis.passwordKey }}{{ $_ := set $redis "password" (printf "${%s}" .) }}{{ end }}
{{- with .Values.state.redis.replicaAcks }}{{ $_ := set $redis "replica_acks" . }}{{ end }}
{{- with .Values.state.redis.replicaAckTimeout }}{{ $_ := set $redis "replica_ack_timeout" . }}{{ end }}
{{- $_ := set $cfg "state" (dict "backend" "redis" "redis" $redis) }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* The environment variable gateway.yaml reads state.postgres.url from:
urlKey, a key of the chart's Secret (envFrom), or OSB_GATEWAY_POSTGRES_URL
from state.postgres.urlSecret (a secretKeyRef). */}}
{{- define "osb-gateway.postgresURLVar" -}}
{{- if (.Values.state.postgres.urlSecret | default dict).name }}OSB_GATEWAY_POSTGRES_URL{{ else }}{{ .Values.state.postgres.urlKey }}{{ end }}
{{- end }}

{{/* The container's env beside envFrom: the PostgreSQL URL from a Secret of
its own (state.postgres.urlSecret). The pod and the config check both get it. */}}
{{- define "osb-gateway.env" -}}
{{- $sec := .Values.state.postgres.urlSecret | default dict }}
{{- if and (eq .Values.state.backend "postgres") $sec.name }}
env:
  - name: OSB_GATEWAY_POSTGRES_URL
    valueFrom:
      secretKeyRef: {name: {{ $sec.name | quote }}, key: {{ $sec.key | quote }}}
{{- end }}
{{- end }}

{{/* The keys and values of the chart's Secret (and of the config check's copy). */}}
{{- define "osb-gateway.secretData" -}}
{{- range $k, $v := .Values.secrets.env }}
{{ $k }}: {{ $v | toString | quote }}
{{- end }}
OSB_GATEWAY_ADMIN_TOKEN: {{ .Values.admin.token | quote }}
{{- end }}
