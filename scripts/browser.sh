#!/usr/bin/env bash
# Makes the dashboard's browser test runnable: Debian's Chromium and
# playwright-core (pinned in tests/browser/package-lock.json). Idempotent; never
# fails the caller: when something cannot be installed it says so in one line and
# the browser test skips with the same reason.
set -uo pipefail
cd "$(dirname "$0")/.."

say() { printf '[browser] %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

if [ -x /usr/bin/chromium ] || [ -n "${GENESIS_CHROMIUM:-}" ]; then
  say "chromium: present"
elif command -v apt-get >/dev/null 2>&1; then
  say "chromium: installing (apt-get install chromium)"
  if as_root apt-get update -qq >/dev/null 2>&1 &&
     DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium >/dev/null 2>&1; then
    say "chromium: installed"
  else
    say "chromium: could not be installed; the dashboard browser test will skip"
  fi
else
  say "chromium: no apt-get here; the dashboard browser test will skip"
fi

if [ -f tests/browser/node_modules/playwright-core/package.json ]; then
  say "playwright-core: present"
elif command -v npm >/dev/null 2>&1; then
  if (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1); then
    say "playwright-core: installed (npm ci in tests/browser)"
  else
    say "playwright-core: npm ci failed; the dashboard browser test will skip"
  fi
else
  say "playwright-core: no npm here; the dashboard browser test will skip"
fi
exit 0
