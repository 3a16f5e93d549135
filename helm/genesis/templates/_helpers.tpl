{{/*
Named templates shared by every manifest of the chart: names, labels,
secret lookups, the image reference and the pieces every container carries.
*/}}

{{/* Chart name, overridable with nameOverride. */}}
{{- define "genesis.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name, truncated to 63 characters (the DNS label limit).
When the release name already contains the chart name it is used alone.
*/}}
{{- define "genesis.fullname" -}}
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

{{/* Name of one component's resources: <fullname>-<component>. */}}
{{- define "genesis.componentName" -}}
{{- printf "%s-%s" (include "genesis.fullname" .root | trunc 48 | trimSuffix "-") .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Chart label value: <name>-<version>. */}}
{{- define "genesis.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels shared by the whole release (never change on upgrade). */}}
{{- define "genesis.selectorLabels" -}}
app.kubernetes.io/name: {{ include "genesis.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Common labels for release-wide resources. */}}
{{- define "genesis.labels" -}}
helm.sh/chart: {{ include "genesis.chart" . }}
{{ include "genesis.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: genesis
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels of one component. Call with (dict "root" $ "component" "control").
*/}}
{{- define "genesis.componentSelectorLabels" -}}
{{ include "genesis.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Full labels of one component. Call with (dict "root" $ "component" "control"). */}}
{{- define "genesis.componentLabels" -}}
{{ include "genesis.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
Labels of the pods of coder Jobs (services/lanes/src/coders.rs puts them on
every Job it creates): the selector of their NetworkPolicy. Release-wide,
as control's Jobs carry no release label.
*/}}
{{- define "genesis.coderSelectorLabels" -}}
app.kubernetes.io/managed-by: genesis
app.kubernetes.io/component: coder
{{- end }}

{{/* The ServiceAccount control runs under. */}}
{{- define "genesis.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "genesis.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image reference: repository@digest when a digest is set, else repository:tag. */}}
{{- define "genesis.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The chart-managed Secret (URLs, token and LLM keys not given as existing secrets). */}}
{{- define "genesis.secretName" -}}
{{- include "genesis.fullname" . }}
{{- end }}

{{/*
Secret and key of the migrations Job's GENESIS_DATABASE_URL: the owner's
(postgres.migrations.existingSecret, else postgres.migrations.url in the
Job's own hook Secret), else the services' existing Secret, else the hook
Secret holding postgres.url (migrations-job.yaml).
*/}}
{{- define "genesis.migrationsDatabaseRef" -}}
{{- $p := .root.Values.postgres }}
{{- if $p.migrations.existingSecret }}
name: {{ $p.migrations.existingSecret }}
key: {{ $p.migrations.existingSecretKey }}
{{- else if and $p.existingSecret (not $p.migrations.url) }}
name: {{ $p.existingSecret }}
key: {{ $p.existingSecretKey }}
{{- else }}
name: {{ .hookSecret }}
key: database-url
{{- end }}
{{- end }}

{{/* Secret and key of GENESIS_DATABASE_URL for the long-running services. */}}
{{- define "genesis.databaseSecretName" -}}
{{- default (include "genesis.secretName" .) .Values.postgres.existingSecret }}
{{- end }}
{{- define "genesis.databaseSecretKey" -}}
{{- if .Values.postgres.existingSecret }}{{ .Values.postgres.existingSecretKey }}{{ else }}database-url{{ end }}
{{- end }}

{{/* Secret holding the NATS credentials (nats.credentials). */}}
{{- define "genesis.natsCredentialsSecretName" -}}
{{- default (printf "%s-nats-credentials" (include "genesis.fullname" .)) .Values.nats.credentials.existingSecret }}
{{- end }}

{{/* Secret and key of GENESIS_AGENT_TOKEN. */}}
{{- define "genesis.agentTokenSecretName" -}}
{{- default (include "genesis.secretName" .) .Values.agentToken.existingSecret }}
{{- end }}
{{- define "genesis.agentTokenSecretKey" -}}
{{- if .Values.agentToken.existingSecret }}{{ .Values.agentToken.existingSecretKey }}{{ else }}agent-token{{ end }}
{{- end }}

{{/*
Secret holding the provider keys, one key per provider key as presets name it
(and optional <NAME>.tenants bindings): llm.existingSecret, else the chart's
own "<fullname>-llm-keys" (llm-keys.yaml). Kept apart from the chart's main
Secret so the directory it is mounted as holds provider keys only.
*/}}
{{- define "genesis.llmSecretName" -}}
{{- default (printf "%s-llm-keys" (include "genesis.fullname" .)) .Values.llm.existingSecret }}
{{- end }}
{{/* ConfigMap of the llm.keyTenants bindings, as <NAME>.tenants files. */}}
{{- define "genesis.llmKeyTenantsName" -}}
{{- printf "%s-llm-key-tenants" (include "genesis.fullname" .) }}
{{- end }}

{{/*
The key directory (GENESIS_LLM_KEY_DIR) of control and the agent pods: the
provider-key Secret projected with the llm.keyTenants ConfigMap, read-only.
Both read the same set; control reads file names and bindings only.
*/}}
{{- define "genesis.llmKeyEnv" -}}
- name: GENESIS_LLM_KEY_DIR
  value: {{ .Values.llm.keyDir | quote }}
{{- end }}
{{- define "genesis.llmKeyVolumeMount" -}}
- name: llm-keys
  mountPath: {{ .Values.llm.keyDir }}
  readOnly: true
{{- end }}
{{- define "genesis.llmKeyVolume" -}}
- name: llm-keys
  projected:
    sources:
      - secret:
          name: {{ include "genesis.llmSecretName" . }}
          optional: true
      {{- if .Values.llm.keyTenants }}
      - configMap:
          name: {{ include "genesis.llmKeyTenantsName" . }}
      {{- end }}
{{- end }}

{{/* minReplicaCount of the agent pods: 0 when ephemeral, at least 1 when warm. */}}
{{- define "genesis.agentPodMinReplicas" -}}
{{- if eq .Values.agentPod.mode "warm" }}
{{- max 1 (int .Values.keda.warmMinReplicaCount) }}
{{- else }}
{{- 0 }}
{{- end }}
{{- end }}

{{/* Pod-level settings every pod of the chart shares. */}}
{{- define "genesis.podCommon" -}}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Environment every service reads. */}}
{{- define "genesis.commonEnv" -}}
- name: GENESIS_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
- name: GENESIS_LEASE_TTL_SECS
  value: {{ .Values.tick.leaseTtlSecs | quote }}
{{- with .Values.otel }}
{{- if .endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .protocol | quote }}
- name: OTEL_METRIC_EXPORT_INTERVAL
  value: {{ .metricExportIntervalMs | int | quote }}
{{- if .resourceAttributes }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ .resourceAttributes | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* GENESIS_DATABASE_URL from its Secret (never given to agent pods). */}}
{{- define "genesis.databaseEnv" -}}
- name: GENESIS_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "genesis.databaseSecretName" . }}
      key: {{ include "genesis.databaseSecretKey" . }}
{{- if .Values.postgres.allowOwnerLogin }}
- name: GENESIS_ALLOW_OWNER_LOGIN
  value: "true"
{{- end }}
{{- end }}

{{/* GENESIS_NATS_URL, the credentials, TLS, the stream and the shared consumer. */}}
{{- define "genesis.natsEnv" -}}
{{ include "genesis.natsEnvFor" (dict "root" . "consumer" .Values.nats.consumer) }}
{{- end }}

{{/*
As genesis.natsEnv, for the consumer `.consumer` (an agent-pod pool's).
The URL is a plain value (nats.url) unless nats.existingSecret holds it.
Credentials: a mounted .creds file (genesis.natsVolumes) or user and
password from the credentials Secret; TLS: the CA file and the TLS demand.
*/}}
{{- define "genesis.natsEnvFor" -}}
{{- $n := .root.Values.nats }}
- name: GENESIS_NATS_URL
  {{- if $n.existingSecret }}
  valueFrom:
    secretKeyRef:
      name: {{ $n.existingSecret }}
      key: {{ $n.existingSecretKey }}
  {{- else }}
  value: {{ required "nats.url is required when nats.existingSecret is empty" $n.url | quote }}
  {{- end }}
{{- if eq $n.credentials.type "creds" }}
- name: GENESIS_NATS_CREDS_FILE
  value: "/etc/genesis/nats/nats.creds"
{{- else if eq $n.credentials.type "userPassword" }}
- name: GENESIS_NATS_USER
  valueFrom:
    secretKeyRef:
      name: {{ include "genesis.natsCredentialsSecretName" .root }}
      key: {{ $n.credentials.userKey }}
- name: GENESIS_NATS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "genesis.natsCredentialsSecretName" .root }}
      key: {{ $n.credentials.passwordKey }}
{{- end }}
{{- if $n.tls.caSecret }}
- name: GENESIS_NATS_CA_FILE
  value: "/etc/genesis/nats-ca/ca.crt"
{{- end }}
{{- if $n.tls.required }}
- name: GENESIS_NATS_TLS_REQUIRED
  value: "true"
{{- end }}
- name: GENESIS_STREAM
  value: {{ $n.stream | quote }}
- name: GENESIS_CONSUMER
  value: {{ .consumer | quote }}
{{- end }}

{{/* Volume mounts and volumes of the NATS .creds file and CA (control and agent pods). */}}
{{- define "genesis.natsVolumeMounts" -}}
{{- if eq .Values.nats.credentials.type "creds" }}
- name: nats-creds
  mountPath: /etc/genesis/nats
  readOnly: true
{{- end }}
{{- if .Values.nats.tls.caSecret }}
- name: nats-ca
  mountPath: /etc/genesis/nats-ca
  readOnly: true
{{- end }}
{{- end }}
{{- define "genesis.natsVolumes" -}}
{{- if eq .Values.nats.credentials.type "creds" }}
- name: nats-creds
  secret:
    secretName: {{ include "genesis.natsCredentialsSecretName" . }}
    defaultMode: 0440
    items:
      - key: {{ .Values.nats.credentials.credsKey }}
        path: nats.creds
{{- end }}
{{- with .Values.nats.tls.caSecret }}
- name: nats-ca
  secret:
    secretName: {{ . }}
    defaultMode: 0444
    items:
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- end }}

