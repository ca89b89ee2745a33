# download -> preprocess. Output folders are declared through what they hold, so Snakemake
# compares file times while DVC tracks the same folders whole. Both rules may be shared between
# checkouts through Snakemake's between-workflow cache
# (SNAKEMAKE_OUTPUT_CACHE=<dir> snakemake --cache --cores all).


rule check:
    input:
        stage_inputs("check"),
    output:
        **stage_outputs("check"),
    log:
        "logs/check.log",
    params:
        **stage_params("check"),
    shell:
        stage_command("check")


rule download:
    input:
        stage_inputs("download"),
    output:
        **stage_outputs("download"),
    log:
        "logs/download.log",
    cache: CACHE
    threads: workflow.cores
    params:
        **stage_params("download"),
    shell:
        stage_command("download")


rule preprocess:
    input:
        stage_inputs("preprocess"),
    output:
        **stage_outputs("preprocess"),
    log:
        "logs/preprocess.log",
    cache: CACHE
    params:
        **stage_params("preprocess"),
    shell:
        stage_command("preprocess")
