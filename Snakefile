# The workflow's table of contents: the rules (written from the stage table by `mnist-pipeline generate`),
# what runs around the jobs, and the targets. docs/orchestrators.md says how both tools agree.
import os

from snakemake.utils import min_version

min_version("9.0")


# The image this repository's Dockerfile builds, used with `--software-deployment-method apptainer`
container: os.environ.get("MNIST_PIPELINE_IMAGE", "docker-daemon://mnist-jax-pipeline:cpu")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/profile.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/sweep_common.smk"


onstart:
    PIPELINE.start(STOPPER)


onsuccess:
    PIPELINE.finish(succeeded=True)


onerror:
    PIPELINE.finish(succeeded=False)


rule all:  # every output of every stage
    default_target: True
    input:
        PIPELINE.targets,


if PIPELINE.sweep_errors:  # the target fails, naming each sweep file that is not valid

    rule sweeps:
        input:
            [f"sweeps/{name}/compare.html" for name in PIPELINE.sweeps],
        shell:
            PIPELINE.sweeps_command()

else:

    rule sweeps:  # every sweep's comparison page: `snakemake --cores N sweeps`
        input:
            [f"sweeps/{name}/compare.html" for name in PIPELINE.sweeps],