{{/*
TLS of a server (control, supervisor): GENESIS_TLS_CERT_FILE and
GENESIS_TLS_KEY_FILE from the Secret `.secret` mounted whole at
/etc/genesis/tls/server (the services reload the files when they change).
Call with (dict "root" $ "secret" <name> "what" <values path for the error>).
*/}}
{{- define "genesis.tlsServerEnv" -}}
{{- if .root.Values.tls.enabled }}
- name: GENESIS_TLS_CERT_FILE
  value: "/etc/genesis/tls/server/tls.crt"
- name: GENESIS_TLS_KEY_FILE
  value: "/etc/genesis/tls/server/tls.key"
- name: GENESIS_TLS_RELOAD_SECS
  value: {{ .root.Values.tls.reloadSecs | int | quote }}
{{- end }}
{{- end }}
{{- define "genesis.tlsServerVolumeMount" -}}
{{- if .root.Values.tls.enabled }}
- name: tls-server
  mountPath: /etc/genesis/tls/server
  readOnly: true
{{- end }}
{{- end }}
{{- define "genesis.tlsServerVolume" -}}
{{- if .root.Values.tls.enabled }}
- name: tls-server
  secret:
    secretName: {{ required (printf "%s is required when tls.enabled is true" .what) .secret }}
    defaultMode: 0440
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end }}
{{- end }}

