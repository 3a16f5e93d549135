#!/usr/bin/env bash
# End-to-end run of Genesis Agents on a throwaway kind cluster:
#   kind cluster (deploy/kind/cluster.yaml) → image built with docker and
#   `kind load`ed → NATS with JetStream and a password login (nats chart,
#   deploy/kind/nats-values.yaml), KEDA (kedacore chart), PostgreSQL
#   (deploy/kind/postgres.yaml: the owner genesis and the service login
#   genesis_service, each URL in its Secret) → helm/genesis in ephemeral
#   mode, migrating as the owner, serving as genesis_service, logging in to
#   NATS with the chart's default credentials Secret →
#   cargo test -p genesis-e2e --test kind -- --include-ignored.
# The cluster is deleted on exit, whatever happened. Where Docker (a running
# engine) or kind is missing it prints one "skipped: no docker/kind" line and
# exits 0.
#
# Environment handed to the test:
#   KUBECONFIG               kubeconfig of the kind cluster
#   GENESIS_ENDPOINT         control gRPC (NodePort 30051 mapped to 127.0.0.1)
#   GENESIS_TOKEN            a platform-wide operator token
#   GENESIS_KIND_NAMESPACE   namespace of the release
#   GENESIS_KIND_RELEASE     helm release name
# Knobs: KIND_CLUSTER_NAME, GENESIS_IMAGE, KEEP_CLUSTER=1 (skip the delete).
set -euo pipefail

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1 || ! command -v kind >/dev/null 2>&1; then
  echo "skipped: no docker/kind"
  exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER="${KIND_CLUSTER_NAME:-genesis-e2e}"
IMAGE="${GENESIS_IMAGE:-genesis-agents/genesis:kind}"
NS=genesis
RELEASE=genesis
WORK="$(mktemp -d)"
export KUBECONFIG="$WORK/kubeconfig"

log() { printf '\n== %s\n' "$*"; }

# helm and kubectl: from PATH, else the copies scripts/chart-check.sh caches.
HELM="$(command -v helm || true)"
KUBECTL="$(command -v kubectl || true)"
if [ -z "$HELM" ] || [ -z "$KUBECTL" ]; then
  log "obtaining helm/kubectl through scripts/chart-check.sh"
  "$ROOT/scripts/chart-check.sh"
  HELM="${HELM:-$ROOT/target/tools/bin/helm}"
  KUBECTL="${KUBECTL:-$ROOT/target/tools/bin/kubectl}"
fi

diagnostics() {
  echo "---- diagnostics" >&2
  "$KUBECTL" get pods,jobs,svc,scaledobjects -A -o wide >&2 || true
  "$KUBECTL" -n "$NS" describe pods >&2 || true
  for p in $("$KUBECTL" -n "$NS" get pods -o name 2>/dev/null); do
    echo "---- logs $p" >&2
    "$KUBECTL" -n "$NS" logs "$p" --all-containers --tail=200 >&2 || true
  done
}

