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

{{/* Secret and key of GENESIS_DATABASE_URL for the long-running services. */}}
{{- define "genesis.databaseSecretName" -}}
{{- default (include "genesis.secretName" .) .Values.postgres.existingSecret }}
{{- end }}
{{- define "genesis.databaseSecretKey" -}}
{{- if .Values.postgres.existingSecret }}{{ .Values.postgres.existingSecretKey }}{{ else }}database-url{{ end }}
{{- end }}

{{/* Secret and key of GENESIS_NATS_URL. */}}
{{- define "genesis.natsSecretName" -}}
{{- default (include "genesis.secretName" .) .Values.nats.existingSecret }}
{{- end }}
{{- define "genesis.natsSecretKey" -}}
{{- if .Values.nats.existingSecret }}{{ .Values.nats.existingSecretKey }}{{ else }}nats-url{{ end }}
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
{{- end }}

{{/* GENESIS_NATS_URL from its Secret, the stream and the shared consumer. */}}
{{- define "genesis.natsEnv" -}}
{{ include "genesis.natsEnvFor" (dict "root" . "consumer" .Values.nats.consumer) }}
{{- end }}

{{/* As genesis.natsEnv, for the consumer `.consumer` (an agent-pod pool's). */}}
{{- define "genesis.natsEnvFor" -}}
- name: GENESIS_NATS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "genesis.natsSecretName" .root }}
      key: {{ include "genesis.natsSecretKey" .root }}
- name: GENESIS_STREAM
  value: {{ .root.Values.nats.stream | quote }}
- name: GENESIS_CONSUMER
  value: {{ .consumer | quote }}
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
