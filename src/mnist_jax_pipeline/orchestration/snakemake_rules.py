"""What the Snakemake rule files call: each stage's inputs, outputs, params and command, the default
target, the sweeps' rules and what runs before and after the jobs.

workflow/rules/common.smk makes one `Rules` from Snakemake's `workflow` and `config` and names its
methods for the rules; everything else lives here, where it is tested without a Snakemake run.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import yaml
from snakemake.io import ancient, directory
from snakemake.ioflags import update  # the flag functions a Snakefile sees

from ..artefacts import atomic
from ..config import sweeps
from ..config.params import load, validate
from ..foundation import console, paths, runtime
from ..foundation.errors import PipelineError
from . import dvc_lock, freshness, markers, snakemake_paths, stage_table
from .markers import MARKERS

POINT = "sweeps/{sweep}/{point}"
LOGS = Path("logs")  # the rules' log: files
# Points run side by side on purpose, and their runs record it (timing_lock: off); with --cores 1 each
# takes the machine's lock, so its timings are taken alone. The choice travels in the environment
# (MNIST_PIPELINE_SWEEP_LOCK: empty = the machine's lock), not in the rules' params or commands, so
# running a finished sweep again with other --cores does not re-run its points.
SWEEP_LOCK_ENV = "MNIST_PIPELINE_SWEEP_LOCK"
POINT_LOCK = f"{runtime.LOCK_ENV}=${{{{{SWEEP_LOCK_ENV}-off}}}}"  # unset: off
CONFIG_REFUSED = (
    "error: --config/--configfile overrides are not used by the stages, which read params.yaml; edit"
    " params.yaml, run dvc exp run -S KEY=VALUE, or apply a preset: mnist-pipeline preset NAME"
)


def refuse(problem: str | None) -> None:
    """Stop the run with one line, before any job, where there is a problem."""
    if problem:
        raise SystemExit(f"error: {problem}")


def logged(command: str) -> str:
    """A job's shell command: what it prints goes to the console and to its log, and its details (the
    profile's op table) to its log only (MNIST_PIPELINE_LOG, foundation/console.py). tee ignores the stop
    signals, which reach the whole process group, so the stage's own line on stopping reaches both; it
    appends, to the file Snakemake removed before the job and the stage appends its details to."""
    return (
        f"{freshness.TOOL_ENV}=snakemake {console.LOG_ENV}={{log:q}} {command} 2>&1"
        " | (trap '' INT TERM HUP; exec tee -a {log:q})"
    )


class Rules:
    """The workflow's parameters, jobs and markers, and the values its rules declare.

    `workflow` is Snakemake's workflow object and `config` its config dict. Making it reads params.yaml
    (one line naming the key where it is not valid) and the sweep files; `prepare()` then marks every
    job as current or stale by content, before Snakemake builds its DAG."""

    def __init__(self, workflow: Any, config: dict[str, Any]) -> None:
        if config:  # every stage reads params.yaml itself, so an override would be silently ignored
            raise SystemExit(CONFIG_REFUSED)
        try:  # one line naming the key, before any job is scheduled
            self.params = load("params.yaml")
        except PipelineError as err:
            raise SystemExit(f"error: {err}") from None
        config.update(self.params.to_dict())
        self.workflow = workflow
        self.config = config
        self.variants = tuple(self.params.variants)
        self.checker = freshness.Checker(self.params)
        self.jobs = freshness.jobs(self.variants)
        self.stale: dict[freshness.Job, list[str]] = {}
        self.lock = dvc_lock.RepositoryLock()
        self.recorded = False
        # A sweep file that is not valid fails the `sweeps` target, with its one-line error; it does not
        # stop the rest of the workflow.
        self.sweeps, self.sweep_errors = sweeps.discover()
        # Snakemake's between-workflow cache (docs/scaling-out.md) for download and preprocess, when the run
        # asks for it (--cache): otherwise Snakemake would say on every run that both rules could be cached.
        self.cache: str | bool = "omit-software" if workflow.workflow_settings.cache is not None else False

    # --- before Snakemake builds its DAG ---

    def prepare(self) -> None:
        """Mark the main jobs and the sweep points' jobs, refuse an output path that cannot be written,
        warn about invalid sweep files and choose the sweep points' lock."""
        self.stale = self.checker.stale(self.jobs)
        markers.mark(self.jobs, self.stale)
        if self.workflow.output_settings.verbose:  # Snakemake's console names the marker; the calm one its first line
            for job, reasons in self.stale.items():
                if job.stamp_path.exists():  # a job never run needs no explanation
                    print(f"{job.name}: not current: {reasons[0]}", file=sys.stderr)
        markers.settle(self.jobs)
        # A file where an output folder belongs (`models` a file) stops Snakemake's DAG with a traceback.
        outputs = [p for job in self.jobs for p in [*job.outputs(), job.stamp_path]]
        refuse(atomic.obstacle([*outputs, LOGS / "check.log"], probe=False))
        for message in self.sweep_errors:
            print(f"warning: {message} (the sweeps target fails until it is fixed)", file=sys.stderr)
        # --cores 1: the lock the main stages take (MNIST_PIPELINE_LOCK, else the machine's); set every time,
        # whatever an earlier process left in the environment
        os.environ[SWEEP_LOCK_ENV] = os.environ.get(runtime.LOCK_ENV, "") if self.workflow.cores == 1 else "off"
        self.mark_sweeps()

    def mark_sweeps(self) -> None:
        """Markers for every sweep point's jobs, as for the main jobs: a point's params.yaml is stale when
        the sections its stages read differ from the sweep's; its train and evaluate by their records."""
        for sweep in self.sweeps.values():
            for point in sweep.points:
                folder = sweep.folder(point)
                file = folder / paths.POINT_PARAMS
                try:
                    have = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
                except (OSError, yaml.YAMLError):
                    have = {}
                wanted = sweep.read_by_point(point)
                differs = {section: have.get(section) for section in wanted} != wanted
                markers.mark_one(
                    MARKERS / folder / "params", [f"{file}: not the sweep's point"] if differs else None, [file]
                )
                checker = freshness.Checker(validate(sweep.params(point), str(file)), str(file))
                jobs = [freshness.Job(stage_table.get(name), sweep.variant, folder) for name in ("train", "evaluate")]
                stale = {job: ["its params.yaml changes"] for job in jobs} if differs else checker.stale(jobs)
                markers.mark(jobs, stale)
                markers.settle(jobs)

    # --- the rules' declarations ---

    def stage_inputs(self, name: str) -> list[str]:
        """The job's marker, the records of the jobs it reads, then the files it reads of them, ancient():
        their times decide nothing. Its code files are no input: a code change makes the job stale by
        content, which gives its marker new content."""
        stage = stage_table.get(name)
        own = (MARKERS / Path(stage.stamp.path).name).as_posix()
        upstream: list[str] = []
        for artefact in stage.inputs:
            maker = stage_table.get(artefact.made_by)
            names = (
                [maker.stamp.path]
                if stage.per_variant or not maker.per_variant
                else [maker.stamp.path.format(variant=v) for v in self.variants]
            )
            upstream += [path for path in names if path not in upstream]
        return [own, *upstream] + [ancient(path) for path in snakemake_paths.snakemake_inputs(name, self.variants)]

    def stage_outputs(self, name: str) -> dict[str, Any]:
        """Files and whole folders a stage writes, named by their path (the between-workflow cache wants
        named outputs): `output: **stage_outputs(name)`. Each is update(): Snakemake would otherwise delete
        a job's earlier outputs before it runs, and a failed or stopped job would leave none (the stages
        write atomically, so an earlier output stays until the new one is complete)."""
        files, folders = snakemake_paths.snakemake_outputs(name, self.variants)
        named = {path: update(path) for path in files} | {folder: update(directory(folder)) for folder in folders}
        return {re.sub(r"\W", "_", Path(p).name.replace("{variant}", "")).strip("_"): out for p, out in named.items()}

    def stage_params(self, name: str) -> dict[str, Any]:
        """The params.yaml sections a stage reads and the digest of each code file it runs. They decide no
        re-run (the provenance records do), but they are the key of Snakemake's between-workflow cache, so
        a cached output is one of these values, made by this code."""
        stage = stage_table.get(name)
        return {"values": {section: self.config[section] for section in stage.params}, "code": self.checker.code(stage)}

    def stage_command(self, name: str) -> str:
        """The stage's command (the one dvc.yaml runs), logged."""
        return logged(stage_table.get(name).cmd("{wildcards.variant}"))

    def all_targets(self, wildcards: object) -> list[str]:
        """Rule all's inputs: every output of every stage (after record_when_nothing_runs)."""
        self.record_when_nothing_runs()
        return snakemake_paths.snakemake_targets(self.variants)

    # --- the sweeps' rules (rules/sweep.smk) ---

    def point_inputs(self, name: str) -> dict[str, Any]:
        """A sweep point's job's inputs: its marker, its params.yaml, the records of the jobs it reads, then
        its upstream files, ancient()."""
        stage = stage_table.get(name)
        upstream = [stage_table.get("preprocess").stamp.path]
        if name == "evaluate":
            upstream.append(f"{POINT}/{stage_table.get('train').stamp.path}")
        own = (MARKERS / POINT / Path(stage.stamp.path.format(variant="{variant}")).name).as_posix()
        return {
            "marker": own,
            "params": f"{POINT}/{paths.POINT_PARAMS}",
            "records": upstream,
            "upstream": [ancient(path) for path in snakemake_paths.point_inputs(name, POINT)],
        }

    def point_command(self, stage: str) -> str:
        """A per-variant stage's command for one sweep point, under the point's folder."""
        return logged(
            f"{POINT_LOCK} mnist-pipeline --params {{input.params}} {stage} --variant {{wildcards.variant}}"
            " --root sweeps/{wildcards.sweep}/{wildcards.point:q}"
        )

    def sweeps_command(self) -> str:
        """The `sweeps` target's shell command: fails with the invalid sweep files' errors, if any."""
        lines = " ".join(shlex.quote(f"error: {message}") for message in self.sweep_errors)
        return f"printf '%s\\n' {lines} >&2; exit 1".replace("{", "{{").replace("}", "}}")  # not placeholders

    def sweep_files(self, wildcards: Any) -> list[str]:
        """Every point's outputs that the comparison page reads."""
        sweep = self.sweeps[wildcards.sweep]
        outputs = [p for stage in ("train", "evaluate") for p in snakemake_paths.snakemake_outputs(stage, ())[0]]
        return [
            f"{sweep.folder(p)}/{path}".replace("{variant}", sweep.variant) for p in sweep.points for path in outputs
        ]

    # --- around the jobs: onstart, onsuccess, onerror ---

    def check_writable(self) -> None:
        """Every output and log of the jobs about to run can be written (onstart): a read-only reports/, say,
        is one line here, not a failed job or Snakemake's own error once a job starts."""
        jobs = self.workflow.dag.needrun_jobs()
        refuse(atomic.obstacle([str(p) for job in jobs for p in [*job.output, *job.log]]))

    def record_in_dvc(self) -> None:
        """Let dvc.lock record what this run made, so `dvc status` agrees with it (`dvc commit` of the jobs
        of this run's DAG that are current by content). Runs after a failed run too, for the jobs that
        finished. MNIST_PIPELINE_DVC_COMMIT=0 turns it off."""
        self.lock.release()
        if not dvc_lock.committing() or self.workflow.dryrun or self.workflow.touch:  # nothing was made
            return
        ran = {
            f"{job.rule.name}@{job.wildcards_dict['variant']}" if "variant" in job.wildcards_dict else job.rule.name
            for job in self.workflow.dag.jobs
        }
        failed = dvc_lock.record_run(freshness.Checker(load("params.yaml")), self.jobs, ran)
        refuse(failed)

    def record_when_nothing_runs(self) -> None:
        """A run with nothing to run (Snakemake skips onsuccess then) still brings dvc.lock up to date, after
        git moved it (`git stash`, `git checkout dvc.lock`): every job is current by content (dvc_lock.py).
        Called while Snakemake builds the DAG of a run: its executor is known then (not while it parses,
        lints or writes its report), so a dry run or --touch records nothing."""
        workflow = self.workflow
        if workflow.executor_plugin is None or not workflow.is_main_process or workflow.dryrun or workflow.touch:
            return
        if self.recorded:
            return
        self.recorded = True
        if self.stale or not dvc_lock.committing():
            return
        line = dvc_lock.bring_up_to_date(self.jobs)
        if line:
            print(line, file=sys.stderr)
