# The parameters and the stage table (src/mnist_jax_pipeline/orchestration/stage_table.py) as rules see them.
import asyncio
import contextlib
import os
import re
import shlex
import signal
import sys
import threading
import time
from pathlib import Path

# Ctrl-C, from the start of the workflow on (before that, Snakemake itself is starting), reaches
# Snakemake and every job in its process group. Each stage stops itself (it removes its
# temporary files and says so in one line), and Snakemake is asked to stop as on SIGTERM: no new job
# starts, the running ones are waited for. Its own handling, a KeyboardInterrupt raised wherever it is,
# leaves tracebacks of its event loops when the interrupt lands in one (a second Ctrl-C, say).
STOPPING = []


def stop(signum, frame):
    name = signal.Signals(signum).name
    graceful = signal.getsignal(signal.SIGTERM)  # the scheduler's, once it runs jobs
    if callable(graceful):
        if not STOPPING:
            print(f"{name}: stopping; the running jobs stop and clean up, no new job starts", file=sys.stderr)
        STOPPING.append(signum)
        # from a thread: the handler takes a lock the interrupted code may hold
        threading.Thread(target=graceful, args=(signal.SIGTERM, None), daemon=True).start()
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # parsing: stop now
        raise SystemExit(f"error: stopped by {name} before any job started") from None
    STOPPING.append(signum)  # building the DAG, in an event loop: stop before the first job (onstart)


signal.signal(signal.SIGINT, stop)


def stopped_before_start():
    if STOPPING:
        sys.exit(f"error: stopped by {signal.Signals(STOPPING[0]).name} before any job started")


from mnist_jax_pipeline.orchestration import code_deps, dvc_lock, freshness, snakemake_paths, stage_table
from mnist_jax_pipeline.config import sweeps
from mnist_jax_pipeline.foundation import console, paths, runtime, variants
from mnist_jax_pipeline.artefacts import atomic
from mnist_jax_pipeline.config.params import load, validate
from mnist_jax_pipeline.foundation.errors import PipelineError

if config:  # every stage reads params.yaml itself, so an override would be silently ignored
    sys.exit(
        "error: --config/--configfile overrides are not used by the stages, which read params.yaml; edit"
        " params.yaml, run dvc exp run -S KEY=VALUE, or apply a preset: mnist-pipeline preset NAME"
    )
try:  # one line naming the key, before any job is scheduled
    PARAMS = load("params.yaml")
except PipelineError as err:
    sys.exit(f"error: {err}")
config.update(PARAMS.to_dict())
VARIANTS = tuple(PARAMS.variants)


# Content, not file times, decides what is stale (src/mnist_jax_pipeline/orchestration/freshness.py): each job's
# provenance record is compared with the files, params.yaml and code as they are now. A job that is
# not current gets a new marker (.snakemake/provenance/<job>), its one input that is not ancient();
# every other input is ancient(), so a file time alone never re-runs a job. The default profile
# (profiles/default) turns off Snakemake's own records as triggers for the same reason.
CHECKER = freshness.Checker(PARAMS)
JOBS = freshness.jobs(VARIANTS)
STALE = CHECKER.stale(JOBS)
MARKERS = Path(".snakemake/provenance")


def marker(job):
    return MARKERS / job.root / job.stage.stamp.at(job.variant).name


def mark(jobs, stale):
    """A stale job's marker gets new content and a time after its outputs'; a current one's the oldest time."""
    for job in jobs:
        mark_one(marker(job), stale.get(job), job.outputs() + [job.stamp_path])


def mark_one(path, reasons, outputs):
    path.parent.mkdir(parents=True, exist_ok=True)
    if reasons:
        newest = max((p.stat().st_mtime for p in outputs if p.exists()), default=0.0)
        # New content each time (Snakemake takes an input whose content it saw at the job's last run as
        # unchanged), except when the job has no output at all: then Snakemake runs it anyway, and the
        # same content in every fresh checkout keeps the between-workflow cache's key the same.
        fresh = not any(p.exists() for p in outputs)
        path.write_text("\n".join(["missing"] if fresh else [*reasons, str(time.time_ns())]) + "\n", encoding="utf-8")
        moment = max(time.time(), newest + 1)
        os.utime(path, (moment, moment))
    else:
        if not path.exists():
            path.write_text("current\n", encoding="utf-8")
        os.utime(path, (0, 0))


