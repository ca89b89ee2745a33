# A sweep's rules that the stage table does not give: a point's params.yaml, and the sweep's comparison page.
# Their paths are paths.py's; tests/test_snakefile.py checks them.


rule sweep_point:
    input:
        ".snakemake/provenance/sweeps/{sweep}/{point}/params",
    output:
        update("sweeps/{sweep}/{point}/params.yaml"),
    log:
        "logs/sweeps/{sweep}/{point}/params.log",
    shell:
        "MNIST_PIPELINE_LOG={log:q} mnist-pipeline sweep-point"
        " --sweep {wildcards.sweep:q} --point {wildcards.point:q}"


rule sweep_compare:
    input:
        ".snakemake/provenance/sweeps/{sweep}/compare.html",
        sweep_files,
        sweep="sweeps/{sweep}.yaml",
    output:
        update("sweeps/{sweep}/compare.html"),
        update("sweeps/{sweep}/results.csv"),
        update("sweeps/{sweep}/compare.json"),
    log:
        "logs/sweeps/{sweep}/compare.log",
    shell:
        "MNIST_PIPELINE_LOG={log:q} mnist-pipeline compare --sweep {wildcards.sweep:q}"
