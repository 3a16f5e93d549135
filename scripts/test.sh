#!/usr/bin/env bash
# The whole test suite: formatting, lints with warnings denied, every crate's tests
# and the workspace end-to-end tests against real PostgreSQL and NATS, and the Helm
# chart checks. Each run works in a database of its own, dropped at the end.
#   scripts/test.sh            everything
#   scripts/test.sh -p CRATE   only that crate's tests (fmt/clippy/chart still run)
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

command -v cargo >/dev/null 2>&1 || { echo "cargo is missing: install the Rust toolchain (rustup) first" >&2; exit 1; }

step "services"
bash scripts/services.sh

run_db="genesis_test_$(date +%s)_$$"
psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $run_db" >/dev/null
cleanup() {
  # Drop the per-run database and the per-test databases sqlx::test made under it.
  for db in $(psql -h 127.0.0.1 -U postgres -Atc "SELECT datname FROM pg_database WHERE datname LIKE '_sqlx_test_%'" 2>/dev/null); do
    psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
  done
  psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $run_db WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$run_db"
export GENESIS_TEST_NATS_URL="nats://127.0.0.1:4222"
export RUST_BACKTRACE=1
# A clean checkout gains nothing from incremental state; without it the build
# directory stays a fraction of its size.
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "cargo build (bins the end-to-end tests start)"
cargo build --workspace --bins --quiet

step "browser tools (Chromium, playwright-core) for the dashboard test"
bash scripts/browser.sh

step "tests"
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi

step "transaction-shape probe (counts only: scripts/txn-shape.sh 1)"
bash scripts/txn-shape.sh 1 >/dev/null

step "container image (scripts/image-check.sh on the debug binaries)"
if [ "$(id -u)" != 0 ]; then
  echo "skipped: the image check needs root (buildah --isolation chroot, chroot, mount); running as uid $(id -u)"
elif ! command -v buildah >/dev/null 2>&1; then
  echo "skipped: buildah is not installed (scripts/services.sh installs it, as root, where apt-get works)"
else
  bash scripts/image-check.sh --bin-dir "${CARGO_TARGET_DIR:-target}/debug"
fi

if [ -x scripts/chart-check.sh ]; then
  step "helm chart checks"
  bash scripts/chart-check.sh
fi
