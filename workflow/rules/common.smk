# Shared helpers: parameter checks, the stage -> params-keys table, code dependencies.
import os
import subprocess
import sys
from pathlib import Path

import yaml

from mnist_jax_pipeline.config import validate as check_params
from mnist_jax_pipeline.errors import PipelineError

try:
    check_params(config, "params.yaml")
except PipelineError as err:  # one line naming the key, before any job is scheduled
    sys.exit(f"error: {err}")
if config != yaml.safe_load(Path("params.yaml").read_text()):  # every stage reads params.yaml itself
    sys.exit("error: --config/--configfile overrides are not used by the stages; edit params.yaml instead")

CODE = "src/mnist_jax_pipeline/"
VARIANTS = list(config["variants"])

# The params each stage depends on: the same dotted keys as the stages' `params:` in dvc.yaml.
STAGE_PARAMS = {
    "download": ["data.dataset"],
    "preprocess": [
        "preprocess.normalize",
        "preprocess.flatten",
        "preprocess.validation_fraction",
        "preprocess.max_train_examples",
        "preprocess.seed",
    ],
    "train": [
        "model.layer_sizes",
        "model.init_scale",
        "model.seed",
        "train.optimizer",
        "train.step_size",
        "train.momentum",
        "train.schedule",
        "train.batch_size",
        "train.epochs",
        "train.shuffle",
        "train.shuffle_seed",
    ],
    "evaluate": [],
    "profile": [
        "model.layer_sizes",
        "model.init_scale",
        "model.seed",
        "train.optimizer",
        "train.step_size",
        "train.momentum",
        "train.schedule",
        "train.batch_size",
        "train.epochs",
        "train.shuffle",
        "train.shuffle_seed",
        "profile.top_allocations",
    ],
    "report": ["data", "preprocess", "model", "train", "variants", "profile"],  # it shows them all
}


def param_values(stage):
    """{dotted key: value} of a stage's params, so a changed value re-runs the rule."""
    values = {}
    for key in STAGE_PARAMS[stage]:
        node = config
        for part in key.split("."):
            node = node[part]
        values[key] = node
    return values


def cli(args):
    """The stage command, its output also kept in the rule's log."""
    return f"mnist-pipeline {args} 2>&1 | tee {{log}}"


def dag_stages():
    """{DVC stage name: its output paths} for the jobs of this run's DAG (run or found up to date)."""
    stages = {}
    for job in workflow.dag.jobs:
        if job.rule.name == "all":
            continue
        variant = job.wildcards_dict.get("variant")
        name = f"{job.rule.name}@{variant}" if variant else job.rule.name
        stages[name] = [str(path) for path in job.output]
    return stages


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
        paths = [Path(o) for o in outputs]
        if all(p.exists() for p in paths):
            done.append(stage)
            newer = newer or any(p.stat().st_mtime > recorded for p in paths)
    if done and newer:
        subprocess.run(["dvc", "commit", "--force", "--quiet", *sorted(done)], check=True)
        lock.touch()  # DVC leaves an unchanged dvc.lock untouched; mark it as checked now
