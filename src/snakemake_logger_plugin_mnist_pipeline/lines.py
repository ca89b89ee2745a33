"""The calm console: Snakemake's log records as the few lines a person running the pipeline reads.

- the plan: `10 jobs to run: check, download, preprocess, train (2), evaluate (2), profile (2), report`
- each job as it starts, by the name its own log lines use, and why it runs:
  `12:00:01 start train@jit: models/jit.safetensors: made with train.epochs: 2 in the record, 1 in params.yaml`
  (the first reason its marker holds, mnist_jax_pipeline/orchestration/markers.py), `after preprocess`, `no outputs yet`
- each job as it ends: `12:00:09 done  train@jit (4 of 10)`, or `failed train@jit (exit status 1); its log: ...`
  or `stopped train@jit by SIGINT; ...`, the stage's own error line being just above
- the end: `finished in 0:02:16; Snakemake's own log: .snakemake/log/...`

Snakemake's banner, its scheduling chatter, the job's file lists and the lines that repeat what the
end line says are left out; every other message is shown as Snakemake words it. An error Snakemake
raises with a traceback (a read-only home folder, say) is one line naming the path and the fix.
"""

from __future__ import annotations

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
LEFT_OUT = re.compile(
    "|".join(
        [
            r"Assuming unrestricted shared filesystem usage\.",
            r"Building DAG of jobs\.\.\.",
            r"Using shell: ",
            r"Provided cores: ",
            r"Provided resources: ",
            r"Provided remote nodes: ",
            r"Rules claiming more threads will be scaled down\.",
            r"Singularity containers: ignored",
            r"Conda environments: ignored",
            r"Group jobs: inactive",
            r"Select jobs to execute\.\.\.",
            r"Execute \d+ jobs\.\.\.",
            r"Will exit after finishing currently running jobs",
            r"Terminating processes on user request",
            r"Shutting down, this might take some time\.",
            r"Exiting because a job execution failed",
            r"Restored previous version of ",
            r"Cannot restore .*: no backup found\.",
            r"--keep-incomplete mode is set",  # the stages write atomically: nothing is incomplete
            r"Reasons:\n",  # a dry run's summary of the reasons each job line gave
        ]
    )
)
COMPLETE_LOG = re.compile(r"Complete log\(s\): (.+)")
ELAPSED = re.compile(r"Elapsed time: (\S+?)(?:\.\d+)?$")
EXIT_STATUS = re.compile(r"returned non-zero exit status (\d+)")
KILLED = re.compile(r"died with <Signals\.SIG\w+: (\d+)>")  # the job's shell itself killed by a signal
OS_ERROR = re.compile(r"(?:\w+Error): \[Errno \d+\] (?P<what>[^:]+): '(?P<path>.+)'$")


def rule_label(rule: str, wildcards: dict[str, Any]) -> str:
    """A job's name as its stage's log lines give it: `train@jit`, `train@jit_scan [step_size/<point>]`."""
    stage = "sweep-point" if rule == "sweep_point" else rule.removeprefix("sweep_")
    parts = [str(wildcards[key]) for key in ("sweep", "point") if key in wildcards]
    root = Path("sweeps", *parts) if parts else Path(".")
    return job_label(stage, wildcards.get("variant"), root)


def record_label(path: str) -> str | None:
    """The job whose provenance record `path` is (`sweeps/s/p/provenance/train_jit_scan.json`), or None."""
    found = RECORD.match(path)
    if found is None:
        return None
    return job_label(found["stage"], found["variant"], found["root"] or ".")


def marker_reason(path: str) -> str:
    """Why the marker's job is not current: its first line (orchestration/markers.py writes the reasons there)."""
    try:
        first = Path(path).read_text(encoding="utf-8").splitlines()[0]
    except (OSError, IndexError, UnicodeError):
        return "not current"
    return "no outputs yet" if first == "missing" else first


def _some(files: list[str]) -> str:
    return files[0] + (f" and {len(files) - 1} more" if len(files) > 1 else "")


