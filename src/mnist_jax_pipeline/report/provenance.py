"""Where a report comes from: git commit, parameter digest, data checksums, versions, date."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from typing import Any

from ..runtime import package_version

UNKNOWN = "unknown"
PACKAGES = ("jax", "jaxlib", "tensorflow-datasets", "dvc", "snakemake", "numpy", "matplotlib")
GIT_TIMEOUT_S = 10


def _git(*args: str) -> str | None:
    """Output of one git command in the current folder, or None (no git, no repository)."""
    try:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def git_state() -> dict[str, str]:
    """The commit checked out and whether any file (tracked or untracked, not ignored) differs."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return {"commit": UNKNOWN, "dirty": UNKNOWN}
    status = _git("status", "--porcelain")
    dirty = UNKNOWN if status is None else ("yes" if status else "no")
    return {"commit": commit, "dirty": dirty}


def versions() -> dict[str, str]:
    """Python and the pipeline's key packages, read from installed metadata (nothing imported)."""
    found = {"python": platform.python_version()}
    found.update({name: package_version(name) or "not installed" for name in PACKAGES})
    return found


def generated_at() -> str:
    """UTC ISO date of this report; SOURCE_DATE_EPOCH pins it for reproducible builds."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = (
        datetime.fromtimestamp(int(epoch), UTC) if epoch and epoch.isdigit() else datetime.now(UTC)
    )
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def collect(params_digest: str, params_path: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """Everything the provenance section and the summary's last line show."""
    files = manifest.get("files")
    files = files if isinstance(files, dict) else {}
    return {
        **git_state(),
        "params_sha256": params_digest,
        "params_path": params_path,
        "data_checksums": {
            name: str(entry.get("sha256", UNKNOWN))
            for name, entry in sorted(files.items())
            if isinstance(entry, dict)
        },
        "versions": versions(),
        "date": generated_at(),
    }
