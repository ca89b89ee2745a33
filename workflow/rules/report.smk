# report (HTML + Markdown, figures), after train, evaluate and profile


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
        stamp=update(stage_table.get("report").stamp.path),
    log:
        "logs/report.log",
    params:
        **stage_params("report"),
    shell:
        stage_command("report")
