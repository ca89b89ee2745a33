# Written by `mnist-pipeline generate` from src/mnist_jax_pipeline/orchestration/stage_table.py: edit the table.


rule check:
    input:
        ".snakemake/provenance/check.json",
    output:
        record=update("provenance/check.json"),
    log:
        "logs/check.log",
    shell:
        "MNIST_PIPELINE_LOG={log:q} mnist-pipeline check"


rule download:
    input:
        ".snakemake/provenance/download.json",
    output:
        manifest=update("data/raw/manifest.json"),
        arrays=update(directory("data/raw/arrays")),
        idx=update(directory("data/raw/idx")),
        record=update("provenance/download.json"),
    log:
        "logs/download.log",
    cache: CACHE
    threads: workflow.cores
    params:
        key=cache_key("download"),
    shell:
        "MNIST_PIPELINE_LOG={log:q} mnist-pipeline download"


rule preprocess:
    input:
        ".snakemake/provenance/preprocess.json",
        "provenance/download.json",
        ancient("data/raw/manifest.json"),
    output:
        train_images=update("data/processed/train_images.npy"),
        train_labels=update("data/processed/train_labels.npy"),
        val_images=update("data/processed/val_images.npy"),
        val_labels=update("data/processed/val_labels.npy"),
        test_images=update("data/processed/test_images.npy"),
        test_labels=update("data/processed/test_labels.npy"),
        stats=update("data/processed/stats.json"),
        record=update("provenance/preprocess.json"),
    log:
        "logs/preprocess.log",
    cache: CACHE
    params:
        key=cache_key("preprocess"),
    shell:
        "MNIST_PIPELINE_LOG={log:q} mnist-pipeline preprocess"