mark(JOBS, STALE)
if workflow.output_settings.verbose:  # Snakemake's own console names the marker; the calm one its first line
    for job, reasons in STALE.items():
        if job.stamp_path.exists():  # a job never run needs no explanation
            print(f"{job.name}: not current: {reasons[0]}", file=sys.stderr)


def settle(jobs):
    """Provenance records get an old time (1 s after the epoch, after the markers of current jobs): they link each job to the jobs it reads (so a job that
    re-runs re-runs those after it), but their time never makes a job stale."""
    for job in jobs:
        with contextlib.suppress(OSError):
            os.utime(job.stamp_path, (1, 1))  # not 0: Snakemake reads an output time of 0 as none


settle(JOBS)


# --- before any job runs: one line where a job could not write, none of Snakemake's tracebacks ---
LOGS = Path("logs")  # the rules' log: files


def refuse(problem):
    if problem:
        sys.exit(f"error: {problem}")


# A file where an output folder belongs (`models` a file) stops Snakemake's DAG with a traceback: say so first.
refuse(
    atomic.obstacle([p for job in JOBS for p in [*job.outputs(), job.stamp_path]] + [LOGS / "check.log"], probe=False)
)


def check_writable():
    """Every output and log of the jobs about to run can be written (onstart): a read-only reports/, say,
    is one line here, not a failed job or Snakemake's own error once a job starts."""
    jobs = workflow.dag.needrun_jobs()
    refuse(atomic.obstacle([str(p) for job in jobs for p in [*job.output, *job.log]]))


def stage_inputs(name):
    """The job's marker, the records of the jobs it reads, then the files it reads of them, ancient():
    their times decide nothing. Its code files are no input: a code change makes the job stale by
    content, which gives its marker new content."""
    stage = stage_table.get(name)
    own = (MARKERS / Path(stage.stamp.path).name).as_posix()
    upstream = []
    for artefact in stage.inputs:
        maker = stage_table.get(artefact.made_by)
        names = (
            [maker.stamp.path]
            if stage.per_variant or not maker.per_variant
            else [maker.stamp.path.format(variant=v) for v in VARIANTS]
        )
        upstream += [path for path in names if path not in upstream]
    return [own, *upstream] + [ancient(path) for path in snakemake_paths.snakemake_inputs(name, VARIANTS)]


def stage_outputs(name):
    """Files and whole folders a stage writes, named by their path (the between-workflow cache wants
    named outputs): `output: **stage_outputs(name)`. Each is update(): Snakemake would otherwise delete a
    job's earlier outputs before it runs, and a failed or stopped job would leave none (the stages write
    atomically, so an earlier output stays until the new one is complete)."""
    files, folders = snakemake_paths.snakemake_outputs(name, VARIANTS)
    named = {path: update(path) for path in files} | {folder: update(directory(folder)) for folder in folders}
    return {re.sub(r"\W", "_", Path(path).name.replace("{variant}", "")).strip("_"): out for path, out in named.items()}


def stage_params(name):
    """The params.yaml sections a stage reads and the digest of each code file it runs. They decide no
    re-run (the provenance records do), but they are the key of Snakemake's between-workflow cache, so a
    cached output is one of these values, made by this code."""
    stage = stage_table.get(name)
    return {"values": {section: config[section] for section in stage.params}, "code": CHECKER.code(stage)}


# Snakemake's between-workflow cache (docs/scaling-out.md) for download and preprocess, when the run asks
# for it (--cache): otherwise Snakemake would say on every run that both rules could be cached.
CACHE = "omit-software" if workflow.workflow_settings.cache is not None else False


def logged(command):
    """A job's shell command: what it prints goes to the console and to its log, and its details (the
    profile's op table) to its log only (MNIST_PIPELINE_LOG, src/mnist_jax_pipeline/foundation/console.py). tee ignores
    the stop signals, which reach the whole process group, so the stage's own line on stopping reaches both;
    it appends, to the file Snakemake removed before the job and the stage appends its details to."""
    return (
        f"{freshness.TOOL_ENV}=snakemake {console.LOG_ENV}={{log:q}} {command} 2>&1"
        " | (trap '' INT TERM HUP; exec tee -a {log:q})"
    )


