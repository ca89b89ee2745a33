"""The calm console: Snakemake's log records as the few lines a person running the pipeline reads.

The plan, a line per job as it starts (and why) and as it ends, the stages' own lines, one end line; Snakemake's
banner and chatter left out, an error it raises with a traceback in one line naming the path and the fix.
"""

import logging
import os
import re
import signal
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir
from snakemake.logging import DefaultFormatter
from snakemake_interface_logger_plugins.common import LogEvent

from mnist_jax_pipeline.foundation.console import job_label
from mnist_jax_pipeline.foundation.paths import MARKERS

AGGREGATES = {"all", "sweeps"}  # rules that only gather other jobs' outputs
RECORD = re.compile(r"^(?:(?P<root>.+)/)?provenance/(?P<stage>[a-z]+)(?:_(?P<variant>\w+))?\.json$")
SILENT = {LogEvent(name) for name in ("workflow_started", "job_started", "resources_info", "progress", "rulegraph")}
SNAKEMAKES = re.compile(  # Snakemake's banner and chatter (left out), the path of its own log, the time the run took
    r"Assuming unrestricted shared|Building DAG of jobs|Using shell: |Provided (?:cores|resources|remote nodes): "
    r"|Rules claiming more threads|(?:Singularity containers|Conda environments): ignored|Group jobs: inactive"
    r"|Select jobs to execute|Execute \d+ jobs|Will exit after finishing|Terminating processes on user request"
    r"|Shutting down, this might|Exiting because a job execution failed|Restored previous version of "
    r"|Cannot restore .*: no backup found|--keep-incomplete mode is set"  # the stages write atomically
    r"|Reasons:\n"  # a dry run's summary of the reasons each job line gave
    r"|Complete log\(s\): (?P<log>.+)|Elapsed time: (?P<elapsed>\S+?)(?:\.\d+)?$"
)
# a job's command that failed: its exit status (128 + a signal's number: stopped by it), or the signal that killed it
EXIT = re.compile(r"CalledProcessError.*(?:returned non-zero exit status (\d+)|died with <Signals\.(SIG\w+))", re.S)
SIGNALS = {s.value: s.name for s in signal.Signals}
OS_ERROR = re.compile(r"\w+Error: \[Errno \d+\] (?P<what>[^:]+): '(?P<path>.+)'$")


def rule_label(rule: str, wildcards: dict[str, Any]) -> str:
    """A job's name as its stage's log lines give it: `train@jit`, `train@jit_scan [step_size/<point>]`."""
    stage = "sweep-point" if rule == "sweep_point" else rule.removeprefix("sweep_")
    parts = [str(wildcards[key]) for key in ("sweep", "point") if key in wildcards]
    return job_label(stage, wildcards.get("variant"), Path("sweeps", *parts) if parts else ".")


def record_label(path: str) -> str | None:
    """The job whose provenance record `path` is (`sweeps/s/p/provenance/train_jit_scan.json`), or None."""
    return job_label(found["stage"], found["variant"], found["root"] or ".") if (found := RECORD.match(path)) else None


def marker_reason(path: str) -> str:
    """Why the marker's job is not current: its first line (orchestration/snakefile.py writes the reasons there)."""
    try:
        first = Path(path).read_text(encoding="utf-8").splitlines()[0]
    except (OSError, IndexError, UnicodeError):
        return "not current"
    return "no outputs yet" if first == "missing" else first


def _some(items: list[str], shown: int = 1) -> str:
    """The first `shown` items, and how many more."""
    return ", ".join(items[:shown]) + (f" and {len(items) - shown} more" if len(items) > shown else "")


def why(reason: str, inputs: list[str] | None = None) -> str:
    """Snakemake's reason for running a job (dag.Reason, as text) in a few words: its marker's (among `inputs`) when
    Snakemake names it or an output is missing, as the marker was written when Snakemake read the workflow."""
    reason = re.sub(r"^Finished \(was: (.*)\)$", r"\1", reason, flags=re.S)
    heads = (part.partition(": ") for part in reason.split("; "))  # `Missing output files: a, b; ...`
    parts = {head: [name for name in files.split(", ") if name] for head, _, files in heads}
    if "Forced execution" in parts:
        return "forced"
    updated, missing = parts.get("Updated input files", []), parts.get("Missing output files", [])
    if markers := [name for name in [*updated, *(inputs or [] if missing else [])] if name.startswith(MARKERS + "/")]:
        return marker_reason(markers[0])
    if upstream := parts.get("Input files updated by another job", []):
        # the jobs whose records are among the updated inputs
        makers = sorted({label for name in upstream if (label := record_label(name))})
        return f"after {_some(makers, shown=4)}" if makers else f"after the job that makes {upstream[0]}"
    return f"{_some(missing)} missing" if missing else f"{_some(updated)} changed" if updated else reason