{{/*
A volume of only the ca.crt key of a Secret (a CA bundle, never a key).
Call with (dict "name" <volume> "secret" <Secret name>).
*/}}
{{- define "genesis.caVolume" -}}
- name: {{ .name }}
  secret:
    secretName: {{ .secret }}
    defaultMode: 0444
    items:
      - key: ca.crt
        path: ca.crt
{{- end }}

{{/* PostgreSQL CA (postgres.caSecret) at /etc/genesis/postgres-ca/ca.crt. */}}
{{- define "genesis.postgresCaVolumeMount" -}}
{{- if .Values.postgres.caSecret }}
- name: postgres-ca
  mountPath: /etc/genesis/postgres-ca
  readOnly: true
{{- end }}
{{- end }}
{{- define "genesis.postgresCaVolume" -}}
{{- with .Values.postgres.caSecret }}
{{ include "genesis.caVolume" (dict "name" "postgres-ca" "secret" .) }}
{{- end }}
{{- end }}

{{/*
Agent pods' side of the supervisor's TLS: https:// URL (genesis.supervisorUrl),
the CA that verifies it, and the client certificate when there is one.
*/}}
{{- define "genesis.supervisorUrl" -}}
{{- printf "%s://%s.%s.svc:%d" (ternary "https" "http" .Values.tls.enabled) (include "genesis.componentName" (dict "root" . "component" "supervisor")) .Release.Namespace (int .Values.supervisor.grpcPort) }}
{{- end }}
{{- define "genesis.controlUrl" -}}
{{- if .Values.control.coderControlUrl }}
{{- .Values.control.coderControlUrl }}
{{- else }}
{{- printf "%s://%s.%s.svc:%d" (ternary "https" "http" .Values.tls.enabled) (include "genesis.componentName" (dict "root" . "component" "control")) .Release.Namespace (int .Values.control.grpcPort) }}
{{- end }}
{{- end }}
{{- define "genesis.agentTlsEnv" -}}
{{- if .Values.tls.enabled }}
- name: GENESIS_SUPERVISOR_CA_FILE
  value: "/etc/genesis/tls/supervisor-ca/ca.crt"
{{- if .Values.tls.agentPod.clientSecretName }}
- name: GENESIS_TLS_CLIENT_CERT_FILE
  value: "/etc/genesis/tls/client/tls.crt"
