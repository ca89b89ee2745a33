"""The calm console: Snakemake's log records as the few lines a person running the pipeline reads.

The plan, a line per job as it starts (and why: its marker's first line, `after preprocess`, `no outputs yet`) and as
it ends (done, failed, stopped), the stages' own lines, one end line; Snakemake's banner and chatter left out, an error
it raises with a traceback in one line naming the path and the fix, any other message as Snakemake words it.
"""

import logging
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir
from snakemake_interface_logger_plugins.common import LogEvent

from mnist_jax_pipeline.foundation.console import job_label

AGGREGATES = {"all", "sweeps"}  # rules that only gather other jobs' outputs
SHOWN = 4  # upstream jobs named in a reason
MARKERS = ".snakemake/provenance/"  # a job's marker: its first line says why it is not current
RECORD = re.compile(r"^(?:(?P<root>.+)/)?provenance/(?P<stage>[a-z]+)(?:_(?P<variant>\w+))?\.json$")
SILENT = {LogEvent(name) for name in ("workflow_started", "job_started", "resources_info", "progress", "rulegraph")}
LEFT_OUT = re.compile(  # Snakemake's banner and chatter; the stages write atomically: nothing is incomplete
    r"Assuming unrestricted shared filesystem usage\.|Building DAG of jobs\.\.\.|Using shell: |Provided cores: "
    r"|Provided resources: |Provided remote nodes: |Rules claiming more threads will be scaled down\."
    r"|Singularity containers: ignored|Conda environments: ignored|Group jobs: inactive|Select jobs to execute\.\.\."
    r"|Execute \d+ jobs\.\.\.|Will exit after finishing currently running jobs|Terminating processes on user request"
    r"|Shutting down, this might take some time\.|Exiting because a job execution failed|Restored previous version of "
    r"|Cannot restore .*: no backup found\.|--keep-incomplete mode is set"
    r"|Reasons:\n"  # a dry run's summary of the reasons each job line gave
)
COMPLETE_LOG = re.compile(r"Complete log\(s\): (.+)")
ELAPSED = re.compile(r"Elapsed time: (\S+?)(?:\.\d+)?$")
# a job's command that failed: its exit status, or the signal that killed its shell (as a status, 128 + its number)
EXIT = re.compile(
    r"CalledProcessError.*(?:returned non-zero exit status (\d+)|died with <Signals\.SIG\w+: (\d+)>)", re.S
)
CACHE_FIX = (  # where Snakemake cannot write in the home folder
    "Snakemake keeps its source cache there (in the home folder, or XDG_CACHE_HOME): make it writable,"
    " or point XDG_CACHE_HOME at a writable folder (XDG_CACHE_HOME=/tmp/cache snakemake ...)"
)
OS_ERROR = re.compile(r"(?:\w+Error): \[Errno \d+\] (?P<what>[^:]+): '(?P<path>.+)'$")


def rule_label(rule: str, wildcards: dict[str, Any]) -> str:
    """A job's name as its stage's log lines give it: `train@jit`, `train@jit_scan [step_size/<point>]`."""
    stage = "sweep-point" if rule == "sweep_point" else rule.removeprefix("sweep_")
    parts = [str(wildcards[key]) for key in ("sweep", "point") if key in wildcards]
    return job_label(stage, wildcards.get("variant"), Path("sweeps", *parts) if parts else ".")


def record_label(path: str) -> str | None:
    """The job whose provenance record `path` is (`sweeps/s/p/provenance/train_jit_scan.json`), or None."""
    found = RECORD.match(path)
    return job_label(found["stage"], found["variant"], found["root"] or ".") if found else None


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
    markers = [name for name in [*updated, *(inputs or [] if missing else [])] if name.startswith(MARKERS)]
    if markers:
        return marker_reason(markers[0])
    upstream = parts.get("Input files updated by another job", [])
    if upstream:  # the jobs whose records are among the updated inputs
        makers = sorted({label for name in upstream if (label := record_label(name))})
        return f"after {_some(makers, SHOWN)}" if makers else f"after the job that makes {upstream[0]}"
    if missing:
        return f"{_some(missing)} missing"
    return f"{_some(updated)} changed" if updated else reason


def one_line_error(text: str) -> str:
    """An error Snakemake raised with a traceback, in one line naming the path and the fix."""
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), text)
    found = OS_ERROR.match(last)
    if found is None:
        return f"error: {last} (snakemake --verbose shows where)"
    path, what = found["path"], found["what"].lower()
    folders = [Path(user_cache_dir()), Path.home()]
    cache = any(Path(path).is_relative_to(folder) or folder.is_relative_to(path) for folder in folders)
    fix = CACHE_FIX if cache else "check that the folder exists, its permissions and the free space"
    return f"error: {path}: {what}; {fix}"


