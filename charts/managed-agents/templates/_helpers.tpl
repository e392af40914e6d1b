{{/* The chart's name, cut to 63 characters (a label value's limit). */}}
{{- define "managed-agents.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every object's name, cut to 41 characters: the StatefulSet <fullname>-postgresql
must stay within 52 (its pods' controller-revision-hash label adds 11), and the longest name,
the Service <fullname>-postgresql-headless, within 63.
*/}}
{{- define "managed-agents.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 41 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 41 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 41 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "managed-agents.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; pass (dict "ctx" $ "component" "api"). */}}
{{- define "managed-agents.labels" -}}
helm.sh/chart: {{ include "managed-agents.chart" .ctx }}
{{ include "managed-agents.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Values.image.tag | default .ctx.Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: managed-agents
{{- end -}}

{{/* The labels a component's Service and workload select on; they never change. */}}
{{- define "managed-agents.selectorLabels" -}}
app.kubernetes.io/name: {{ include "managed-agents.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "managed-agents.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The Secret every credential comes from: the chart's own or existingSecret. */}}
{{- define "managed-agents.secretName" -}}
{{- .Values.existingSecret | default (include "managed-agents.fullname" .) -}}
{{- end -}}

{{- define "managed-agents.serviceAccountName" -}}
{{- printf "%s-%s" (include "managed-agents.fullname" .ctx) .component -}}
{{- end -}}

{{- define "managed-agents.temporalAddress" -}}
{{- if .Values.temporal.address -}}
{{- .Values.temporal.address -}}
{{- else -}}
{{- printf "%s-temporal:7233" (include "managed-agents.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
Cross-value checks the schema cannot express. Each message names the value to set, as the
server's own configuration errors name their variable.
*/}}
{{- define "managed-agents.validate" -}}
{{- if and .Values.worker.webSearch.backend (not .Values.worker.webSearch.url) -}}
{{- fail "worker.webSearch.backend needs worker.webSearch.url (the search backend's base URL)" -}}
{{- end -}}
{{- if and (not .Values.postgresql.enabled) (not .Values.externalDatabase.url) (not .Values.existingSecret) -}}
{{- fail "postgresql.enabled=false needs externalDatabase.url (or existingSecret with a database-url key)" -}}
{{- end -}}
{{- if and .Values.postgresql.enabled .Values.externalDatabase.url -}}
{{- fail "externalDatabase.url is set but postgresql.enabled=true: set postgresql.enabled=false to use the external database" -}}
{{- end -}}
{{- if and (not .Values.temporal.devServer.enabled) (not .Values.temporal.address) -}}
{{- fail "temporal.devServer.enabled=false needs temporal.address (host:port of the Temporal frontend)" -}}
{{- end -}}
{{- if and .Values.temporal.devServer.enabled .Values.temporal.address -}}
{{- fail "temporal.address is set but temporal.devServer.enabled=true: set temporal.devServer.enabled=false to use that Temporal" -}}
{{- end -}}
{{- if and (eq .Values.model.provider "anthropic") (not .Values.existingSecret) (not .Values.model.anthropic.apiKey) (not .Values.model.anthropic.authToken) -}}
{{- fail "model.provider=anthropic needs model.anthropic.apiKey or model.anthropic.authToken (or existingSecret with anthropic-api-key or anthropic-auth-token)" -}}
{{- end -}}
{{- if and (eq .Values.sandbox.provider "kubernetes") (not .Values.sandbox.kubernetes.image) -}}
{{- fail "sandbox.provider=kubernetes needs sandbox.kubernetes.image (the image sandboxes run in; any image with bash)" -}}
{{- end -}}
{{- if and (eq .Values.sandbox.provider "kubernetes") (not .Values.controller.enabled) -}}
{{- fail "sandbox.provider=kubernetes needs controller.enabled=true: the controller runs the sandbox pods" -}}
{{- end -}}
{{- if and (eq .Values.model.provider "anthropic") (eq .Values.sandbox.provider "local") (not .Values.sandbox.allowUnsafeLocal) -}}
{{- fail "model.provider=anthropic with sandbox.provider=local needs sandbox.allowUnsafeLocal=true: the local sandbox is not a security boundary" -}}
{{- end -}}
{{- with .Values.environmentWorker }}
{{- if .enabled }}
{{- if not .environmentID -}}
{{- fail "environmentWorker.enabled=true needs environmentWorker.environmentID: the self-hosted environment (env_…) it serves" -}}
{{- end -}}
{{- if and .environmentKey .existingSecret -}}
{{- fail "environmentWorker.environmentKey and environmentWorker.existingSecret are both set: the environment key comes from one of them" -}}
{{- end -}}
{{- if and .environmentKey $.Values.existingSecret (not .existingSecret) -}}
{{- fail "environmentWorker.environmentKey is not used with existingSecret: put the key in that Secret under environment-key, or name a Secret of your own in environmentWorker.existingSecret" -}}
{{- end -}}
{{- if not (or .environmentKey .existingSecret $.Values.existingSecret) -}}
{{- fail "environmentWorker.enabled=true needs the environment's key: environmentWorker.existingSecret (a Secret holding it under environmentWorker.existingSecretKey) or environmentWorker.environmentKey (kept in the chart's Secret); `managed-agents admin keys create --workspace … --environment env_…` makes one" -}}
{{- end -}}
{{- if and (eq .sandboxProvider "kubernetes") (ne $.Values.sandbox.provider "kubernetes") -}}
{{- if not $.Values.sandbox.kubernetes.image -}}
{{- fail "environmentWorker.sandboxProvider=kubernetes needs sandbox.kubernetes.image (the image sandboxes run in; any image with bash)" -}}
{{- end -}}
{{- if not $.Values.controller.enabled -}}
{{- fail "environmentWorker.sandboxProvider=kubernetes needs controller.enabled=true: the controller runs the sandbox pods" -}}
{{- end -}}
{{- end -}}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The MANAGED_AGENT_* environment every managed-agents role gets. Credentials come from the
Secret by reference, never as plain values; the binary keeps them out of its children's
environment. Optional keys are optional references, so an existingSecret may leave them out.
*/}}
{{- define "managed-agents.env" -}}
{{- $secret := include "managed-agents.secretName" . -}}
- name: MANAGED_AGENT_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: MANAGED_AGENT_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
{{- if ne .Values.tracing.exporter "none" }}
- name: MANAGED_AGENT_OTEL_EXPORTER
  value: {{ .Values.tracing.exporter | quote }}
{{- with .Values.tracing.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.tracing.serviceName }}
- name: OTEL_SERVICE_NAME
  value: {{ . | quote }}
{{- end }}
{{- end }}
- name: MANAGED_AGENT_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: database-url
- name: MANAGED_AGENT_TEMPORAL_ADDRESS
  value: {{ include "managed-agents.temporalAddress" . | quote }}
{{- with .Values.workspaceQuotas }}
- name: MANAGED_AGENT_WORKSPACE_MAX_RUNNING_SESSIONS
  value: {{ .maxRunningSessions | quote }}
- name: MANAGED_AGENT_WORKSPACE_MAX_SANDBOXES
  value: {{ .maxSandboxes | quote }}
{{- end }}
- name: MANAGED_AGENT_TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
{{- with .Values.temporal.taskQueue }}
- name: MANAGED_AGENT_TEMPORAL_TASK_QUEUE
  value: {{ . | quote }}
{{- end }}
- name: MANAGED_AGENT_TEMPORAL_TLS
  value: {{ .Values.temporal.tls | quote }}
- name: MANAGED_AGENT_TEMPORAL_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: temporal-api-key
      optional: true
- name: MANAGED_AGENT_MODEL
  value: {{ .Values.model.provider | quote }}
{{- with .Values.model.fakeWordDelay }}
- name: MANAGED_AGENT_FAKE_MODEL_WORD_DELAY
  value: {{ . | quote }}
{{- end }}
{{- if eq .Values.model.provider "anthropic" }}
{{- with .Values.model.anthropic.baseURL }}
- name: MANAGED_AGENT_ANTHROPIC_BASE_URL
  value: {{ . | quote }}
{{- end }}
- name: MANAGED_AGENT_ANTHROPIC_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: anthropic-api-key
      optional: true
- name: MANAGED_AGENT_ANTHROPIC_AUTH_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: anthropic-auth-token
      optional: true
{{- end }}
{{ include "managed-agents.sandboxEnv" (dict "ctx" . "provider" .Values.sandbox.provider) }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The sandbox provider's environment: MANAGED_AGENT_SANDBOX and the provider's settings from
sandbox.*, and the remote providers' plain settings. Pass (dict "ctx" $ "provider" <name>): the
worker's provider is sandbox.provider, environment-worker's may differ.
*/}}
{{- define "managed-agents.sandboxEnv" -}}
{{- $ctx := .ctx -}}
{{- $provider := .provider -}}
- name: MANAGED_AGENT_SANDBOX
  value: {{ $provider | quote }}
- name: MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX
  value: {{ $ctx.Values.sandbox.allowUnsafeLocal | quote }}
{{- with $ctx.Values.sandbox.idleStop }}
- name: MANAGED_AGENT_SANDBOX_IDLE_STOP
  value: {{ . | quote }}
{{- end }}
{{- with $ctx.Values.sandbox.retention }}
- name: MANAGED_AGENT_SANDBOX_RETENTION
  value: {{ . | quote }}
{{- end }}
{{- if eq $provider "docker" }}
{{- with $ctx.Values.sandbox.docker }}
{{- if .host }}
- name: DOCKER_HOST
  value: {{ .host | quote }}
{{- end }}
{{- range $name, $value := dict "IMAGE" .image "CPUS" .cpus "MEMORY" .memory "PIDS" .pids "RUNTIME" .runtime "DEPLOYMENT" .deployment }}
{{- if $value }}
- name: MANAGED_AGENT_DOCKER_{{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if eq $provider "kubernetes" }}
{{- with $ctx.Values.sandbox.kubernetes }}
- name: MANAGED_AGENT_KUBERNETES_NAMESPACE
  value: {{ include "managed-agents.sandboxNamespace" $ctx | quote }}
- name: MANAGED_AGENT_KUBERNETES_SANDBOXD_PORT
  value: {{ .sandboxdPort | quote }}
{{- if .persistentWorkspace }}
- name: MANAGED_AGENT_KUBERNETES_PERSISTENT_WORKSPACE
  value: "true"
{{- end }}
{{- range $name, $value := dict "IMAGE" .image "RUNTIME_CLASS" .runtimeClassName "SERVICE_ACCOUNT" .serviceAccountName "READY_TIMEOUT" .readyTimeout "WORKSPACE_STORAGE_CLASS" .workspaceStorageClass "WORKSPACE_SIZE" .workspaceSize "PACKAGE_TIMEOUT" .packageTimeout }}
{{- if $value }}
- name: MANAGED_AGENT_KUBERNETES_{{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end }}
{{- if and .provider (ne .provider "pod") }}
- name: MANAGED_AGENT_KUBERNETES_PROVIDER
  value: {{ .provider | quote }}
- name: MANAGED_AGENT_CONTROLLER_SANDBOX_PROVIDERS
  value: {{ .provider | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- range $name, $value := $ctx.Values.sandbox.remote.settings }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/* envFrom of every role (each validates the whole configuration at start): the remote
providers' Secret. */}}
{{- define "managed-agents.remoteEnvFrom" -}}
{{- with .Values.sandbox.remote.secretName -}}
envFrom:
  - secretRef:
      name: {{ . }}
{{- end -}}
{{- end -}}

{{/* The namespace of the sandbox pods (sandbox.kubernetes.namespace, else the release's). */}}
{{- define "managed-agents.sandboxNamespace" -}}
{{- .Values.sandbox.kubernetes.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* Whether the sandbox pods' egress proxy is deployed. */}}
{{- define "managed-agents.egressProxy" -}}
{{- if and (eq .Values.sandbox.provider "kubernetes") .Values.sandbox.kubernetes.egressProxy.enabled }}true{{ end -}}
{{- end -}}

{{- define "managed-agents.podSpecCommon" -}}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
serviceAccountName: {{ include "managed-agents.serviceAccountName" . }}
securityContext:
  {{- toYaml .ctx.Values.podSecurityContext | nindent 2 }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The sandbox provider of environment-worker (environmentWorker.sandboxProvider, else
sandbox.provider); empty when it is not deployed.
*/}}
{{- define "managed-agents.environmentWorkerSandbox" -}}
{{- if .Values.environmentWorker.enabled -}}
{{- .Values.environmentWorker.sandboxProvider | default .Values.sandbox.provider -}}
{{- end -}}
{{- end -}}

{{/*
The pods a sandbox pod's NetworkPolicy lets reach sandboxd (the controller's
MANAGED_AGENT_SANDBOX_WORKER_SELECTOR): the release's workers, and when environment-worker runs
kubernetes sandboxes too, the pods labelled with sandboxClientLabel (both of them).
*/}}
{{- define "managed-agents.sandboxWorkerSelector" -}}
{{- if eq (include "managed-agents.environmentWorkerSandbox" .) "kubernetes" -}}
{{- printf "app.kubernetes.io/instance=%s,managed-agents.io/sandbox-client=true" .Release.Name -}}
{{- else -}}
{{- printf "app.kubernetes.io/instance=%s,app.kubernetes.io/component=worker" .Release.Name -}}
{{- end -}}
{{- end -}}

{{/* The pod label sandboxWorkerSelector selects on, when it does. */}}
{{- define "managed-agents.sandboxClientLabel" -}}
{{- if eq (include "managed-agents.environmentWorkerSandbox" .) "kubernetes" -}}
managed-agents.io/sandbox-client: "true"
{{- end -}}
{{- end -}}

{{/*
The rules of a role that runs kubernetes sandboxes (the worker, environment-worker): it
creates, watches and deletes SandboxBindings, patches them to suspend and resume them
(spec.suspended), and reads their token Secrets. It never touches pods or claims: the
controller runs them.
*/}}
{{- define "managed-agents.sandboxClientRules" -}}
- apiGroups: ["agents.managed-agents.io"]
  resources: ["sandboxbindings"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end -}}

{{/*
environment-worker's MANAGED_AGENT_SERVER_URL: environmentWorker.serverURL, else this release's
API Service.
*/}}
{{- define "managed-agents.environmentWorkerServerURL" -}}
{{- .Values.environmentWorker.serverURL | default (printf "http://%s.%s.svc:%v" (include "managed-agents.fullname" .) .Release.Namespace .Values.api.service.port) -}}
{{- end -}}

{{/*
The secretKeyRef of environment-worker's key: environmentWorker.existingSecret's
existingSecretKey, else environment-key of the chart's Secret (or of existingSecret).
*/}}
{{- define "managed-agents.environmentKeyRef" -}}
{{- with .Values.environmentWorker.existingSecret -}}
name: {{ . }}
key: {{ $.Values.environmentWorker.existingSecretKey }}
{{- else -}}
name: {{ include "managed-agents.secretName" . }}
key: environment-key
{{- end -}}
{{- end -}}
