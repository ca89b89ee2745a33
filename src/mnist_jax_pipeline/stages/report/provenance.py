"""Where a report comes from: git commit, parameter digest, data checksums, versions, date."""

from __future__ import annotations

import fnmatch
import os
import platform
import subprocess
from datetime import UTC, datetime
from typing import Any

from ...artefacts.dataset import Manifest
from ...foundation.paths import PIPELINE_WRITES
from ...foundation.runtime import package_version, runtime_lock_sha256

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
