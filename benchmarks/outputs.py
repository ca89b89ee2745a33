"""A benchmark writes its --output only where the file is new or one it wrote before."""

from __future__ import annotations

import sys
from pathlib import Path


def refuse_foreign(path: Path | None, signature: str, option: str = "--output") -> None:
    """Exit with one line, before any work, where `path` is there and is not a file that holds `signature` (the
    mark of what this benchmark writes): a folder, a pipe, a user's file, a tracked README."""
    if path is None or not (path.exists() or path.is_symlink()):
        return
    try:
        ours = path.is_file() and signature in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        ours = False
    if not ours:
        sys.exit(f"error: {option} {path}: not a file this benchmark wrote; choose another path")
