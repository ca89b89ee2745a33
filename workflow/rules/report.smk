# profile (one job per variant: execution trace and device memory, alone on the machine)
# -> report (HTML + Markdown, figures)


rule profile:
    input:
        stage_inputs("profile"),
    output:
        **stage_outputs("profile"),
    params:
        **stage_params("profile"),
    log:
        "logs/profile_{variant}.log",
    wildcard_constraints:
        variant="|".join(VARIANTS),
    threads: workflow.cores
    shell:
        stage_command("profile")


rule report:
    input:
        stage_inputs("report"),
    output:
        history=update(paths.VARIANTS_HISTORY.path),
        html=update(report(paths.REPORT_HTML.path, caption="../report/report.rst", category="Report")),
        summary=update(report(paths.REPORT_MD.path, caption="../report/summary.rst", category="Report")),
        figures=[
            update(report(path, caption="../report/figures.rst", category="Figures"))
            for path in paths.REPORT_FIGURES.inside(*paths.REPORT_FIGURES.file_names(VARIANTS))
        ],
        stamp=update(stages.get("report").stamp.path),
    params:
        **stage_params("report"),
    log:
        "logs/report.log",
    shell:
        stage_command("report")
