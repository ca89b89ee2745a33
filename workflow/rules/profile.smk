# Written by `mnist-pipeline generate` from src/mnist_jax_pipeline/orchestration/stage_table.py: edit the table.


rule profile:
    input:
        ".snakemake/provenance/profile_{variant}.json",
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
        init=update("reports/profile/{variant}/init.prof"),
        train_step=update("reports/profile/{variant}/train_step.prof"),
        evaluate=update("reports/profile/{variant}/evaluate.prof"),
        summary=update("reports/profile/{variant}/summary.json"),
        perfetto_trace=update("reports/profile/{variant}/trace/plugins/profile/{variant}/perfetto_trace.json.gz"),
        host_trace=update("reports/profile/{variant}/trace/plugins/profile/{variant}/host.trace.json.gz"),
        host_xplane=update("reports/profile/{variant}/trace/plugins/profile/{variant}/host.xplane.pb"),
        record=update("provenance/profile_{variant}.json"),
    log:
        "logs/profile_{variant}.log",
    wildcard_constraints:
        variant=VARIANTS,
    threads: workflow.cores
    shell:
        "MNIST_PIPELINE_LOG={log:q} mnist-pipeline profile --variant {wildcards.variant}"
