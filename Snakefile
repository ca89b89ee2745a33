# Thin entry point: configuration, validation, rule files, the default target.
# Every rule calls the `mnist-pipeline` CLI with the same command as dvc.yaml.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "params.yaml"


include: "workflow/rules/common.smk"


validate(config, "workflow/schemas/params.schema.yaml")


include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


onsuccess:
    record_in_dvc()


rule all:
    input:
        "reports/report.html",
        "reports/summary.md",
    default_target: True
