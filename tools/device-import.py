#!/usr/bin/env python3
"""Import a GPU run of record (tools/device-run.sh's output folder) into the repository.

    python tools/device-import.py RESULTS_DIR [--repo DIR] [--no-commit]

Copies its JSON files into benchmarks/results/ as <date>-<what>-<device slug>.json (the manifest as
`device-run`, bench_train.py's as `train`, bench_time_to_accuracy.py's as `time-to-accuracy`), writes
the README's "Verified on" row of the NVIDIA GPU from the manifest (device, date, what ran), and commits
exactly those files, the message naming the device and the date. A smoke run (--smoke) is refused: it
measures nothing. The tar.xz bundles stay where they are (logs, models, traces: too large for git).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from device_run import PARTS  # beside this script (tools/ is on sys.path when it runs)

# the docstring's first line, kept where python -OO drops docstrings
DESCRIPTION = "Import a GPU run of record (tools/device-run.sh's output folder) into the repository."
ROOT = Path(__file__).resolve().parents[1]
COPIED = {"manifest.json": "device-run", "bench-train.json": "train", "bench-time-to-accuracy.json": "time-to-accuracy"}
ROW_START = "| NVIDIA GPU"
SECTION = "## Verified on"


class UserError(Exception):
    """A one-line error the user can act on."""


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def device_name(manifest: dict[str, Any]) -> str:
    """The GPU's name: nvidia-smi's first line, else JAX's device kind."""
    device = manifest.get("device") or {}
    smi = device.get("nvidia_smi") or []
    name = smi[0].split(",")[0].strip() if smi else device.get("device_kind")
    if not name:
        raise UserError("manifest.json: names no device (no nvidia_smi, no device_kind); was the run cut short?")
    return name


def cut_short(step: dict[str, Any] | None) -> bool:
    """A step the run's time budget stopped or left out (no exit code, a note saying so)."""
    return step is not None and step.get("exit_code") is None and "time budget" in (step.get("note") or "")


def outcome(step: dict[str, Any] | None) -> str:
    if step is None:
        return "not in this run"
    if step.get("exit_code") == 0:
        return "ran"
    if cut_short(step):
        return (
            "not run (the time budget was spent)"
            if step.get("seconds") is None
            else "not finished within the time budget"
        )
    return "failed"


