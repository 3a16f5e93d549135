#!/usr/bin/env bash
# The container image, built and checked on this machine without a Docker
# daemon: builds deploy/Dockerfile's `runtime-prebuilt` target with
# `buildah bud --isolation chroot` around binaries built outside the image, on
# a local stand-in for the distroless runtime base made from Debian's own
# packages (debootstrap, cached under target/image-check/), then checks the
# image's config, its filesystem, each binary's --version run from the image's
# root filesystem via chroot, and a short fleet smoke test from it: migrate,
# control, supervisor, one agent pod, one greeting, against the local
# PostgreSQL and NATS (a database, login role and stream names of its own, removed at the
# end with every container, mount, image and process the run made).
#
#   scripts/image-check.sh                   binaries from target/release
#   scripts/image-check.sh --bin-dir DIR     binaries from DIR (scripts/test.sh
#                                            passes target/debug)
#   scripts/image-check.sh --expect-user U   the user the image must run as
#                                            (default 65532:65532)
#   scripts/image-check.sh --mirror URL      Debian mirror for debootstrap
#                                            (default: the one apt uses for bookworm)
#
# Needs root, buildah, debootstrap, chroot, mount, python3, psql and curl;
# scripts/services.sh installs buildah and debootstrap where apt-get works.
# Exits non-zero with one precise line when a check fails (logs of the
# services are then kept and their tails printed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN_DIR=$TARGET_DIR/release
EXPECT_USER=65532:65532
MIRROR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) [ $# -ge 2 ] || { echo "image-check: --bin-dir needs a directory" >&2; exit 2; }; BIN_DIR=$2; shift 2 ;;
    --expect-user) [ $# -ge 2 ] || { echo "image-check: --expect-user needs UID:GID" >&2; exit 2; }; EXPECT_USER=$2; shift 2 ;;
    --mirror) [ $# -ge 2 ] || { echo "image-check: --mirror needs a URL" >&2; exit 2; }; MIRROR=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "image-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$EXPECT_USER" in
  *[!0-9:]*|:*|*:|*:*:*|"") echo "image-check: --expect-user must be UID or UID:GID in digits, got '$EXPECT_USER'" >&2; exit 2 ;;
esac

