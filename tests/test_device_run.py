"""The run of record's tools: tools/device-prepare.sh, tools/device-run.sh and tools/device-import.py.

The run is checked end to end on the CPU (JAX_PLATFORMS=cpu, --smoke's tiny settings): an offline bundle
of tiny synthetic data and the wheels a Python 3.12 lacks, that Python holding only the packages a GPU
machine's image would (its jax a CPU build here). The steps' bookkeeping, the arguments, the bundle's
data check and the import are checked apart, in seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import runpy
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import psutil
import pytest

from conftest import ROOT, adopt, compiling_afresh, write_raw
from mnist_jax_pipeline.config.params import load
from pythons import find_python, make_venv

sys.path.insert(0, str(ROOT / "tools"))
import device_bundle  # noqa: E402  (tools/ is no package)
import device_run  # noqa: E402

# a GPU image's packages that the stages and the benchmarks use (its jax: the CPU build here)
IMAGE_PACKAGES = ["jax==0.11.2", "jaxlib==0.11.2", "numpy==2.5.2", "optax", "safetensors", "jinja2", "matplotlib"]
IMAGE_PACKAGES += ["pandas", "pyyaml", "filelock", "psutil", "tqdm"]
STEPS = [
    "wheels",
    "preprocess",
    *[f"{stage}-{v}" for stage in ("train", "evaluate", "profile") for v in ("nojit", "jit", "jit_scan")],
    "report",
    "determinism-train-jit",
    "bench-command-buffers",
    "bench-train",
    "bench-time-to-accuracy",
    "accelerator-tier",
]


def tiny_project(folder: Path) -> Path:
    """A folder where the download stage ran, on tiny synthetic data."""
    folder.mkdir()
    for name in ("src", "requirements"):
        (folder / name).symlink_to(ROOT / name)
    write_raw(folder / "data" / "raw", 600, 200)
    return folder


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A bundle for an image's Python 3.12, then tools/device-run.sh --smoke --accelerator with it: OUT and the
    process."""
    base = tmp_path_factory.mktemp("device")
    image = make_venv(base / "image", find_python("3.12"), *IMAGE_PACKAGES, seed=True, byte_code=True)
    freeze = base / "freeze.txt"
    freeze.write_text(subprocess.run([image, "-m", "pip", "freeze"], capture_output=True, text=True).stdout)
    prepare = ["--from", str(tiny_project(base / "project")), "--python-version", "3.12", "--installed", str(freeze)]
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "src")}
    prepared = subprocess.run(["bash", "tools/device-prepare.sh", str(base / "bundle"), *prepare], cwd=ROOT, env=env)
    assert prepared.returncode == 0
    env = compiling_afresh({**os.environ, "PYTHON": str(image), "JAX_PLATFORMS": "cpu"})  # compile times, afresh
    for name in ("PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(name, None)
    out = base / "out"
    command = ["bash", "tools/device-run.sh", str(out), "--bundle", str(base / "bundle"), "--smoke", "--accelerator"]
    return out, subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=900)


@pytest.mark.slow
def test_the_smoke_run_records_every_step_and_the_same_jit_bytes_twice(smoke_run):
    out, done = smoke_run
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert {p.name for p in out.iterdir()} == {"manifest.json", "results.tar.gz"} | {
        f"bench-{name}.json" for name in ("train", "time-to-accuracy", "command-buffers")
    }
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["name"] for s in manifest["steps"]] == STEPS
    assert all(s["exit_code"] == 0 and s["seconds"] >= 0 and s["command"] for s in manifest["steps"])
    assert manifest["ok"] and not manifest["failed"] and manifest["smoke"] and manifest["budget_seconds"] is None
    assert manifest["determinism"]["same"] is True and manifest["determinism"]["first_sha256"]
    assert manifest["versions"]["python"].startswith("3.12.") and manifest["versions"]["jax"] == "0.11.2"
    assert manifest["device"]["backend"] == "cpu" and manifest["device"]["jax_version"] == "0.11.2"
    assert "pydantic" in " ".join(manifest["bundle"]["wheels"]) and manifest["date"] == manifest["started"][:10]
    assert json.loads((out / "bench-train.json").read_text())["versions"]["jax"] == "0.11.2"
    with tarfile.open(out / "results.tar.gz") as tar:
        names = set(tar.getnames())
    assert sum(name.startswith("logs/") and name.endswith(".log") for name in names) == len(STEPS)
    for name in ("reports/report.html", "provenance/download.json", "provenance/report.json", "params.yaml"):
        assert name in names, name
    assert {f"models/{v}.safetensors" for v in ("nojit", "jit", "jit_scan")} <= names
    assert "determinism/jit-again.safetensors" in names and any(
        n.startswith("reports/profile/jit_scan/") for n in names
    )


