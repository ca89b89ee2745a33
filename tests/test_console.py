"""The console: stage log lines name their job, details go to the job's log, and Snakemake's records
become the calm console's lines (src/snakemake_logger_plugin_mnist_pipeline)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from snakemake_interface_logger_plugins.common import LogEvent

from mnist_jax_pipeline.foundation import console
from snakemake_logger_plugin_mnist_pipeline.lines import Console, one_line_error, record_label, rule_label, why


@pytest.fixture(autouse=True)
def own_handlers_removed():
    """configure() puts handlers on the root and details loggers: none is left for the next test."""
    yield
    for logger in (logging.getLogger(), console.details):
        for handler in [h for h in logger.handlers if h.name == console.HANDLER]:
            logger.removeHandler(handler)
            handler.close()
    console.details.propagate = True


def record(msg: str | None = None, level: int = logging.INFO, **extra: object) -> logging.LogRecord:
    """A log record as Snakemake's queue hands it to a plugin: the message formatted, the extras set."""
    made = logging.LogRecord("snakemake.logging", level, __file__, 1, msg, None, None)
    made.__dict__.update(extra)
    return made


def job_info(jobid: int, rule: str, reason: str, **wildcards: str) -> logging.LogRecord:
    return record(
        f" Rule: {rule}, Jobid: {jobid}",
        event=LogEvent.JOB_INFO,
        jobid=jobid,
        rule_name=rule,
        wildcards=wildcards,
        reason=reason,
    )


@pytest.mark.parametrize(
    ("args", "label"),
    [
        (("train", "jit"), "train@jit"),
        (("report",), "report"),
        (("train", "jit_scan", "sweeps/step_size/step_size=0.05"), "train@jit_scan [step_size/step_size=0.05]"),
        (("evaluate", "jit", "elsewhere/run1"), "evaluate@jit [elsewhere/run1]"),
    ],
)
def test_a_job_is_named_by_stage_variant_and_sweep_point(args, label):
    assert console.job_label(*args) == label


def test_stage_lines_name_the_job_and_details_go_to_the_jobs_log(tmp_path, monkeypatch, capsys):
    log_file = tmp_path / "logs" / "profile_jit.log"
    log_file.parent.mkdir()
    monkeypatch.setenv(console.LOG_ENV, str(log_file))
    console.configure("profile@jit [s/p=1]")
    logging.getLogger("mnist_jax_pipeline.stages.profile.stage").info("traced 5 step call(s)")
    console.details.info("op table\n  self ms  share")
    shown = capsys.readouterr().err
    assert shown.endswith(" INFO profile@jit [s/p=1] traced 5 step call(s)\n") and "op table" not in shown
    assert log_file.read_text().endswith(" INFO profile@jit [s/p=1] op table\n  self ms  share\n")

    monkeypatch.delenv(console.LOG_ENV)  # under DVC or by hand: no job log, the details are shown
    console.configure("profile@jit")
    console.details.info("op table")
    assert capsys.readouterr().err.endswith(" INFO profile@jit op table\n")


def test_a_library_print_goes_to_the_details(capsys):
    from mnist_jax_pipeline.stages.download.stage import prints_to_details

    console.configure("download")
    with prints_to_details():
        print("Downloading and preparing dataset Unknown size")
    shown = capsys.readouterr()
    assert shown.out == "" and shown.err.endswith(" INFO download Downloading and preparing dataset Unknown size\n")


def test_a_rule_and_a_provenance_record_give_the_stages_own_name():
    assert rule_label("train", {"variant": "jit"}) == "train@jit"
    assert rule_label("sweep_train", {"sweep": "s", "point": "lr=1", "variant": "jit"}) == "train@jit [s/lr=1]"
    assert rule_label("sweep_compare", {"sweep": "s"}) == "compare [s]"
    assert rule_label("sweep_point", {"sweep": "s", "point": "lr=1"}) == "sweep-point [s/lr=1]"
    assert record_label("provenance/train_jit_scan.json") == "train@jit_scan"
    assert record_label("sweeps/s/lr=1/provenance/evaluate_jit.json") == "evaluate@jit [s/lr=1]"
    assert record_label("provenance/report.json") == "report"
    assert record_label("data/processed/stats.json") is None


def test_the_reason_is_the_markers_first_line_or_the_jobs_it_follows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    markers = tmp_path / ".snakemake/provenance"
    markers.mkdir(parents=True)
    (markers / "train_jit.json").write_text(
        "models/jit.safetensors: made with train.epochs: 2 in the record, 1 in"
        " params.yaml\nsecond reason\n1732420000000000000\n"
    )
    (markers / "check.json").write_text("missing\n")
    assert why("Updated input files: .snakemake/provenance/train_jit.json") == (
        "models/jit.safetensors: made with train.epochs: 2 in the record, 1 in params.yaml"
    )
    assert (
        why("Missing output files: provenance/check.json; Updated input files: .snakemake/provenance/check.json")
        == "no outputs yet"
    )
    assert why("Missing output files: provenance/check.json", [".snakemake/provenance/check.json"]) == "no outputs yet"
    upstream = ", ".join(
        [
            "provenance/train_jit.json",
            "models/jit.safetensors",
            "provenance/preprocess.json",
            "data/processed/train_images.npy",
        ]
    )
    assert why(f"Input files updated by another job: {upstream}") == "after preprocess, train@jit"
    many = ", ".join(f"provenance/evaluate_v{i}.json" for i in range(6))
    assert why(f"Input files updated by another job: {many}") == (
        "after evaluate@v0, evaluate@v1, evaluate@v2, evaluate@v3 and 2 more"
    )
    assert why("Missing output files: sweeps/s/compare.html, sweeps/s/compare.csv") == (
        "sweeps/s/compare.html and 1 more missing"
    )
    assert why("Forced execution") == "forced"


