"""Who ran the workflow, as git knows them in the project: `git config user.name` and `user.email`."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

GIT_TIMEOUT_S = 10


@dataclass(frozen=True)
class GitUser:
    name: str
    email: str | None


def _config(key: str) -> str | None:
    """One git setting as git resolves it in the current folder; None when unset or without git."""
    try:
        done = subprocess.run(["git", "config", "--get", key], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def git_user() -> GitUser | None:
    """The configured git user; None without a user.name (an email alone names no one)."""
    name = _config("user.name")
    return GitUser(name, _config("user.email")) if name else None