def manifest_of(record: device_run.RunOfRecord) -> dict:
    shutil.rmtree(record.work)
    return json.loads((record.out / "manifest.json").read_text())


def test_a_failed_step_is_recorded_and_the_rest_still_run(tmp_path):
    record = device_run.RunOfRecord(tmp_path)
    record.step("fails", [sys.executable, "-c", "import sys; print('said'); sys.exit(3)"], tmp_path)
    record.step("missing", [str(tmp_path / "no-such-program")], tmp_path)
    record.step("passes", [sys.executable, "-c", "pass"], tmp_path)
    assert (record.work / "logs" / "01-fails.log").read_text() == "said\n"
    manifest = manifest_of(record)
    assert [(s["name"], s["exit_code"]) for s in manifest["steps"]] == [("fails", 3), ("missing", None), ("passes", 0)]
    assert manifest["steps"][1]["note"].startswith("could not start")
    assert manifest["failed"] == ["fails", "missing"] and manifest["ok"] is False


def test_a_step_that_needs_a_failed_step_is_not_run(tmp_path):
    record = device_run.RunOfRecord(tmp_path)
    record.step("download", [sys.executable, "-c", "import sys; sys.exit(1)"], tmp_path)
    record.step("preprocess", [sys.executable, "-c", "pass"], tmp_path, needs="download")
    record.step("benchmark", [sys.executable, "-c", "pass"], tmp_path, needs="")
    download, preprocess, benchmark = manifest_of(record)["steps"]
    assert preprocess["exit_code"] is None and preprocess["note"] == "not run: download failed"
    assert benchmark["exit_code"] == 0


def test_the_budget_stops_the_step_it_runs_out_in_and_the_later_ones_are_not_run(tmp_path):
    record = device_run.RunOfRecord(tmp_path, budget=device_run.BUNDLE_RESERVE_S + 3)
    started = time.monotonic()
    record.step("slow", ["bash", "-c", "sleep 60 & sleep 60"], tmp_path)  # a child of its own: stopped too
    record.step("later", [sys.executable, "-c", "pass"], tmp_path)
    assert time.monotonic() - started < 20
    slow, later = manifest_of(record)["steps"]
    assert slow["exit_code"] is None and re.match(r"stopped after \d+ s", slow["note"]) and slow["seconds"] < 10
    assert later["exit_code"] is None and later["seconds"] is None and later["note"].startswith("not run")


STOPPED_RUN = """
import sys
sys.path.insert(0, sys.argv[1])
import device_run

def setup(record):
    print(record.work, flush=True)
    pids = sys.argv[3]
    record.step("slow", ["bash", "-c", f"echo $$ > {pids}; sleep 60 & echo $! >> {pids}; wait"], record.work)

device_run.RunOfRecord.setup = setup
sys.exit(device_run.main([sys.argv[2]]))
"""


def test_a_stopped_run_stops_its_running_step_and_removes_its_work_folder(tmp_path):
    """A step runs in a session of its own, which a stop of the run does not reach: the run stops it."""
    out, pids = tmp_path / "out", tmp_path / "pids"
    command = [sys.executable, "-c", STOPPED_RUN, str(ROOT / "tools"), str(out), str(pids)]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    work = Path(run.stdout.readline().strip())
    while not pids.exists() or len(pids.read_text().split()) < 2:
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=30) == 130
    assert run.stderr.read().splitlines() == [f"error: stopped; {out / 'manifest.json'} says how far the run got"]
    for pid in map(int, pids.read_text().split()):  # gone, or a zombie its new parent has yet to reap
        with contextlib.suppress(psutil.NoSuchProcess):
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not work.exists()
    assert json.loads((out / "manifest.json").read_text())["steps"][0]["note"] == "stopped: the run was stopped"


@pytest.mark.parametrize(
    "command",
    [
        ["tools/device-run.sh"],
        ["tools/device-run.sh", "out", "--budget", "soon"],
        ["tools/device-run.sh", "out", "--budget", "0"],
        ["tools/device-run.sh", "out", "--budget", "inf"],
        ["tools/device-run.sh", "out", "--only", "benchmarks"],
        ["tools/device-prepare.sh", "bundle", "--python-version", "twelve"],
        ["tools/device-import.py"],
    ],
)
def test_a_bad_argument_is_one_line(command):
    run = [sys.executable] if command[0].endswith(".py") else ["bash"]
    done = subprocess.run(
        [*run, *command], cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable}
    )
    assert done.returncode == 2 and done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1, (
        done.stderr
    )


