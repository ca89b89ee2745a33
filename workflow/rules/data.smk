# download -> preprocess
# Folder outputs are declared through the files inside them, so Snakemake compares file
# times only; DVC tracks the same folders whole (tests/test_orchestrators.py checks both).

PROCESSED = expand("data/processed/{split}_{kind}.npy", split=["train", "val", "test"], kind=["images", "labels"]) + [
    "data/processed/stats.json"
]


rule download:
    input:
        CODE + "data/download.py",
        CODE + "data/checksums.py",
        CODE + "data/idx.py",
    output:
        "data/raw/manifest.json",
    params:
        values=param_values("download"),
    log:
        "logs/download.log",
    threads: workflow.cores
    shell:
        cli("download")


rule preprocess:
    input:
        "data/raw/manifest.json",
        CODE + "data/preprocess.py",
    output:
        PROCESSED,
    params:
        values=param_values("preprocess"),
    log:
        "logs/preprocess.log",
    shell:
        cli("preprocess")
