#!/usr/bin/env bash
# The whole Genesis Agents fleet on this machine: PostgreSQL + NATS, control,
# supervisor and two agent pods, then a story an operator can follow turn by turn.
#
#   scripts/demo.sh            build in release mode, play the story, keep running
#                              until Ctrl-C (explore with genesisctl meanwhile)
#   scripts/demo.sh --ci       play the story and exit (bounded time; used by tests)
#   scripts/demo.sh --debug    use the debug build (faster to build, slower to run)
#   scripts/demo.sh --no-build use the binaries already built (the test suite's way)
#
# With ANTHROPIC_API_KEY or OPENAI_API_KEY set, the agents think with that provider;
# otherwise with the offline scripted provider. A second run needs no cleanup: the
# demo database is recreated on every run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

CI_MODE=0
PROFILE=release
BUILD=1
for arg in "$@"; do
  case "$arg" in
    --ci) CI_MODE=1 ;;
    --debug) PROFILE=debug ;;
    --no-build) BUILD=0 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "demo: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

step_no=0
step() { step_no=$((step_no + 1)); printf '\n\033[1m[%d] %s\033[0m\n' "$step_no" "$*"; }
info() { printf '    %s\n' "$*"; }
ok() { printf '    \033[32mok\033[0m %s\n' "$*"; }
die() { printf '\n\033[31mdemo failed:\033[0m %s\n' "$*" >&2; exit 1; }

