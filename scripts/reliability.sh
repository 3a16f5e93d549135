#!/usr/bin/env bash
# The reliability run: the fault-injection, isolation, back-pressure, shutdown and
# secrets end-to-end tests against the real binaries, PostgreSQL and NATS, one test
# at a time (so no test's timing is another's load), then the fault table of
# RELIABILITY.md regenerated from the `FAULT <name>: …` lines those tests print (and
# the security row from the `secrets: …` line). The table is rewritten only when
# every test passed and every known fault printed its line; otherwise it is left as
# it was and the script exits non-zero.
#   scripts/reliability.sh             one round of every fault
#   scripts/reliability.sh --soak N    N times the rounds of every fault (GENESIS_FAULT_SOAK=N)
#   scripts/reliability.sh --no-write  run and print the table, leave RELIABILITY.md alone
# The full output is kept in target/reliability/run.log.
set -euo pipefail
cd "$(dirname "$0")/.."

soak=1
write=1
while [ $# -gt 0 ]; do
  case "$1" in
    --soak)
      [ $# -ge 2 ] || { echo "--soak needs a number of rounds (1 to 1000)" >&2; exit 2; }
      soak=$2
      shift 2
      ;;
    --soak=*) soak=${1#--soak=}; shift ;;
    --no-write) write=0; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
# The tests read GENESIS_FAULT_SOAK as 1..=1000 and silently fall back to 1
# otherwise; refuse here instead, so a typo never passes for a soak.
if ! [[ "$soak" =~ ^[0-9]+$ ]] || [ "$soak" -lt 1 ] || [ "$soak" -gt 1000 ]; then
  echo "--soak must be a whole number from 1 to 1000, got: $soak" >&2
  exit 2
fi

command -v cargo-nextest >/dev/null 2>&1 || { echo "cargo-nextest is missing: cargo install cargo-nextest" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "python3 is missing (it rewrites the table)" >&2; exit 1; }

