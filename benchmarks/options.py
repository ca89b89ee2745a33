"""The benchmarks' options: counts, seconds and lists checked as argparse reads them, and an --output that
writes over no file the benchmark did not make."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path


def count(text: str) -> int:
    """`type=` of an option that counts (rounds, epochs, examples): a whole number, at least 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text}': give a whole number, at least 1")
    return int(text)


def _number(text: str, low: float, high: float, closed: bool, wanted: str) -> float:
    """A number from `low` to `high` (`closed`: both included; else neither), or argparse's refusal."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (low <= value <= high if closed else low < value < high):
        raise argparse.ArgumentTypeError(f"'{text}': give {wanted}")
    return value


def seconds(text: str) -> float:
    """`type=` of a time limit: a number of seconds above 0."""
    return _number(text, 0, math.inf, False, "a number of seconds above 0")


def accuracy(text: str) -> float:
    """`type=` of an accuracy to reach: a fraction from 0 (any) to 1 (0.985, not 98.5)."""
    return _number(text, 0, 1, True, "a fraction from 0 to 1, such as 0.985")


def numbers(text: str) -> str:
    """`type=` of a list of whole numbers separated by commas (seeds, rows), kept as given."""
    if not all(part.strip().isdigit() for part in text.split(",")):
        raise argparse.ArgumentTypeError(f"'{text}': give whole numbers separated by commas, such as 0,1,2")
    return text


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
