# Written by `mnist-pipeline generate` from src/mnist_jax_pipeline/orchestration/stage_table.py: edit the table.


rule sweep_train:
    input:
        ".snakemake/provenance/sweeps/{sweep}/{point}/train_{variant}.json",
        "provenance/preprocess.json",
        ancient("data/processed/train_images.npy"),
        ancient("data/processed/train_labels.npy"),
        ancient("data/processed/val_images.npy"),
        ancient("data/processed/val_labels.npy"),
        ancient("data/processed/test_images.npy"),
        ancient("data/processed/test_labels.npy"),
        ancient("data/processed/stats.json"),
        params="sweeps/{sweep}/{point}/params.yaml",
    output:
        model=update("sweeps/{sweep}/{point}/models/{variant}.safetensors"),
        train_headline=update("sweeps/{sweep}/{point}/metrics/train/{variant}.json"),
        train_metrics=update("sweeps/{sweep}/{point}/metrics/train/{variant}.full.json"),
        train_run=update("sweeps/{sweep}/{point}/metrics/train/{variant}.run.json"),
        train_history=update("sweeps/{sweep}/{point}/plots/train/{variant}.csv"),
        record=update("sweeps/{sweep}/{point}/provenance/train_{variant}.json"),
    log:
        "logs/sweeps/{sweep}/{point}/train_{variant}.log",
    wildcard_constraints:
        variant=ALL_VARIANTS,
    shell:
        POINT_LOCK
        + "MNIST_PIPELINE_LOG={log:q} mnist-pipeline --params {input.params:q} train --variant {wildcards.variant} --root sweeps/{wildcards.sweep}/{wildcards.point:q}"


rule sweep_evaluate:
    input:
        ".snakemake/provenance/sweeps/{sweep}/{point}/evaluate_{variant}.json",
        "provenance/preprocess.json",
        "sweeps/{sweep}/{point}/provenance/train_{variant}.json",
        ancient("data/processed/train_images.npy"),
        ancient("data/processed/train_labels.npy"),
        ancient("data/processed/val_images.npy"),
        ancient("data/processed/val_labels.npy"),
        ancient("data/processed/test_images.npy"),
        ancient("data/processed/test_labels.npy"),
        ancient("data/processed/stats.json"),
        ancient("sweeps/{sweep}/{point}/models/{variant}.safetensors"),
        params="sweeps/{sweep}/{point}/params.yaml",
    output:
        eval_headline=update("sweeps/{sweep}/{point}/metrics/evaluate/{variant}.json"),
        eval_metrics=update("sweeps/{sweep}/{point}/metrics/evaluate/{variant}.full.json"),
        eval_details=update("sweeps/{sweep}/{point}/metrics/evaluate/{variant}_details.json"),
        confusion=update("sweeps/{sweep}/{point}/plots/confusion/{variant}.csv"),
        record=update("sweeps/{sweep}/{point}/provenance/evaluate_{variant}.json"),
    log:
        "logs/sweeps/{sweep}/{point}/evaluate_{variant}.log",
    wildcard_constraints:
        variant=ALL_VARIANTS,
    shell:
        POINT_LOCK
        + "MNIST_PIPELINE_LOG={log:q} mnist-pipeline --params {input.params:q} evaluate --variant {wildcards.variant} --root sweeps/{wildcards.sweep}/{wildcards.point:q}"
