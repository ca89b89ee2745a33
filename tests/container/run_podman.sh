#!/usr/bin/env bash
# Prove the Dockerfile on a machine without a Docker engine: rootful Podman builds the `cpu`
# image (JAX_EXTRA=cpu) and runs the whole pipeline in it, offline, on a fresh copy of this checkout.
#
#   tests/container/run_podman.sh            (called by .ci/container.sh)
#
# Steps: install podman/runc/debootstrap (apt) -> write a containers.conf that works in this
# sandbox -> base image (python:3.11-slim-bookworm if a registry answers, else a debootstrapped
# bookworm + Debian's python3, cached) -> build the cpu image with the host's index settings as build
# secrets -> check the image (non-root, no index configuration or secrets left) -> copy the
# checkout (HEAD plus the working tree's changes) -> `snakemake --cores all` in the container
# with --network none and the MNIST mirror mounted -> check reports/report.html.
# It skips (one line "SKIP container check: <capability>", exit 0) only where this machine lacks a
# capability: root, or a package manager to install Podman with. Any failure of its own set-up
# (an install, Podman's start, a build) is "FAIL container check: ..." and exit 1.
#
# Environment:
#   MNIST_MIRROR              host folder with the four MNIST .gz files (default /work/shared/data/mnist)
#   CONTAINER_STATE           cache folder (default /var/tmp/mnist-podman)
#   CONTAINER_TARGETS         more JAX builds (JAX_EXTRA) to build besides cpu (e.g. "cuda12 cuda13 tpu");
#                             each must build and pass tests/container/check_jax.py (its JAX imports; a
#                             CUDA build's plugin matches jaxlib and loads; without the accelerator JAX
#                             falls back to the CPU with at most one line); no accelerator needed
#   CONTAINER_BASE_IMAGE      base image to use instead of the pull / local fallback
#   CONTAINER_SOURCE          worktree (default: HEAD + uncommitted changes) or head (HEAD only)
#   CONTAINER_RUN_PIPELINE    0 to stop after the image checks
#   CONTAINER_PRESET          a preset (presets/NAME.yaml) applied in the container before the run
#                             (.ci/run: quick, every stage on 2,000 examples); unset: params.yaml as it is
#   MNIST_PIPELINE_LOCK       host lock held while the containerised pipeline runs, so the host's
#                             timed stages never share the machine with it (default: the
#                             pipeline's own default, ${TMPDIR:-/tmp}/mnist-jax-pipeline-<uid>.lock)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="${CONTAINER_STATE:-/var/tmp/mnist-podman}"
MIRROR="${MNIST_MIRROR:-/work/shared/data/mnist}"
# cpu is always built (it runs the pipeline); the others are built and import-checked
TARGETS="cpu $(printf '%s\n' ${CONTAINER_TARGETS:-} | { grep -vx cpu || true; } | tr '\n' ' ')"
SOURCE="${CONTAINER_SOURCE:-worktree}"
LOCK="${MNIST_PIPELINE_LOCK:-${TMPDIR:-/tmp}/mnist-jax-pipeline-$(id -u).lock}"
IMAGE=localhost/mnist-jax-pipeline
LOCAL_MINBASE=localhost/bookworm-minbase:debootstrap
LOCAL_BASE=localhost/bookworm-python:3.11
UPSTREAM_BASE=docker.io/library/python:3.11-slim-bookworm
NICE=(nice -n 10)   # the lead times stages on this machine

skip() { echo "SKIP container check: $*"; exit 0; }
fail() { echo "FAIL container check: $*" >&2; exit 1; }
log() { echo "[container] $*"; }
now() { date +%s; }

