# download -> preprocess. Output folders are declared through what they hold, so Snakemake
# compares file times while DVC tracks the same folders whole. Both rules may be shared between
# checkouts through Snakemake's between-workflow cache
# (SNAKEMAKE_OUTPUT_CACHE=<dir> snakemake --cache --cores all).


rule check:
    input:
        stage_inputs("check"),
    output:
        **stage_outputs("check"),
    params:
        **stage_params("check"),
    log:
        "logs/check.log",
    shell:
        stage_command("check")


rule download:
    input:
        stage_inputs("download"),
    output:
        **stage_outputs("download"),
    cache: CACHE
    params:
        **stage_params("download"),
    log:
        "logs/download.log",
    threads: workflow.cores
    shell:
        stage_command("download")


rule preprocess:
    input:
        stage_inputs("preprocess"),
    output:
        **stage_outputs("preprocess"),
    cache: CACHE
    params:
        **stage_params("preprocess"),
    log:
        "logs/preprocess.log",
    shell:
        stage_command("preprocess")
