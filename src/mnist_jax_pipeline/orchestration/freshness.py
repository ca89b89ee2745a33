"""Whether a job's outputs are current, by content, the same way for every tool: its record lists the
files at its outputs, and it was made from the params, code and inputs it would be made from now."""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artefacts.provenance import changed_files, ignored
from ..foundation import paths, variants
from ..foundation.errors import PipelineError
from .jobs import Job, Recorder


def _first_difference(old: Any, new: Any, key: str) -> str | None:
    """The dotted key of the first value that differs, with both values."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = (_first_difference(old.get(name), new.get(name), f"{key}.{name}") for name in sorted({*old, *new}))
        return next(filter(None, found), None)
    return f"{key}: {json.dumps(old)} in the record, {json.dumps(new)} now" if old != new else None


def _changed(first: Path, made: str, now: dict[str, str], recorded: dict[str, str]) -> list[str]:
    """One problem naming (three of) the files whose digests differ from the record's."""
    changed = changed_files(now, recorded)
    return [f"{first}: made {made} ({', '.join(changed[:3])}{' ...' * (len(changed) > 3)} changed)"] if changed else []


def read_whole(job: Job) -> set[Path]:
    """The folders DVC reads whole for the job: those of its per-variant inputs, unless it runs per variant."""
    return {job.root / Path(a.path).parent for a in job.stage.inputs if a.per_variant and not job.stage.per_variant}


@dataclass
class Checker(Recorder):
    """Checks jobs against the files as they are: why one is not current, and whether a stage may run."""

    _problems: dict[Job, list[str]] = field(default_factory=dict)

    def problems(self, job: Job) -> list[str]:
        """Why the job's outputs are not current, first things first; [] when they are."""
        if job in self._problems:
            return self._problems[job]
        record, first = job.read_record(), (job.outputs() or [job.record_path])[0]
        if record is None or record.stage != job.name:
            absent = [p for p in job.outputs() if not p.exists()]
            why = f"{absent[0]}: missing" if absent else f"{first}: not recorded as made by '{job.name}'"
            found = [f"{why} ({job.record_path}: {'not a record of it' if job.record_path.exists() else 'missing'})"]
        else:
            now, found = self.hashes.tree(job.outputs()), []
            for name in changed_files(now, record.outputs):
                if name not in now:
                    found.append(f"{name}: missing")
                elif name in record.outputs:
                    found.append(f"{name}: changed since '{job.name}' wrote it")
                else:
                    found.append(f"{name}: not written by '{job.name}'")
            for section, value in self.made_from(job).items():
                if differs := _first_difference(record.params.get(section), value, section):
                    found.append(f"{first}: made with {differs.replace(' now', ' in ' + self.params_path)}")
            found += _changed(first, "by other code", self.code(job.stage), record.code)
            found += _changed(first, "from other inputs", self.inputs(job), record.inputs)
            if read := read_whole(job):
                from ..artefacts.dropped import left

                for variant, files in left(self.params.variants, job.root).items():
                    if seen := [file for file in files if file.parent in read]:  # as DVC sees them
                        found.append(f"{seen[0]}: left by variant '{variant}', which {self.params_path} does not list")
            found += self.strays(job)
        self._problems[job] = found
        return found

    def strays(self, job: Job) -> list[str]:
        """What lies in a folder the job reads whole, as DVC does, that no variant's stage writes there."""
        made = {a.at(v, job.root) for a in paths.ARTEFACTS if a.per_variant for v in variants.names()}
        return [
            f"{file}: no stage's output, in {folder}/, which '{job.name}' reads whole under DVC; move it away"
            for folder in sorted(read_whole(job))
            for file in (sorted(folder.iterdir()) if folder.is_dir() else [])
            if file not in made and not ignored(file.name)
        ]

    def ancestors(self, job: Job) -> list[Job]:
        """Every job upstream of `job`, upstream first."""
        order: list[Job] = []
        for producer, _ in job.producers(self.params.variants):
            order += [j for j in [*self.ancestors(producer), producer] if j not in order]
        return order

    def check_inputs(self, job: Job) -> dict[str, str]:
        """The digests of the job's inputs, once every job upstream is current; else one line naming the file."""
        for upstream in self.ancestors(job):
            if found := self.problems(upstream):
                raise PipelineError(f"{found[0]}; {upstream.fix()}")
        if strays := self.strays(job):
            raise PipelineError(strays[0])
        return self.inputs(job)

    def stale(self, candidates: list[Job]) -> dict[Job, list[str]]:
        """{job: its problems} of the jobs that are not current."""
        self.hashes.prefetch([p for job in candidates if job.record_path.exists() for p in job.outputs()])
        return {job: found for job in candidates if (found := self.problems(job))}
