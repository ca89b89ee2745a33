"""`mnist-pipeline explain PATH`: where an output came from, and whether it is current.

For an output of a stage (the project's or a sweep point's): the job that made it, the tool that ran it and when,
the parameters, code and inputs of its record, whether the file is as recorded, whether the job is current (a sweep
point's: as its sweep file gives it now), the fix.
"""

import argparse
import json
import os
import textwrap
from datetime import datetime
from pathlib import Path, PurePath
from typing import Any

from ..artefacts.provenance import Execution, Record, changed_files
from ..config import sweeps
from ..config.params import Params, load
from ..foundation import console, paths, variants
from ..foundation.errors import PipelineError
from . import stage_table
from .commands import COMMANDS
from .freshness import Checker
from .jobs import Job, all_jobs
from .points import point_params

CODE_SHOWN = 3  # code files named
NBSP = "\xa0"  # joins an item's words: textwrap breaks lines at ASCII spaces only
NO_STAGE = (
    "name a file a stage writes (docs/architecture.md, 'Where everything lands'), a provenance record,"
    " or a sweep point's model or metrics, from the project root"
)


def short(digest: str) -> str:
    """The first 8 hex digits of a digest ('symlink:' and 'special:' digests keep their prefix)."""
    return digest[: digest.rfind(":") + 9]


def relative(path: str) -> Path | None:
    """`path` relative to the project root (the current folder), or None when it lies outside it."""
    pairs = ((Path.cwd(), Path(os.path.abspath(path))), (Path.cwd().resolve(), Path(path).resolve()))
    return next((there.relative_to(here) for here, there in pairs if there.is_relative_to(here)), None)


def find_job(rel: PurePath) -> Job | None:
    """The job whose output (or record) `rel` is, or lies inside; a sweep point's under its folder."""
    point = rel.parts[:1] == (paths.SWEEPS.name,) and len(rel.parts) > 3
    jobs = all_jobs(variants.names(), Path(*rel.parts[:3]) if point else Path("."))
    inside = (job for job in jobs if any(Path(rel).is_relative_to(out) for out in [*job.outputs(), job.record_path]))
    return next((job for job in inside if not point or job.stage.name in stage_table.POINT_STAGES), None)


def _value(value: Any) -> str:
    """A parameter's value as YAML's flow style writes it, without quotes: `sgd`, `0.01`, `[784,512,10]`."""
    if isinstance(value, list | tuple):
        return "[" + ",".join(_value(v) for v in value) + "]"
    return value if isinstance(value, str) else json.dumps(value)


def _label(name: str, lines: list[str] | None = None) -> str:
    """The first 12 columns of a line: its label, or blank under the lines already written for it."""
    return f"  {'' if lines else name:<10}"


def pack(items: list[str], first: str) -> list[str]:
    """`first` then the items, comma-separated, wrapped at 100 columns under a blank label, no item split."""
    text = ", ".join(item.replace(" ", NBSP) for item in items)
    wrap = textwrap.TextWrapper(101, first, _label(""), break_long_words=False, break_on_hyphens=False)
    return [line.replace(NBSP, " ") for line in wrap.wrap(text)] or [first]


def params_lines(record: Record, now: dict[str, Any], where: str) -> list[str]:
    """One line (wrapped) per params section of the record: key=value, a value that differs now with its new one."""
    lines: list[str] = []
    for section, values in record.params.items():
        current = now.get(section)
        pairs = [("", values, current)]  # a section that is one value (variants)
        if isinstance(values, dict):
            current = current if isinstance(current, dict) else {}
            pairs = [(f"{key}=", value, current.get(key)) for key, value in values.items()]
        items = [key + _value(old) + (f" ({where}: {_value(new)})" if new != old else "") for key, old, new in pairs]
        lines += pack(items, _label("params", lines) + f"{section}: ")
    return lines or [_label("params") + "none"]


def code_lines(record: Record, stage: stage_table.Stage) -> list[str]:
    """The count of code files, the stage's own module first, a few with short digests."""
    own = f"{paths.CODE.as_posix()}/{COMMANDS[stage.name].module.partition(':')[0].replace('.', '/')}.py"
    names = sorted(record.code, key=lambda name: (name != own, name))
    shown = [f"{name} {short(record.code[name])}" for name in names[:CODE_SHOWN]]
    shown += [f"and {len(names) - CODE_SHOWN} more"] if len(names) > CODE_SHOWN else []
    return pack(shown, _label("code") + f"{len(names)} files: ")


def input_lines(record: Record, job: Job, checker: Checker) -> list[str]:
    """Each input the record lists, grouped by the output of the job upstream it belongs to (a file: its digest)."""
    lines: list[str] = []
    left = dict(record.inputs)
    for producer, read in job.producers(checker.params.variants):
        for name in (path.as_posix() for path in read):
            mine = {k[len(name) + 1 :]: left.pop(k) for k in list(left) if k == name or k.startswith(name + "/")}
            count = f"{len(mine)} files: " if list(mine) != [""] else ""  # a folder's files, or the file's digest
            head = _label("inputs", lines) + f"{name} ({producer.name}): {count}"
            lines += pack([f"{k} {short(v)}".strip() for k, v in mine.items()], head) if mine else []
    for k, v in left.items():
        lines.append(_label("inputs", lines) + f"{k} {short(v)}")
    return lines or [_label("inputs") + "none"]


