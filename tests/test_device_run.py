"""The GPU run of record's scripts: tools/device-prepare.sh, tools/device-run.sh and tools/device-import.py.

The run is checked end to end on the CPU (JAX_PLATFORMS=cpu, --smoke's tiny settings) in what a device
call gets: a copy of the working tree with .device/ filled by the prepare script (the carried wheels
from the package index, tiny synthetic data/raw with its download record), run by a Python 3.12 that
holds only the GPU image's packages at its versions. The import is checked on a fabricated results
folder in a throwaway git repository.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, compiling_afresh, write_raw
from pythons import find_python, make_venv
from workspace import copy_checkout

sys.path.insert(0, str(ROOT / "tools"))
import device_run as device_script  # noqa: E402  (tools/ is no package)

# the GPU image's packages that the stages, the benchmarks and the tests use (its jax: CPU build here)
IMAGE_PACKAGES = [
    "jax==0.11.2",
    "jaxlib==0.11.2",
    "numpy==2.5.2",
    "optax",
    "safetensors",
    "jinja2",
    "matplotlib",
    "pandas",
    "pyyaml",
    "filelock",
    "psutil",
    "tqdm",
    "pytest",
    "pytest-xdist",
    "hypothesis",
]
STEPS = [
    "venv",
    "wheels",
    "unpack",
    "params",
    "raw-record",
    "environment",
    "preprocess",
    *[f"{stage}-{v}" for stage in ("train", "evaluate", "profile") for v in ("nojit", "jit", "jit_scan")],
    "report",
    "determinism-train-jit",
    "accelerator-tier",
    "bench-train",
    "bench-time-to-accuracy",
]
OUT_FILES = {
    "manifest.json",
    "bench-train.json",
    "bench-time-to-accuracy.json",
    "results.tar.xz",
    "models.tar.xz",
    "profile.tar.xz",
}


def copy_working_tree(dest: Path) -> Path:
    """What a device call carries of the checkout: tracked files and untracked ones git does not ignore."""
    return copy_checkout(dest, ROOT)


@pytest.fixture(scope="module")
def device_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """tools/device-run.sh --smoke, run as the device would: its output folder and the process."""
    base = tmp_path_factory.mktemp("device")
    checkout = copy_working_tree(base / "checkout")
    project = base / "project"  # where the download stage ran: here, the tiny data and its record
    project.mkdir()
    for name in ("src", "requirements"):
        (project / name).symlink_to(checkout / name)
    write_raw(project / "data" / "raw", 600, 200)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    prepared = subprocess.run(
        ["bash", "tools/device-prepare.sh", "--from", str(project)],
        cwd=checkout,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path, "PYTHONPATH": str(checkout / "src")},
    )
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    image = make_venv(base / "image", find_python("3.12"), *IMAGE_PACKAGES, seed=True, byte_code=True)  # as an image
    out = base / "out"
    env = compiling_afresh(  # the run of record reports compile times: XLA compiles afresh
        {**os.environ, "PATH": os.pathsep.join([str(image.parent), os.environ.get("PATH", "")]), "JAX_PLATFORMS": "cpu"}
    )
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        ["bash", "tools/device-run.sh", str(out), "--smoke"],
        cwd=checkout,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    return out, done


def members(archive: Path) -> set[str]:
    with tarfile.open(archive) as tar:
        return set(tar.getnames())


@pytest.mark.slow
def test_device_run_writes_every_promised_result(device_run):
    out, done = device_run
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert {p.name for p in out.iterdir()} == OUT_FILES
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["name"] for s in manifest["steps"]] == STEPS
    assert all(s["exit_code"] == 0 and s["seconds"] >= 0 and s["command"] for s in manifest["steps"]), manifest["steps"]
    assert manifest["ok"] and not manifest["failed"] and manifest["smoke"]
    assert manifest["determinism"]["same"] is True and manifest["determinism"]["first_sha256"]
    versions, device = manifest["versions"], manifest["device"]
    assert versions["python"].startswith("3.12.") and versions["jax"] == "0.11.2" and versions["jaxlib"] == "0.11.2"
    assert versions["numpy"] == "2.5.2" and "plugins" in versions
    assert device["backend"] == "cpu" and device["jax_devices"] and device["cpu_model"]
    assert manifest["raw_record"]["status"] == "current"
    assert manifest["params"]["variants"] == ["nojit", "jit", "jit_scan"]
    assert manifest["accelerator"]["tests"] >= 1 and manifest["accelerator"]["failures"] == 0
    assert manifest["prepared"]["wheels"] and manifest["date"] == manifest["started"][:10]
    preallocate = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    assert manifest["settings"] == {"XLA_PYTHON_CLIENT_PREALLOCATE": preallocate}
    assert all(not f.get("over_limit") for f in manifest["files"].values()) and set(manifest["files"]) == OUT_FILES
    train = json.loads((out / "bench-train.json").read_text())
    tta = json.loads((out / "bench-time-to-accuracy.json").read_text())
    assert train["versions"]["jax"] == "0.11.2" and train["backend"] == "cpu"
    assert tta["versions"]["jax"] == "0.11.2" and tta["seeds"] == 1
    results = members(out / "results.tar.xz")
    for name in (
        "reports/report.html",
        "reports/summary.md",
        "params.yaml",
        "accelerator.xml",
        "environment.json",
        "metrics/train/jit.json",
        "metrics/evaluate/jit_scan.json",
        "provenance/report.json",
        "provenance/download.json",
    ):
        assert name in results, name
    assert sum(name.startswith("logs/") for name in results) == len(STEPS)
    assert {
        "models/nojit.safetensors",
        "models/jit.safetensors",
        "models/jit_scan.safetensors",
        "determinism/jit-again.safetensors",
    } <= members(out / "models.tar.xz")
    assert any(name.startswith("reports/profile/jit_scan/") for name in members(out / "profile.tar.xz"))


def test_help_says_what_to_carry_and_how_to_call():
    done = subprocess.run(["bash", str(ROOT / "tools" / "device-run.sh"), "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for words in ("tools/device-prepare.sh", 'bash tools/device-run.sh "$OUT"', '[".device"]', "device-import.py"):
        assert words in done.stdout, words
    assert subprocess.run(["bash", str(ROOT / "tools" / "device-run.sh")], capture_output=True).returncode == 2
    ignored = subprocess.run(["git", "check-ignore", "-q", ".device/wheels/x.whl"], cwd=ROOT)
    assert ignored.returncode == 0, ".device/ must be git-ignored"


def fabricated(folder: Path, smoke: bool = False) -> Path:
    """A results folder as a GPU run would leave it (the figures made up)."""
    folder.mkdir()
    steps = [
        {"name": name, "command": name, "cwd": ".", "exit_code": 0, "seconds": 1.0, "log": None, "note": None}
        for name in STEPS
    ]
    manifest: dict[str, Any] = {
        "what": "GPU run of record (tools/device-run.sh)",
        "smoke": smoke,
        "date": "2026-12-01",
        "started": "2026-12-01T10:00:00Z",
        "versions": {
            "python": "3.12.3",
            "jax": "0.11.2",
            "jaxlib": "0.11.2",
            "numpy": "2.5.2",
            "plugins": {"jax-cuda13-plugin": "0.11.2"},
        },
        "device": {
            "backend": "gpu",
            "device_kind": "NVIDIA H100 80GB HBM3",
            "nvidia_smi": ["NVIDIA H100 80GB HBM3, 580.95.05, 81559 MiB"],
        },
        "steps": steps,
        "determinism": {"same": True},
        "failed": [],
        "ok": True,
        "accelerator": {"tests": 6, "passed": 6, "failures": 0, "errors": 0, "skipped": 0},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "bench-train.json").write_text('{"roofline_ratio": 1.5}')
    (folder / "bench-time-to-accuracy.json").write_text('{"passed": true}')
    (folder / "results.tar.xz").write_bytes(b"not copied")
    return folder


def test_import_copies_updates_the_readme_and_commits(tmp_path):
    repo = tmp_path / "repo"
    (repo / "benchmarks" / "results").mkdir(parents=True)
    shutil.copy2(ROOT / "README.md", repo / "README.md")
    (repo / "other.txt").write_text("left alone\n")
    git = lambda *args: subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)  # noqa: E731
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "start")
    git("add", "README.md", "other.txt")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "readme")
    (repo / "other.txt").write_text("changed, not committed\n")
    script = ROOT / "tools" / "device-import.py"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    smoke = subprocess.run(
        [sys.executable, script, fabricated(tmp_path / "smoke", smoke=True), "--repo", repo],
        capture_output=True,
        text=True,
        env=env,
    )
    assert smoke.returncode == 1 and smoke.stderr.startswith("error: ") and len(smoke.stderr.splitlines()) == 1

    done = subprocess.run(
        [sys.executable, script, fabricated(tmp_path / "gpu"), "--repo", repo], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    names = {
        "2026-12-01-device-run-nvidia-h100-80gb-hbm3.json",
        "2026-12-01-train-nvidia-h100-80gb-hbm3.json",
        "2026-12-01-time-to-accuracy-nvidia-h100-80gb-hbm3.json",
    }
    assert {p.name for p in (repo / "benchmarks" / "results").iterdir()} == names
    readme = (repo / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| NVIDIA GPU"))
    assert "NVIDIA H100 80GB HBM3" in row and "| 2026-12-01 |" in row and "jax-cuda13-plugin 0.11.2" in row
    assert "the same model bytes" in row and "6 passed" in row and "not verified" not in row
    assert readme.count("| NVIDIA GPU") == 1 and "| Cloud TPU" in readme
    log = git("log", "-1", "--name-only", "--format=%s").stdout
    assert "NVIDIA H100 80GB HBM3 (2026-12-01)" in log
    assert set(log.split()[-4:]) == {"README.md", *(f"benchmarks/results/{n}" for n in names)}
    assert git("status", "--porcelain").stdout.strip() == "M other.txt"


def test_import_tells_a_step_cut_by_the_budget_from_a_failure_and_a_partial_run_leaves_the_row(tmp_path):
    repo = tmp_path / "repo"
    (repo / "benchmarks" / "results").mkdir(parents=True)
    shutil.copy2(ROOT / "README.md", repo / "README.md")
    script = ROOT / "tools" / "device-import.py"
    cut = fabricated(tmp_path / "cut")
    manifest = json.loads((cut / "manifest.json").read_text())
    for step in manifest["steps"]:
        if step["name"] == "bench-train":
            step |= {"exit_code": None, "note": "stopped after 82 s: the time budget was spent"}
        if step["name"] == "accelerator-tier":
            step["exit_code"] = 1
    manifest["failed"] = ["accelerator-tier", "bench-train"]
    (cut / "manifest.json").write_text(json.dumps(manifest))
    (cut / "bench-train.json").unlink()
    done = subprocess.run([sys.executable, script, cut, "--repo", repo, "--no-commit"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    row = next(line for line in (repo / "README.md").read_text().splitlines() if line.startswith("| NVIDIA GPU"))
    assert "`bench_train.py` not finished within the time budget" in row
    assert "**failed: accelerator-tier**" in row and "within the call's time budget: bench-train" in row

    # a second call with --only benchmarks: its manifest under its own name; the README's row stays
    before = (repo / "README.md").read_text()
    second = fabricated(tmp_path / "second")
    manifest = json.loads((second / "manifest.json").read_text())
    manifest["parts"] = ["benchmarks"]
    (second / "manifest.json").write_text(json.dumps(manifest))
    done = subprocess.run(
        [sys.executable, script, second, "--repo", repo, "--no-commit"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert (repo / "README.md").read_text() == before
    names = {p.name for p in (repo / "benchmarks" / "results").iterdir()}
    assert "2026-12-01-device-run-only-benchmarks-nvidia-h100-80gb-hbm3.json" in names
    assert "2026-12-01-train-nvidia-h100-80gb-hbm3.json" in names


@pytest.mark.parametrize(
    ("only", "said"),
    [("benchmarks,pipeline", None), ("determinism", "add pipeline"), ("gpu", "'gpu': not a part"), (",", "not a part")],
)
def test_only_takes_known_parts_in_run_order(only, said):
    if said is None:
        assert device_script.parts(only) == ("pipeline", "benchmarks")
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=said):
            device_script.parts(only)


def test_prepare_finds_a_pip_and_a_failed_prepare_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    python, *rest = device_script.pip_command()  # a venv made by `uv sync` has no pip: its base interpreter's
    assert rest == ["-m", "pip"] and subprocess.run([python, "-c", "import pip"]).returncode == 0

    project = tmp_path / "project"
    project.mkdir()
    for name in ("src", "requirements"):
        (project / name).symlink_to(ROOT / name)
    write_raw(project / "data" / "raw", 60, 20)
    dest = tmp_path / ".device"
    dest.mkdir()
    (dest / "prepared.json").write_text('{"prepared": "earlier"}')
    (dest / "raw.tar.xz").write_bytes(b"the earlier data")
    monkeypatch.setattr(device_script, "pip_command", lambda: [sys.executable, "-c", "import sys; sys.exit(1)"])
    with pytest.raises(device_script.UserError, match="pip download of .* wheels failed"):
        device_script.prepare(dest, project)
    assert sorted(p.name for p in dest.iterdir()) == ["prepared.json", "raw.tar.xz"]
    assert (dest / "raw.tar.xz").read_bytes() == b"the earlier data"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []
