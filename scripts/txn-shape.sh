#!/usr/bin/env bash
# What the shape of a tick's transactions costs the database, apart from the
# services: pgbench drives the schema's own tick functions (enqueue, claim,
# complete: genesis_enqueue_event, genesis_claim_tick, genesis_apply_complete)
# on a fresh database built from migrations/, K instances per statement, and
# reports cycles/s and the machine's CPU per cycle (from /proc/stat).
#   K = 1 is today's protocol: one autocommit transaction per event and step.
#   K > 1 is the same work with K events' steps in one statement (one commit).
# Two more rows bound what the commit path costs: the same K = 1 cycle with
# pg_notify made a no-op (shadowed by a public function through search_path),
# and with synchronous_commit off. The last is a bound only: ticks keep
# synchronous commits.
#   scripts/txn-shape.sh [SECONDS_PER_ROW]      (default 12)
# It ends by checking that the counts add up (every enqueued event consumed by
# exactly one ledger turn, no failed transaction) and exits 1 when they do not;
# scripts/test.sh runs it with 1 second per row for that check alone.
# Runs as the superuser, so RLS is not evaluated; every row pays the same.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-12}
case "$secs" in '' | *[!0-9]*) echo "txn-shape: SECONDS_PER_ROW must be a whole number, got '$secs'" >&2; exit 2 ;; esac
[ "$secs" -ge 1 ] || { echo "txn-shape: SECONDS_PER_ROW must be at least 1" >&2; exit 2; }

bash scripts/services.sh
command -v pgbench >/dev/null || PATH="$PATH:$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
command -v pgbench >/dev/null || { echo "txn-shape: pgbench not found (postgresql-contrib)" >&2; exit 1; }

