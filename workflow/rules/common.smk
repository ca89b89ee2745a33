# Shared helpers: parameter checks, the stage -> params-keys table, code dependencies.
import sys

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
