# profile (device memory of the jit model) -> report (HTML + Markdown, figures)


rule profile:
    input:
        "data/processed",
        "models/jit.safetensors",
        CODE + "profile.py",
        CODE + "pprof.py",
        CODE + "model.py",
        CODE + "train.py",
        CODE + "evaluate.py",
    output:
        directory("reports/profile"),
    params:
        values=param_values("profile"),
    log:
        "logs/profile.log",
    threads: workflow.cores
    shell:
        cli("profile")


rule report:
    input:
        "data/raw",
        "data/processed",
        "reports/profile",
        CODE + "report",
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
            directory("reports/figures"),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
        ),
    params:
        values=param_values("report"),
    log:
        "logs/report.log",
    shell:
        cli("report")