# --- 1. tools ---------------------------------------------------------------------------------
[ "$(id -u)" -eq 0 ] || skip "needs root for rootful podman (running as uid $(id -u))"
[ -d "$MIRROR" ] || fail "MNIST mirror $MIRROR not found; set MNIST_MIRROR to the folder of the four .gz files"
mkdir -p "$STATE"
need=()
for tool in podman runc debootstrap flock; do command -v "$tool" >/dev/null 2>&1 || need+=("$tool"); done
if [ "${#need[@]}" -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || skip "no apt-get to install ${need[*]}"
  log "installing podman runc debootstrap (apt)"
  export DEBIAN_FRONTEND=noninteractive
  pkgs=(podman runc debootstrap fuse-overlayfs slirp4netns uidmap util-linux)
  if ! "${NICE[@]}" apt-get install -y --no-install-recommends "${pkgs[@]}" >"$STATE/apt.log" 2>&1; then
    { apt-get update && "${NICE[@]}" apt-get install -y --no-install-recommends "${pkgs[@]}"; } \
      >"$STATE/apt.log" 2>&1 || fail "apt-get could not install podman (see $STATE/apt.log)"
  fi
fi

# --- 2. a Podman configuration that works in this sandbox --------------------------------------
# crun fails here; runc works. cgroupfs and a file event log need no systemd.
cat >"$STATE/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF="$STATE/containers.conf"
podman info >/dev/null 2>"$STATE/podman-info.err" \
  || fail "podman does not start: $(tail -n 1 "$STATE/podman-info.err")"

# --- 3. base image ----------------------------------------------------------------------------
python3 "$REPO/tests/container/index_secrets.py" "$STATE/secrets" >"$STATE/secret-args"
mapfile -t SECRETS <"$STATE/secret-args"
log "build secrets: $(grep -o 'id=[a-z]*' "$STATE/secret-args" | cut -d= -f2 | tr '\n' ' ')"

# a trivial container must start before anything is built with this runtime
check_runtime() {
  podman run --rm --network none "$1" true >/dev/null 2>"$STATE/podman-run.err" \
    || fail "podman cannot start a container: $(grep . "$STATE/podman-run.err" | tail -n 1)"
}

debian_mirror() {
  apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null \
    | awk '$2 == "bookworm" { print $1; exit }' | grep . || echo http://deb.debian.org/debian/
}

if [ -n "${CONTAINER_BASE_IMAGE:-}" ]; then
  BASE="$CONTAINER_BASE_IMAGE"
  check_runtime "$BASE"
elif podman image exists "$UPSTREAM_BASE" || timeout 120 podman pull -q "$UPSTREAM_BASE" >/dev/null 2>&1; then
  BASE="$UPSTREAM_BASE"
  check_runtime "$BASE"
else
  BASE="$LOCAL_BASE"
  if ! podman image exists "$LOCAL_MINBASE"; then
    t0=$(now)
    rm -rf "$STATE/rootfs"
    log "no registry: debootstrap bookworm from $(debian_mirror)"
    "${NICE[@]}" debootstrap --variant=minbase bookworm "$STATE/rootfs" "$(debian_mirror)" \
      >"$STATE/debootstrap.log" 2>&1 || fail "debootstrap failed (see $STATE/debootstrap.log)"
    # the image keeps Debian's public defaults, never this host's mirror
    echo "deb http://deb.debian.org/debian bookworm main" >"$STATE/rootfs/etc/apt/sources.list"
    : >"$STATE/rootfs/etc/resolv.conf"
    rm -rf "$STATE/rootfs/var/cache/apt/archives/"*.deb "$STATE/rootfs/var/lib/apt/lists/"*
    tar -C "$STATE/rootfs" -c . | podman import -q - "$LOCAL_MINBASE" >/dev/null
    rm -rf "$STATE/rootfs"
    log "local minbase image: $(( $(now) - t0 )) s"
  fi
  check_runtime "$LOCAL_MINBASE"
  if ! podman image exists "$LOCAL_BASE"; then
    t0=$(now)
    "${NICE[@]}" podman build -q --network host "${SECRETS[@]}" -t "$LOCAL_BASE" \
      -f "$REPO/tests/container/base-python.Containerfile" "$REPO/docker" >/dev/null \
      || fail "building $LOCAL_BASE failed"
    log "local python base image: $(( $(now) - t0 )) s"
  fi
fi
log "base image: $BASE"

# --- 4. the source: a fresh clone plus the working tree's changes ---------------------------------
WORK="$STATE/work"
rm -rf "$WORK"
mkdir -p "$WORK"
git clone -q --no-hardlinks "$REPO" "$WORK/checkout"
if [ "$SOURCE" = worktree ]; then
  (cd "$REPO" && git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read -c 2>/dev/null) \
    | tar -C "$WORK/checkout" -x
  (cd "$REPO" && git ls-files -z -d) | (cd "$WORK/checkout" && xargs -0 -r rm -f --)
fi
log "source: $SOURCE ($(git -C "$REPO" rev-parse --short HEAD)$( [ "$SOURCE" = worktree ] && \
  [ -n "$(git -C "$REPO" status --porcelain)" ] && echo ' + uncommitted changes'))"

# --- 5. build ---------------------------------------------------------------------------------
declare -A BUILD_S BUILD_RC
for target in $TARGETS; do
  t0=$(now)
  # the tag's image before this build: removed after it if the build replaced it, so that repeated
  # checks on one machine do not fill its disk with untagged images (kept if anything still uses it)
  previous=$(podman image inspect --format '{{.Id}}' "$IMAGE:$target" 2>/dev/null || true)
  set +e
  "${NICE[@]}" podman build --network host "${SECRETS[@]}" --build-arg "BASE_IMAGE=$BASE" \
    --build-arg "JAX_EXTRA=$target" -t "$IMAGE:$target" -f "$WORK/checkout/Dockerfile" "$WORK/checkout" \
    >"$STATE/build-$target.log" 2>&1
  BUILD_RC[$target]=$?
  set -e
  BUILD_S[$target]=$(( $(now) - t0 ))
  if [ "${BUILD_RC[$target]}" -eq 0 ]; then
    if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$IMAGE:$target")" ]; then
      podman rmi "$previous" >/dev/null 2>&1 || true
    fi
    size=$(podman image inspect --format '{{.Size}}' "$IMAGE:$target")
    log "build $target: OK in ${BUILD_S[$target]} s, image $(( size / 1000000 )) MB"
  else
    log "build $target: FAILED after ${BUILD_S[$target]} s; last lines of $STATE/build-$target.log:"
    tail -n 15 "$STATE/build-$target.log" | sed 's/^/    /'
  fi