@pytest.mark.parametrize("out", ["README.md", "README.md/out"])
def test_an_out_that_is_a_file_or_under_one_is_one_line(out):
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", "tools/device-run.sh", out], cwd=ROOT, capture_output=True, text=True, env=env)
    assert done.returncode == 1 and done.stderr.startswith(f"error: {ROOT / out}: "), done.stderr
    assert len(done.stderr.splitlines()) == 1 and (ROOT / "README.md").is_file()


def test_the_help_says_how_to_prepare_run_and_import():
    done = subprocess.run(["bash", "tools/device-run.sh", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0
    for words in ("tools/device-prepare.sh", "--bundle", "--budget", "--accelerator", "tools/device-import.py"):
        assert words in done.stdout, words


def test_prepare_refuses_a_data_raw_that_is_not_the_download_stages_output(tmp_path):
    project = tiny_project(tmp_path / "project")
    with (project / "data" / "raw" / "manifest.json").open("a") as changed:
        changed.write("\n")
    with pytest.raises(device_run.UserError, match="run `mnist-pipeline download` there again"):
        device_bundle.prepare(tmp_path / "bundle", project, "3.12", "manylinux2014_x86_64", None)
    assert not (tmp_path / "bundle").exists()


def test_prepare_writes_over_no_file_it_did_not_make(tmp_path):
    """A bundle folder may be new, empty or a bundle: a file of the user's in it, or a file in its place, is kept."""
    project = tiny_project(tmp_path / "project")
    adopt(project, params=load(ROOT / "params.yaml"))
    bundle, a_file = tmp_path / "bundle", tmp_path / "a-file"
    bundle.mkdir()
    (bundle / "bundle.json").write_text("{}\n")
    (bundle / "notes.txt").write_text("mine\n")
    a_file.write_text("mine\n")
    for dest in (bundle, a_file):
        with pytest.raises(device_run.UserError, match="a file, or a folder with files this script did not write"):
            device_bundle.prepare(dest, project, "3.12", "manylinux2014_x86_64", None)
    assert (bundle / "notes.txt").read_text() == "mine\n" and a_file.read_text() == "mine\n"
    with pytest.raises(device_run.UserError, match=r"--installed .*gone.txt: cannot read it"):
        device_bundle.prepare(tmp_path / "new", project, "3.12", "manylinux2014_x86_64", tmp_path / "gone.txt")


def test_import_files_a_run_under_its_date_and_device(tmp_path):
    importer = [sys.executable, str(ROOT / "tools" / "device-import.py")]
    out, results = tmp_path / "out", tmp_path / "results"
    out.mkdir()
    results.mkdir()
    manifest = {
        "smoke": True,
        "date": "2026-12-01",
        "device": {"nvidia_smi": ["NVIDIA H100 80GB HBM3, 580, 81559 MiB"]},
    }
    (out / "manifest.json").write_text(json.dumps(manifest))
    smoke = subprocess.run([*importer, str(out)], capture_output=True, text=True)
    assert smoke.returncode == 1 and smoke.stderr.startswith("error: ") and len(smoke.stderr.splitlines()) == 1
    (out / "manifest.json").write_text(json.dumps(manifest | {"smoke": False}))
    (out / "bench-train.json").write_text("{}")
    assert device_run_import(out, results) == [
        "2026-12-01-device-run-nvidia-h100-80gb-hbm3.json",
        "2026-12-01-train-nvidia-h100-80gb-hbm3.json",
    ]
    assert (
        device_run_import(out, results)[0] == "2026-12-01-device-run-nvidia-h100-80gb-hbm3.json"
    )  # the same run again
    (out / "bench-train.json").write_text('{"another": "run"}')
    assert device_run_import(out, results)[1] == "2026-12-01-train-2-nvidia-h100-80gb-hbm3.json"


@pytest.mark.parametrize("manifest", ["[]", "{}", '{"date": "x/y"}', '{"date": "2026"}'])
def test_import_refuses_what_is_not_a_runs_manifest_and_files_nothing(tmp_path, manifest):
    out, results = tmp_path / "out", tmp_path / "results"
    out.mkdir()
    results.mkdir()
    (out / "manifest.json").write_text(manifest)
    with pytest.raises(device_run.UserError, match="not a run's manifest"):
        runpy.run_path(str(ROOT / "tools" / "device-import.py"))["file_results"](out, results)
    assert not any(results.iterdir())


def device_run_import(out: Path, results: Path) -> list[str]:
    """tools/device-import.py's file_results(out, results): the names of the files it wrote."""
    file_results = runpy.run_path(str(ROOT / "tools" / "device-import.py"))["file_results"]
    return [path.name for path in file_results(out, results)]