def one_line_error(text: str) -> str:
    """An error Snakemake raised with a traceback, in one line naming the path and the fix."""
    last = text.strip().splitlines()[-1].strip()
    if (found := OS_ERROR.match(last)) is None:
        return f"error: {last} (snakemake --verbose shows where)"
    path, said = found["path"], f"error: {found['path']}: {found['what'].lower()}; "
    if not any(Path(path).is_relative_to(f) or f.is_relative_to(path) for f in (Path(user_cache_dir()), Path.home())):
        return said + "check that the folder exists, its permissions and the free space"
    return said + (
        "Snakemake keeps its source cache there (in the home folder, or XDG_CACHE_HOME): make it writable,"
        " or point XDG_CACHE_HOME at a writable folder (XDG_CACHE_HOME=/tmp/cache snakemake ...)"
    )


class Console:
    """Turns Snakemake's log records into the calm console's lines (None: nothing to show)."""

    def __init__(self, dryrun: bool = False):
        self.dryrun = dryrun
        self.planned: int | None = None
        self.done = 0
        self.labels: dict[int, str] = {}  # jobid -> label, but for the aggregates
        self.exits: list[tuple[str, tuple[str, str]]] = []  # (error text, (how its job ended, why)) of failed commands
        self.ended: dict[str, list[str]] = {"stopped": [], "failed": []}  # the jobs that did not finish
        self.snakemake_log = ""
        self.snakemakes = DefaultFormatter()  # for the records the calm console does not reword

    def line(self, record: logging.LogRecord) -> str | None:
        """The line a record shows, or None: the method named by its event says it (`_job_info` for JOB_INFO),
        `_message` for a record without one."""
        if (event := getattr(record, "event", None)) in SILENT:
            return None
        if (shows := getattr(self, f"_{event.value if event else 'message'}", None)) is None:
            return self.snakemakes.format(record) or None  # group jobs, DAG debugging: as Snakemake writes them
        text = record.getMessage() if record.msg is not None else ""
        return shows(vars(record), text, self.snakemakes.formatTime(record, "%H:%M:%S"))

    def _run_info(self, extra: dict[str, Any], text: str, at: str) -> str | None:
        if self.planned is not None:  # a dry run states it twice
            return None
        counts = {rule: n for rule, n in extra.get("stats", {}).items() if rule != "total" and rule not in AGGREGATES}
        self.planned = sum(counts.values())
        listed = ", ".join(rule if n == 1 else f"{rule} ({n})" for rule, n in counts.items())
        return f"{self.planned} job{'s' if self.planned != 1 else ''} to run: {listed}" if counts else None

    def _job_info(self, extra: dict[str, Any], text: str, at: str) -> str | None:
        if (rule := str(extra.get("rule_name", ""))) in AGGREGATES:
            return None
        label = self.labels[extra.get("jobid", -1)] = rule_label(rule, dict(extra.get("wildcards") or {}))
        reason = why(str(extra.get("reason", "")), list(extra.get("input") or []))
        return f"would run {label}: {reason}" if self.dryrun else f"{at} start {label}: {reason}"

    def _job_finished(self, extra: dict[str, Any], text: str, at: str) -> str | None:
        if (label := self.labels.get(extra.get("job_id", -1))) is None:  # an aggregate
            return None
        self.done += 1
        return f"{at} done  {label}" + (f" ({self.done} of {self.planned})" if self.planned else "")

    def _job_error(self, extra: dict[str, Any], text: str, at: str) -> str:
        label = self.labels.get(extra.get("jobid", -1)) or str(extra.get("rule_name", "a job"))
        command = str(extra.get("shellcmd") or "").strip()
        ended, how = next((e for said, e in reversed(self.exits) if command and command in said), ("failed", ""))
        self.ended[ended].append(label)
        return f"{at} {ended} {label}{how}" + (f"; its log: {extra['log'][0]}" if extra.get("log") else "")

    def _shellcmd(self, extra: dict[str, Any], text: str, at: str) -> str:
        return "    " + str(extra.get("shellcmd") or text)

    def _error(self, extra: dict[str, Any], text: str, at: str) -> str | None:
        if found := EXIT.search(text):  # the job's line says it
            status, killed = found.groups()
            stop = killed or SIGNALS.get(int(status) - 128)  # 130: stopped by SIGINT
            self.exits.append((text, ("stopped", f" by {stop}") if stop else ("failed", f" (exit status {status})")))
            return None
        if "At least one job did not complete successfully" in text and any(self.ended.values()):
            return None  # the end line says which
        return one_line_error(text) if "Traceback (most recent call last)" in text else text

    def _message(self, extra: dict[str, Any], text: str, at: str) -> str | None:
        if (found := SNAKEMAKES.match(text)) is None:
            return text or None
        if found["log"]:
            self.snakemake_log = f"; Snakemake's own log: {os.path.relpath(found['log'])}"
        if not found["elapsed"]:
            return None
        how = next((f"{ended} after" for ended, labels in self.ended.items() if labels), "finished in")
        jobs = [label for labels in self.ended.values() for label in labels]
        return f"{how} {found['elapsed']}" + (f": {', '.join(jobs)}" if jobs else "") + self.snakemake_log
