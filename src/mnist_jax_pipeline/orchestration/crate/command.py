"""`mnist-pipeline crate [--out DIR] [--validate]`: write DIR/ro-crate-metadata.json, optionally validate it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ...artefacts import atomic
from ...artefacts.provenance import Hashes
from ...foundation.errors import PipelineError
from . import build, records

METADATA = "ro-crate-metadata.json"


def main(args: argparse.Namespace) -> None:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise PipelineError(f"--out {out}: not a folder; name the folder to write {METADATA} in")
    atomic.claim(out / METADATA, option="--out", command="crate", signature=json.dumps(build.RUN_NAME))
    hashes = Hashes()
    jobs, warnings = records.recorded_jobs(hashes)
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    metadata = build.build(jobs, out, hashes, build.git_user())
    path = out / METADATA
    if args.validate:
        check(metadata, out, path)
    atomic.write_text(path, json.dumps(metadata, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {path}: {len(jobs)} jobs" + (f", {len(warnings)} records left out" if warnings else ""))


def check(metadata: dict[str, Any], out: Path, path: Path) -> None:
    """Validate offline: one line per REQUIRED issue, then one line of the counts (RECOMMENDED findings by kind);
    on a REQUIRED issue, fail (the crate is not written)."""
    from .validate import PROFILE, validate  # roc-validator is slow to import: only when asked

    outcome = validate(metadata, out)
    for line in outcome.required:
        print(f"REQUIRED: {line}")
    print(outcome.summary())
    if outcome.required:
        raise PipelineError(
            f"{path}: not written, it would not conform to {PROFILE} ({len(outcome.required)} REQUIRED"
            " issues above);"
            " report it as a bug of mnist-pipeline crate"
        )
