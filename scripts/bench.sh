#!/usr/bin/env bash
# The benchmark: ensures PostgreSQL and NATS (scripts/services.sh), installs the
# peer queue (graphile-worker, npm) under target/bench-peer when node is present,
# builds the release binaries and runs genesis-bench on them.
#   scripts/bench.sh                 the full run (several minutes; report in target/bench)
#   scripts/bench.sh --quick         a few seconds, counts only
#                                    (every run also prints the $ per tick of a
#                                    three-turn episode by priced model, with and
#                                    without prompt caching: a computation)
#   scripts/bench.sh --out DIR       where report.md and report.json go
#   scripts/bench.sh --autovacuum-as-is
#                                    leave the server's autovacuum as it is (a full
#                                    run otherwise turns it on for the run when it
#                                    is off, and puts it back after)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/services.sh

# The version whose documented high-throughput options the peer script uses
# (local queue, batched completion); an older install is replaced.
peer_version=0.18.0
installed=$(cat target/bench-peer/node_modules/graphile-worker/package.json 2>/dev/null \
  | sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' | head -1 || true)
if command -v npm >/dev/null 2>&1 && [ "$installed" != "$peer_version" ]; then
  mkdir -p target/bench-peer
  (cd target/bench-peer && npm install --silent --no-audit --no-fund "graphile-worker@$peer_version") \
    || echo "[bench] graphile-worker could not be installed; the peer figure will say so" >&2
fi

cargo build --release --quiet -p genesis-control -p genesis-supervisor -p genesis-agent-pod -p genesisctl -p genesis-bench
echo "[bench] load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
GENESIS_E2E_BIN_DIR="$PWD/target/release" exec target/release/genesis-bench "$@"
