#!/usr/bin/env bash
# The tick's server functions alone, on one PostgreSQL client, no services:
# a scratch database built from migrations/ up to a given
# number (psql follows each migration's includes of sql/), 100 tenants
# with 10 SOA instances each, then pgbench running one tick per script
# (enqueue an ExternalSignalReceived, claim it, the call attempt, the
# completion) as genesis_app, so row-level security applies as in the fleet.
# The claim is genesis_claim_and_read, as the supervisor sends it: the claim plus the bundle read (ledger tail after the
# turn the supervisor already holds, missions, escalations, credit; the
# catalogue left out as current), so the bundle read is timed as well.
# Prints ticks/s and each function's own time per tick (track_functions), so
# two schemas can be compared function by function without the noise of the
# whole fleet. The script also remembers each
# instance's last turn in its own table (one small UPDATE per tick), which
# counts in ticks/s but in no function's time.
#   scripts/bench-tick-sql.sh             every migration
#   scripts/bench-tick-sql.sh --upto N    the tables as migration N left them (the function
#                                         files are always the current ones: to compare two
#                                         versions of a function, run it in two checkouts)
#   --secs N     seconds per round (default 15)
#   --rounds N   rounds (default 3)
# The database is dropped at the end. Needs psql and pgbench (scripts/services.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

upto=9999
secs=15
rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --upto) upto="$2"; shift 2 ;;
    --secs) secs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "bench-tick-sql: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
case "$upto$secs$rounds" in
  *[!0-9]*) echo "bench-tick-sql: --upto, --secs and --rounds take whole numbers" >&2; exit 2 ;;
esac

