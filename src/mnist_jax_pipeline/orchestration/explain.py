"""`mnist-pipeline explain PATH`: where an output came from, and whether it is current.

For an output of a stage (under the project root or a sweep point's folder) it names the job that made
it, the tool that ran it and when, the parameters, code and inputs it was made from (from its record),
whether the file is as recorded, and whether the job is current now, with the command that fixes it.
"""

import argparse
import json
import os
import textwrap
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from ..artefacts.provenance import Execution, Stamp
from ..config.params import load
from ..foundation import console, paths, variants
from ..foundation.errors import PipelineError
from . import stage_table
from .commands import COMMANDS
from .freshness import Checker
from .jobs import CODE_ROOT, Job, all_jobs

SHORT = 8  # hex digits of a digest shown
CODE_SHOWN = 3  # code files named
WIDTH = 100  # columns a listing is wrapped at
INDENT = " " * 12
NBSP = "\xa0"  # joins an item's words: textwrap breaks lines at ASCII spaces only


def short(digest: str) -> str:
    """The first SHORT hex digits of a digest ('symlink:' digests keep their prefix)."""
    kind, _, value = digest.rpartition(":")
    return f"{kind}:{value[:SHORT]}" if kind else value[:SHORT]


def relative(path: str) -> PurePosixPath | None:
    """`path` relative to the project root (the current folder), or None when it lies outside it."""
    for here, there in ((os.getcwd(), os.path.abspath(path)), (os.path.realpath(os.getcwd()), os.path.realpath(path))):
        rel = os.path.relpath(there, here)
        if rel != ".." and not rel.startswith(".." + os.sep):
            return PurePosixPath(Path(rel).as_posix())
    return None


def find_job(rel: PurePosixPath) -> Job | None:
    """The job whose output (or record) `rel` is, or lies inside; a sweep point's under its folder."""
    point = rel.parts[:1] == (console.SWEEPS.name,) and len(rel.parts) > 3
    for job in all_jobs(variants.names(), Path(*rel.parts[:3]) if point else Path(".")):
        allowed = not point or job.stage.name in stage_table.POINT_STAGES
        if allowed and any(Path(rel).is_relative_to(out) for out in [*job.outputs(), job.stamp_path]):
            return job
    return None


def _value(value: Any) -> str:
    """A parameter's value as YAML's flow style writes it, without quotes: `sgd`, `0.01`, `[784,512,10]`."""
    if isinstance(value, list | tuple):
        return "[" + ",".join(_value(v) for v in value) + "]"
    return value if isinstance(value, str) else json.dumps(value)


def pack(items: list[str], first: str) -> list[str]:
    """`first` then the items, comma-separated, wrapped at WIDTH columns under INDENT, no item split."""
    text = ", ".join(item.replace(" ", NBSP) for item in items)
    wrap = textwrap.TextWrapper(WIDTH + 1, first, INDENT, break_long_words=False, break_on_hyphens=False)
    lines = wrap.wrap(text)
    return [line.replace(NBSP, " ") for line in lines] or [first]


def _label(name: str, lines: list[str] | None = None) -> str:
    """The column of a line: its label, or blank under the lines already written for it."""
    return INDENT if lines else f"  {name:<10}"


def params_lines(stamp: Stamp, now: dict[str, Any], params_path: str) -> list[str]:
    """One line (wrapped) per params section of the record: key=value, a value that differs now with its new one."""
    lines: list[str] = []
    for section, values in stamp.params.items():
        current = now.get(section)
        if isinstance(values, dict):
            current = current if isinstance(current, dict) else {}
            pairs = [(f"{key}=", value, current.get(key)) for key, value in values.items()]
        else:  # a section that is one value (variants)
            pairs = [("", values, current)]
        items = [
            key + _value(old) + (f" ({params_path}: {_value(new)})" if new != old else "") for key, old, new in pairs
        ]
        lines += pack(items, _label("params", lines) + f"{section}: ")
    return lines or [_label("params") + "none"]


def code_lines(stamp: Stamp, stage: stage_table.Stage) -> list[str]:
    """The count of code files, the stage's own module first, a few with short digests."""
    module = COMMANDS[stage.command].module.partition(":")[0]
    own = (CODE_ROOT / Path(*module.split("."))).with_suffix(".py").as_posix()
    names = sorted(stamp.code, key=lambda name: (name != own, name))
    shown = [f"{name} {short(stamp.code[name])}" for name in names[:CODE_SHOWN]]
    more = [f"and {len(names) - CODE_SHOWN} more"] if len(names) > CODE_SHOWN else []
    return pack(shown + more, _label("code") + f"{len(names)} files: ")


def input_lines(stamp: Stamp, job: Job, checker: Checker) -> list[str]:
    """Each input the record lists, grouped by the output of the job upstream it belongs to."""
    lines: list[str] = []
    left = dict(stamp.inputs)
    for producer, read in job.producers(checker.params.variants):
        for name in (path.as_posix() for path in read):
            mine = {k: left.pop(k) for k in list(left) if k == name or k.startswith(name + "/")}
            head = _label("inputs", lines) + f"{name} ({producer.name}): "
            if list(mine) == [name]:
                lines.append(head + short(mine[name]))
            elif mine:
                items = [f"{k.removeprefix(name + '/')} {short(v)}" for k, v in mine.items()]
                lines += pack(items, head + f"{len(mine)} files: ")
    lines += [_label("inputs", lines) + f"{k} {short(v)}" for k, v in left.items()]
    return lines or [_label("inputs") + "none"]