def _reason_parts(reason: str) -> dict[str, list[str]]:
    """{heading: its files} of a reason's `; `-separated parts (`Missing output files: a, b`)."""
    parts: dict[str, list[str]] = {}
    for part in reason.split("; "):
        head, _, files = part.partition(": ")
        parts[head] = [f for f in files.split(", ") if f] if files else []
    return parts


def _after(upstream: list[str]) -> str:
    """`after train@jit, ...`: the jobs whose records are among the updated inputs."""
    makers = sorted({label for f in upstream if (label := record_label(f))})
    if not makers:
        return f"after the job that makes {upstream[0]}"
    more = f" and {len(makers) - SHOWN} more" if len(makers) > SHOWN else ""
    return "after " + ", ".join(makers[:SHOWN]) + more


def why(reason: str, inputs: list[str] | None = None) -> str:
    """Snakemake's reason for running a job (dag.Reason, as text), said in a few words. The job's marker
    (among `inputs`) says why it is not current when Snakemake names it, or when an output is missing:
    either way the marker was written as Snakemake read the workflow."""
    reason = re.sub(r"^Finished \(was: (.*)\)$", r"\1", reason, flags=re.S)
    parts = _reason_parts(reason)
    if "Forced execution" in parts:
        return "forced"
    updated = parts.get("Updated input files", [])
    markers = [f for f in updated if f.startswith(MARKERS)]
    if not markers and parts.get("Missing output files"):
        markers = [f for f in inputs or [] if f.startswith(MARKERS)]
    if markers:
        return marker_reason(markers[0])
    upstream = parts.get("Input files updated by another job", [])
    if upstream:
        return _after(upstream)
    if parts.get("Missing output files"):
        return f"{_some(parts['Missing output files'])} missing"
    if updated:
        return f"{_some(updated)} changed"
    return reason


def _signal_name(status: int | None) -> str | None:
    """SIGINT for the exit status 130 of a command a signal stopped (128 + its number), else None."""
    if status is None or status <= 128:
        return None
    try:
        return signal.Signals(status - 128).name
    except ValueError:
        return None


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/") or folder.startswith(path.rstrip("/") + "/")


def one_line_error(text: str) -> str:
    """An error Snakemake raised with a traceback, in one line naming the path and the fix."""
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), text)
    found = OS_ERROR.match(last)
    if found is None:
        return f"error: {last} (snakemake --verbose shows where)"
    path, what = found["path"], found["what"].lower()
    if any(_within(path, folder) for folder in (user_cache_dir(), os.path.expanduser("~"))):
        fix = (
            "Snakemake keeps its source cache there (in the home folder, or XDG_CACHE_HOME): make it writable,"
            " or point XDG_CACHE_HOME at a writable folder (XDG_CACHE_HOME=/tmp/cache snakemake ...)"
        )
    else:
        fix = "check that the folder exists, its permissions and the free space"
    return f"error: {path}: {what}; {fix}"