say() { printf '[image-check] %s\n' "$*"; }
ok() { printf '[image-check] ok   %s\n' "$*"; }
die() { printf '[image-check] FAIL %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (buildah --isolation chroot, chroot and mount need it); running as uid $(id -u)"
for tool in buildah debootstrap chroot mount umount mknod python3 psql curl git; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed (scripts/services.sh installs buildah and debootstrap where apt-get works)"
done

BINS=(genesis-control genesis-supervisor genesis-agent-pod genesis-coder genesisctl)
SUITE=bookworm
# What gcr.io/distroless/cc-debian12 carries besides its files of its own
# (passwd, group, nsswitch.conf): glibc, libgcc, libgomp, libstdc++, OpenSSL,
# CA certificates, time zones, /etc/services and friends, os-release.
BASE_PACKAGES=(base-files netbase tzdata ca-certificates libc6 libgcc-s1 libgomp1 libstdc++6 libssl3)
DISTROLESS_RUNTIME='gcr.io/distroless/cc-debian12:nonroot'
CACHE=$TARGET_DIR/image-check
RUN_ID="$(date +%s)-$$"
RUN_DIR=$CACHE/runs/$RUN_ID
VERSION=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' Cargo.toml | head -n1)
[ -n "$VERSION" ] || die "no [workspace.package] version in Cargo.toml"
REVISION=$(git rev-parse HEAD)
BASE_IMAGE=localhost/genesis-image-check-base:$RUN_ID
IMAGE=localhost/genesis-image-check:$RUN_ID
DB=genesis_imgchk_${RUN_ID//-/_}
SVC_ROLE=genesis_imgchk_svc_${RUN_ID//-/_}
STREAM=GENESIS_IMGCHK_${RUN_ID//-/_}
NATS_URL=${GENESIS_TEST_NATS_URL:-nats://127.0.0.1:4222}

# ---- cleanup: processes, mounts, containers, images, database, stream ----
PIDS=()
MOUNTS=()
CONTAINERS=()
IMAGES=()
DB_CREATED=0
ROLE_CREATED=0
cleanup() {
  local code=$?
  set +e
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  done
  local i
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount "${MOUNTS[$i]}" 2>/dev/null || umount -l "${MOUNTS[$i]}"; done
  for c in "${CONTAINERS[@]}"; do buildah umount "$c" >/dev/null 2>&1; buildah rm "$c" >/dev/null 2>&1; done
  for img in "${IMAGES[@]}"; do buildah rmi "$img" >/dev/null 2>&1; done
  if [ "$DB_CREATED" = 1 ]; then
    psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
  fi
  if [ "$ROLE_CREATED" = 1 ]; then
    psql -h 127.0.0.1 -U postgres -qc "DROP ROLE IF EXISTS $SVC_ROLE" >/dev/null 2>&1
  fi
  [ -n "${STREAM_USED:-}" ] && nats_delete_stream "$STREAM" >/dev/null 2>&1
  if grep -qF " $RUN_DIR/" /proc/mounts; then
    # Never delete through a mount that would not go away.
    echo "[image-check] still mounted under $RUN_DIR; left in place" >&2
  elif [ "$code" != 0 ] && compgen -G "$RUN_DIR/*.log" >/dev/null; then
    for f in "$RUN_DIR"/*.log; do [ -s "$f" ] && { echo "--- tail $f" >&2; tail -n 20 "$f" >&2; }; done
    rm -rf "$RUN_DIR/base-rootfs" "$RUN_DIR/bins" "$RUN_DIR/context" "$RUN_DIR/rootfs"
    echo "[image-check] logs kept in $RUN_DIR" >&2
  else
    rm -rf "$RUN_DIR"
  fi
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Delete a JetStream stream (and its consumers) by name over the NATS protocol.
nats_delete_stream() {
  python3 - "$NATS_URL" "$1" <<'EOF'
import json, socket, sys, urllib.parse
url = urllib.parse.urlparse(sys.argv[1]); stream = sys.argv[2]
s = socket.create_connection((url.hostname or "127.0.0.1", url.port or 4222), timeout=5)
f = s.makefile("rb")
f.readline()  # INFO
s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _IMGCHK.reply 1\r\n'
          + f"PUB $JS.API.STREAM.DELETE.{stream} _IMGCHK.reply 0\r\n\r\n".encode())
while True:
    line = f.readline()
    if not line: raise SystemExit("connection closed")
    if line.startswith(b"PING"): s.sendall(b"PONG\r\n"); continue
    if line.startswith(b"MSG"):
        n = int(line.split()[-1]); body = f.read(n + 2)[:n]
        print(json.loads(body)); break
EOF
}

# What a run killed outright (SIGKILL, a power cut) left behind: containers
# and images tagged with a run id whose process is gone.
for c in $(buildah containers --format '{{.ContainerName}}' 2>/dev/null | grep -E '^genesis-image-check(-base)?-[0-9]+-[0-9]+$' || true); do
  kill -0 "${c##*-}" 2>/dev/null || { buildah rm "$c" >/dev/null 2>&1 && say "removed container $c of an earlier run"; }
done
for img in $(buildah images --format '{{.Name}}:{{.Tag}}' 2>/dev/null | grep -E '^localhost/genesis-image-check(-base)?:[0-9]+-[0-9]+$' || true); do
  kill -0 "${img##*-}" 2>/dev/null || { buildah rmi "$img" >/dev/null 2>&1 && say "removed image $img of an earlier run"; }
done

mkdir -p "$RUN_DIR"

# ---- 1. the binaries ----
say "binaries from $BIN_DIR"
[ -d "$BIN_DIR" ] || die "--bin-dir $BIN_DIR is not a directory"
mkdir -p "$RUN_DIR/bins" "$RUN_DIR/context"
for b in "${BINS[@]}"; do
  [ -f "$BIN_DIR/$b" ] && [ -x "$BIN_DIR/$b" ] || die "$BIN_DIR/$b: missing or not executable (build it: cargo build --bins [--release])"
  [ "$(head -c 4 "$BIN_DIR/$b" | od -An -c | tr -d ' ')" = '177ELF' ] || die "$BIN_DIR/$b is not an ELF executable"
  ln "$BIN_DIR/$b" "$RUN_DIR/bins/$b" 2>/dev/null || cp "$BIN_DIR/$b" "$RUN_DIR/bins/$b"
done
ok "${BINS[*]}"

# ---- 2. the runtime base this Dockerfile expects ----
runtime_default=$(sed -n 's/^ARG RUNTIME_IMAGE=\(.*\)$/\1/p' deploy/Dockerfile | head -n1)
[ "$runtime_default" = "$DISTROLESS_RUNTIME" ] || \
  die "deploy/Dockerfile's default RUNTIME_IMAGE is '$runtime_default', but the local base here reproduces $DISTROLESS_RUNTIME: update scripts/image-check.sh with it"
grep -q '^FROM runtime-base AS runtime-prebuilt$' deploy/Dockerfile || die "deploy/Dockerfile has no 'runtime-prebuilt' target"

if [ -z "$MIRROR" ]; then
  MIRROR=$(apt-get indextargets --format '$(RELEASE) $(COMPONENT) $(REPO_URI)' 'Identifier: Packages' 2>/dev/null \
    | awk -v s="$SUITE" '$1 == s && $2 == "main" { print $3; exit }')
  [ -n "$MIRROR" ] || die "no apt source serves Debian $SUITE main (see /etc/apt/sources.list*); pass --mirror URL"
fi

# debootstrap's tree, made once per (suite, mirror, packages) and reused; a
# lock keeps two concurrent runs from making it twice.
DEBOOTSTRAP=$CACHE/debootstrap-$SUITE
stamp="$SUITE $MIRROR minbase ${BASE_PACKAGES[*]}"
mkdir -p "$CACHE"
exec 9>"$CACHE/.debootstrap.lock"
flock 9
if [ "$(cat "$DEBOOTSTRAP.stamp" 2>/dev/null)" != "$stamp" ]; then
  say "debootstrap --variant=minbase $SUITE from $MIRROR (cached in $DEBOOTSTRAP)"
  rm -rf "$DEBOOTSTRAP" "$DEBOOTSTRAP.partial" "$DEBOOTSTRAP.stamp"
  includes=$(IFS=,; echo "${BASE_PACKAGES[*]}")
  debootstrap --variant=minbase --include="$includes" "$SUITE" "$DEBOOTSTRAP.partial" "$MIRROR" \
    >"$RUN_DIR/debootstrap.log" 2>&1 || die "debootstrap failed (see $RUN_DIR/debootstrap.log)"
  mv "$DEBOOTSTRAP.partial" "$DEBOOTSTRAP"
  echo "$stamp" >"$DEBOOTSTRAP.stamp"
else
  say "debootstrap tree reused: $DEBOOTSTRAP"
fi
flock -u 9

# The distroless-like tree: only the files of BASE_PACKAGES (as dpkg lists
# them, merged-/usr paths resolved), the CA bundle, and distroless's own
# passwd/group/nsswitch.conf, /tmp, /home/nonroot. No shell, no package
# manager, no coreutils.
python3 - "$DEBOOTSTRAP" "$RUN_DIR/base-rootfs" "${BASE_PACKAGES[@]}" <<'EOF' || die "could not assemble the base tree"
import os, shutil, subprocess, sys
src, dst, pkgs = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(dst)
for top in os.listdir(src):  # merged-/usr links: bin -> usr/bin, lib -> usr/lib, ...
    if os.path.islink(os.path.join(src, top)):
        os.symlink(os.readlink(os.path.join(src, top)), os.path.join(dst, top))
def copy(rel):
    parent = os.path.realpath(os.path.join(src, os.path.dirname(rel)))
    if not (parent + "/").startswith(os.path.realpath(src) + "/") and parent != os.path.realpath(src):
        raise SystemExit(f"{rel} resolves outside the tree")
    s = os.path.join(parent, os.path.basename(rel))
    d = os.path.join(dst, os.path.relpath(s, os.path.realpath(src)))
    if os.path.lexists(d) or not os.path.lexists(s):
        return
    if os.path.isdir(s) and not os.path.islink(s):
        os.makedirs(d, exist_ok=True); shutil.copystat(s, d); return
    os.makedirs(os.path.dirname(d), exist_ok=True)
    shutil.copy2(s, d, follow_symlinks=False)
for pkg in pkgs:
    out = subprocess.run(["dpkg-query", f"--admindir={src}/var/lib/dpkg", "-L", pkg],
                         check=True, capture_output=True, text=True).stdout
    for path in out.splitlines():
        if path.startswith("/") and path != "/." and not path.startswith(("/usr/share/man/", "/usr/share/doc/", "/usr/share/lintian/")):
            copy(path.lstrip("/"))
copy("etc/ssl/certs/ca-certificates.crt")  # generated by update-ca-certificates, not listed by dpkg
for name, text in {
    "etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
    "etc/group": "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n",
    "etc/nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\nethers: files\nrpc: files\n",
}.items():
    os.makedirs(os.path.join(dst, os.path.dirname(name)), exist_ok=True)
    with open(os.path.join(dst, name), "w") as f: f.write(text)
for d, mode, uid in (("tmp", 0o1777, 0), ("root", 0o700, 0), ("home/nonroot", 0o700, 65532)):
    p = os.path.join(dst, d); os.makedirs(p, exist_ok=True); os.chmod(p, mode); os.chown(p, uid, uid)
EOF
for shell in sh bash dash busybox; do
  [ ! -e "$RUN_DIR/base-rootfs/usr/bin/$shell" ] || die "the assembled base has /usr/bin/$shell; the runtime image has no shell"
done

ctr=$(buildah from --name "genesis-image-check-base-$RUN_ID" scratch)
CONTAINERS+=("$ctr")
mnt=$(buildah mount "$ctr")
cp -a "$RUN_DIR/base-rootfs/." "$mnt/"
buildah umount "$ctr" >/dev/null
# distroless's config: PATH, SSL_CERT_FILE, user nonroot, home as workdir.
buildah config --user 65532 --workingdir /home/nonroot \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "$ctr"
buildah commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
CONTAINERS=()
IMAGES+=("$BASE_IMAGE")
ok "local runtime base $BASE_IMAGE ($(du -sh "$RUN_DIR/base-rootfs" | cut -f1); ${BASE_PACKAGES[*]})"

# ---- 3. the build ----
CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
say "buildah bud --isolation chroot --target runtime-prebuilt"
buildah bud --isolation chroot --pull=never --layers=false \
  -f deploy/Dockerfile --target runtime-prebuilt \
  --build-context "bins=$RUN_DIR/bins" \
  --build-arg "RUNTIME_IMAGE=$BASE_IMAGE" \
  --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" --build-arg "CREATED=$CREATED" \
  -t "$IMAGE" "$RUN_DIR/context" >"$RUN_DIR/build.log" 2>&1 || die "buildah bud failed (see $RUN_DIR/build.log)"
IMAGES+=("$IMAGE")
ok "built $IMAGE"

# ---- 4. the image's config ----
buildah inspect --type image "$IMAGE" >"$RUN_DIR/inspect.json" || die "buildah inspect $IMAGE failed"
python3 - "$RUN_DIR/inspect.json" "$EXPECT_USER" "$VERSION" "$REVISION" "$CREATED" >"$RUN_DIR/env.list" <<'EOF' || exit 1
import json, sys
cfg = json.load(open(sys.argv[1]))["OCIv1"].get("config") or {}; user, version, revision, created = sys.argv[2:]
def check(what, got, want):
    if got != want:
        print(f"[image-check] FAIL image config {what}: expected {want!r}, got {got!r}", file=sys.stderr)
        raise SystemExit(1)
    print(f"[image-check] ok   image config {what} = {got!r}", file=sys.stderr)
check("User", cfg.get("User"), user)
check("Entrypoint", cfg.get("Entrypoint"), ["/usr/local/bin/genesis-control"])
check("ExposedPorts", sorted((cfg.get("ExposedPorts") or {}).keys()),
      sorted(f"{p}/tcp" for p in (50051, 9090, 50052, 9091, 9092)))
env = dict(e.split("=", 1) for e in cfg.get("Env") or [])
check("Env GENESIS_LOG_FORMAT", env.get("GENESIS_LOG_FORMAT"), "json")
check("Env SSL_CERT_FILE", env.get("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt")
labels = cfg.get("Labels") or {}
for key, want in (("title", "genesis"), ("version", version), ("revision", revision),
                  ("created", created), ("licenses", "Apache-2.0")):
    check(f"label org.opencontainers.image.{key}", labels.get(f"org.opencontainers.image.{key}"), want)
for e in cfg.get("Env") or []:
    print(e)
EOF

# ---- 5. the image's root filesystem ----
ctr=$(buildah from --pull-never --name "genesis-image-check-$RUN_ID" "$IMAGE")
CONTAINERS+=("$ctr")
MNT=$(buildah mount "$ctr")
for shell in bin/sh usr/bin/sh bin/bash usr/bin/bash bin/dash usr/bin/dash bin/busybox usr/bin/busybox; do
  if [ -e "$MNT/$shell" ] || [ -L "$MNT/$shell" ]; then die "the image has /$shell; the runtime image ($DISTROLESS_RUNTIME) has no shell"; fi
done
found=$(cd "$MNT" && find . \( -type f -o -type l \) \( -name sh -o -name bash -o -name dash -o -name busybox -o -name apt -o -name dpkg \) -print | head -n3)
[ -z "$found" ] || die "the image holds a shell or package manager: $found"
ok "no shell and no package manager in the image"
for b in "${BINS[@]}"; do
  cmp -s "$MNT/usr/local/bin/$b" "$RUN_DIR/bins/$b" || die "/usr/local/bin/$b in the image differs from $BIN_DIR/$b as this run took it"
done
extra=$(ls "$MNT/usr/local/bin" | grep -vxF -e genesis-control -e genesis-supervisor -e genesis-agent-pod -e genesis-coder -e genesisctl || true)
[ -z "$extra" ] || die "/usr/local/bin in the image holds more than the five binaries: $extra"
ok "/usr/local/bin holds exactly ${BINS[*]}, identical to $BIN_DIR"
certs=$(grep -c 'BEGIN CERTIFICATE' "$MNT/etc/ssl/certs/ca-certificates.crt" 2>/dev/null || echo 0)
[ "$certs" -ge 100 ] || die "/etc/ssl/certs/ca-certificates.crt holds $certs certificates, expected at least 100"
ok "CA bundle with $certs certificates"
grep -qx 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' "$MNT/etc/passwd" || die "/etc/passwd lacks the nonroot user 65532"
[ "$(stat -c %a "$MNT/tmp")" = 1777 ] || die "/tmp in the image has mode $(stat -c %a "$MNT/tmp"), expected 1777"

# A container's view of that filesystem: read-only root (as the chart runs
# it), /proc, a minimal /dev, a tmpfs on /tmp, the host's network.
mkdir -p "$MNT/proc" "$MNT/dev" "$MNT/sys"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$MNT/etc/hosts"
cp /etc/resolv.conf "$MNT/etc/resolv.conf" 2>/dev/null || true
CHROOT=$RUN_DIR/rootfs
mkdir -p "$CHROOT"
mount --bind "$MNT" "$CHROOT"; MOUNTS+=("$CHROOT")
mount -o remount,bind,ro "$CHROOT"
mount -t proc proc "$CHROOT/proc"; MOUNTS+=("$CHROOT/proc")
mount -t tmpfs -o mode=0755,size=64k,nosuid tmpfs "$CHROOT/dev"; MOUNTS+=("$CHROOT/dev")
for node in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
  set -- $node; mknod -m 0666 "$CHROOT/dev/$1" c "$2" "$3"
done
ln -s /proc/self/fd "$CHROOT/dev/fd"
mount -t tmpfs -o mode=1777,size=64m,nosuid,nodev tmpfs "$CHROOT/tmp"; MOUNTS+=("$CHROOT/tmp")

IMAGE_ENV=()
while IFS= read -r line; do IMAGE_ENV+=("$line"); done <"$RUN_DIR/env.list"
uid=${EXPECT_USER%%:*}
gid=${EXPECT_USER#*:}; [ "$gid" != "$EXPECT_USER" ] || gid=$uid
# Run a binary of the image as the image's user with the image's env plus
# the given NAME=VALUE pairs: in_image [NAME=VALUE...] BIN [ARGS...]
in_image() {
  local extra=()
  while [ $# -gt 0 ] && [[ "$1" == *=* ]]; do extra+=("$1"); shift; done
  local bin=$1; shift
  ${IN_IMAGE_EXEC:-} env -i "${IMAGE_ENV[@]}" HOME=/home/nonroot "${extra[@]}" \
    chroot --userspec="$uid:$gid" --groups="$gid" "$CHROOT" "/usr/local/bin/$bin" "$@"
}
# The same in the background, logging to $1; the pid recorded in PIDS is the
# binary's own (the subshell execs env, which execs chroot, which execs it).
start_in_image() {
  local log=$1; shift
  (IN_IMAGE_EXEC=exec in_image "$@") >"$log" 2>&1 &
  PIDS+=($!)
}

# ---- 6. --version of each binary, from the image ----
for b in "${BINS[@]}"; do
  out=$(in_image "$b" --version 2>&1) || die "$b --version in the image failed: $out"
  [ "$out" = "$b $VERSION" ] || die "$b --version in the image printed '$out', expected '$b $VERSION'"
  ok "$b --version: $out"
done

# ---- 7. the fleet, from the image ----
say "fleet smoke test: database $DB, service login $SVC_ROLE, stream $STREAM"
psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $DB" >/dev/null || die "cannot create database $DB on 127.0.0.1:5432"
DB_CREATED=1
# The services' own login, as a platform creates it (trust on loopback
# here, so no password); migrate grants it what the services need.
psql -h 127.0.0.1 -U postgres -qc "CREATE ROLE $SVC_ROLE LOGIN" >/dev/null || die "cannot create role $SVC_ROLE on 127.0.0.1:5432"
ROLE_CREATED=1
OWNER_URL="postgres://postgres@127.0.0.1:5432/$DB"
read -r P_CTL_GRPC P_CTL_HTTP P_SUP_GRPC P_SUP_HTTP P_POD_HTTP < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
FLEET_ENV=(
  "GENESIS_DATABASE_URL=postgres://$SVC_ROLE@127.0.0.1:5432/$DB"
  "GENESIS_NATS_URL=$NATS_URL"
  "GENESIS_STREAM=$STREAM"
  "GENESIS_SUBJECT_PREFIX=genesis.imgchk.${RUN_ID//-/_}.ticks"
  "GENESIS_CONSUMER=agent-pods-imgchk-$RUN_ID"
  "GENESIS_DEFAULT_PROVIDER=scripted"
  "RUST_LOG=info"
)
# The migrations and the tokens are the owner's work; the services log in
# as $SVC_ROLE and would refuse to start as the owner.
in_image "${FLEET_ENV[@]}" GENESIS_DATABASE_URL="$OWNER_URL" genesis-control migrate --service-role "$SVC_ROLE" \
  >"$RUN_DIR/migrate.log" 2>&1 || die "genesis-control migrate --service-role $SVC_ROLE in the image failed (see $RUN_DIR/migrate.log)"
for line in 'migrations applied' "service role $SVC_ROLE prepared"; do
  grep -qxF "$line" "$RUN_DIR/migrate.log" || die "genesis-control migrate did not print '$line' (see $RUN_DIR/migrate.log)"
done
ok "genesis-control migrate --service-role: migrations applied, service role $SVC_ROLE prepared"
mint() {
  in_image "${FLEET_ENV[@]}" GENESIS_DATABASE_URL="$OWNER_URL" genesis-control token create --scope "$1" --label image-check 2>>"$RUN_DIR/token.log" \
    | grep -o '^gen_[A-Za-z0-9_-]*$' | head -n1
}
OP_TOKEN=$(mint operator) || true
POD_TOKEN=$(mint agent-pod) || true
[ -n "$OP_TOKEN" ] && [ -n "$POD_TOKEN" ] || die "genesis-control token create in the image minted no token (see $RUN_DIR/token.log)"
ok "operator and agent-pod tokens minted"

STREAM_USED=1
start_in_image "$RUN_DIR/control.log" "${FLEET_ENV[@]}" GENESIS_GRPC_ADDR=127.0.0.1:$P_CTL_GRPC \
  GENESIS_HTTP_ADDR=127.0.0.1:$P_CTL_HTTP GENESIS_DASHBOARD_ADDR=off genesis-control serve
start_in_image "$RUN_DIR/supervisor.log" "${FLEET_ENV[@]}" GENESIS_GRPC_ADDR=127.0.0.1:$P_SUP_GRPC \
  GENESIS_HTTP_ADDR=127.0.0.1:$P_SUP_HTTP genesis-supervisor
wait_ready() { # port name pid
  for _ in $(seq 1 300); do
    curl -fsS "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$3" 2>/dev/null || die "$2 exited before it was ready (see $RUN_DIR/$2.log)"
    sleep 0.2
  done
  die "$2 was not ready on http://127.0.0.1:$1/readyz within 60 s (see $RUN_DIR/$2.log)"
}
wait_ready "$P_CTL_HTTP" control "${PIDS[0]}"
wait_ready "$P_SUP_HTTP" supervisor "${PIDS[1]}"
start_in_image "$RUN_DIR/agent-pod.log" "${FLEET_ENV[@]}" GENESIS_SUPERVISOR_URL=http://127.0.0.1:$P_SUP_GRPC \
  GENESIS_AGENT_TOKEN="$POD_TOKEN" GENESIS_HTTP_ADDR=127.0.0.1:$P_POD_HTTP genesis-agent-pod
wait_ready "$P_POD_HTTP" agent-pod "${PIDS[2]}"
names=(control supervisor agent-pod)
for i in 0 1 2; do
  got=$(awk '/^Uid:/ { print $2 }' "/proc/${PIDS[$i]}/status")
  [ "$got" = "$uid" ] || die "${names[$i]} runs as uid $got, expected $uid"
done
ok "control, supervisor and agent pod ready, each as uid $uid"
logins=$(psql -h 127.0.0.1 -U postgres -Atc "SELECT usename || ' ' || count(*) FROM pg_stat_activity
  WHERE datname = '$DB' AND backend_type = 'client backend' GROUP BY usename ORDER BY 1" | paste -sd, -)
[[ "$logins" =~ ^$SVC_ROLE\ [0-9]+$ ]] || die "the services' sessions on $DB are by '${logins:-nobody}', expected only $SVC_ROLE"
ok "every session of the services on $DB is $SVC_ROLE's ($logins)"

ctl() { in_image GENESIS_ENDPOINT="http://127.0.0.1:$P_CTL_GRPC" GENESIS_TOKEN="$OP_TOKEN" genesisctl "$@"; }
TENANT=$(ctl --output json tenant create "imgchk-$RUN_ID" 2>"$RUN_DIR/genesisctl.log" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])') || die "genesisctl tenant create failed (see $RUN_DIR/genesisctl.log)"
ctl --tenant "$TENANT" tenant standing-agents on >/dev/null 2>>"$RUN_DIR/genesisctl.log" || die "genesisctl tenant standing-agents on failed (see $RUN_DIR/genesisctl.log)"
greeting=""
for _ in $(seq 1 300); do
  soa=$(ctl --tenant "$TENANT" --output json agent list 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    if line.strip():
        d = json.loads(line)
        for a in d.get("agents", [d]):
            if a.get("agent_type", a.get("agentType")) == "Soa": print(a["id"]); raise SystemExit
' || true)
  if [ -n "$soa" ]; then
    greeting=$(ctl --tenant "$TENANT" agent messages "$soa" 2>/dev/null | grep -m1 'Hello, I am your Strategic Orchestration Agent' || true)
    [ -n "$greeting" ] && break
  fi
  sleep 0.2
done
[ -n "$greeting" ] || die "no greeting from tenant $TENANT's SOA within 60 s (see the logs in $RUN_DIR)"
ok "one greeting, planned by the pod and posted through the supervisor: ${greeting:0:90}"
say "passed: $IMAGE built on a local $SUITE base and checked (config, filesystem, --version, fleet)"