def stage_command(name):
    """The stage's command (the one dvc.yaml runs), logged."""
    return logged(stage_table.get(name).cmd("{wildcards.variant}"))


DVC_LOCK = Path(".dvc/tmp/lock")  # DVC's own repository lock: one run at a time, across both tools
_held = []


def hold_dvc_lock():
    """Hold DVC's repository lock while jobs run, so `dvc repro` (or `dvc exp run`) cannot run the same
    stages beside this run, and this run does not start beside one of them."""
    if not Path(".dvc").is_dir():
        return
    import zc.lockfile

    DVC_LOCK.parent.mkdir(parents=True, exist_ok=True)
    busy = f"error: a DVC command is running in this checkout ({{}}); wait for it to end, then run snakemake again"
    try:
        _held.append(zc.lockfile.LockFile(str(DVC_LOCK)))
    except zc.lockfile.LockError:
        sys.exit(busy.format(f"{DVC_LOCK} is held"))
    running = dvc_stage_runs()
    if running:
        release_dvc_lock()
        sys.exit(busy.format(f"pid {running[0]} runs a stage"))


def dvc_stage_runs():
    """Processes that run a DVC stage now: DVC lets go of its repository lock while a stage's command runs,
    and holds read and write locks on the stage's paths in .dvc/tmp/rwlock instead."""
    import json

    import psutil

    try:
        locks = json.loads((DVC_LOCK.parent / "rwlock").read_text())
    except (OSError, ValueError):
        return []
    infos = list(locks.get("write", {}).values()) + [i for group in locks.get("read", {}).values() for i in group]
    return sorted(
        {info["pid"] for info in infos if psutil.pid_exists(info.get("pid", 0)) and info["pid"] != os.getpid()}
    )


def release_dvc_lock():
    while _held:
        _held.pop().close()


def record_in_dvc():
    """Let dvc.lock record what this run made, so `dvc status` agrees with it (`dvc commit`).

    Only jobs of this run's DAG whose outputs are current by content (freshness.py) are recorded:
    dvc.lock never names an output under parameters, code or inputs it was not made from. Runs
    after a failed run too, for the jobs that finished. MNIST_PIPELINE_DVC_COMMIT=0 turns it off.
    """
    release_dvc_lock()
    if os.environ.get("MNIST_PIPELINE_DVC_COMMIT", "1") == "0" or not Path(".dvc").is_dir():
        return
    if workflow.dryrun or workflow.touch:  # nothing was made
        return
    names = {
        f"{job.rule.name}@{job.wildcards_dict['variant']}" if "variant" in job.wildcards_dict else job.rule.name
        for job in workflow.dag.jobs
    }
    checker = freshness.Checker(load("params.yaml"))
    current, left = [], []
    for job in JOBS:
        if job.name not in names:
            continue
        problems = checker.problems(job)
        (left if problems else current).append((job.name, problems[:1]))
    if left:  # one line: after a failed or stopped run, every job after the failed one is here
        first, (problem,) = left[0]
        others = f" (and {', '.join(name for name, _ in left[1:])})" if left[1:] else ""
        print(f"dvc.lock: not current, so not recorded: {first}: {problem}{others}", file=sys.stderr)
    current = [name for name, _ in current]
    failed = dvc_lock.commit(current)
    if failed:
        sys.exit(f"error: {failed}")
    if not left and {job.name for job in JOBS} <= names:
        dvc_lock.remember(JOBS)


def record_when_nothing_runs():
    """A run with nothing to run (Snakemake skips onsuccess then) still brings dvc.lock up to date, after git
    moved it (`git stash`, `git checkout dvc.lock`): every job is current by content (src/.../dvc_lock.py).
    Called while Snakemake builds the DAG of a run: its executor is known then (not while it parses, lints
    or writes its report), so a dry run or --touch records nothing."""
    plugin = workflow.executor_plugin
    if plugin is None or not workflow.is_main_process or workflow.dryrun or workflow.touch or _RECORDED:
        return
    _RECORDED.append(True)
    if STALE or not Path(".dvc").is_dir() or os.environ.get("MNIST_PIPELINE_DVC_COMMIT", "1") == "0":
        return
    line = dvc_lock.bring_up_to_date(JOBS)
    if line:
        print(line, file=sys.stderr)


_RECORDED = []