def run_line(run: Execution | None) -> str:
    """Which tool ran the job, when, and for how long."""
    if run is None:
        return _label("ran by") + "not recorded (a record from before runs were kept)"
    try:
        start, end = datetime.fromisoformat(run.started), datetime.fromisoformat(run.ended)
    except ValueError:
        return _label("ran by") + f"{run.tool}, {run.started} to {run.ended}"
    return _label("ran by") + f"{run.tool}, {start:%Y-%m-%d %H:%M:%S} UTC, {(end - start).total_seconds():.1f} s"


def file_line(rel: PurePosixPath, job: Job, stamp: Stamp, checker: Checker) -> str:
    """Whether the file (or folder) named is as the record lists it."""
    name, path = rel.as_posix(), Path(rel)
    recorded = {k: v for k, v in stamp.outputs.items() if k == name or k.startswith(name + "/")}
    now = checker.hashes.tree([path]) if recorded else {}
    differ = sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))
    if path == job.stamp_path:
        return _label("file") + "the job's provenance record itself"
    if name in recorded:
        if name not in now:
            return _label("file") + f"missing; recorded sha256 {short(recorded[name])}"
        if not differ:
            return _label("file") + f"as recorded, sha256 {short(now[name])}"
        return (
            _label("file") + f"differs from its record: sha256 {short(now[name])} now, {short(recorded[name])} recorded"
        )
    if recorded:
        more = f" and {len(differ) - 1} more" if len(differ) > 1 else ""
        return _label("folder") + (
            f"differs from its record: {differ[0]}{more}" if differ else f"{len(recorded)} files, as recorded"
        )
    if path.exists():
        return _label("file") + f"not among the files '{job.name}' recorded; it did not write it"
    return _label("file") + f"missing, and '{job.name}' recorded no such file"


def unlisted(job: Job, checker: Checker) -> str | None:
    """The fix when the job's variant is not among the parameters' variants (no tool runs it), else None."""
    if job.variant is None or job.variant in checker.params.variants:
        return None
    return f"list '{job.variant}' in {checker.params_path}'s variants (no tool runs '{job.name}' until then)"


def current_lines(job: Job, checker: Checker) -> list[str]:
    """`yes`, or the first reason it is not (its own, else of a job upstream) and the command that fixes it."""
    listing = unlisted(job, checker)
    found, culprit = ([f"'{job.variant}' is not among {checker.params_path}'s variants"] if listing else []), job
    found = found or checker.problems(job)
    stale = [upstream for upstream in checker.ancestors(job) if checker.problems(upstream)] if not found else []
    if stale:
        found, culprit = checker.problems(stale[0]), stale[0]
    if not found:
        return [_label("current") + "yes"]
    where = "" if culprit == job else f"'{_job_name(culprit)}' upstream is not: "
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return [_label("current") + f"no: {where}{found[0]}{more}", _label("fix") + (listing or culprit.fix())]


def _job_name(job: Job) -> str:
    return console.job_label(job.stage.name, job.variant, job.root)


def not_recorded(rel: PurePosixPath, job: Job, why: str, make: str | None = None) -> list[str]:
    """The job has no record of its own: the path is not made yet, or not by it; the command that makes it."""
    there = Path(rel).exists() and Path(rel) != job.stamp_path
    state = "there, but not recorded as made by it" if there else "not made yet"
    if make is None:
        make = job.fix() if there or job.root != Path(".") else f"snakemake --cores all, or dvc repro {job.name}"
    return [str(rel), _label("made by") + f"{_job_name(job)}: {state} ({job.stamp_path}: {why})", _label("fix") + make]


def explain(path: str, params_path: str = "params.yaml") -> list[str]:
    """The lines that say where `path` came from and whether it is current."""
    rel = relative(path)
    if rel is None:
        raise PipelineError(
            f"{path}: not an output of any stage; it lies outside the project (run explain from the project root)"
        )
    job = find_job(rel)
    if job is None:
        raise PipelineError(
            f"{path}: not an output of any stage; name a file a stage writes (docs/architecture.md,"
            " 'Where everything lands'), a provenance record, or a sweep point's model or metrics"
        )
    point = job.root != Path(".")
    params_file = job.root / paths.POINT_PARAMS if point else Path(params_path)
    if point and not params_file.is_file():  # the point is not written yet (the project's own: load says so)
        return not_recorded(rel, job, f"no {params_file}")
    checker = Checker(load(params_file), str(params_file))
    stamp = checker.read(job)
    if stamp is None or stamp.stage != job.name:
        why = "not a record of this job" if job.stamp_path.exists() else "no such record"
        return not_recorded(rel, job, why, unlisted(job, checker))
    return [
        str(rel),
        _label("made by") + f"{_job_name(job)}, recorded in {job.stamp_path}",
        run_line(stamp.run),
        *params_lines(stamp, checker.made_from(job), str(params_file)),
        *code_lines(stamp, job.stage),
        *input_lines(stamp, job, checker),
        file_line(rel, job, stamp, checker),
        *current_lines(job, checker),
    ]


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline explain PATH`."""
    print("\n".join(explain(args.path, args.params)))