def test_a_run_is_a_plan_one_line_per_job_start_and_end_and_an_end_line():
    console_ = Console()
    lines = [
        console_.line(r)
        for r in [
            record("Assuming unrestricted shared filesystem usage."),
            record("Workflow has started!", event=LogEvent.WORKFLOW_STARTED),
            record("Building DAG of jobs..."),
            record(
                "Job stats: ...", event=LogEvent.RUN_INFO, stats={"preprocess": 1, "train": 2, "all": 1, "total": 4}
            ),
            record("Select jobs to execute..."),
            record("Execute 1 jobs...", event=LogEvent.JOB_STARTED, jobs=[1]),
            job_info(1, "preprocess", "Input files updated by another job: provenance/download.json"),
            record("Finished jobid: 1 (Rule: preprocess)", event=LogEvent.JOB_FINISHED, job_id=1),
            record(None, event=LogEvent.PROGRESS, done=1, total=4),
            job_info(0, "all", "Input files updated by another job: models/jit.safetensors"),
            record("Finished jobid: 0 (Rule: all)", event=LogEvent.JOB_FINISHED, job_id=0),
            record("Complete log(s): /work/p/.snakemake/log/2026.snakemake.log"),
            record("Elapsed time: 0:02:16.026720"),
        ]
    ]
    shown = [line for line in lines if line]
    assert shown[0] == "3 jobs to run: preprocess, train (2)"
    assert shown[1].endswith(" start preprocess: after download") and shown[2].endswith(" done  preprocess (1 of 3)")
    assert shown[3].startswith("finished in 0:02:16; Snakemake's own log: ")
    assert shown[3].endswith(".snakemake/log/2026.snakemake.log") and len(shown) == 4


def test_a_failed_or_stopped_job_is_one_line_naming_its_log():
    console_ = Console()
    command = "MNIST_PIPELINE_LOG=logs/train_jit.log mnist-pipeline train --variant jit"
    for ending, expected in (
        ("returned non-zero exit status 130", "stopped train@jit by SIGINT; its log: logs/train_jit.log"),
        ("returned non-zero exit status 1", "failed train@jit (exit status 1); its log: logs/train_jit.log"),
        # the job's shell itself killed (as when its orchestrator is gone): named by the signal
        ("died with <Signals.SIGKILL: 9>", "stopped train@jit by SIGKILL; its log: logs/train_jit.log"),
    ):
        assert console_.line(job_info(5, "train", "Missing output files: x", variant="jit")) is not None
        error = (
            f"RuleException:\nCalledProcessError in file workflow/rules/train.smk, line 17:\nCommand 'set -euo"
            f" pipefail;  {command}' {ending}."
        )
        assert console_.line(record(error, logging.ERROR, event=LogEvent.ERROR, exception="RuleException")) is None
        line = console_.line(
            record(
                "Error in rule train, jobid: 5",
                logging.ERROR,
                event=LogEvent.JOB_ERROR,
                jobid=5,
                rule_name="train",
                log=["logs/train_jit.log"],
                shellcmd=command,
            )
        )
        assert line is not None and line.endswith(expected)
    for noise in (
        "Restored previous version of models/jit.safetensors (updating job failed).",
        "Shutting down, this might take some time.",
        "--keep-incomplete mode is set, so incomplete output files and shadow directories of failed jobs"
        " are not removed.",
    ):
        assert console_.line(record(noise)) is None
    assert (
        console_.line(
            record(
                "WorkflowError:\nAt least one job did not complete successfully.",
                logging.ERROR,
                event=LogEvent.ERROR,
                exception="WorkflowError",
            )
        )
        is None
    )
    assert console_.line(record("Elapsed time: 0:00:18.3")) == "stopped after 0:00:18: train@jit, train@jit, train@jit"


def test_an_error_snakemake_raises_with_a_traceback_is_one_line(monkeypatch, tmp_path):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    traceback = (
        'Traceback (most recent call last):\n\n  File "snakemake/sourcecache.py", line 791, in __init__\n'
        "    os.makedirs(self.cache_path, exist_ok=True)\n\n"
        f"PermissionError: [Errno 13] Permission denied: '{home}/.cache'\n"
    )
    line = one_line_error(traceback)
    assert line.startswith(f"error: {home}/.cache: permission denied; Snakemake keeps its source cache there")
    assert "XDG_CACHE_HOME" in line and "\n" not in line
    other = 'Traceback (most recent call last):\n  File "x.py"\nValueError: a bad value\n'
    assert one_line_error(other) == "error: ValueError: a bad value (snakemake --verbose shows where)"
    shown = Console().line(record(traceback, logging.ERROR, event=LogEvent.ERROR, exception="PermissionError"))
    assert shown == line


def test_unknown_messages_pass_unchanged():
    for message in (
        "Nothing to be done (all requested files are present and up to date).",
        "Moving output file data/raw to cache.",
        "error: a DVC command is running in this checkout",
    ):
        assert Console().line(record(message)) == message
    assert Path(console.__file__).read_text().count("import jax") == 0  # Snakemake loads it at every start