- name: GENESIS_TLS_CLIENT_KEY_FILE
  value: "/etc/genesis/tls/client/tls.key"
{{- end }}
{{- end }}
{{- end }}
{{- define "genesis.agentTlsVolumeMounts" -}}
{{- if .Values.tls.enabled }}
- name: tls-supervisor-ca
  mountPath: /etc/genesis/tls/supervisor-ca
  readOnly: true
{{- if .Values.tls.agentPod.clientSecretName }}
- name: tls-client
  mountPath: /etc/genesis/tls/client
  readOnly: true
{{- end }}
{{- end }}
{{- end }}
{{- define "genesis.agentTlsVolumes" -}}
{{- if .Values.tls.enabled }}
{{ include "genesis.caVolume" (dict "name" "tls-supervisor-ca" "secret" (.Values.tls.agentPod.caSecretName | default .Values.tls.supervisor.secretName)) }}
{{- with .Values.tls.agentPod.clientSecretName }}
- name: tls-client
  secret:
    secretName: {{ . }}
    defaultMode: 0440
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end }}
{{- end }}
{{- end }}

{{/*
Refuses TLS values that cannot work: tls.enabled without a server Secret,
client-certificate verification without a client Secret for the pods.
*/}}
{{- define "genesis.tlsValidate" -}}
{{- $t := .Values.tls }}
{{- if $t.enabled }}
{{- if not $t.control.secretName }}
{{- fail "tls.control.secretName is required when tls.enabled is true (a kubernetes.io/tls Secret with tls.crt, tls.key and ca.crt)" }}
{{- end }}
{{- if not $t.supervisor.secretName }}
{{- fail "tls.supervisor.secretName is required when tls.enabled is true (a kubernetes.io/tls Secret with tls.crt, tls.key and ca.crt)" }}
{{- end }}
{{- if and $t.supervisor.clientCa.enabled (not $t.agentPod.clientSecretName) }}
{{- fail "tls.agentPod.clientSecretName is required when tls.supervisor.clientCa.enabled is true: the supervisor would refuse every agent pod" }}
{{- end }}
{{- else if or $t.supervisor.clientCa.enabled $t.agentPod.clientSecretName }}
{{- fail "tls.supervisor.clientCa.enabled and tls.agentPod.clientSecretName need tls.enabled: true" }}
{{- end }}
{{- end }}

