# download -> preprocess


rule download:
    input:
        CODE + "data/download.py",
        CODE + "data/checksums.py",
        CODE + "data/idx.py",
    output:
        directory("data/raw"),
    params:
        values=param_values("download"),
    log:
        "logs/download.log",
    threads: workflow.cores
    shell:
        cli("download")


rule preprocess:
    input:
        "data/raw",
        CODE + "data/preprocess.py",
    output:
        directory("data/processed"),
    params:
        values=param_values("preprocess"),
    log:
        "logs/preprocess.log",
    shell:
        cli("preprocess")
