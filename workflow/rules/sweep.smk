# Sweeps: sweeps/<name>.yaml -> each point trained and evaluated in sweeps/<name>/<point>/, the
# points side by side within --cores, all sharing one download and one preprocess ->
# sweeps/<name>/compare.html. `snakemake --cores N sweeps` runs every sweep file.


if SWEEP_ERRORS:  # the target fails, naming each file that is not valid

    rule sweeps:
        input:
            [f"sweeps/{name}/{paths.COMPARE_HTML}" for name in SWEEPS],
        shell:
            sweeps_command()

else:

    rule sweeps:
        input:
            [f"sweeps/{name}/{paths.COMPARE_HTML}" for name in SWEEPS],


rule sweep_point:
    input:
        (MARKERS / POINT / "params").as_posix(),
    output:
        f"{POINT}/{paths.POINT_PARAMS}",
    log:
        "logs/sweeps/{sweep}/{point}/params.log",
    shell:
        logged("mnist-pipeline sweep-point --sweep {wildcards.sweep:q} --point {wildcards.point:q}")


rule sweep_train:
    input:
        **point_inputs("train"),
    output:
        [update(f"{POINT}/{path}") for path in snakemake_paths.snakemake_outputs("train", ())[0]],
    log:
        "logs/sweeps/{sweep}/{point}/train_{variant}.log",
    wildcard_constraints:
        variant="|".join(variants.names()),
    shell:
        point_command("train")


rule sweep_evaluate:
    input:
        **point_inputs("evaluate"),
    output:
        [update(f"{POINT}/{path}") for path in snakemake_paths.snakemake_outputs("evaluate", ())[0]],
    log:
        "logs/sweeps/{sweep}/{point}/evaluate_{variant}.log",
    wildcard_constraints:
        variant="|".join(variants.names()),
    shell:
        point_command("evaluate")


rule sweep_compare:
    input:
        sweep_files,
        code_deps.command_code("compare", ("stages/report/templates",)),
        sweep="sweeps/{sweep}.yaml",
    output:
        f"sweeps/{{sweep}}/{paths.COMPARE_HTML}",
        f"sweeps/{{sweep}}/{paths.COMPARE_CSV}",
    log:
        "logs/sweeps/{sweep}/compare.log",
    shell:
        logged("mnist-pipeline compare --sweep {wildcards.sweep:q}")
