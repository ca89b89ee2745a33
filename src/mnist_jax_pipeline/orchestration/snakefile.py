"""What the Snakefile calls: every job marked current or stale by content before Snakemake builds its
DAG, DVC's lock held while jobs run, and dvc.lock brought in step after.

Snakemake compares file times, so each job gets a marker (.snakemake/provenance/<job>), its one input
whose time counts: a stale job's marker gets new content and a time after its outputs', a current job's
the oldest time. Records get a time of 1 s: they link the jobs, but their time never runs one.
"""

import asyncio
import contextlib
import json
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from ..artefacts import atomic
from ..artefacts.provenance import changed_files
from ..config import sweeps
from ..config.params import load, read_yaml
from ..foundation import paths, stops
from ..foundation.console import job_label
from ..foundation.errors import PipelineError, read_text
from ..foundation.runtime import LOCK_ENV
from . import dvc_lock, freshness, run, stage_table
from .jobs import Job, all_jobs
from .points import point_checker, point_jobs

MARKERS = Path(paths.MARKERS)
CONFIG_REFUSED = (
    "error: --config/--configfile overrides are not used by the stages, which read params.yaml; edit"
    " params.yaml, run dvc exp run -S KEY=VALUE, or apply a preset: mnist-pipeline preset NAME"
)


class Stopper:
    """Ctrl-C or a closed terminal (SIGHUP) under Snakemake: before any job, the run stops with one line; once
    jobs run, Snakemake is asked to stop as on SIGTERM (no new job, the running ones stop themselves, its lock
    let go), without its tracebacks."""

    def __init__(self) -> None:
        self.signals: list[int] = list(stops.RECEIVED)  # kept while the package imported (common.smk)
        stops.handle(self, (signal.SIGINT, signal.SIGHUP))
        self.stopped_before_start()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        graceful = signal.getsignal(signal.SIGTERM)  # the scheduler's, once it runs jobs
        if callable(graceful) and not self.signals:
            name = signal.Signals(signum).name
            print(f"{name}: stopping; the running jobs stop and clean up, no new job starts", file=sys.stderr)
        self.signals.append(signum)  # while the DAG is built: said before the first job
        if callable(graceful):  # from a thread: the handler takes a lock the interrupted code may hold
            threading.Thread(target=graceful, args=(signal.SIGTERM, None), daemon=True).start()
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # parsing: stop now
            self.stopped_before_start()

    def stopped_before_start(self) -> None:
        """Exit as a stopped command does (128 + the signal's number), after one line."""
        if self.signals:
            print(f"error: stopped by {signal.Signals(self.signals[0]).name} before any job started", file=sys.stderr)
            raise SystemExit(128 + self.signals[0])


def marker(job: Job) -> Path:
    return MARKERS / job.root / job.stage.record.at(job.variant).name


def mark_one(path: Path, reasons: list[str] | None, outputs: list[Path]) -> None:
    """Mark `path` stale (`reasons`) or current; `outputs` are what the job it stands for writes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not reasons:
        if not path.exists():
            path.write_text("current\n", encoding="utf-8")
        os.utime(path, (0, 0))
        return
    times = [p.stat().st_mtime for p in outputs if p.exists()]
    # New content each time (Snakemake takes an input it saw at the job's last run as unchanged), but the same
    # for a job with no output yet: then it runs anyway, and every fresh checkout's cache key is the same.
    path.write_text("\n".join([*reasons, str(time.time_ns())] if times else ["missing"]) + "\n", encoding="utf-8")
    moment = max(time.time(), max(times, default=0.0) + 1)
    os.utime(path, (moment, moment))


def mark(jobs: Iterable[Job], stale: Mapping[Job, list[str]]) -> None:
    for job in jobs:
        mark_one(marker(job), stale.get(job), [*job.outputs(), job.record_path])
        with contextlib.suppress(OSError):  # not 0: Snakemake reads an output time of 0 as none
            os.utime(job.record_path, (1, 1))


def declared(job: Job, variants: tuple[str, ...]) -> list[str]:
    """The files and folders the job's rule names as outputs."""
    found: list[Path] = []
    for artefact in job.stage.artefacts:
        base = artefact.at(job.variant, job.root)
        names = [*artefact.file_names(variants), *artefact.folders]
        found += [base / name.format(variant=job.variant) for name in names] if names else [base]
    return [p.as_posix() for p in [*found, job.record_path]]