db="genesis_txn_shape_$$"
work=$(mktemp -d)
pg=(-h 127.0.0.1 -U postgres)
cleanup() { psql "${pg[@]}" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT

psql "${pg[@]}" -qc "CREATE DATABASE $db"
for f in migrations/*.sql; do
  psql "${pg[@]}" -d "$db" -q -v ON_ERROR_STOP=1 -f "$f" >/dev/null
done
psql "${pg[@]}" -d "$db" -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
INSERT INTO tenants (name) SELECT 'shape-' || g FROM generate_series(1, 100) g;
CREATE TABLE shape_map (n int PRIMARY KEY, t uuid NOT NULL, i uuid NOT NULL);
WITH ins AS (
  INSERT INTO agent_instances (tenant_id, agent_type, status)
  SELECT t.id, 'Soa', 'active' FROM tenants t, generate_series(1, 10)
  RETURNING id, tenant_id)
INSERT INTO shape_map SELECT row_number() OVER (ORDER BY tenant_id, id) - 1, tenant_id, id FROM ins;
-- The no-op notify of the "no NOTIFY" row; found only with search_path = public, pg_catalog.
CREATE FUNCTION public.pg_notify(text, text) RETURNS void LANGUAGE sql AS '';
SQL

# Each client owns s instances; a script run is one cycle of k of them.
cat >"$work/cycle.sql" <<'SQL'
\set a random(0, :s / :k - 1) * :k + :client_id * :s
\set b :a + :k - 1
\set r random(1, 2000000000)
SELECT count(genesis_enqueue_event(t, i, 'ExternalSignalReceived', '{}', NULL, NULL)) FROM shape_map WHERE n BETWEEN :a AND :b;
SELECT count(genesis_claim_tick(t, i, md5(:r::text)::uuid, '30 s', 5)) FROM shape_map WHERE n BETWEEN :a AND :b;
SELECT count(genesis_apply_complete(p_tenant => t, p_instance => i, p_session => md5(:r::text)::uuid,
   p_event => (SELECT e.id FROM agent_event_queue e
                WHERE e.instance_id = shape_map.i AND e.claimed_session = md5(:r::text)::uuid
                  AND e.consumed_at IS NULL AND e.dead_lettered_at IS NULL LIMIT 1),
   p_decision_kind => 'Wait', p_phase => 'idle', p_plan_input_hash => NULL, p_consecutive_idle_ticks => 0,
   p_idle_ticks_since_replan => 0, p_consecutive_blocked_turns => 0, p_consecutive_exhausted_turns => 0,
   p_halt => false, p_next_tick_delay_ms => 86400000, p_attention_title => NULL, p_attention_body => NULL,
   p_decision_payload => '{}'::jsonb, p_wait_condition => NULL, p_reasoning_summary => 'txn-shape',
   p_llm_call_snapshot_id => NULL, p_served_model => NULL, p_cost_usd => NULL, p_input_tokens => NULL,
   p_output_tokens => NULL, p_actions => NULL, p_expecting => false, p_expect_event_kind => NULL,
   p_expect_plan_input_hash => NULL, p_expect_idle_ticks => NULL, p_expect_idle_since_replan => NULL,
   p_expect_blocked_turns => NULL, p_expect_exhausted_turns => NULL, p_attempts => NULL))
  FROM shape_map WHERE n BETWEEN :a AND :b;
SQL

clients=4
per_client=$((1000 / clients))
cpu() { awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }
ticks_per_s=$(getconf CLK_TCK)

# row LABEL K SECONDS [PGOPTIONS]
row() {
  local label=$1 k=$2 t=$3 opts=${4:-}
  local s0 s1 out tps
  read -r -a s0 < <(cpu)
  out=$(PGOPTIONS="$opts" pgbench "${pg[@]}" -n -M prepared -f "$work/cycle.sql" -D k="$k" -D s="$per_client" \
          -c "$clients" -j 2 -T "$t" "$db" 2>&1) || { echo "$out" >&2; exit 1; }
  read -r -a s1 < <(cpu)
  if grep -q "failed transactions: [1-9]" <<<"$out"; then echo "$out" >&2; exit 1; fi
  tps=$(awk '/^tps/{print $3}' <<<"$out")
  awk -v l="$label" -v k="$k" -v tps="$tps" -v b=$((s1[0] - s0[0])) -v i=$((s1[1] - s0[1])) \
      -v t="$t" -v hz="$ticks_per_s" 'BEGIN {
        c = tps * k; printf "| %s | %d | %.0f | %.0f %% | %.3f |\n", l, k, c, 100 * b / (b + i), 1000 * b / hz / (c * t) }'
}

echo "[txn-shape] $db: 1,000 instances of 100 tenants, $clients clients, ${secs}s per row" >&2
row warm-up 1 2 >/dev/null
echo "| cycle (enqueue, claim, complete) | events per statement | cycles/s | CPU busy | CPU ms per cycle |"
echo "|---|---:|---:|---:|---:|"
for k in 1 2 4 8; do row "as shipped" "$k" "$secs"; done
row "pg_notify a no-op" 1 "$secs" "-c search_path=public,pg_catalog"
row "synchronous_commit off (bound only)" 1 "$secs" "-c synchronous_commit=off"

# The counts: a cycle whose claim took nothing would leave its event unconsumed
# and write no turn (genesis_apply_complete answers, it does not raise).
read -r events consumed turns < <(psql "${pg[@]}" -d "$db" -AtF' ' -c "
  SELECT (SELECT count(*) FROM agent_event_queue WHERE event_kind = 'ExternalSignalReceived'),
         (SELECT count(*) FROM agent_event_queue WHERE event_kind = 'ExternalSignalReceived'
                                                   AND consumed_at IS NOT NULL),
         (SELECT count(*) FROM agent_state_ledger)")
echo "[txn-shape] events $events, consumed $consumed, ledger turns $turns" >&2
if [ "$events" -eq 0 ] || [ "$consumed" -ne "$events" ] || [ "$turns" -ne "$events" ]; then
  echo "txn-shape: the counts do not add up" >&2
  exit 1
fi