def run_line(run: Execution) -> str:
    """Which tool ran the job, when, and for how long."""
    try:
        start, end = datetime.fromisoformat(run.started), datetime.fromisoformat(run.ended)
    except ValueError:
        return _label("ran by") + f"{run.tool}, {run.started} to {run.ended}"
    return _label("ran by") + f"{run.tool}, {start:%Y-%m-%d %H:%M:%S} UTC, {(end - start).total_seconds():.1f} s"


def file_line(rel: Path, job: Job, record: Record, checker: Checker) -> str:
    """Whether the file (or folder) named is as the record lists it."""
    name = rel.as_posix()
    recorded = {k: v for k, v in record.outputs.items() if k == name or k.startswith(name + "/")}
    now = checker.hashes.tree([rel]) if recorded else {}
    if rel == job.record_path:
        return _label("file") + "the job's provenance record itself"
    if not recorded and rel.exists():
        return _label("file") + f"not among the files '{job.name}' recorded; it did not write it"
    if not recorded:
        return _label("file") + f"missing, and '{job.name}' recorded no such file"
    if name not in recorded:  # a folder
        differ = changed_files(now, recorded)
        more = f" and {len(differ) - 1} more" if len(differ) > 1 else ""
        state = f"differs from its record: {differ[0]}{more}" if differ else f"{len(recorded)} files, as recorded"
        return _label("folder") + state
    if name not in now:
        return _label("file") + f"missing; recorded sha256 {short(recorded[name])}"
    if now[name] == recorded[name]:
        return _label("file") + f"as recorded, sha256 {short(now[name])}"
    return _label("file") + f"differs from its record: sha256 {short(now[name])} now, {short(recorded[name])} recorded"


def unlisted(job: Job, checker: Checker) -> str | None:
    """The fix when the job's variant is not among the parameters' variants (no tool runs it), else None."""
    if job.variant is None or job.variant in checker.params.variants:
        return None
    if job.root != Path("."):  # a sweep file names one variant
        return f"set 'variant: {job.variant}' in {checker.params_path} (no tool runs '{job.name}' for it until then)"
    return f"list '{job.variant}' in {checker.params_path}'s variants (no tool runs '{job.name}' until then)"


def current_lines(job: Job, checker: Checker, gone: str | None = None) -> list[str]:
    """`yes`, or the first reason it is not (`gone`: why no sweep gives its point now, and the fix after '; '; its own,
    else of a job upstream) and the command that fixes it."""
    if gone:
        reason, _, fix = gone.rpartition("; ")
        return [_label("current") + f"no: {reason}", _label("fix") + fix]
    listing = unlisted(job, checker)
    culprit = job if listing else next((j for j in [job, *checker.ancestors(job)] if checker.problems(j)), None)
    if culprit is None:
        return [_label("current") + "yes"]
    found = [f"'{job.variant}' is not a variant {checker.params_path} trains"] if listing else checker.problems(culprit)
    where = "" if culprit == job else f"'{_name(culprit)}' upstream is not: "
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return [_label("current") + f"no: {where}{found[0]}{more}", _label("fix") + (listing or culprit.fix())]


def _name(job: Job) -> str:
    return console.job_label(job.name, root=job.root)


def not_recorded(rel: Path, job: Job, why: str, make: str | None = None) -> list[str]:
    """The job has no record of its own: the path is not made yet, or not by it; the command that makes it."""
    there = rel.exists() and rel != job.record_path
    state = "there, but not recorded as made by it" if there else "not made yet"
    if make is None:
        make = job.fix() if there or job.root != Path(".") else f"snakemake --cores all, or dvc repro {job.name}"
    return [str(rel), _label("made by") + f"{_name(job)}: {state} ({job.record_path}: {why})", _label("fix") + make]


def explain(path: str, params_path: str = paths.PARAMS) -> list[str]:
    """The lines that say where `path` came from and whether it is current."""
    rel = relative(path)
    job = find_job(rel) if rel is not None and not any(p.is_file() for p in rel.parents) else None  # under a file
    if rel is None or job is None:
        hint = NO_STAGE if rel is not None else "it lies outside the project (run explain from the project root)"
        raise PipelineError(f"{path}: not an output of any stage; {hint}")
    point, sweep_file = job.root != Path("."), sweeps.file(job.root.parent.name).as_posix()
    if point and not job.root.exists() and not Path(sweep_file).exists():
        raise PipelineError(f"{path}: not an output of any stage; no sweep file {sweep_file} gives it")
    params_file = job.root / paths.PARAMS if point else Path(params_path)
    swept = point_params(job.root, params_path) if point else None  # what the point's sweep file gives it now
    gone = swept if isinstance(swept, str) else None
    if point and not params_file.is_file():  # the point is not written yet (the project's own: load says so)
        return not_recorded(rel, job, f"no {params_file}", gone.rpartition("; ")[2] if gone else None)
    checker = Checker(swept, sweep_file) if isinstance(swept, Params) else Checker(load(params_file), str(params_file))
    if (record := job.read_record()) is None or record.stage != job.name:
        why = "not a record of this job" if job.record_path.exists() else "no such record"
        return not_recorded(rel, job, why, gone.rpartition("; ")[2] if gone else unlisted(job, checker))
    lines = [str(rel), _label("made by") + f"{_name(job)}, recorded in {job.record_path}", run_line(record.run)]
    lines += params_lines(record, checker.made_from(job), checker.params_path) + code_lines(record, job.stage)
    lines += input_lines(record, job, checker) + [file_line(rel, job, record, checker)]
    return lines + current_lines(job, checker, gone)


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline explain PATH`."""
    print("\n".join(explain(args.path, args.params)))
