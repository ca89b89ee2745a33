"""Where a report comes from (git commit, parameter digest, data checksums, versions, date), and this run
against the committed baseline: each variant's test accuracy and median epoch now and at git's HEAD."""

from __future__ import annotations

import fnmatch
import logging
import os
import platform
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from ...artefacts.dataset import Manifest
from ...artefacts.evaluation import EvalHeadline
from ...artefacts.training import TrainHeadline
from ...foundation import paths
from ...foundation.paths import PIPELINE_WRITES
from ...foundation.runtime import package_version, runtime_lock_sha256
from .inputs import VariantResults

log = logging.getLogger(__name__)

UNKNOWN = "unknown"
PACKAGES = ("jax", "jaxlib", "tensorflow-datasets", "dvc", "snakemake", "numpy", "matplotlib")
GIT_TIMEOUT_S = 10


def git(*args: str) -> str | None:
    """Output of one git command in the current folder, or None (no git, no repository)."""
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


def modified_files(porcelain: str) -> list[str]:
    """Paths in `git status --porcelain=v1 -z` output, less the files the pipeline itself rewrites."""
    entries = porcelain.split("\0")
    found, skip = [], False
    for entry in entries:
        if skip or not entry:  # the second path of a rename or copy, or the end
            skip = False
            continue
        status, path = entry[:2], entry[3:]
        skip = "R" in status or "C" in status
        if not any(fnmatch.fnmatchcase(path, pattern) for pattern in PIPELINE_WRITES):
            found.append(path)
    return sorted(found)


def git_state() -> dict[str, Any]:
    """The commit checked out and the tracked files that differ from it (not dvc.lock: runs rewrite it)."""
    commit = (git("rev-parse", "HEAD") or "").strip()
    status = git("status", "--porcelain=v1", "-z", "--untracked-files=no") if commit else None
    if not commit or status is None:
        return {"commit": UNKNOWN, "modified": None}
    return {"commit": commit, "modified": modified_files(status)}


def versions() -> dict[str, str]:
    """Python and the pipeline's key packages, read from installed metadata (nothing imported)."""
    found = {"python": platform.python_version()}
    found.update({name: package_version(name) or "not installed" for name in PACKAGES})
    return found


def generated_at() -> str:
    """UTC ISO date of this report; SOURCE_DATE_EPOCH pins it for reproducible builds."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = datetime.fromtimestamp(int(epoch), UTC) if epoch and epoch.isdigit() else datetime.now(UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def collect(params_digest: str, params_path: str, manifest: Manifest) -> dict[str, Any]:
    """Everything the provenance section and the summary's last line show."""
    return {
        **git_state(),
        "params_sha256": params_digest,
        "params_path": params_path,
        "data_checksums": {name: entry.sha256 for name, entry in sorted(manifest.files.items())},
        "versions": versions(),
        "runtime_lock_sha256": runtime_lock_sha256(),
        "date": generated_at(),
    }


@dataclass(frozen=True)
class CommittedRow:
    """One variant now and in the committed baseline."""

    name: str
    commit: str  # short hash of the last commit that changed the variant's metrics
    test_accuracy: float
    committed_test_accuracy: float
    epoch_seconds: float  # the median epoch after the first
    committed_epoch_seconds: float

    @property
    def epoch_change(self) -> float | None:
        """The median epoch's relative change since the commit (+0.1: a tenth longer)."""
        if self.committed_epoch_seconds <= 0:
            return None
        return self.epoch_seconds / self.committed_epoch_seconds - 1


def _committed(path: str) -> str | None:
    """The text of `path` (relative to the current folder) at HEAD, or None where git has none."""
    return git("show", f"HEAD:./{path}")


def compare_variant(v: VariantResults) -> CommittedRow | None:
    """The variant now and at HEAD; None when HEAD has no metrics of it (or none this version reads)."""
    train_path, eval_path = paths.TRAIN_HEADLINE.at(v.name).as_posix(), paths.EVAL_HEADLINE.at(v.name).as_posix()
    train_text, eval_text = _committed(train_path), _committed(eval_path)
    if train_text is None or eval_text is None:
        return None
    try:
        train, evaluation = TrainHeadline.model_validate_json(train_text), EvalHeadline.model_validate_json(eval_text)
    except ValidationError:
        log.info("HEAD:%s or HEAD:%s is not in today's format: no comparison of %s", train_path, eval_path, v.name)
        return None
    commit = (git("log", "-1", "--format=%h", "HEAD", "--", f"./{train_path}", f"./{eval_path}") or "").strip()
    return CommittedRow(
        name=v.name,
        commit=commit or "HEAD",
        test_accuracy=v.evaluation.test_accuracy,
        committed_test_accuracy=evaluation.test_accuracy,
        epoch_seconds=v.train.epoch_seconds_median,
        committed_epoch_seconds=train.epoch_s,
    )


def against_committed(results: tuple[VariantResults, ...]) -> list[CommittedRow]:
    """Every variant that HEAD holds metrics of, now and then."""
    return [row for v in results if (row := compare_variant(v)) is not None]