def all_targets(wildcards):
    """Rule all's inputs: every output of every stage (after record_when_nothing_runs)."""
    record_when_nothing_runs()
    return snakemake_paths.snakemake_targets(VARIANTS)


# --- sweeps (rules/sweep.smk) ---
# A sweep file that is not valid fails the `sweeps` target, with its one-line error; it does not
# stop the rest of the workflow.
SWEEPS, SWEEP_ERRORS = sweeps.discover()
for message in SWEEP_ERRORS:
    print(f"warning: {message} (the sweeps target fails until it is fixed)", file=sys.stderr)
POINT = "sweeps/{sweep}/{point}"
# Points run side by side on purpose, and their runs record it (ran_alone: false); with --cores 1
# each takes the machine's lock, so its timings are taken alone. The choice travels in the
# environment (MNIST_PIPELINE_SWEEP_LOCK: empty = the machine's lock), not in the rules' params or
# commands, so running a finished sweep again with other --cores does not re-run its points.
SWEEP_LOCK_ENV = "MNIST_PIPELINE_SWEEP_LOCK"
# --cores 1: the lock the main stages take (MNIST_PIPELINE_LOCK, else the machine's); set every
# time, whatever an earlier process left in the environment
os.environ[SWEEP_LOCK_ENV] = os.environ.get(runtime.LOCK_ENV, "") if workflow.cores == 1 else "off"
POINT_LOCK = f"{runtime.LOCK_ENV}=${{{{{SWEEP_LOCK_ENV}-off}}}}"  # unset: off


def mark_sweeps():
    """Markers for every sweep point's jobs, as for the main jobs: a point's params.yaml is stale when the
    sections its stages read differ from the sweep's; its train and evaluate by their provenance records."""
    import yaml

    for sweep in SWEEPS.values():
        for point in sweep.points:
            folder = sweep.folder(point)
            file = folder / paths.POINT_PARAMS
            try:
                have = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
            except (OSError, yaml.YAMLError):
                have = {}
            wanted = sweep.read_by_point(point)
            differs = {section: have.get(section) for section in wanted} != wanted
            mark_one(MARKERS / folder / "params", [f"{file}: not the sweep's point"] if differs else None, [file])
            checker = freshness.Checker(validate(sweep.params(point), str(file)), str(file))
            jobs = [freshness.Job(stage_table.get(name), sweep.variant, folder) for name in ("train", "evaluate")]
            stale = {job: ["its params.yaml changes"] for job in jobs} if differs else checker.stale(jobs)
            mark(jobs, stale)
            settle(jobs)


mark_sweeps()


def point_inputs(name):
    """A sweep point's job's inputs: its marker, its params.yaml, the records of the jobs it reads, then
    its upstream files and code files, ancient()."""
    stage = stage_table.get(name)
    upstream = [stage_table.get("preprocess").stamp.path]
    if name == "evaluate":
        upstream.append(f"{POINT}/{stage_table.get('train').stamp.path}")
    own = (MARKERS / POINT / Path(stage.stamp.path.format(variant="{variant}")).name).as_posix()
    return {
        "marker": own,
        "params": f"{POINT}/{paths.POINT_PARAMS}",
        "records": upstream,
        "upstream": [ancient(path) for path in snakemake_paths.point_inputs(name, POINT)],
    }


def point_command(stage):
    """A per-variant stage's command for one sweep point, under the point's folder."""
    return logged(
        f"{POINT_LOCK} mnist-pipeline --params {{input.params}} {stage} --variant {{wildcards.variant}}"
        " --root sweeps/{wildcards.sweep}/{wildcards.point:q}"
    )


def sweeps_command():
    """The `sweeps` target's shell command: fails with the invalid sweep files' errors, if any."""
    lines = " ".join(shlex.quote(f"error: {message}") for message in SWEEP_ERRORS)
    return f"printf '%s\\n' {lines} >&2; exit 1".replace("{", "{{").replace("}", "}}")  # not placeholders


def sweep_files(wildcards):
    """Every point's outputs that the comparison page reads."""
    sweep = SWEEPS[wildcards.sweep]
    outputs = [path for stage in ("train", "evaluate") for path in snakemake_paths.snakemake_outputs(stage, ())[0]]
    return [f"{sweep.folder(p)}/{path}".replace("{variant}", sweep.variant) for p in sweep.points for path in outputs]