class Pipeline:
    """The workflow's parameters and jobs, marked by content as the Snakefile is read (one line where
    params.yaml is not valid or .snakemake cannot be written), and what runs before and after the jobs."""

    def __init__(self, workflow: Any, config: dict[str, Any]) -> None:
        if config:  # every stage reads params.yaml itself: an override would be silently ignored
            raise SystemExit(CONFIG_REFUSED)
        try:
            self.params = load(paths.PARAMS)
        except PipelineError as err:
            raise SystemExit(f"error: {err}") from None
        self.workflow = workflow
        self.variants = tuple(self.params.variants)
        self.checker = freshness.Checker(self.params)
        self.jobs = all_jobs(self.variants)
        self.lock = dvc_lock.RepositoryLock()
        self.recorded = False
        self.sweeps, self.sweep_errors = sweeps.discover()  # a bad sweep file fails the `sweeps` target only
        # Snakemake's between-workflow cache for download and preprocess, when the run asks for it (--cache)
        self.cache: str | bool = "omit-software" if workflow.workflow_settings.cache is not None else False
        # sweep points run side by side, without the timing lock, unless --cores 1
        self.point_lock = "" if workflow.cores == 1 else f"{LOCK_ENV}=off "
        os.environ[run.ORCHESTRATOR] = run.identity(os.getpid())  # its jobs stop once it is gone
        if workflow.is_main_process:  # Snakemake writes its folder, in a dry run too (its I/O cache)
            self.refuse([".snakemake/iocache/latest.pkl"], probe=True)
        self.stale = self.checker.stale(self.jobs)
        mark(self.jobs, self.stale)
        if workflow.output_settings.verbose:
            for job, reasons in self.stale.items():
                if job.record_path.exists():  # a job never run needs no explanation
                    print(f"{job.name}: not current: {reasons[0]}", file=sys.stderr)
        self.refuse([p for job in self.jobs for p in declared(job, self.variants)], probe=False)
        for message in self.sweep_errors:
            print(f"warning: {message} (the sweeps target fails until it is fixed)", file=sys.stderr)
        self.mark_sweeps()

    @staticmethod
    def refuse(outputs: Iterable[str | Path], probe: bool) -> None:
        """Stop the run with one line, before any job, where an output could not be written."""
        try:
            atomic.claim(*outputs, Path("logs/check.log"), probe=probe)
        except PipelineError as err:
            raise SystemExit(f"error: {err}") from None

    def mark_sweeps(self) -> None:
        """A point's params.yaml is stale when the sections its stages read differ from the sweep's; its jobs
        are marked by their records, as the main jobs are."""
        for sweep in self.sweeps.values():
            for point in sweep.points:
                folder = sweep.folder(point)
                have: Any = None
                with contextlib.suppress(PipelineError):
                    have = read_yaml(folder / paths.PARAMS)
                wanted = sweep.read_by_point(point)
                differs = not isinstance(have, dict) or {section: have.get(section) for section in wanted} != wanted
                reasons = [f"{folder}/params.yaml: not the sweep's point"] if differs else None
                mark_one(MARKERS / folder / "params", reasons, [folder / paths.PARAMS])
                checker = point_checker(sweep, point, self.checker.hashes)
                jobs = point_jobs(sweep, point)
                mark(jobs, {job: ["its params.yaml changes"] for job in jobs} if differs else checker.stale(jobs))
            made = [sweep.folder() / name for name in (paths.COMPARE_HTML, paths.COMPARE_CSV, paths.COMPARE_RECORD)]
            mark_one(MARKERS / made[0], self.compared(sweep, made), made)

    def compared(self, sweep: sweeps.Sweep, made: list[Path]) -> list[str] | None:
        """Why the sweep's comparison is not current: its record lists other files of the points or its own."""
        try:
            recorded = json.loads(read_text(made[2]))
            now = self.checker.hashes.tree([*sweep.compared_from(), *made[:2]])
        except (OSError, ValueError, PipelineError):
            recorded = None
        if not isinstance(recorded, dict):
            return [f"{made[2]}: missing or not a record"]
        changed = changed_files(now, recorded)
        return [f"{changed[0]}: changed since `compare` made {made[0]}"] if changed else None

    # --- what the rules name ---

    def cache_key(self, name: str) -> dict[str, Any]:
        """The parameter values and code digests a cached stage's outputs are made from: with its inputs, the
        key of Snakemake's between-workflow cache."""
        job = Job(stage_table.get(name))  # the cached stages are not per variant
        return {"values": self.checker.made_from(job), "code": self.checker.code(job.stage)}

    def targets(self, wildcards: object) -> list[str]:
        """Rule all's inputs: every output of every job. Read while Snakemake builds the DAG of a run, when a
        run with nothing to run brings dvc.lock up to date (not while it parses, lints or writes its report)."""
        workflow = self.workflow
        runs = workflow.executor_plugin is not None and workflow.is_main_process
        if runs and not (workflow.dryrun or workflow.touch or self.recorded or self.stale) and dvc_lock.committing():
            self.recorded = True
            if line := dvc_lock.bring_up_to_date(self.jobs):
                print(line, file=sys.stderr)
        return list(dict.fromkeys(p for job in self.jobs for p in declared(job, self.variants)))

    def sweep_files(self, wildcards: Any) -> list[str]:
        """Every point's outputs that the comparison page reads."""
        if (sweep := self.sweeps.get(wildcards.sweep)) is None:  # its file is not valid: the one line that says why
            name = sweeps.file(wildcards.sweep).as_posix()
            why = next((m for m in self.sweep_errors if m.startswith(name)), f"{name}: missing")
            raise SystemExit(f"error: {why}")
        jobs = [job for point in sweep.points for job in point_jobs(sweep, point)]
        return [path for job in jobs for path in declared(job, (sweep.variant,))]

    def sweeps_command(self) -> str:
        """The `sweeps` target's command: fails with the invalid sweep files' errors."""
        lines = " ".join(shlex.quote(f"error: {message}") for message in self.sweep_errors)
        return f"printf '%s\\n' {lines} >&2; exit 1".replace("{", "{{").replace("}", "}}")  # not placeholders

    # --- around the jobs: onstart, onsuccess, onerror ---

    def start(self, stopper: Stopper) -> None:
        """Before the first job: a stop asked for meanwhile, outputs that could not be written, DVC's lock."""
        stopper.stopped_before_start()
        force = self.workflow.dag_settings  # known once the DAG is built, not yet while the Snakefile is read
        # Snakemake plans before any job runs: a job current by content ends at once, unless the run forces jobs
        os.environ[run.CUTOFF] = "" if force.forceall or force.forcerun or force.forcetargets else "1"
        outputs = [p for job in self.workflow.dag.needrun_jobs() for p in [*job.output, *job.log]]
        whole = [p for job in self.jobs if job.record_path.as_posix() in outputs for p in job.outputs()]  # its folders
        self.refuse([*outputs, *whole], probe=True)
        self.lock.hold()

    def finish(self, succeeded: bool) -> None:
        """Let go of DVC's lock and `dvc commit` the jobs of this run that are current by content."""
        self.lock.release()
        if not dvc_lock.committing() or self.workflow.dryrun or self.workflow.touch:
            return
        ran = {job_label(job.rule.name, job.wildcards_dict.get("variant")) for job in self.workflow.dag.jobs}
        if failed := dvc_lock.commit_current(freshness.Checker(load(paths.PARAMS)), self.jobs, ran, succeeded):
            raise SystemExit(f"error: {failed}")
