# Thin entry point: the parameters (read and checked as DVC reads them), the rule files, the
# default target. Every rule takes its command, params, inputs, outputs and code deps from the
# stage table in src/mnist_jax_pipeline/orchestration/stage_table.py, the table dvc.yaml is generated from.
import os

from snakemake.utils import min_version

min_version("9.0")


# The software every rule runs with: the image this repository's Dockerfile builds, used when
# Snakemake runs with `--software-deployment-method apptainer` (docs/scaling-out.md: "A software environment per rule").
# By default Apptainer takes it from the local Docker daemon (`docker build -t mnist-jax-pipeline:cpu .`);
# MNIST_PIPELINE_IMAGE names another, e.g. docker://<registry>/mnist-jax-pipeline:cuda12.
container: os.environ.get("MNIST_PIPELINE_IMAGE", "docker-daemon://mnist-jax-pipeline:cpu")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/profile.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/sweep.smk"


onstart:
    STOPPER.stopped_before_start()
    RULES.check_writable()
    RULES.lock.hold()


onsuccess:
    RULES.record_in_dvc()


onerror:
    RULES.record_in_dvc()


rule all:  # every output of every stage in the table
    default_target: True
    input:
        all_targets,