{{/*
checkov.io/skip<N> annotations, one per "CKV_K8S_xx=reason" of the list
(reasons hold no "="). Renders nothing for an empty list.
*/}}
{{- define "genesis.checkovSkips" -}}
{{- range $i, $s := . }}
checkov.io/skip{{ add1 $i }}: {{ $s | quote }}
{{- end }}
{{- end }}

{{/* The skips every workload of the chart carries, given its values. */}}
{{- define "genesis.commonSkips" -}}
{{- $s := list }}
{{- if not .Values.image.digest }}
{{- $s = append $s "CKV_K8S_43=image.digest is optional so that a tag installs; set it in production to pin the checked image" }}
{{- end }}
{{- toJson $s }}
{{- end }}

{{/*
HTTP probes on the container's port named "http": /readyz gates traffic,
/healthz restarts a wedged process, the startup probe gives a slow first
start (pool connect, consumer bind) two minutes before liveness applies.
*/}}
{{- define "genesis.probes" -}}
startupProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: 2
  failureThreshold: 60
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 3
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
{{- end }}

{{/* The writable scratch space every container gets beside its read-only root. */}}
{{- define "genesis.tmpVolumeMount" -}}
- name: tmp
  mountPath: /tmp
{{- end }}
{{- define "genesis.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}

{{/*
One NetworkPolicy rule on one or more TCP ports. Call with
(dict "port" <int or list> "peers" <NetworkPolicyPeer list> "dir" "from"|"to").
Empty peers leave out from/to, which Kubernetes reads as "any peer".
*/}}
{{- define "genesis.npRule" -}}
- ports:
    {{- range $p := (kindIs "slice" .port | ternary .port (list .port)) }}
    - protocol: TCP
      port: {{ $p }}
    {{- end }}
  {{- with .peers }}
  {{ $.dir }}:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/* DNS egress (UDP and TCP 53) to the given peers, or to any peer when empty. */}}
{{- define "genesis.npDns" -}}
- ports:
    - protocol: UDP
      port: 53
    - protocol: TCP
      port: 53
  {{- with . }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/*
GENESIS_BACKEND_URLS from llm.backendUrls: "label=url,label=url", sorted by
label so the rendered env is stable.
*/}}
{{- define "genesis.backendUrls" -}}
{{- $pairs := list -}}
{{- range $label, $url := . -}}
{{- $pairs = append $pairs (printf "%s=%s" $label $url) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end }}

