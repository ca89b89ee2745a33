# train (one job per variant, each alone on the machine) -> evaluate


rule train:
    input:
        stage_inputs("train"),
    output:
        **stage_outputs("train"),
    log:
        "logs/train_{variant}.log",
    wildcard_constraints:
        variant="|".join(VARIANTS),
    threads: workflow.cores
    params:
        **stage_params("train"),
    shell:
        stage_command("train")


rule evaluate:
    input:
        stage_inputs("evaluate"),
    output:
        **stage_outputs("evaluate"),
    log:
        "logs/evaluate_{variant}.log",
    wildcard_constraints:
        variant="|".join(VARIANTS),
    threads: workflow.cores
    params:
        **stage_params("evaluate"),
    shell:
        stage_command("evaluate")