class Console:
    """Turns Snakemake's log records into the calm console's lines (None: nothing to show)."""

    def __init__(self, dryrun: bool = False):
        self.dryrun = dryrun
        self.planned: int | None = None
        self.done = 0
        self.labels: dict[int, str] = {}  # jobid -> label (None: an aggregate)
        self.exits: list[tuple[str, int]] = []  # (error text, exit status) of failed shell commands
        self.failed: list[str] = []
        self.stopped: list[str] = []
        self.snakemake_log: str | None = None
        self.fallback: logging.Formatter | None = None

    def line(self, record: logging.LogRecord) -> str | None:
        event = getattr(record, "event", None)
        text = record.getMessage() if record.msg is not None else ""
        at = time.strftime("%H:%M:%S", time.localtime(record.created))
        if event in (
            LogEvent.WORKFLOW_STARTED,
            LogEvent.JOB_STARTED,
            LogEvent.RESOURCES_INFO,
            LogEvent.PROGRESS,
            LogEvent.RULEGRAPH,
        ):
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
            return self._exception(text, getattr(record, "exception", ""))
        if event is not None:  # group jobs, DAG debugging: as Snakemake writes them
            return self._snakemakes(record)
        return self._message(text)

    def _plan(self, stats: dict[str, int]) -> str | None:
        if self.planned is not None:  # a dry run states it twice
            return None
        counts = {rule: n for rule, n in stats.items() if rule != "total" and rule not in AGGREGATES}
        self.planned = sum(counts.values())
        if not counts:
            return None
        listed = ", ".join(rule if n == 1 else f"{rule} ({n})" for rule, n in counts.items())
        return f"{self.planned} job{'s' if self.planned != 1 else ''} to run: {listed}"

    def _start(self, record: logging.LogRecord, at: str) -> str | None:
        rule = str(getattr(record, "rule_name", ""))
        jobid = int(getattr(record, "jobid", -1))
        if rule in AGGREGATES:
            self.labels[jobid] = ""
            return None
        label = rule_label(rule, dict(getattr(record, "wildcards", {}) or {}))
        self.labels[jobid] = label
        reason = why(str(getattr(record, "reason", "")), list(getattr(record, "input", []) or []))
        return f"would run {label}: {reason}" if self.dryrun else f"{at} start {label}: {reason}"

    def _finished(self, jobid: int, at: str) -> str | None:
        label = self.labels.get(jobid)
        if not label:
            return None
        self.done += 1
        count = f" ({self.done} of {self.planned})" if self.planned else ""
        return f"{at} done  {label}{count}"

    def _error(self, record: logging.LogRecord, at: str) -> str:
        jobid = int(getattr(record, "jobid", -1))
        label = self.labels.get(jobid) or str(getattr(record, "rule_name", "a job"))
        command = str(getattr(record, "shellcmd", "") or "")
        status = next((n for text, n in reversed(self.exits) if command and command.strip() in text), None)
        logs = list(getattr(record, "log", []) or [])
        where = f"; its log: {logs[0]}" if logs else ""
        stop = _signal_name(status)
        if stop:
            self.stopped.append(label)
            return f"{at} stopped {label} by {stop}{where}"
        self.failed.append(label)
        return f"{at} failed {label}" + (f" (exit status {status})" if status is not None else "") + where

    def _exception(self, text: str, exception: str) -> str | None:
        status = EXIT_STATUS.search(text)
        if status is not None and "CalledProcessError" in text:  # the job's line says it
            self.exits.append((text, int(status.group(1))))
            return None
        killed = KILLED.search(text)
        if killed is not None and "CalledProcessError" in text:  # as a command a signal stopped: 128 + its number
            self.exits.append((text, 128 + int(killed.group(1))))
            return None
        if "At least one job did not complete successfully" in text and (self.failed or self.stopped):
            return None  # the end line says which
        if "Traceback (most recent call last)" in text:
            return one_line_error(text)
        return text

    def _message(self, text: str) -> str | None:
        if LEFT_OUT.match(text):
            return None
        found = COMPLETE_LOG.match(text)
        if found:
            self.snakemake_log = os.path.relpath(found.group(1))
            return None
        found = ELAPSED.match(text)
        if found:
            return self._end(found.group(1))
        return text or None

    def _end(self, elapsed: str) -> str:
        where = f"; Snakemake's own log: {self.snakemake_log}" if self.snakemake_log else ""
        if self.stopped:
            return f"stopped after {elapsed}: {', '.join(self.stopped + self.failed)}{where}"
        if self.failed:
            return f"failed after {elapsed}: {', '.join(self.failed)}{where}"
        return f"finished in {elapsed}{where}"

    def _snakemakes(self, record: logging.LogRecord) -> str | None:
        if self.fallback is None:
            from snakemake.logging import DefaultFormatter

            self.fallback = DefaultFormatter()
        return self.fallback.format(record) or None