bash scripts/services.sh
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
export GENESIS_TEST_NATS_URL=${GENESIS_TEST_NATS_URL:-nats://127.0.0.1:4222}
export GENESIS_FAULT_SOAK=$soak

echo "[reliability] building the service binaries" >&2
cargo build --workspace --bins --quiet

mkdir -p target/reliability
log=target/reliability/run.log
started=$(date -u +%s)
echo "[reliability] running the fault, isolation, back-pressure, shutdown and secrets tests (soak $soak); log in $log" >&2
set +e
# --no-capture runs the tests one at a time and lets their lines through.
cargo nextest run -p genesis-e2e \
  --test faults --test isolation --test scaler --test shutdown --test secrets \
  --no-capture --no-fail-fast --color never 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
secs=$(( $(date -u +%s) - started ))

# The commit the binaries were built from; "-dirty" when the tested sources
# had changes not yet committed.
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- services tests migrations Cargo.toml Cargo.lock || commit="$commit-dirty"

python3 - "$log" RELIABILITY.md "$status" "$soak" "$secs" "$write" "$commit" <<'PY'
import datetime, re, sys

log_path, doc_path, status, soak, secs, write, commit = sys.argv[1:8]
status, write = int(status), write == "1"

# What each fault is and how it is injected; the figures come from the run.
KNOWN = [
    ("pod-kill", "agent pods SIGKILLed at random moments",
     "`kill -9` of a random pod 0–400 ms into a burst, restart 300 ms later; then every pod at once while a tick holds a lease, until a kill leaves a lease behind"),
    ("supervisor-and-control-restart", "supervisor and control restarted under load",
     "SIGKILL + restart of the supervisor, then of control, between bursts"),
    ("nats-outage", "NATS unreachable, then back",
     "a private nats-server stopped mid-burst and resumed (same store)"),
    ("pg-terminate", "PostgreSQL connections severed",
     "`pg_terminate_backend` of every service connection during bursts"),
    ("poison", "an event whose tick kills the pod every time",
     "`GENESIS_FAULT_EXIT_ON=POISON-PILL`; `GENESIS_MAX_ATTEMPTS=3`; another agent of the tenant keeps receiving messages"),
    ("hanging-provider", "one tenant's LLM provider hangs",
     "its preset points at a loopback OpenAI-compatible server that holds every request open; 5 due ticks on a 4-slot pod, then another tenant starts and sends 3 messages"),
    ("failing-provider", "one tenant's LLM provider always fails fast",
     "its preset points at a loopback server answering 500 at once; 4 of its agents get 12 messages/s while another tenant's enqueue→answered latency is measured against a baseline from the same run"),
    ("checker", "the invariant checker itself",
     "each invariant the checker names broken by hand in a settled fleet's database (a dead letter covered only by another event's request, an operator message pending beside the heartbeat, a lease just past its expiry), undone before the next"),
    ("backpressure", "publisher at its back-pressure limit",
     "`GENESIS_OUTBOX_MAX_PENDING=10`, batch 4, 40 messages with no pods, then two pods"),
    ("partition-pod", "an agent pod cut from the supervisor mid-tick, after a tool call",
     "the pod runs in a network namespace made by the test (`ip netns`, one veth pair to the host); `GENESIS_FAULT_PAUSE_AT=after_tool` holds it after the greeting's tool call while the test takes the link down; a pod on the host takes the event over; the link comes back once the cut pod gave its tick up; provider: the strict Anthropic stand-in"),
    ("partition-control", "control cut from NATS between a publish and its mark",
     "control runs in a network namespace made by the test (`ip netns`, one veth pair; PostgreSQL through a relay on the link); an nftables rule there drops every segment from NATS, so a publish reaches the stream and its ack is lost (`GENESIS_PUBLISH_ACK_TIMEOUT_MS=1000`); first with no pod running, then with one"),
]
# Faults described here but not required in every run (a newer test).
OPTIONAL = {
    "poison-fail": ("an event whose tick fails every time, without a crash",
                    "`GENESIS_FAULT_FAIL_ON=POISON-PILL`: the pod fails the tick and NAKs it; `GENESIS_MAX_ATTEMPTS=3`; another agent of the tenant keeps receiving messages",
                    "the lease it left expired, the event was retried to the limit and dead-lettered with one `dead_letter` attention request; no pod died; the other agent answered every message"),
}
# What a passing line means, beyond its figures.
MEANING = {
    "pod-kill": "every message has its turn; the events claimed twice (ticks interrupted in flight and taken over) were each consumed once",
    "supervisor-and-control-restart": "the fleet settled with no restart by hand",
    "nats-outage": "enqueues landed in PostgreSQL; the outbox republished, nothing lost",
    "pg-terminate": "every pool reconnected; nothing lost",
    "poison": "dead-lettered with one `dead_letter` attention request; the other agent answered every message",
    "hanging-provider": "the stuck tenant held only its share of the slots (`GENESIS_POD_TENANT_CONCURRENCY`); the other tenant answered every message while the requests hung; once the provider failed fast the ticks ended `WaitingForEvent / idle:blocked`",
    "failing-provider": "the other tenant answered every message within 3 × its baseline p95 + 2 s; no failing message was answered, consumed or dead-lettered (each was deferred for a later retry), every provider request is a recorded `server_error` attempt, and each failing agent stayed active (a provider outage is never STUCK) with one `provider_failure` attention request",
    "checker": "the checker refused every breakage and accepted the repaired fleet",
    "backpressure": "the stream held at the limit, the rest stayed in PostgreSQL; all 40 answered once",
    "partition-control": "the event stayed unmarked while the ack was lost, with one copy in the stream; healed, control published it again, the stream dropped the duplicate and the event was marked; the pod answered each message once, and a message it had answered while control was cut was not published again",
    "partition-pod": "the host pod resumed the journaled episode: one greeting, one decision and one mission, each of the opener's four turns asked of the provider once and paid once, no lease left behind; the cut pod rejoined on its own",
}
# The crash points of GENESIS_FAULT_EXIT_AT: where the pod aborts, and what
# recovery means there. A point missing here still gets a row.
CRASH = {
    "before_claim": ("after receiving a tick message, before ClaimTick",
                     "the unacked message is redelivered; nothing was claimed before the crash"),
    "after_claim": ("right after claiming",
                    "the lease expires and the event is reclaimed"),
    "after_tool": ("after a tool call",
                   "the reclaimed tick resumes the journaled episode: the greeting is answered from its record, not sent again, and the journaled turn is not asked of the provider again; the decision and the mission are made once"),
    "before_complete": ("before CompleteTick",
                        "the reclaimed tick resumes the journaled episode: all four turns are replayed, nothing is asked, sent, proposed or put to the operator again"),
    "after_complete": ("after CompleteTick, before the JetStream ack",
                       "the redelivered message finds the event consumed"),
}
COLUMNS = ("rounds", "events", "consumed", "dead_lettered")

faults = {}   # name -> {"kv": {...}, "notes": [...], "test": str, "ok": bool}
order = []
test = None
secrets = None
shutdown = None
start_re = re.compile(r"^\s*START\s+(?:\[[^\]]*\]\s+)?(?:\(\s*\d+/\d+\)\s+)?(\S+)\s+(\S+)")
with open(log_path, encoding="utf-8", errors="replace") as f:
    for raw in f:
        line = raw.rstrip("\n")
        m = start_re.match(line)
        if m:
            test = f"{m.group(1).split('::')[-1]}::{m.group(2)}"
            continue
        if line.startswith("secrets: "):
            secrets = line[len("secrets: "):]
            continue
        if line.startswith("shutdown: "):
            shutdown = (line[len("shutdown: "):], test)
            continue
        m = re.match(r"^FAULT ([A-Za-z0-9_.-]+): (.*)$", line)
        if not m:
            continue
        name, rest = m.groups()
        if name not in faults:
            faults[name] = {"kv": {}, "notes": [], "test": test, "ok": False}
            order.append(name)
        entry = faults[name]
        ok = re.search(r"(^|\s)ok(;|$)", rest) is not None
        entry["ok"] = entry["ok"] or ok
        # The table's columns are summed over a fault's lines (a soaked
        # crash point prints one line per round, each its own fleet); every
        # other figure and whatever follows "ok;" is kept as a note.
        head, _, tail = rest.partition(" ok;") if " ok;" in rest else (rest, "", "")
        head = re.sub(r"\s+ok$", "", head.strip())
        for k, v in re.findall(r"(?<![\w-])([A-Za-z_][A-Za-z0-9_]*)=(\S+)", head):
            if k in COLUMNS and v.isdigit():
                entry["kv"][k] = str(int(entry["kv"].get(k, "0")) + int(v))
        note = re.sub(r"(?<![\w-])(" + "|".join(COLUMNS) + r")=\d+\s*", "", head).strip()
        for n in (note, tail.strip()):
            if n and n != "ok":
                entry["notes"].append(n)

problems = []
if status != 0:
    problems.append(f"cargo nextest exited {status}: a test failed (see {log_path})")
for name, _, _ in KNOWN:
    if name not in faults:
        problems.append(f"no `FAULT {name}:` line in the run")
if not any(n.startswith("crash-") for n in faults):
    problems.append("no `FAULT crash-<point>:` line in the run")
for name in order:
    if not faults[name]["ok"]:
        problems.append(f"`FAULT {name}:` never reported ok")
if secrets is None:
    problems.append("no `secrets:` line in the run")

def cell(v):
    return v.replace("|", "\\|")

rows = []
def row(title, how, test, kv, result):
    vals = [cell(kv.get(c, "—")) for c in COLUMNS]
    rows.append(f"| {title} | {how} | `{test or '?'}` | " + " | ".join(vals) + f" | {result} |")

def result_of(name, entry, meaning):
    parts = ["ok" if entry["ok"] else "**FAILED**"]
    notes = entry["notes"]
    if len(notes) > 3:
        notes = notes[:3] + [f"… {len(notes) - 3} more in target/reliability/run.log"]
    detail = "; ".join(cell(n) for n in notes)
    if detail:
        parts.append(detail)
    if meaning:
        parts.append(meaning)
    return " — ".join(parts)

# Crash points first, in the order the run printed them.
for name in order:
    if name.startswith("crash-"):
        point = name[len("crash-"):].replace("-", "_")
        where, meaning = CRASH.get(point, (f"at `{point}`", ""))
        e = faults[name]
        row(f"agent pod crashes {where}",
            f"a fleet of 2 controls, 2 supervisors and 2 pods (the chart's defaults) with both pods armed; `GENESIS_FAULT_EXIT_AT={point}` aborts the pod that takes the first tick (no shutdown path), the other may take the event over, and the harness restarts the dead one; provider: the strict Anthropic stand-in",
            e["test"], e["kv"],
            result_of(name, e, "; ".join(x for x in [meaning, "the opener (a greeting, a decision, a mission over four turns) completed exactly once: one turn, one of each effect, each turn asked of the provider and paid once"] if x)))
known_names = {k for k, _, _ in KNOWN}
for name, title, how in KNOWN:
    if name in faults:
        row(title, how, faults[name]["test"], faults[name]["kv"], result_of(name, faults[name], MEANING.get(name)))
for name in order:
    if not name.startswith("crash-") and name not in known_names:
        e = faults[name]
        title, how, meaning = OPTIONAL.get(name, (f"`{name}`", "(no description in scripts/reliability.sh yet)", None))
        row(title, how, e["test"], e["kv"], result_of(name, e, meaning))
if shutdown:
    row("SIGTERM to an agent pod right after an operator message, then to the supervisor and control",
        "`Fleet::terminate`", shutdown[1], {}, "ok — " + shutdown[0])
rows.append("| an event whose tick always fails, by the store alone | claims past `GENESIS_MAX_ATTEMPTS` | `store::an_event_past_max_attempts_is_dead_lettered_with_an_attention_request` (genesis-store tests, not part of this run) | — | — | — | 1 | dead-lettered with an attention request |")

when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
table = "\n".join([
    f"Generated by `scripts/reliability.sh{'' if soak == '1' else ' --soak ' + soak}` on {when} at commit `{commit}` "
    f"(soak {soak}, {int(secs) // 60} min {int(secs) % 60} s). Do not edit by hand: rerun the script.",
    "",
    "| fault | how it is injected | test | rounds | events | consumed | dead-lettered | result |",
    "|---|---|---|---|---|---|---|---|",
    *rows,
])
print()
print(table)
if secrets:
    print()
    print("secrets:", secrets)

if problems:
    print("\n[reliability] RELIABILITY.md left unchanged:", file=sys.stderr)
    for p in problems:
        print(f"  - {p}", file=sys.stderr)
    sys.exit(1)
if not write:
    sys.exit(0)

def replace(doc, name, body):
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    pat = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pat.search(doc):
        sys.exit(f"[reliability] {doc_path} has no {begin} … {end} block")
    return pat.sub(lambda _: f"{begin}\n{body}\n{end}", doc, count=1)

with open(doc_path, encoding="utf-8") as f:
    doc = f.read()
doc = replace(doc, "fault-table", table)
doc = replace(doc, "secrets-line", f"Last run: {secrets}.")
with open(doc_path, "w", encoding="utf-8") as f:
    f.write(doc)
print(f"\n[reliability] {doc_path} regenerated ({len(rows)} rows)", file=sys.stderr)
PY