{{/*
The agent-pod pools as JSON {"pools": [...]}: the shared pool (agentPod.*,
agentToken.*, nats.consumer, keda.maxReplicaCount) first, then each
dedicated pool of agentPod.pools with its own token Secret, the consumer
<nats.consumer>-<name> and the shared pool's settings where it sets none.
Read with (include "genesis.agentPools" . | fromJson).pools. Refuses two
pools of one name, a tenant in two pools, a pool whose resource names
would not fit in 63 characters and a tenantConcurrency above concurrency.
*/}}
{{- define "genesis.agentPools" -}}
{{- $c := .Values.agentPod }}
{{- $pools := list (dict
  "name" ""
  "component" "agent-pod"
  "consumer" .Values.nats.consumer
  "tokenSecret" (include "genesis.agentTokenSecretName" .)
  "tokenKey" (include "genesis.agentTokenSecretKey" .)
  "mode" $c.mode
  "replicaCount" (int $c.replicaCount)
  "maxReplicaCount" (int .Values.keda.maxReplicaCount)
  "concurrency" (int $c.concurrency)
  "tenantConcurrency" (int $c.tenantConcurrency)
  "resources" $c.resources
  "tenants" (list)) }}
{{- $names := dict }}
{{- $placed := dict }}
{{- $prefix := include "genesis.fullname" . | trunc 48 | trimSuffix "-" }}
{{- range $p := ($c.pools | default list) }}
{{- if hasKey $names $p.name }}
{{- fail (printf "agentPod.pools: two pools are named %q" $p.name) }}
{{- end }}
{{- $_ := set $names $p.name true }}
{{- range $t := $p.tenants }}
{{- if hasKey $placed $t }}
{{- fail (printf "agentPod.pools: tenant %s is in pools %q and %q" $t (get $placed $t) $p.name) }}
{{- end }}
{{- $_ := set $placed $t $p.name }}
{{- end }}
{{- $component := printf "agent-pod-%s" $p.name }}
{{- if gt (len (printf "%s-%s" $prefix $component)) 63 }}
{{- fail (printf "agentPod.pools: pool %q makes the resource name %s-%s longer than 63 characters; shorten the pool name or fullnameOverride" $p.name $prefix $component) }}
{{- end }}
{{- $pools = append $pools (dict
  "name" $p.name
  "component" $component
  "consumer" (printf "%s-%s" $.Values.nats.consumer $p.name)
  "tokenSecret" $p.tokenSecret
  "tokenKey" ($p.tokenSecretKey | default "GENESIS_AGENT_TOKEN")
  "mode" ($p.mode | default $c.mode)
  "replicaCount" (int (ternary $p.replicaCount $c.replicaCount (hasKey $p "replicaCount")))
  "maxReplicaCount" (int (ternary $p.maxReplicaCount $.Values.keda.maxReplicaCount (hasKey $p "maxReplicaCount")))
  "concurrency" (int ($p.concurrency | default $c.concurrency))
  "tenantConcurrency" (int (ternary $p.tenantConcurrency $c.tenantConcurrency (hasKey $p "tenantConcurrency")))
  "resources" ($p.resources | default $c.resources)
  "tenants" $p.tenants) }}
{{- end }}
{{- range $p := $pools }}
{{- if gt $p.tenantConcurrency $p.concurrency }}
{{- if $p.name }}
{{- fail (printf "agentPod.pools[%s]: tenantConcurrency (%d) must not exceed concurrency (%d)" $p.name $p.tenantConcurrency $p.concurrency) }}
{{- else }}
{{- fail (printf "agentPod.tenantConcurrency (%d) must not exceed agentPod.concurrency (%d)" $p.tenantConcurrency $p.concurrency) }}
{{- end }}
{{- end }}
{{- end }}
{{- dict "pools" $pools | toJson }}
{{- end }}

{{/*
GENESIS_POD_POOLS of control: "name=tenant,tenant;name=tenant" from
agentPod.pools (empty without dedicated pools).
*/}}
{{- define "genesis.podPoolsEnv" -}}
{{- $items := list -}}
{{- range $p := (.Values.agentPod.pools | default list) -}}
{{- $items = append $items (printf "%s=%s" $p.name (join "," $p.tenants)) -}}
{{- end -}}
{{- join ";" $items -}}
{{- end }}

{{/* minReplicaCount of an agent-pod pool of mode `.mode`: 0 when ephemeral, at least 1 when warm. */}}
{{- define "genesis.poolMinReplicas" -}}
{{- if eq .mode "warm" }}
{{- max 1 (int .root.Values.keda.warmMinReplicaCount) }}
{{- else }}
{{- 0 }}
{{- end }}
{{- end }}

{{/*
GENESIS_DEFAULT_PROVIDER of control and the supervisor: required, so the
offline scripted provider runs only where an operator chose it.
*/}}
{{- define "genesis.defaultProvider" -}}
{{- required "llm.defaultProvider must be set: anthropic, openai, or scripted (the offline provider, for demos and tests only)" .Values.llm.defaultProvider -}}
{{- end }}