def split_failed(manifest: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The manifest's failed steps: those that failed, and those the time budget cut short."""
    steps = {s["name"]: s for s in manifest.get("steps", [])}
    names = manifest.get("failed") or []
    cut = [name for name in names if cut_short(steps.get(name))]
    return [name for name in names if name not in cut], cut


def parts_of(manifest: dict[str, Any]) -> list[str]:
    """The parts the run ran (`--only`); a manifest from before the option ran them all."""
    return manifest.get("parts") or list(PARTS)


def what_ran(manifest: dict[str, Any], copied: list[str]) -> str:
    """The row's "what ran" cell, from the steps and verdicts in the manifest."""
    steps = {s["name"]: s for s in manifest["steps"]}
    ok = lambda *names: all(steps.get(n, {}).get("exit_code") == 0 for n in names)  # noqa: E731
    stages = [f"{stage}-{v}" for stage in ("train", "evaluate", "profile") for v in ("nojit", "jit", "jit_scan")]
    parts = [
        f"`tools/device-run.sh`: the stages ({'all passed' if ok('preprocess', *stages, 'report') else 'not all'}:"
        " preprocess; train, evaluate, profile of nojit, jit, jit_scan; report)"
    ]
    parts.append("`bench_train.py` " + outcome(steps.get("bench-train")))
    parts.append("`bench_time_to_accuracy.py` " + outcome(steps.get("bench-time-to-accuracy")))
    counts = manifest.get("accelerator")
    if counts:
        parts.append(
            f"the accelerator tier: {counts['passed']} passed, {counts['failures'] + counts['errors']} failed,"
            f" {counts['skipped']} skipped"
        )
    same = (manifest.get("determinism") or {}).get("same")
    parts.append(
        {
            True: "jit trained twice: the same model bytes",
            False: "jit trained twice: **other model bytes**",
            None: "determinism not checked",
        }[same]
    )
    failed, cut = split_failed(manifest)
    if failed:
        parts.append(f"**failed: {', '.join(failed)}**")
    if cut:
        parts.append(f"not finished within the call's time budget: {', '.join(cut)}")
    return "; ".join(parts) + "; results: " + ", ".join(f"`benchmarks/results/{name}`" for name in copied)


def row(manifest: dict[str, Any], copied: list[str]) -> str:
    v = manifest.get("versions") or {}
    plugins = ", ".join(f"{name} {version}" for name, version in sorted((v.get("plugins") or {}).items()))
    software = ", ".join(
        filter(None, [f"jax {v.get('jax')}", f"jaxlib {v.get('jaxlib')}", plugins, f"Python {v.get('python')}"])
    )
    return (
        f"{ROW_START}: {device_name(manifest)} (the GPU image's {software}; not the lock's versions) |"
        f" {manifest['date']} | {what_ran(manifest, copied)} |"
    )


def update_readme(readme: Path, new_row: str) -> None:
    """Replace the NVIDIA GPU row of the "Verified on" table."""
    lines = readme.read_text(encoding="utf-8").splitlines(keepends=True)
    if not any(line.startswith(SECTION) for line in lines):
        raise UserError(f"{readme}: no '{SECTION}' section")
    start = next(i for i, line in enumerate(lines) if line.startswith(SECTION))
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("## "):
            break
        if lines[i].startswith(ROW_START):
            lines[i] = new_row + "\n"
            readme.write_text("".join(lines), encoding="utf-8")
            return
    raise UserError(f"{readme}: no '{ROW_START}' row under '{SECTION}'")


def git(repo: Path, *args: str) -> None:
    """Run git in `repo`, waiting for another process's index.lock to go."""
    for _ in range(60):
        done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
        if done.returncode == 0:
            return
        if "index.lock" not in done.stderr:
            said = done.stderr.strip().splitlines()
            raise UserError(f"git {args[0]}: {said[-1] if said else 'failed'}")
        time.sleep(2)
    raise UserError(f"git {args[0]}: {repo}/.git/index.lock stayed for 2 minutes; retry when the other git is done")


def import_results(results: Path, repo: Path, commit: bool) -> list[Path]:
    """Copy, update the README, commit; the files written."""
    try:
        manifest = json.loads((results / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError(f"{results / 'manifest.json'}: cannot read it ({err})") from err
    if manifest.get("smoke"):
        raise UserError(f"{results}: a --smoke run, not a run of record; run tools/device-run.sh without --smoke")
    name = device_name(manifest)
    date = manifest["date"]
    target_dir = repo / "benchmarks" / "results"
    parts = parts_of(manifest)
    partial = "" if list(parts) == list(PARTS) else "-only-" + "-".join(parts)
    copies: list[tuple[Path, Path]] = []
    for source_name, what in COPIED.items():
        source = results / source_name
        if source.is_file():
            what = what + partial if source_name == "manifest.json" else what
            target = target_dir / f"{date}-{what}-{slug(name)}.json"
            if target.exists() and target.read_bytes() != source.read_bytes():
                raise UserError(f"{target}: exists with other content; move it away to import this run")
            copies.append((source, target))
    readme = repo / "README.md"
    if "pipeline" in parts:  # the row says what a run of the stages showed; a partial run leaves it
        update_readme(readme, row(manifest, [target.name for _, target in copies]))
    for source, target in copies:
        shutil.copyfile(source, target)
    written = [target for _, target in copies] + ([readme] if "pipeline" in parts else [])
    if commit:
        names = [str(path.relative_to(repo)) for path in written]
        failed, cut = split_failed(manifest)
        said = [f"failed: {', '.join(failed)}"] if failed else []
        said += [f"cut by the time budget: {', '.join(cut)}"] if cut else []
        verdict = "; ".join(said) or "every step passed"
        git(repo, "add", "--", *names)
        git(
            repo,
            "commit",
            "-q",
            "-m",
            f"GPU run{' (' + ', '.join(parts) + ')' if partial else ' of record'} on {name} ({date}): {verdict}"
            + ("; README's Verified on row from its manifest" if "pipeline" in parts else ""),
            "--",
            *names,
        )
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("results", type=Path, help="tools/device-run.sh's output folder")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the repository (default: this checkout)")
    parser.add_argument("--no-commit", action="store_true", help="copy and update the README only")
    args = parser.parse_args(argv)
    try:
        written = import_results(args.results, args.repo.resolve(), not args.no_commit)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print("\n".join(str(path) for path in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
