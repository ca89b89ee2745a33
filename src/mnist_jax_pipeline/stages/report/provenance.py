"""Where a report comes from (git commit, parameter digest, data checksums, versions, date), and this run
against the committed baseline: each variant's test accuracy and median epoch now and at git's HEAD."""

import fnmatch
import logging
import os
import platform
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from ...artefacts.dataset import Manifest
from ...artefacts.evaluation import EvalHeadline
from ...artefacts.training import TrainHeadline
from ...foundation import paths, versions
from ...foundation.runtime import runtime_lock_sha256
from .inputs import VariantResults

log = logging.getLogger(__name__)

# tracked files a run itself rewrites: dvc.lock, the committed baseline, the .gitignore files DVC writes
PIPELINE_WRITES = (
    "dvc.lock",
    f"{paths.PROVENANCE}/.gitignore",
    *(a.path.replace("{variant}", "*") for a in paths.ARTEFACTS if a.in_git),
    *(f"{Path(a.path).parent.as_posix()}/.gitignore" for a in paths.ARTEFACTS),
)


def git(*args: str) -> str | None:
    """Output of one git command in the current folder, or None (no git, no repository)."""
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def git_state() -> dict[str, Any]:
    """The commit checked out and the tracked files that differ from it, less those the pipeline itself rewrites
    (dvc.lock, the committed baseline's metrics)."""
    commit = (git("rev-parse", "HEAD") or "").strip()
    changed = git("diff", "HEAD", "--name-only", "-z") if commit else None
    if changed is None:
        return {"commit": "unknown", "modified": None}
    own = [f for f in changed.split("\0") if f and not any(fnmatch.fnmatchcase(f, p) for p in PIPELINE_WRITES)]
    return {"commit": commit, "modified": sorted(own)}


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
        "versions": {"python": platform.python_version(), **versions()},
        "runtime_lock_sha256": runtime_lock_sha256(),
        "date": generated_at(),
    }


class Committed(NamedTuple):
    """A variant's results now, and its headlines as git's HEAD holds them."""

    now: VariantResults
    commit: str  # short hash of the last commit that changed the variant's metrics
    train: TrainHeadline
    evaluation: EvalHeadline

    @property
    def epoch_change(self) -> float | None:
        """The median epoch's relative change since the commit (+0.1: a tenth longer)."""
        return self.now.train.epoch_seconds_median / self.train.epoch_s - 1 if self.train.epoch_s > 0 else None


def against_committed(results: tuple[VariantResults, ...]) -> Iterator[Committed]:
    """Every variant that HEAD holds metrics of in a format this version reads, now and then."""
    for v in results:
        files = [paths.TRAIN_HEADLINE.at(v.name).as_posix(), paths.EVAL_HEADLINE.at(v.name).as_posix()]
        train, evaluation = (git("show", f"HEAD:./{path}") for path in files)
        if train is None or evaluation is None:
            continue
        try:
            headlines = TrainHeadline.model_validate_json(train), EvalHeadline.model_validate_json(evaluation)
        except ValidationError:
            log.info("HEAD:%s or HEAD:%s is not in today's format: no comparison of %s", *files, v.name)
            continue
        commit = (git("log", "-1", "--format=%h", "HEAD", "--", *(f"./{path}" for path in files)) or "").strip()
        yield Committed(v, commit or "HEAD", *headlines)
