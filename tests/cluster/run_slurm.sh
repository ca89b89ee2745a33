#!/usr/bin/env bash
# Runs the whole workflow on a one-node Slurm cluster started here for the purpose
# (workflow/profiles/slurm-local, fast params), then a two-point sweep, and proves from Slurm's own
# job completion log that every rule, and every point's jobs, ran as Slurm jobs. Stops every daemon it started (by pid) and restores
# every /etc file it changed, whatever happens. It skips (one line "SKIP slurm check: <reason>",
# exit 0) only where the machine lacks a capability: root, a package manager, or a machine free of
# another Slurm. A failure of its own set-up (an install, a daemon's start) is "FAIL", exit 1.
# SLURM_INSTALL_ONLY=1: install slurm-wlm and munge where they are missing, and stop there (.ci/run
# does it first, so that this apt run and Podman's never overlap).
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
START=$(date +%s)
EXPECTED_RULES="download preprocess train evaluate profile report"
CONF=/etc/slurm/slurm.conf
MUNGE_KEY=/etc/munge/munge.key
MUNGE_RUN=/run/munge

skip() { echo "SKIP slurm check: $*"; exit 0; }
fail() { echo "FAIL slurm check: $*" >&2; exit 1; }
elapsed() { echo $(( $(date +%s) - START )); }
say() { echo "[slurm $(elapsed)s] $*"; }

[ "$(id -u)" = 0 ] || skip "needs root to start munged, slurmctld and slurmd"
[ -n "${MNIST_MIRROR:-}" ] && [ -d "${MNIST_MIRROR}" ] || fail "set MNIST_MIRROR to the real MNIST files (now '${MNIST_MIRROR:-}')"
python -c "import snakemake_executor_plugin_slurm" 2>/dev/null \
  || fail "snakemake-executor-plugin-slurm is not installed (pip install -e '.[slurm]')"
if pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null; then
  skip "a Slurm daemon already runs on this machine; not touching someone else's cluster"
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null \
   || ! command -v sbatch >/dev/null; then
  command -v apt-get >/dev/null || skip "slurm-wlm and munge are not installed and there is no apt-get"
  say "installing slurm-wlm and munge"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge; } \
    >/tmp/slurm-apt.log 2>&1 || fail "apt-get install slurm-wlm munge failed (see /tmp/slurm-apt.log)"
fi
if [ "${SLURM_INSTALL_ONLY:-0}" = 1 ]; then say "installed: $(slurmctld -V), $(munged --version 2>&1 | head -1)"; exit 0; fi
say "$(slurmctld -V), $(munged --version 2>&1 | head -1), plugin $(python -c \
  'import importlib.metadata as m; print(m.version("snakemake-executor-plugin-slurm"))')"

WORK="$(mktemp -d /tmp/slurm-check.XXXXXX)"
chmod 755 "$WORK"
PIDS=()                 # daemons we started, stopped in reverse order
CONF_BACKUP=""          # the original slurm.conf, restored on exit
CONF_CREATED=0
KEY_CREATED=0
RUN_CREATED=0
OK=0
WORKFLOW_PID=""         # the Snakemake that submits the jobs, while it runs

stop() {  # stop PID: SIGTERM, then SIGKILL after 20 s
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.2; done
  kill -9 "$1" 2>/dev/null || true
}

