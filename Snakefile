# Thin entry point: the parameters (read and checked as DVC reads them), the rule files, the
# default target. Every rule takes its command, params, inputs, outputs and code deps from the
# stage table in src/mnist_jax_pipeline/stages.py, the table dvc.yaml is generated from.
from snakemake.utils import min_version

min_version("9.0")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


onsuccess:
    record_in_dvc()


rule all:
    input:
        paths.REPORT_HTML.path,
        paths.REPORT_MD.path,
    default_target: True