done
[ "${BUILD_RC[cpu]:-1}" -eq 0 ] || fail "the cpu target did not build (see $STATE/build-cpu.log)"
IMG="$IMAGE:cpu"
for target in $TARGETS; do
  [ "${BUILD_RC[$target]}" -eq 0 ] || fail "target $target did not build (see $STATE/build-$target.log)"
  timeout 300 podman run --rm --network none -v "$REPO/tests/container/check_jax.py:/tmp/check_jax.py:ro" \
    "$IMAGE:$target" python /tmp/check_jax.py "$target" >"$STATE/jax-$target.log" 2>&1 \
    || fail "$target: $(tail -n 1 "$STATE/jax-$target.log") (see $STATE/jax-$target.log)"
  log "$target: $(tail -n 1 "$STATE/jax-$target.log")"
done

# --- 6. image checks ----------------------------------------------------------------------------
uid=$(podman run --rm --network none "$IMG" id -u)
gid=$(podman run --rm --network none "$IMG" id -g)
[ "$uid" != 0 ] || fail "the image runs as root"
log "runs as uid $uid gid $gid: OK"

leaks=$(podman run --rm --network none "$IMG" sh -c '
  [ ! -e /etc/pip.conf ] || echo "/etc/pip.conf exists"
  for f in /etc/xdg/pip/pip.conf "$HOME/.pip/pip.conf" "$HOME/.config/pip/pip.conf" /opt/venv/pip.conf; do
    [ ! -e "$f" ] || echo "$f exists"
  done
  pip config list | grep -iE "index|find-links|trusted-host|cert|proxy" | sed "s/^/pip config: /"
  env | grep -iE "^(PIP_(INDEX_URL|EXTRA_INDEX_URL|FIND_LINKS|TRUSTED_HOST|CERT|CONFIG_FILE)|APT_CONFIG|https?_proxy)=" \
    | sed "s/^/env: /"
  if [ -d /run/secrets ] && [ -n "$(ls -A /run/secrets)" ]; then echo "/run/secrets not empty: $(ls -A /run/secrets)"; fi
  cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | grep -oE "[a-z+]+://[^ ]+" \
    | grep -vE "^https?://deb\.debian\.org/debian(-security)?/?$" | sed "s/^/apt source: /"
  apt-config dump | grep -E "^Acquire::(https?::Proxy|Check-Valid-Until|Check-Date)" | sed "s/^/apt conf: /"
' 2>&1 || true)
# the secrets' own settings must not be found anywhere in the image's configuration
# (apt sources are checked by URI above; the CA bundle is Debian's own in the image)
lines=()
for f in "$STATE/secrets/aptconf" "$STATE/secrets/pipconf"; do
  [ -f "$f" ] || continue
  while IFS= read -r line; do [ -z "$line" ] || [ "$line" = "[global]" ] || lines+=("$line"); done <"$f"
done
if [ "${#lines[@]}" -gt 0 ]; then
  leaks+=$(podman run --rm --network none "$IMG" sh -c '
    for l; do grep -rqsF -- "$l" /etc /opt/venv/pip.conf /home/app && echo "host setting found in the image: $l"; done
    true' _ "${lines[@]}")
fi
[ -z "$leaks" ] || fail "package-index configuration left in the image:"$'\n'"$leaks"
log "no package-index configuration or secrets in the image: OK"

if [ "${CONTAINER_RUN_PIPELINE:-1}" = 0 ]; then
  log "CONTAINER_RUN_PIPELINE=0: not running the pipeline"
  exit 0
fi

# --- 7. the pipeline, offline, in the container -------------------------------------------------
# The checkout is bind-mounted read-write and the container's user is not root, so the copy is
# handed to the image's uid (rootful Podman has no --userns=keep-id). The copy is ours, so
# nothing of the caller's checkout changes owner. `--user "$(id -u):$(id -g)"` is what
# .github/workflows/ci.yml does instead, where the runner's user owns the checkout.
chown -R "$uid:$gid" "$WORK/checkout"
touch "$LOCK"
RUN=(snakemake --cores all)  # the image's own command
[ -z "${CONTAINER_PRESET:-}" ] || RUN=(sh -c 'mnist-pipeline preset "$1" && exec snakemake --cores all' sh "$CONTAINER_PRESET")
log "running ${CONTAINER_PRESET:+mnist-pipeline preset $CONTAINER_PRESET, then }snakemake --cores all in $IMG (network none; waiting for $LOCK)"
t0=$(now)
set +e
flock "$LOCK" "${NICE[@]}" podman run --rm --network none \
  -v "$WORK/checkout:/workspace" -v "$MIRROR:/mirror:ro" -e MNIST_MIRROR=/mirror \
  "$IMG" "${RUN[@]}" 2>&1 | tee "$STATE/pipeline.log" | tail -n 40
rc=${PIPESTATUS[0]}
set -e
run_s=$(( $(now) - t0 ))
log "pipeline run: rc=$rc in $run_s s (log: $STATE/pipeline.log)"
[ "$rc" -eq 0 ] || fail "snakemake --cores all failed in the container (rc=$rc)"
[ -s "$WORK/checkout/reports/report.html" ] || fail "reports/report.html missing after the run"
log "reports/report.html: $(stat -c %s "$WORK/checkout/reports/report.html") bytes, owned by uid $(stat -c %u "$WORK/checkout/reports/report.html")"
summary=""
for target in $TARGETS; do summary+="build $target ${BUILD_S[$target]} s, "; done
echo "container check OK: ${summary}pipeline${CONTAINER_PRESET:+ (preset $CONTAINER_PRESET)} ${run_s} s (base $BASE)"