RUN_DIR=$(mktemp -d -t genesis-demo.XXXXXX)
PIDS=()
cleanup() {
  local code=$?
  if [ ${#PIDS[@]} -gt 0 ]; then
    printf '\n[demo] stopping the fleet\n'
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    done
  fi
  if [ "$code" != 0 ]; then
    echo "[demo] logs kept in $RUN_DIR" >&2
    for f in "$RUN_DIR"/*.log; do [ -f "$f" ] && { echo "--- tail $f" >&2; tail -n 15 "$f" >&2; }; done
  else
    rm -rf "$RUN_DIR"
  fi
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "services: PostgreSQL and NATS with JetStream"
bash scripts/services.sh | sed 's/^/    /'

step "build ($PROFILE)"
if [ "$BUILD" = 0 ]; then
  info "--no-build: using the binaries in target/$PROFILE"
elif [ "$PROFILE" = release ]; then
  cargo build --release --bins --quiet
else
  cargo build --bins --quiet
fi
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE"
for b in genesis-control genesis-supervisor genesis-agent-pod genesisctl; do
  [ -x "$BIN/$b" ] || die "missing binary $BIN/$b"
done
ok "genesis-control genesis-supervisor genesis-agent-pod genesisctl"

DB=genesis_demo
step "database $DB (recreated) and migrations"
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null
psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $DB" >/dev/null
# The owner (the local superuser) migrates; the services log in as a role of
# their own, which owns nothing and which row-level security binds. Roles are
# server-wide: the role is created once and kept.
SERVICE_ROLE=genesis_demo_service
psql -h 127.0.0.1 -U postgres -qc "DO \$\$ BEGIN CREATE ROLE $SERVICE_ROLE LOGIN;
  EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END \$\$" >/dev/null
GENESIS_DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB" \
  "$BIN/genesis-control" migrate --service-role "$SERVICE_ROLE" >"$RUN_DIR/migrate.log" 2>&1 \
  || die "migrations failed (see $RUN_DIR/migrate.log)"
export GENESIS_DATABASE_URL="postgres://$SERVICE_ROLE@127.0.0.1:5432/$DB"
ok "schema migrated; the services log in as $SERVICE_ROLE"

# Ports and names of this demo: away from the defaults so a running fleet is not disturbed.
export GENESIS_NATS_URL="nats://127.0.0.1:4222"
export GENESIS_STREAM="GENESIS_DEMO_TICKS"
export GENESIS_SUBJECT_PREFIX="genesis.demo.ticks"
export GENESIS_CONSUMER="agent-pods-demo"
export GENESIS_LOG_FORMAT=text
export RUST_LOG=${RUST_LOG:-info}
CONTROL_GRPC=127.0.0.1:26051
SUPERVISOR_GRPC=127.0.0.1:26052
export GENESIS_ENDPOINT="http://$CONTROL_GRPC"
# The demo's fixed ports sit below the kernel's ephemeral range, so no test or
# outgoing connection is handed one of them; say so plainly if one is taken.
for port in 26051 26052 26080 26090 26091 26092 26093; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "port $port is already in use (is another demo still running?)"
  fi
done

step "tokens (shown once, stored as SHA-256)"
ADMIN_TOKEN=$("$BIN/genesis-control" token create --scope operator --label demo-admin 2>"$RUN_DIR/token.log" | grep -o 'gen_[A-Za-z0-9_-]*' | head -n1) || true
[ -n "$ADMIN_TOKEN" ] || die "could not mint the operator token (see $RUN_DIR/token.log)"
POD_TOKEN=$("$BIN/genesis-control" token create --scope agent-pod --label demo-pods 2>>"$RUN_DIR/token.log" | grep -o 'gen_[A-Za-z0-9_-]*' | head -n1) || true
[ -n "$POD_TOKEN" ] || die "could not mint the agent-pod token (see $RUN_DIR/token.log)"
ok "platform operator token and agent-pod token minted"
export GENESIS_TOKEN="$ADMIN_TOKEN"

if [ -n "${ANTHROPIC_API_KEY:-}" ]; then PROVIDER=anthropic
elif [ -n "${OPENAI_API_KEY:-}" ]; then PROVIDER=openai
else PROVIDER=scripted; fi
export GENESIS_DEFAULT_PROVIDER="$PROVIDER"

wait_http() { # url name
  for _ in $(seq 1 150); do
    curl -fsS "$1" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "$2 did not become ready at $1"
}

step "fleet: control, supervisor and two agent pods (LLM provider: $PROVIDER)"
GENESIS_GRPC_ADDR=$CONTROL_GRPC GENESIS_HTTP_ADDR=127.0.0.1:26090 GENESIS_DASHBOARD_ADDR=127.0.0.1:26080 \
  "$BIN/genesis-control" serve >"$RUN_DIR/control.log" 2>&1 &
PIDS+=($!)
GENESIS_GRPC_ADDR=$SUPERVISOR_GRPC GENESIS_HTTP_ADDR=127.0.0.1:26091 \
  "$BIN/genesis-supervisor" >"$RUN_DIR/supervisor.log" 2>&1 &
PIDS+=($!)
wait_http http://127.0.0.1:26090/readyz control
wait_http http://127.0.0.1:26091/readyz supervisor
for i in 1 2; do
  GENESIS_SUPERVISOR_URL="http://$SUPERVISOR_GRPC" GENESIS_AGENT_TOKEN="$POD_TOKEN" \
  GENESIS_HTTP_ADDR=127.0.0.1:2609$((1 + i)) \
    "$BIN/genesis-agent-pod" >"$RUN_DIR/agent-pod-$i.log" 2>&1 &
  PIDS+=($!)
done
wait_http http://127.0.0.1:26092/readyz agent-pod-1
wait_http http://127.0.0.1:26093/readyz agent-pod-2
ok "control :26051 (dashboard http://127.0.0.1:26080/)  supervisor :26052  agent pods x2  (metrics on :26090-26093/metrics)"

CTL=("$BIN/genesisctl")
ctl() { "${CTL[@]}" "$@"; }
json_field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d' + sys.argv[1]))" "$1"; }

# Wait until the ledger of $1 (tenant) / $2 (instance) holds a turn whose decision kind is $3.
wait_turn() {
  local tenant=$1 inst=$2 kind=$3 n
  for _ in $(seq 1 200); do
    n=$(ctl --tenant "$tenant" --output json agent ledger "$inst" --limit 50 2>/dev/null \
        | python3 -c "import json,sys
kind=sys.argv[1]; c=0
for line in sys.stdin:
    line=line.strip()
    if not line: continue
    d=json.loads(line)
    turns=d.get('turns', [d]) if isinstance(d, dict) else d
    c += sum(1 for t in turns if t.get('decision_kind', t.get('decisionKind'))==kind)
print(c)" "$kind" 2>/dev/null || echo 0)
    [ "${n:-0}" -ge "${4:-1}" ] && return 0
    sleep 0.1
  done
  die "no $kind turn for instance $inst"
}

step "tenant acme with standing agents on: the SOA boots and greets"
ACME=$(ctl --output json tenant create acme | json_field "['id']")
# Live: every turn and message of acme as genesisctl watch streams it
# (WatchTurns), interleaved with the story below and kept in watch-acme.log.
# The watch is subscribed before the standing agents are switched on (it
# says so on stderr), so even the first greeting streams live.
ctl --tenant "$ACME" watch > >(tee "$RUN_DIR/watch-acme.log" | sed -u 's/^/    live │ /') 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
  grep -q "^watching tenant" "$RUN_DIR/watch-acme.log" 2>/dev/null && break
  sleep 0.1
done
grep -q "^watching tenant" "$RUN_DIR/watch-acme.log" 2>/dev/null || die "genesisctl watch did not subscribe"
ctl --tenant "$ACME" tenant standing-agents on >/dev/null
SOA=""
for _ in $(seq 1 100); do
  SOA=$(ctl --tenant "$ACME" --output json agent list 2>/dev/null | python3 -c "import json,sys
for line in sys.stdin:
    line=line.strip()
    if not line: continue
    d=json.loads(line)
    for a in d.get('agents', [d]):
        if a.get('agent_type', a.get('agentType'))=='Soa': print(a['id']); raise SystemExit
" || true)
  [ -n "$SOA" ] && break
  sleep 0.1
done
[ -n "$SOA" ] || die "the bootstrap created no SOA for acme"
ok "SOA $SOA bootstrapped (Active, foundational phase, AgentInitialized seeded)"
wait_turn "$ACME" "$SOA" Initialized
ok "turn: Initialized — greeting posted:"
ctl --tenant "$ACME" agent messages "$SOA" | sed 's/^/      /'

step "an operator message gets a reply"
ctl --tenant "$ACME" agent send "$SOA" "Hello! What are you watching this week?" >/dev/null
wait_turn "$ACME" "$SOA" MessageAcknowledged
ok "turn: MessageAcknowledged"
ctl --tenant "$ACME" agent messages "$SOA" | head -n 3 | sed 's/^/      /'

step "the agent escalates a decision to a human"
ctl --tenant "$ACME" agent send "$SOA" "Should we pause the nightly data export? Please escalate this to me." >/dev/null
wait_turn "$ACME" "$SOA" Escalated
DECISION=$(ctl --tenant "$ACME" --output json decision list --status open | python3 -c "import json,sys
for line in sys.stdin:
    line=line.strip()
    if not line: continue
    d=json.loads(line)
    for x in d.get('decisions', [d]): print(x['id']); raise SystemExit
")
[ -n "$DECISION" ] || die "no open decision after the escalation"
ok "turn: Escalated — decision $DECISION is on the queue:"
ctl --tenant "$ACME" decision list --status open | sed 's/^/      /'

step "the operator answers; the agent resumes"
ctl --tenant "$ACME" decision respond "$DECISION" --resolution approve --notes "Yes, pause it until Monday." >/dev/null
wait_turn "$ACME" "$SOA" EscalationResumed
ok "turn: EscalationResumed"
ctl --tenant "$ACME" agent messages "$SOA" | head -n 2 | sed 's/^/      /'

step "a second tenant, globex, proves isolation"
GLOBEX=$(ctl --output json tenant create globex | json_field "['id']")
# globex checks in every 2 s instead of daily (a live system_configs write, read on
# every tick), so the demo can show what an unchanged heartbeat costs.
ctl --tenant "$GLOBEX" config set AgentDispatcher:StandingAgentHeartbeatInterval 2s >/dev/null
ctl --tenant "$GLOBEX" tenant standing-agents on >/dev/null
ACME_TOKEN=$("$BIN/genesis-control" token create --scope operator --tenant "$ACME" --label demo-acme 2>/dev/null | grep -o 'gen_[A-Za-z0-9_-]*' | head -n1)
if GENESIS_TOKEN="$ACME_TOKEN" ctl --tenant "$GLOBEX" agent list >"$RUN_DIR/isolation.out" 2>&1; then
  die "an acme operator token could list globex's agents"
fi
ok "acme's operator token on globex: refused ($(tail -n1 "$RUN_DIR/isolation.out"))"
GENESIS_TOKEN="$ACME_TOKEN" ctl --tenant "$ACME" agent list >/dev/null || die "acme's token cannot see acme"
ok "acme's operator token on acme: allowed"

step "an unchanged heartbeat is short-circuited: no LLM call"
GSOA=""
for _ in $(seq 1 100); do
  GSOA=$(ctl --tenant "$GLOBEX" --output json agent list 2>/dev/null | python3 -c "import json,sys
for line in sys.stdin:
    line=line.strip()
    if not line: continue
    d=json.loads(line)
    for a in d.get('agents', [d]):
        if a.get('agent_type', a.get('agentType'))=='Soa': print(a['id']); raise SystemExit
" || true)
  [ -n "$GSOA" ] && break
  sleep 0.1
done
[ -n "$GSOA" ] || die "the bootstrap created no SOA for globex"
wait_turn "$GLOBEX" "$GSOA" Initialized
ok "globex SOA $GSOA greeted (Initialized)"
wait_turn "$GLOBEX" "$GSOA" Heartbeat
ok "turn: Heartbeat — the plan inputs of the heartbeat were unchanged: no LLM call, zero tokens"
ctl --tenant "$GLOBEX" agent ledger "$GSOA" --limit 10 | sed 's/^/      /'
ctl --tenant "$GLOBEX" config set AgentDispatcher:StandingAgentHeartbeatInterval 24h >/dev/null

step "the ledger"
ctl --tenant "$ACME" agent ledger "$SOA" --limit 20 | sed 's/^/    /'

echo "    (the 'live │' lines above are genesisctl watch; the whole stream is in $RUN_DIR/watch-acme.log)"

cat <<EOF

Keep exploring (in another terminal):
  export GENESIS_ENDPOINT=$GENESIS_ENDPOINT GENESIS_TOKEN=$ADMIN_TOKEN
  $BIN/genesisctl tenant list
  $BIN/genesisctl --tenant $ACME agent list
  $BIN/genesisctl --tenant $ACME watch
  $BIN/genesisctl --tenant $ACME agent send $SOA "escalate: should we rotate the keys?"
  $BIN/genesisctl --tenant $ACME decision list
  $BIN/genesisctl --tenant $ACME agent modes
  $BIN/genesisctl --tenant $ACME agent mode set $SOA Incident

The operator dashboard: http://127.0.0.1:26080/ — sign in with acme's
operator token (below), or with the admin token and tenant $ACME.
  acme token: $ACME_TOKEN
EOF

echo
echo "demo: story complete"
if [ "$CI_MODE" = 0 ]; then
  echo "The fleet keeps running; press Ctrl-C to stop it."
  wait
fi