cleanup() {
  rc=$?
  if [ "$rc" -ne 0 ]; then diagnostics; fi
  if [ "${KEEP_CLUSTER:-0}" = "1" ]; then
    echo "KEEP_CLUSTER=1: leaving kind cluster $CLUSTER (KUBECONFIG=$KUBECONFIG)"
  else
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT

log "kind cluster $CLUSTER"
kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
kind create cluster --name "$CLUSTER" --config "$ROOT/deploy/kind/cluster.yaml" --kubeconfig "$KUBECONFIG" --wait 120s

log "image $IMAGE"
docker build -f "$ROOT/deploy/Dockerfile" -t "$IMAGE" \
  --build-arg REVISION="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)" \
  --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$ROOT"
kind load docker-image "$IMAGE" --name "$CLUSTER"
# The coder image (genesis-coder with git) the coder Jobs run.
CODER_IMAGE="${IMAGE%:*}-coder:${IMAGE##*:}"
docker build -f "$ROOT/deploy/Dockerfile" --target coder -t "$CODER_IMAGE" "$ROOT"
kind load docker-image "$CODER_IMAGE" --name "$CLUSTER"

log "NATS with JetStream and a password login"
# One random password, known to the NATS server (Secret nats-genesis-login,
# read by deploy/kind/nats-values.yaml) and to the release (the Secret
# <release>-nats-credentials the chart's default values expect).
# A letter first: NATS parses a value read from its environment as config
# text, and one starting with a digit could read as a number.
NATS_PASSWORD="g$(openssl rand -hex 24)"
"$KUBECTL" create namespace nats
"$KUBECTL" -n nats create secret generic nats-genesis-login --from-literal=password="$NATS_PASSWORD"
"$HELM" repo add nats https://nats-io.github.io/k8s/helm/charts/ --force-update >/dev/null
"$HELM" repo add kedacore https://kedacore.github.io/charts --force-update >/dev/null
"$HELM" repo update >/dev/null
"$HELM" upgrade --install nats nats/nats --namespace nats --create-namespace \
  --values "$ROOT/deploy/kind/nats-values.yaml" --wait --timeout 5m

log "KEDA"
"$HELM" upgrade --install keda kedacore/keda --namespace keda --create-namespace --wait --timeout 5m

log "PostgreSQL"
"$KUBECTL" create namespace "$NS"
"$KUBECTL" -n "$NS" create secret generic "$RELEASE-nats-credentials" \
  --from-literal=user=genesis --from-literal=password="$NATS_PASSWORD"
"$KUBECTL" -n "$NS" apply -f "$ROOT/deploy/kind/postgres.yaml"
"$KUBECTL" -n "$NS" rollout status deployment/postgres --timeout 180s

log "helm/genesis (ephemeral)"
# The migrations hook runs first; the agent pods wait for their token Secret,
# which can only be minted once the schema exists (below).
"$HELM" upgrade --install "$RELEASE" "$ROOT/helm/genesis" --namespace "$NS" \
  --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" \
  --set image.pullPolicy=IfNotPresent \
  --set llm.defaultProvider=scripted \
  --set agentPod.mode=ephemeral \
  --set postgres.existingSecret=genesis-db-service \
  --set postgres.existingSecretKey=database-url \
  --set postgres.migrations.existingSecret=genesis-db-owner \
  --set postgres.migrations.existingSecretKey=database-url \
  --set postgres.serviceRole=genesis_service \
  --set nats.url="nats://nats.nats.svc.cluster.local:4222" \
  --set keda.natsServerMonitoringEndpoint="nats.nats.svc.cluster.local:8222" \
  --set agentToken.existingSecret=genesis-agent-token \
  --set control.replicaCount=1 --set supervisor.replicaCount=1 \
  --set control.service.type=NodePort --set control.service.grpcNodePort=30051 \
  --set control.coderImage="$CODER_IMAGE" \
  --set logFormat=text \
  --timeout 10m
CONTROL="deployment/$RELEASE-control"
"$KUBECTL" -n "$NS" rollout status "$CONTROL" --timeout 300s
"$KUBECTL" -n "$NS" rollout status "deployment/$RELEASE-supervisor" --timeout 300s

log "tokens"
mint() {
  "$KUBECTL" -n "$NS" exec "$CONTROL" -- genesis-control token create --scope "$1" \
    | grep -oE 'gen_[A-Za-z0-9_-]+' | head -n1
}
AGENT_TOKEN="$(mint agent-pod)"
OPERATOR_TOKEN="$(mint operator)"
[ -n "$AGENT_TOKEN" ] && [ -n "$OPERATOR_TOKEN" ] || { echo "could not mint tokens" >&2; exit 1; }
"$KUBECTL" -n "$NS" create secret generic genesis-agent-token \
  --from-literal=GENESIS_AGENT_TOKEN="$AGENT_TOKEN"
"$KUBECTL" -n "$NS" get scaledobject "$RELEASE-agent-pod"

log "helm upgrade (the pre-upgrade migrations hook runs again)"
"$HELM" upgrade "$RELEASE" "$ROOT/helm/genesis" --namespace "$NS" --reuse-values \
  --set agentToken.existingSecret=genesis-agent-token --wait --timeout 10m
export GENESIS_KIND_UPGRADED_REVISION=2

log "cargo test -p genesis-e2e --test kind"
export GENESIS_ENDPOINT="http://127.0.0.1:30051"
export GENESIS_TOKEN="$OPERATOR_TOKEN"
export GENESIS_KIND_NAMESPACE="$NS"
export GENESIS_KIND_RELEASE="$RELEASE"
cd "$ROOT"
# One at a time: the tests share the cluster, and the scale-to-zero test must
# not see the load another test creates.
cargo test -p genesis-e2e --test kind -- --include-ignored --test-threads=1
