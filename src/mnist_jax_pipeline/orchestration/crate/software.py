"""The software of a run, as its records name it: the project's version, the packages the stages ran, the
tools that ran them, and the project's license."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import metadata

from .records import RecordedJob

PROJECT = "mnist-jax-pipeline"  # the project's distribution, as the records' `versions` name it
ENGINES = {"snakemake": "Snakemake", "dvc": "DVC"}  # the tools a record's `run.tool` names: package, name
BY_HAND = "mnist-pipeline"  # the `run.tool` of a job run by hand
NOT_INSTALLED = "not installed"  # a record's version of a package it could not find
PYPI = "https://pypi.org/project/{}/{}/"  # a release's page: the @id and url of a package at a version


def version(jobs: Iterable[RecordedJob], package: str) -> str | None:
    """The version of `package` the jobs recorded, when they agree on one."""
    found = {job.record.versions.get(package) for job in jobs} - {None, NOT_INSTALLED}
    return found.pop() if len(found) == 1 else None


def requirements(jobs: Iterable[RecordedJob]) -> list[tuple[str, str]]:
    """(package, version) of what the jobs' stage needs: what they recorded, less the project and its tools."""
    return sorted(
        {
            (name, release)
            for job in jobs
            for name, release in job.record.versions.items()
            if name != PROJECT and name not in ENGINES and release != NOT_INSTALLED
        }
    )


def license_expression() -> str | None:
    """The project's license as its package metadata states it (pyproject.toml's SPDX expression)."""
    try:
        found = metadata.metadata(PROJECT).json.get("license_expression")
    except metadata.PackageNotFoundError:
        return None
    return found if isinstance(found, str) else None
