"""A copy of the checkout as a clone would hold it: its tracked and unignored files, as they are in the
working tree. The benchmarks (bench_pipeline.py) and the tests (tests/workspace.py) copy it this way."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def copy_checkout(dest: Path, root: Path = ROOT) -> Path:
    """Copy `root`'s tracked and unignored files (links as links) into `dest`; return `dest`."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for rel in filter(None, files):
        src = root / rel
        if src.is_file() or src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel, follow_symlinks=False)
    return dest