class Console:
    """Turns Snakemake's log records into the calm console's lines (None: nothing to show)."""

    def __init__(self, dryrun: bool = False):
        from snakemake.logging import DefaultFormatter

        self.dryrun = dryrun
        self.planned: int | None = None
        self.done = 0
        self.labels: dict[int, str] = {}  # jobid -> label ('': an aggregate)
        self.exits: list[tuple[str, int]] = []  # (error text, exit status) of failed shell commands
        self.failed: list[str] = []
        self.stopped: list[str] = []
        self.snakemake_log: str | None = None
        self.snakemakes = DefaultFormatter()  # for the records the calm console does not reword

    def line(self, record: logging.LogRecord) -> str | None:
        event = getattr(record, "event", None)
        text = record.getMessage() if record.msg is not None else ""
        at = time.strftime("%H:%M:%S", time.localtime(record.created))
        if event in SILENT:
            return None
        if event == LogEvent.RUN_INFO:
            return self._plan(getattr(record, "stats", {}))
        if event == LogEvent.JOB_INFO:
            return self._start(record, at)
        if event == LogEvent.JOB_FINISHED:
            return self._finished(getattr(record, "job_id", -1), at)
        if event == LogEvent.JOB_ERROR:
            return self._error(record, at)
        if event == LogEvent.SHELLCMD:
            return "    " + str(getattr(record, "shellcmd", "") or text)
        if event == LogEvent.ERROR:
            return self._exception(text)
        if event is not None:  # group jobs, DAG debugging: as Snakemake writes them
            return self.snakemakes.format(record) or None
        return self._message(text)

    def _plan(self, stats: dict[str, int]) -> str | None:
        if self.planned is not None:  # a dry run states it twice
            return None
        counts = {rule: n for rule, n in stats.items() if rule != "total" and rule not in AGGREGATES}
        self.planned = sum(counts.values())
        listed = ", ".join(rule if n == 1 else f"{rule} ({n})" for rule, n in counts.items())
        return f"{self.planned} job{'s' if self.planned != 1 else ''} to run: {listed}" if counts else None

    def _start(self, record: logging.LogRecord, at: str) -> str | None:
        rule = str(getattr(record, "rule_name", ""))
        label = "" if rule in AGGREGATES else rule_label(rule, dict(getattr(record, "wildcards", {}) or {}))
        self.labels[int(getattr(record, "jobid", -1))] = label
        if not label:
            return None
        reason = why(str(getattr(record, "reason", "")), list(getattr(record, "input", []) or []))
        return f"would run {label}: {reason}" if self.dryrun else f"{at} start {label}: {reason}"

    def _finished(self, jobid: int, at: str) -> str | None:
        label = self.labels.get(jobid)
        if not label:
            return None
        self.done += 1
        return f"{at} done  {label}" + (f" ({self.done} of {self.planned})" if self.planned else "")

    def _error(self, record: logging.LogRecord, at: str) -> str:
        label = self.labels.get(int(getattr(record, "jobid", -1))) or str(getattr(record, "rule_name", "a job"))
        command = str(getattr(record, "shellcmd", "") or "")
        status = next((n for text, n in reversed(self.exits) if command and command.strip() in text), None)
        logs = list(getattr(record, "log", []) or [])
        where = f"; its log: {logs[0]}" if logs else ""
        stop = {s.value: s.name for s in signal.Signals}.get((status or 0) - 128)  # 130: stopped by SIGINT
        if stop:
            self.stopped.append(label)
            return f"{at} stopped {label} by {stop}{where}"
        self.failed.append(label)
        return f"{at} failed {label}" + (f" (exit status {status})" if status is not None else "") + where

    def _exception(self, text: str) -> str | None:
        found = EXIT.search(text)
        if found:  # the job's line says it
            self.exits.append((text, int(found[1]) if found[1] else 128 + int(found[2])))
            return None
        if "At least one job did not complete successfully" in text and (self.failed or self.stopped):
            return None  # the end line says which
        return one_line_error(text) if "Traceback (most recent call last)" in text else text

    def _message(self, text: str) -> str | None:
        if LEFT_OUT.match(text):
            return None
        found = COMPLETE_LOG.match(text)
        if found:
            self.snakemake_log = os.path.relpath(found.group(1))
            return None
        found = ELAPSED.match(text)
        return self._end(found.group(1)) if found else (text or None)

    def _end(self, elapsed: str) -> str:
        where = f"; Snakemake's own log: {self.snakemake_log}" if self.snakemake_log else ""
        if self.stopped:
            return f"stopped after {elapsed}: {', '.join(self.stopped + self.failed)}{where}"
        if self.failed:
            return f"failed after {elapsed}: {', '.join(self.failed)}{where}"
        return f"finished in {elapsed}{where}"
