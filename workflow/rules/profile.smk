# profile (one job per variant: execution trace and device memory, alone on the machine), after train


rule profile:
    input:
        stage_inputs("profile"),
    output:
        **stage_outputs("profile"),
    log:
        "logs/profile_{variant}.log",
    wildcard_constraints:
        variant="|".join(VARIANTS),
    threads: workflow.cores
    params:
        **stage_params("profile"),
    shell:
        stage_command("profile")
