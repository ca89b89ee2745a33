# Shared helpers: parameter checks, the stage -> params-keys table, code dependencies.
import os
import subprocess
import sys
from pathlib import Path

from mnist_jax_pipeline.config import validate as check_params
from mnist_jax_pipeline.errors import PipelineError

try:
    check_params(config, "params.yaml")
except PipelineError as err:  # one line naming the key, before any job is scheduled
    sys.exit(f"error: {err}")

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
    "report": ["variants"],
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


def stage_outputs():
    """{DVC stage name: its output paths} for every job of this workflow."""
    stages = {}
    for rule in workflow.rules:
        if rule.name == "all":
            continue
        outputs = [str(o) for o in rule.output]
        if any("{variant" in o for o in outputs):
            for variant in VARIANTS:
                stages[f"{rule.name}@{variant}"] = [
                    o.split("{")[0] + variant + o.split("}", 1)[1] for o in outputs
                ]
        else:
            stages[rule.name] = outputs
    return stages


def record_in_dvc():
    """Let dvc.lock record what Snakemake produced (`dvc commit`), so `dvc status` agrees.

    Runs only when some finished stage's outputs are newer than dvc.lock, so a no-op run
    stays a no-op. MNIST_PIPELINE_DVC_COMMIT=0 turns it off.
    """
    if os.environ.get("MNIST_PIPELINE_DVC_COMMIT", "1") == "0" or not Path(".dvc").is_dir():
        return
    if workflow.dryrun or workflow.touch:  # nothing was made
        return
    lock = Path("dvc.lock")
    recorded = lock.stat().st_mtime if lock.exists() else 0.0
    done, newer = [], False
    for stage, outputs in stage_outputs().items():
        paths = [Path(o) for o in outputs]
        if all(p.exists() for p in paths):
            done.append(stage)
            newer = newer or any(p.stat().st_mtime > recorded for p in paths)
    if done and newer:
        subprocess.run(["dvc", "commit", "--force", "--quiet", *done], check=True)
