"""The committed baseline was made by the committed code: every dependency dvc.lock records that lives
in git (code, requirements/, params.yaml) is the file as it is. Fast, no data: `dvc status` in a copy of
the checkout (tracked and unignored files, as a fresh clone has them). When it fails, refresh the baseline
by a real run (docs/dvc.md: "The committed baseline")."""

from __future__ import annotations

import json
import subprocess

import yaml

from conftest import ROOT
from workspace import make_workspace, sh


def stage_outputs() -> set[str]:
    """Every path dvc.lock lists as a stage's output."""
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())
    return {out["path"] for entry in lock["stages"].values() for out in entry.get("outs", [])}


def made_by_stages(path: str, outputs: set[str]) -> bool:
    """An output, or a folder of outputs (`reports/profile`): as a dependency, missing in a fresh clone (the
    DVC-cached files are not in git), which `dvc status` calls changed; not a file in git."""
    return path in outputs or any(out.startswith(path + "/") for out in outputs)


def test_dvc_lock_records_the_committed_code_requirements_and_parameters(tmp_path):
    ws = make_workspace(tmp_path, "clone", fast=False)
    status = json.loads(sh(ws, "dvc", "status", "--json").strip().splitlines()[-1] or "{}")
    outputs = stage_outputs()
    changed = {}
    for stage, entries in status.items():
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            for path, how in entry.get("changed deps", {}).items():
                if not made_by_stages(path, outputs):
                    changed[f"{stage}: {path}"] = how
    assert not changed, (
        f"dvc.lock records other code, requirements or parameters than the checkout's: {changed};"
        " refresh the baseline by a real run (snakemake --cores all) and commit dvc.lock,"
        " metrics/ and plots/"
    )


def test_every_dependency_dvc_lock_names_is_tracked_or_an_output():
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())
    tracked = set(
        subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    )
    outputs = stage_outputs()
    for name, entry in lock["stages"].items():
        for dep in entry.get("deps", []):
            path = dep["path"]
            in_git = path in tracked or any(file.startswith(path + "/") for file in tracked)
            assert made_by_stages(path, outputs) or in_git, (name, path)
