#!/usr/bin/env bash
# Makes PostgreSQL (127.0.0.1:5432, trust auth for local connections) and NATS with
# JetStream (127.0.0.1:4222, monitoring on 127.0.0.1:8222) available. Idempotent: a
# service that already answers is left alone; a missing one is installed with
# apt-get and started. It also installs gcc and make when either is missing, for
# the build, and, run as root where apt-get works, buildah and debootstrap for
# scripts/image-check.sh and iproute2 and nftables for the fault suite's network
# partitions. Source it or run it; it prints one line per service.
set -euo pipefail

PGPORT=${PGPORT:-5432}
NATS_PORT=${NATS_PORT:-4222}
NATS_MONITOR_PORT=${NATS_MONITOR_PORT:-8222}

say() { printf '[services] %s\n' "$*"; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

ensure_postgres() {
  if listening "$PGPORT" && pg_isready -q -h 127.0.0.1 -p "$PGPORT" 2>/dev/null; then
    # The suite runs many databases at once; 100 connections is too tight for it.
    local max; max=$(psql -h 127.0.0.1 -p "$PGPORT" -U postgres -Atc 'show max_connections' 2>/dev/null || echo 0)
    # A restart ends every session, so it is done only while no other client
    # is connected (a fresh machine); run from inside a running suite (the
    # demo test runs scripts/demo.sh) it says so and leaves the server alone.
    local others; others=$(psql -h 127.0.0.1 -p "$PGPORT" -U postgres -Atc \
      "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()" 2>/dev/null || echo 0)
    if [ "${max:-0}" -lt 300 ] && [ "${others:-0}" -gt 0 ]; then
      say "postgresql: max_connections is ${max}, below the 300 the suite needs; not restarting under ${others} connected session(s) (run scripts/services.sh again when the server is idle)"
    elif [ "${max:-0}" -lt 300 ] && command -v pg_ctlcluster >/dev/null 2>&1; then
      psql -h 127.0.0.1 -p "$PGPORT" -U postgres -qc 'ALTER SYSTEM SET max_connections = 300' >/dev/null
      local ver; ver=$(ls /etc/postgresql | sort -V | tail -n1)
      as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main restart
      for _ in $(seq 1 60); do pg_isready -q -h 127.0.0.1 -p "$PGPORT" && break; sleep 0.5; done
      say "postgresql: max_connections raised to 300"
    fi
    say "postgresql: up on 127.0.0.1:$PGPORT"; return
  fi
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    say "postgresql: installing"; apt_install postgresql postgresql-client
  fi
  local ver; ver=$(ls /etc/postgresql | sort -V | tail -n1)
  local hba="/etc/postgresql/$ver/main/pg_hba.conf"
  if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    # Local development and CI only: trust on loopback, as the project's tests expect.
    as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$hba"
  fi
  as_root sed -i "s/^#\?listen_addresses.*/listen_addresses = '127.0.0.1'/" "/etc/postgresql/$ver/main/postgresql.conf"
  as_root sed -i "s/^#\?max_connections.*/max_connections = 300/" "/etc/postgresql/$ver/main/postgresql.conf"
  as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main start 2>/dev/null || as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main restart
  for _ in $(seq 1 60); do pg_isready -q -h 127.0.0.1 -p "$PGPORT" && break; sleep 0.5; done
  pg_isready -q -h 127.0.0.1 -p "$PGPORT" || { say "postgresql: failed to start"; exit 1; }
  say "postgresql: started on 127.0.0.1:$PGPORT"
}

ensure_nats() {
  if listening "$NATS_PORT"; then
    say "nats: up on 127.0.0.1:$NATS_PORT"
    listening "$NATS_MONITOR_PORT" || say "nats: monitoring port $NATS_MONITOR_PORT is closed (the scaler-input test starts its own server)"
    return
  fi
  if ! command -v nats-server >/dev/null 2>&1; then
    say "nats: installing"; apt_install nats-server
  fi
  local bin; bin=$(command -v nats-server)
  as_root mkdir -p /var/lib/nats-server /var/log
  as_root start-stop-daemon --start --oknodo --background --exec "$bin" -- \
    -a 127.0.0.1 -p "$NATS_PORT" -m "$NATS_MONITOR_PORT" -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  for _ in $(seq 1 60); do listening "$NATS_PORT" && break; sleep 0.25; done
  listening "$NATS_PORT" || { say "nats: failed to start (see /var/log/nats-server.log)"; exit 1; }
  say "nats: started on 127.0.0.1:$NATS_PORT (JetStream on)"
}

# The build needs a C compiler and make besides the Rust toolchain: the
# service bins link jemalloc, which its crate builds from source.
ensure_build_tools() {
  local missing=()
  command -v cc >/dev/null 2>&1 || missing+=(gcc)
  command -v make >/dev/null 2>&1 || missing+=(make)
  if [ "${#missing[@]}" -gt 0 ]; then
    say "build tools: installing ${missing[*]}"; apt_install "${missing[@]}"
  fi
}

# scripts/image-check.sh builds the image with buildah on a base debootstrap
# makes; it runs only as root, so these are installed only then, and only
# where apt-get is the package manager. A failed install is reported, not
# fatal: the suite then says why it skips the image check.
ensure_image_tools() {
  local missing=()
  command -v buildah >/dev/null 2>&1 || missing+=(buildah)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  if [ "${#missing[@]}" = 0 ]; then return; fi
  if [ "$(id -u)" != 0 ]; then
    say "image tools: ${missing[*]} missing; not installed (the image check runs only as root)"
  elif ! command -v apt-get >/dev/null 2>&1; then
    say "image tools: ${missing[*]} missing; not installed (no apt-get here)"
  else
    say "image tools: installing ${missing[*]}"
    apt_install "${missing[@]}" || say "image tools: could not install ${missing[*]}"
  fi
}

# The fault suite's partition rows run services in network namespaces (`ip
# netns`, veth) and cut one of them one way (nftables). Only root can, so the
# tools are installed only then; a failed install is reported, not fatal, and
# the rows say why they skip (under CI=true they fail instead).
ensure_partition_tools() {
  local missing=()
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  command -v nft >/dev/null 2>&1 || missing+=(nftables)
  if [ "${#missing[@]}" = 0 ]; then return; fi
  if [ "$(id -u)" != 0 ]; then
    say "partition tools: ${missing[*]} missing; not installed (the partition rows run only as root)"
  elif ! command -v apt-get >/dev/null 2>&1; then
    say "partition tools: ${missing[*]} missing; not installed (no apt-get here)"
  else
    say "partition tools: installing ${missing[*]}"
    apt_install "${missing[@]}" || say "partition tools: could not install ${missing[*]}"
  fi
}

ensure_build_tools
ensure_image_tools
ensure_partition_tools
ensure_postgres
ensure_nats
