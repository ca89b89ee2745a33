# Written by `mnist-pipeline generate` from src/mnist_jax_pipeline/orchestration/stage_table.py: edit the table.


rule train:
    input:
        ".snakemake/provenance/train_{variant}.json",
        "provenance/preprocess.json",
        ancient("data/processed/train_images.npy"),
        ancient("data/processed/train_labels.npy"),
        ancient("data/processed/val_images.npy"),
        ancient("data/processed/val_labels.npy"),
        ancient("data/processed/test_images.npy"),
        ancient("data/processed/test_labels.npy"),
        ancient("data/processed/stats.json"),
    output:
        model=update("models/{variant}.safetensors"),
        train_headline=update("metrics/train/{variant}.json"),
        train_metrics=update("metrics/train/{variant}.full.json"),
        train_run=update("metrics/train/{variant}.run.json"),
        train_history=update("plots/train/{variant}.csv"),
        record=update("provenance/train_{variant}.json"),
    log:
        "logs/train_{variant}.log",
    wildcard_constraints:
        variant=VARIANTS,
    threads: workflow.cores
    shell:
        "MNIST_PIPELINE_LOG={log:q} mnist-pipeline train --variant {wildcards.variant}"


rule evaluate:
    input:
        ".snakemake/provenance/evaluate_{variant}.json",
        "provenance/preprocess.json",
        "provenance/train_{variant}.json",
        ancient("data/processed/train_images.npy"),
        ancient("data/processed/train_labels.npy"),
        ancient("data/processed/val_images.npy"),
        ancient("data/processed/val_labels.npy"),
        ancient("data/processed/test_images.npy"),
        ancient("data/processed/test_labels.npy"),
        ancient("data/processed/stats.json"),
        ancient("models/{variant}.safetensors"),
    output:
        eval_headline=update("metrics/evaluate/{variant}.json"),
        eval_metrics=update("metrics/evaluate/{variant}.full.json"),
        eval_details=update("metrics/evaluate/{variant}_details.json"),
        confusion=update("plots/confusion/{variant}.csv"),
        record=update("provenance/evaluate_{variant}.json"),
    log:
        "logs/evaluate_{variant}.log",
    wildcard_constraints:
        variant=VARIANTS,
    threads: workflow.cores
    shell:
        "MNIST_PIPELINE_LOG={log:q} mnist-pipeline evaluate --variant {wildcards.variant}"
