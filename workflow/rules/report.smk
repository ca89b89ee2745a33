# Written by `mnist-pipeline generate` from src/mnist_jax_pipeline/orchestration/stage_table.py: edit the table.


rule report:
    input:
        ".snakemake/provenance/report.json",
        "provenance/download.json",
        "provenance/preprocess.json",
        expand("provenance/profile_{variant}.json", variant=VARIANT_LIST),
        expand("provenance/train_{variant}.json", variant=VARIANT_LIST),
        expand("provenance/evaluate_{variant}.json", variant=VARIANT_LIST),
        ancient("data/raw/manifest.json"),
        ancient("data/processed/train_images.npy"),
        ancient("data/processed/train_labels.npy"),
        ancient("data/processed/val_images.npy"),
        ancient("data/processed/val_labels.npy"),
        ancient("data/processed/test_images.npy"),
        ancient("data/processed/test_labels.npy"),
        ancient("data/processed/stats.json"),
        ancient(expand("reports/profile/{variant}/init.prof", variant=VARIANT_LIST)),
        ancient(expand("reports/profile/{variant}/train_step.prof", variant=VARIANT_LIST)),
        ancient(expand("reports/profile/{variant}/evaluate.prof", variant=VARIANT_LIST)),
        ancient(expand("reports/profile/{variant}/summary.json", variant=VARIANT_LIST)),
        ancient(
            expand(
                "reports/profile/{variant}/trace/plugins/profile/{variant}/perfetto_trace.json.gz",
                variant=VARIANT_LIST,
            )
        ),
        ancient(
            expand(
                "reports/profile/{variant}/trace/plugins/profile/{variant}/host.trace.json.gz", variant=VARIANT_LIST
            )
        ),
        ancient(
            expand("reports/profile/{variant}/trace/plugins/profile/{variant}/host.xplane.pb", variant=VARIANT_LIST)
        ),
        ancient(expand("metrics/train/{variant}.full.json", variant=VARIANT_LIST)),
        ancient(expand("metrics/train/{variant}.run.json", variant=VARIANT_LIST)),
        ancient(expand("plots/train/{variant}.csv", variant=VARIANT_LIST)),
        ancient(expand("metrics/evaluate/{variant}.full.json", variant=VARIANT_LIST)),
        ancient(expand("metrics/evaluate/{variant}_details.json", variant=VARIANT_LIST)),
    output:
        variants_history=update("plots/variants.csv"),
        report_html=update(report("reports/report.html", **REPORT)),
        report_md=update(report("reports/summary.md", **SUMMARY)),
        dataset_samples=update(report("reports/figures/dataset_samples.png", **FIGURES)),
        class_balance=update(report("reports/figures/class_balance.png", **FIGURES)),
        training_curves=update(report("reports/figures/training_curves.png", **FIGURES)),
        epoch_times=update(report("reports/figures/epoch_times.png", **FIGURES)),
        per_class_recall=update(report("reports/figures/per_class_recall.png", **FIGURES)),
        step_timeline=update(report("reports/figures/step_timeline.png", **FIGURES)),
        confusion=update(report(expand("reports/figures/confusion_{variant}.png", variant=VARIANT_LIST), **FIGURES)),
        misclassified=update(
            report(expand("reports/figures/misclassified_{variant}.png", variant=VARIANT_LIST), **FIGURES)
        ),
        record=update("provenance/report.json"),
    log:
        "logs/report.log",
    shell:
        "MNIST_PIPELINE_LOG={log:q} mnist-pipeline report"
