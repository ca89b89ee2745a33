# profile (device memory of the jit model) -> report (HTML + Markdown, figures)

# Every file of the report package (templates included): a template edit re-runs `report`.
REPORT_CODE = sorted(
    str(p) for p in Path(CODE, "report").rglob("*") if p.is_file() and p.suffix in {".py", ".j2"}
)
FIGURES = ["dataset_samples", "class_balance", "training_curves", "epoch_times", "per_class_recall"] + [
    f"{kind}_{variant}" for kind in ("confusion", "misclassified") for variant in VARIANTS
]


rule profile:
    input:
        PROCESSED,
        "models/jit.safetensors",
        CODE + "profile.py",
        CODE + "pprof.py",
        CODE + "model.py",
        CODE + "train.py",
        CODE + "evaluate.py",
    output:
        expand("reports/profile/{point}.prof", point=["init", "train_step", "evaluate"]),
        "reports/profile/summary.json",
    params:
        values=param_values("profile"),
    log:
        "logs/profile.log",
    threads: workflow.cores
    shell:
        cli("profile")


rule report:
    input:
        "data/raw/manifest.json",
        "data/processed/stats.json",
        "data/processed/test_images.npy",
        "reports/profile/summary.json",
        REPORT_CODE,
        CODE + "pprof.py",
        expand("metrics/train/{variant}.json", variant=VARIANTS),
        expand("plots/train/{variant}.csv", variant=VARIANTS),
        expand("metrics/evaluate/{variant}.json", variant=VARIANTS),
        expand("metrics/evaluate/{variant}_details.json", variant=VARIANTS),
    output:
        html=report(
            "reports/report.html",
            caption="../report/report.rst",
            category="Report",
        ),
        summary=report(
            "reports/summary.md",
            caption="../report/summary.rst",
            category="Report",
        ),
        figures=report(
            expand("reports/figures/{name}.png", name=FIGURES),
            caption="../report/figures.rst",
            category="Figures",
        ),
    params:
        values=param_values("report"),
    log:
        "logs/report.log",
    shell:
        cli("report")