cleanup() {
  if [ -n "$WORKFLOW_PID" ]; then stop "$WORKFLOW_PID"; fi   # it cancels its jobs while the cluster is up
  if [ ${#PIDS[@]} -gt 0 ] && command -v scancel >/dev/null; then
    timeout 20 scancel --full --quiet --user root 2>/dev/null || true   # our own one-node cluster only
  fi
  for (( i=${#PIDS[@]}-1; i>=0; i-- )); do
    stop "${PIDS[i]}"
  done
  if [ -n "$CONF_BACKUP" ]; then cp -p "$CONF_BACKUP" "$CONF"; fi
  if [ "$CONF_CREATED" = 1 ]; then rm -f "$CONF"; fi
  if [ "$KEY_CREATED" = 1 ]; then rm -f "$MUNGE_KEY"; fi
  if [ "$RUN_CREATED" = 1 ]; then rm -rf "$MUNGE_RUN"; fi
  if [ "$OK" = 1 ]; then rm -rf "$WORK"; else echo "slurm check: logs kept in $WORK" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

workflow() {  # workflow LOG [TARGET...]: Snakemake through Slurm in the workspace; a stop ends the wait at once
  local log="$1"
  shift
  ( cd "$WS" && exec snakemake --profile workflow/profiles/slurm-local "$@" ) >"$log" 2>&1 &
  WORKFLOW_PID=$!
  wait "$WORKFLOW_PID"
  local rc=$?
  WORKFLOW_PID=""
  return $rc
}

show_failures() {  # show_failures CONSOLE: each failed job's own log, its Slurm log and Slurm's record of it
  local job log rule wildcards f
  sed -n 's/.* failed \([^ ;]*\); its log: \(.*\)$/\1 \2/p' "$1" | while read -r job log; do
    echo "--- $job: $log (its end)"
    tail -n 40 "$WS/$log" 2>/dev/null
    rule="${job%%@*}"
    wildcards=""
    [[ "$job" == *@* ]] && wildcards="${job#*@}"
    for f in "$WS/.snakemake/slurm_logs/rule_$rule/$wildcards"/*.log; do
      [ -f "$f" ] && { echo "--- Slurm's log of $job: $f (its end)"; tail -n 40 "$f"; }
    done
  done
  grep -v "JobState=COMPLETED" "$WORK/jobcomp.txt" 2>/dev/null | sed 's/^/--- not COMPLETED: /'
}

# --- configuration: /etc/slurm/slurm.conf (jobs of the plugin only see the default path) ---
mkdir -p /etc/slurm "$WORK/state" "$WORK/spool" "$WORK/log"
if [ -e "$CONF" ]; then CONF_BACKUP="$WORK/slurm.conf.orig"; cp -p "$CONF" "$CONF_BACKUP"; else CONF_CREATED=1; fi
cat >"$CONF" <<EOF
# Written by tests/cluster/run_slurm.sh for one run; the original is restored afterwards.
ClusterName=local
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$WORK/jobcomp.txt
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
ReturnToService=2
MinJobAge=300
NodeName=localhost CPUs=$(nproc) RealMemory=$(( $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) * 8 / 10 )) State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF

# --- munge ---
if [ ! -e "$MUNGE_KEY" ]; then
  KEY_CREATED=1
  dd if=/dev/urandom of="$MUNGE_KEY" bs=1 count=1024 status=none
  chown munge:munge "$MUNGE_KEY" && chmod 400 "$MUNGE_KEY"
fi
if [ ! -d "$MUNGE_RUN" ]; then RUN_CREATED=1; mkdir -p "$MUNGE_RUN"; chown munge:munge "$MUNGE_RUN"; fi
runuser -u munge -- munged --foreground --force --log-file="$WORK/log/munged.log" \
  --pid-file="$WORK/munged.pid" --seed-file="$WORK/munged.seed" >"$WORK/log/munged.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.2; done
munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 || fail "munged did not start (see $WORK/log)"

# --- slurmctld, slurmd ---
slurmctld -D -i >"$WORK/log/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D >"$WORK/log/slurmd.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 60); do
  state="$(sinfo -h -n localhost -o %T 2>/dev/null)"
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "${state:-}" = idle ] || fail "slurmctld/slurmd did not bring the node up (state '${state:-none}', see $WORK/log)"
say "cluster up: $(sinfo -h -o '%P %D %c CPUs %m MB %T')"

# --- a fresh checkout with fast params, run through Slurm ---
WS="$(cd "$ROOT/tests" && python -c "
from pathlib import Path
from workspace import make_workspace
print(make_workspace(Path('$WORK'), 'ws'))")" || fail "could not make the workspace"
say "workspace $WS"
RUN_START=$(date +%s)
workflow "$WORK/snakemake.log"
RC=$?
RUN_S=$(( $(date +%s) - RUN_START ))
if [ $RC != 0 ]; then tail -60 "$WORK/snakemake.log"; show_failures "$WORK/snakemake.log"; fail "snakemake through Slurm exited with $RC"; fi
say "workflow through Slurm finished in ${RUN_S}s"

# --- proof from Slurm's records: each rule's jobs (ids from the plugin's per-rule logs) are
#     COMPLETED entries in the job completion log, run in this workspace ---
cat >"$WORK/check_jobs.py" <<'EOF'
import re
import sys
from pathlib import Path

ws, jobcomp, snakelog, *expected = sys.argv[1:]
records = {}
for line in Path(jobcomp).read_text().splitlines():
    fields = dict(re.findall(r"(\w+)=(\S*)", line))
    records[fields["JobId"]] = fields
rules = {}
for log in (Path(ws) / ".snakemake" / "slurm_logs").rglob("*.log"):
    rule = next(p for p in log.relative_to(Path(ws) / ".snakemake" / "slurm_logs").parts if p.startswith("rule_"))
    rules.setdefault(rule.removeprefix("rule_"), []).append(log.stem)
problems = []
for rule in expected:
    ids = rules.get(rule, [])
    if not ids:
        problems.append(f"{rule}: no Slurm job")
    for jobid in ids:
        rec = records.get(jobid)
        if rec is None or rec.get("JobState") != "COMPLETED" or rec.get("WorkDir") != ws:
            problems.append(f"{rule}: job {jobid} is not COMPLETED in {ws} ({rec})")
local = set(re.findall(r"^localrule (\w+):", Path(snakelog).read_text(), re.M)) - {"all"}
if local:
    problems.append(f"ran outside Slurm: {sorted(local)}")
for rule in expected:
    print(f"  {rule:<10} Slurm job(s) {', '.join(sorted(rules.get(rule, []), key=int))}: COMPLETED")
print(f"  jobcomp: {len(records)} jobs, all in {ws}")
if problems:
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1)
EOF
snakemake_log_of() {  # <console output>: Snakemake's own log of that run, which names every job as `rule X:`
  local named                # or `localrule X:` (the console names jobs by their stage), from the console's end line
  named="$(sed -n "s/.*Snakemake's own log: //p" "$1" | tail -n 1)"
  [ -n "$named" ] && [ -s "$WS/$named" ] || fail "$1 names no Snakemake log"
  echo "$WS/$named"
}
check_jobs() {  # <snakemake log> <rule>... : every job of these rules ran through Slurm and completed
  local snakelog=$1; shift
  [ -s "$WORK/jobcomp.txt" ] || fail "Slurm wrote no job completion log"
  python "$WORK/check_jobs.py" "$WS" "$WORK/jobcomp.txt" "$snakelog" "$@" \
    || fail "Slurm's records do not show every rule as a Slurm job"
}
check_jobs "$(snakemake_log_of "$WORK/snakemake.log")" $EXPECTED_RULES
[ -s "$WS/reports/report.html" ] || fail "no reports/report.html"
( cd "$WS" && snakemake --cores 1 -n 2>&1 | grep -q "Nothing to be done" ) || fail "a local dry run after the Slurm run still has work"

# --- a sweep through Slurm: each point's train and evaluate are Slurm jobs, sharing the upstream ---
printf 'variant: jit\ngrid:\n  train.step_size: [0.05, 0.1]\n' >"$WS/sweeps/slurm.yaml"
SWEEP_START=$(date +%s)
workflow "$WORK/sweep.log" sweeps/slurm/compare.html
RC=$?
SWEEP_S=$(( $(date +%s) - SWEEP_START ))
if [ $RC != 0 ]; then tail -60 "$WORK/sweep.log"; show_failures "$WORK/sweep.log"; fail "the sweep through Slurm exited with $RC"; fi
SWEEP_SNAKELOG="$(snakemake_log_of "$WORK/sweep.log")"
grep -qE "^(localrule|rule) (download|preprocess):" "$SWEEP_SNAKELOG" && fail "the sweep ran the shared stages again"
check_jobs "$SWEEP_SNAKELOG" sweep_point sweep_train sweep_evaluate sweep_compare
for point in step_size=0.05 step_size=0.1; do
  [ -s "$WS/sweeps/slurm/$point/metrics/evaluate/jit.json" ] || fail "sweep point $point has no metrics"
done
( cd "$WS" && snakemake --cores 1 -n sweeps/slurm/compare.html 2>&1 | grep -q "Nothing to be done" ) \
  || fail "a local dry run after the sweep still has work"
say "sweep through Slurm: 2 points, each point's jobs Slurm jobs (${SWEEP_S}s)"

OK=1
say "PASS slurm check: every rule ran as a Slurm job, and a sweep's points (workflow ${RUN_S}s, total $(elapsed)s)"
