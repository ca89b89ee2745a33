# The parameters and the stage table (src/mnist_jax_pipeline/stages.py) as rules see them.
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from mnist_jax_pipeline import paths, runtime, stages, sweeps, variants
from mnist_jax_pipeline.config import load
from mnist_jax_pipeline.errors import PipelineError

if config:  # every stage reads params.yaml itself, so an override would be silently ignored
    sys.exit("error: --config/--configfile overrides are not used by the stages, which read params.yaml; edit"
             " params.yaml, run dvc exp run -S KEY=VALUE, or apply a preset: mnist-pipeline preset NAME")
try:  # one line naming the key, before any job is scheduled
    PARAMS = load("params.yaml")
except PipelineError as err:
    sys.exit(f"error: {err}")
config.update(PARAMS.to_dict())
VARIANTS = tuple(PARAMS.variants)


def stage_inputs(name):
    """Upstream files and code files of a stage."""
    return stages.snakemake_inputs(name, VARIANTS)


def stage_outputs(name):
    """Files and whole folders a stage writes, named by their path (the between-workflow cache wants
    named outputs): `output: **stage_outputs(name)`."""
    files, folders = stages.snakemake_outputs(name, VARIANTS)
    named = {path: path for path in files} | {folder: directory(folder) for folder in folders}
    return {re.sub(r"\W", "_", Path(path).name.replace("{variant}", "")).strip("_"): out for path, out in named.items()}


def stage_params(name):
    """The params.yaml sections a stage reads, so that a changed value re-runs its jobs."""
    return {section: config[section] for section in stages.get(name).params}


def stage_command(name):
    """The stage's command, its output also kept in the job's log."""
    return stages.get(name).cmd("{wildcards.variant}") + " 2>&1 | tee {log}"


def dag_stages():
    """{DVC stage name: its output paths} for the jobs of this run's DAG (run or found up to date)."""
    found = {}
    dvc_stages = {stage.name for stage in stages.STAGES}
    for job in workflow.dag.jobs:
        if job.rule.name not in dvc_stages:  # `all`, and the sweep rules (DVC queues sweeps as experiments)
            continue
        variant = job.wildcards_dict.get("variant")
        found[f"{job.rule.name}@{variant}" if variant else job.rule.name] = [str(path) for path in job.output]
    return found


def record_in_dvc():
    """Let dvc.lock record what Snakemake produced (`dvc commit`), so `dvc status` agrees.

    Only the stages of this run's DAG are committed: Snakemake has just made them, or checked
    that they are up to date. It runs only when one of their outputs is newer than dvc.lock,
    so a no-op run stays a no-op. MNIST_PIPELINE_DVC_COMMIT=0 turns it off.
    """
    if os.environ.get("MNIST_PIPELINE_DVC_COMMIT", "1") == "0" or not Path(".dvc").is_dir():
        return
    if workflow.dryrun or workflow.touch:  # nothing was made
        return
    lock = Path("dvc.lock")
    recorded = lock.stat().st_mtime if lock.exists() else 0.0
    done, newer = [], False
    for stage, outputs in dag_stages().items():
        outs = [Path(o) for o in outputs]
        if all(p.exists() for p in outs):
            done.append(stage)
            newer = newer or any(p.stat().st_mtime > recorded for p in outs)
    if done and newer:
        subprocess.run(["dvc", "commit", "--force", "--quiet", *sorted(done)], check=True)
        lock.touch()  # DVC leaves an unchanged dvc.lock untouched; mark it as checked now


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


def point_command(stage):
    """A per-variant stage's command for one sweep point, under the point's folder."""
    return (f"{POINT_LOCK} mnist-pipeline --params {{input.params}} {stage} --variant {{wildcards.variant}}"
            " --root sweeps/{wildcards.sweep}/{wildcards.point:q} 2>&1 | tee {log}")


def point_params(wildcards):
    sweep = SWEEPS[wildcards.sweep]
    return sweep.read_by_point(sweep.point(wildcards.point))


def sweeps_command():
    """The `sweeps` target's shell command: fails with the invalid sweep files' errors, if any."""
    lines = " ".join(shlex.quote(f"error: {message}") for message in SWEEP_ERRORS)
    return f"printf '%s\\n' {lines} >&2; exit 1".replace("{", "{{").replace("}", "}}")  # not placeholders


def sweep_files(wildcards):
    """Every point's outputs that the comparison page reads."""
    sweep = SWEEPS[wildcards.sweep]
    outputs = [path for stage in ("train", "evaluate") for path in stages.snakemake_outputs(stage, ())[0]]
    return [f"{sweep.folder(p)}/{path}".replace("{variant}", sweep.variant) for p in sweep.points for path in outputs]
