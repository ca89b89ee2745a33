# download -> preprocess
# Output folders are declared through what they hold, so Snakemake compares file times
# while DVC tracks the same folders whole (tests/test_orchestrators.py checks they agree).
# Both rules may be shared between checkouts through Snakemake's between-workflow cache
# (SNAKEMAKE_OUTPUT_CACHE=<dir> snakemake --cache --cores all).

PROCESSED_FILES = [f"{split}_{kind}.npy" for split in ("train", "val", "test") for kind in ("images", "labels")]
PROCESSED_FILES.append("stats.json")
PROCESSED = [f"data/processed/{name}" for name in PROCESSED_FILES]


rule download:
    input:
        CODE + "data/download.py",
        CODE + "data/checksums.py",
        CODE + "data/idx.py",
    output:
        manifest="data/raw/manifest.json",
        arrays=directory("data/raw/arrays"),
        idx=directory("data/raw/idx"),
        tfds=directory("data/raw/tfds"),
    cache: "omit-software"
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
        multiext("data/processed/", *PROCESSED_FILES),
    cache: "omit-software"
    params:
        values=param_values("preprocess"),
    log:
        "logs/preprocess.log",
    shell:
        cli("preprocess")