PG="${GENESIS_BENCH_PG:-postgres://postgres@127.0.0.1:5432}"
db="genesis_ticksql_${upto}_$$"
work=$(mktemp -d)
cleanup() {
  psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

psql "$PG/postgres" -qc "CREATE DATABASE $db" >/dev/null
last=0
for f in migrations/*.sql; do
  n=$((10#$(basename "$f" | cut -c1-4)))
  [ "$n" -gt "$upto" ] && continue
  psql "$PG/$db" -q -v ON_ERROR_STOP=1 -f "$f" >/dev/null
  last=$n
done
psql "$PG/$db" -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE TABLE bench_inst (n int PRIMARY KEY, id uuid, tenant_id uuid, turn bigint NOT NULL DEFAULT 0,
                         ledger_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000');
INSERT INTO tenants (name) SELECT 'ticksql-' || g FROM generate_series(1, 100) g;
INSERT INTO agent_instances (tenant_id, agent_type, status)
SELECT t.id, 'Soa', 'active' FROM tenants t, generate_series(1, 10);
INSERT INTO bench_inst SELECT row_number() OVER (ORDER BY id), id, tenant_id FROM agent_instances;
GRANT SELECT, UPDATE ON bench_inst TO genesis_app;
ANALYZE;
SQL

# One tick. pgbench substitutes :name as text, hence the quotes.
turn="p_event => ':ev', p_decision_kind => 'Acted', p_phase => 'acted', p_plan_input_hash => NULL,
      p_consecutive_idle_ticks => 0, p_idle_ticks_since_replan => 0, p_consecutive_blocked_turns => 0,
      p_consecutive_exhausted_turns => 0, p_halt => false, p_next_tick_delay_ms => 86400000,
      p_attention_title => NULL, p_attention_body => NULL, p_decision_payload => '{}'::jsonb,
      p_wait_condition => NULL, p_reasoning_summary => 'done', p_llm_call_snapshot_id => NULL,
      p_served_model => NULL, p_cost_usd => NULL, p_input_tokens => NULL, p_output_tokens => NULL,
      p_actions => NULL, p_expecting => false, p_expect_event_kind => NULL, p_expect_plan_input_hash => NULL,
      p_expect_idle_ticks => NULL, p_expect_idle_since_replan => NULL, p_expect_blocked_turns => NULL,
      p_expect_exhausted_turns => NULL"
{
  echo '\set i random(1, 1000)'
  echo "SELECT id AS inst, tenant_id AS ten, gen_random_uuid() AS sess, turn AS kturn, ledger_id AS kid FROM bench_inst WHERE n = :i \gset"
  echo "SELECT genesis_enqueue_event(':ten', ':inst', 'ExternalSignalReceived', '{}', NULL, NULL)->'event'->>'id' AS enq \gset"
  echo "SELECT genesis_claim_and_read(':ten', ':inst', ':sess', '60 s', 5, 12, 'Soa', '{Agent:Planning,Agent:Default}',
            date_trunc('week', now()), :kturn, ':kid', (SELECT epoch FROM catalogue_epoch))->'event'->>'id' AS ev \gset"
  echo "SELECT coalesce(r->>'turn_number', '0') AS kt, coalesce(r->>'ledger_id', '00000000-0000-0000-0000-000000000000') AS kl
          FROM (SELECT genesis_apply_complete(p_tenant => ':ten', p_instance => ':inst', p_session => ':sess', $turn,
            p_attempts => jsonb_build_array(jsonb_build_object('invocation_id', 'inv-:ev', 'site_id', 'Agent:Default',
              'requested_model', 'scripted-1', 'served_model', 'scripted-1', 'provider', 'scripted',
              'credential_name', '', 'outcome', 'success', 'input_tokens', 1000, 'output_tokens', 1000,
              'usage', '{}'::jsonb, 'latency_ms', 5, 'cost_usd', 0.018, 'error_message', '',
              'prompt_overlay_sha256', NULL, 'week_start', date_trunc('week', now()), 'limit_usd', 50))) AS r) x \gset"
  echo "UPDATE bench_inst SET turn = :kt, ledger_id = ':kl' WHERE n = :i"
} | tr '\n' ' ' | sed 's/\\gset /\\gset\n/g; s/\(random(1, 1000)\) /\1\n/' > "$work/tick.sql"

run() {
  PGOPTIONS="-c role=genesis_app -c synchronous_commit=off -c track_functions=all" \
    pgbench "$PG/$db" -n -M simple -c 1 -T "$1" -f "$work/tick.sql" 2>&1
}
echo "[bench-tick-sql] migrations up to $(printf %04d "$last"), $rounds rounds of ${secs}s, one client"
# A warm-up, then statistics: a fresh table's plans differ from a grown one's
# (the fleet's autovacuum keeps them current; this machine's may be off).
out=$(run 5) || { echo "$out" >&2; exit 1; }
psql "$PG/$db" -qc "ANALYZE" >/dev/null
for r in $(seq 1 "$rounds"); do
  psql "$PG/$db" -qAtc "SELECT pg_stat_reset()" >/dev/null
  out=$(run "$secs") || { echo "$out" >&2; exit 1; }
  tps=$(echo "$out" | awk '/^tps/ {print $3}')
  sleep 0.6 # the statistics collector's flush
  psql "$PG/$db" -qAt -F' ' <<SQL
WITH n AS (SELECT calls FROM pg_stat_user_functions WHERE funcname = 'genesis_enqueue_event')
SELECT 'round $r: ' || round($tps::numeric, 1) || ' ticks/s; own us per tick:',
       string_agg(funcname || '=' || round((self_time / n.calls)::numeric * 1000, 1), ' ' ORDER BY funcname),
       'sum=' || round((sum(self_time) / min(n.calls))::numeric * 1000, 1)
  FROM pg_stat_user_functions, n GROUP BY n.calls;
SQL
done
psql "$PG/$db" -qAt <<'SQL'
SELECT '[bench-tick-sql] counts: ' || (SELECT count(*) FROM agent_state_ledger) || ' turns, '
       || (SELECT count(*) FROM llm_call_attempts) || ' attempts, '
       || (SELECT count(*) FROM agent_event_queue WHERE event_kind = 'ExternalSignalReceived' AND consumed_at IS NULL)
       || ' signals left unconsumed';
SQL
