"""`mnist-pipeline crate [--out DIR] [--validate]`: write DIR/ro-crate-metadata.json, optionally validate it."""

import argparse
import json
import sys
from pathlib import Path

from ...artefacts import atomic
from ...artefacts.provenance import Hashes
from ...stages.report.provenance import git
from . import build, records

METADATA = "ro-crate-metadata.json"
GIT_USER = ("config", "--get-regexp", r"^user\.(name|email)$")  # each as `user.name Ada Lovelace`


def git_user() -> dict[str, str]:
    """`git config user.name` and `user.email` as git resolves them here; none without a user.name (an email
    alone names no one) or without git."""
    pairs = (line.partition(" ") for line in (git(*GIT_USER) or "").splitlines())
    found = {key.removeprefix("user."): value for key, _, value in pairs}  # the last one is git's choice
    return {key: value for key, value in found.items() if value} if found.get("name") else {}


def main(args: argparse.Namespace) -> None:
    out = Path(args.out)
    option = "--out" if out != Path(".") else ""  # at the default place, a file in the way is to be moved
    atomic.claim(out / METADATA, option=option, command="crate", signature=json.dumps(build.RUN_NAME))
    hashes = Hashes()
    jobs, warnings = records.recorded_jobs(hashes)
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    metadata = build.build(jobs, out, hashes, git_user())
    if args.validate:
        from .validate import validate  # roc-validator is slow to import: only when asked

        out.mkdir(parents=True, exist_ok=True)  # the validator reads the crate's files from its folder
        validate(metadata, out, out / METADATA)
    atomic.write_text(out / METADATA, json.dumps(metadata, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {out / METADATA}: {len(jobs)} jobs" + (f", {len(warnings)} warning(s) above" if warnings else ""))
