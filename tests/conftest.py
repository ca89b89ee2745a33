"""Shared fixtures: tiny datasets made on the fly, the real-data mirror, a params factory."""

from __future__ import annotations

import copy
import os
import shutil
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import filelock
import numpy as np
import pytest
import yaml

from mnist_jax_pipeline.artefacts import storage
from mnist_jax_pipeline.config.params import Params, read_yaml, validate

ROOT = Path(__file__).resolve().parents[1]
MIRROR = os.environ.get("MNIST_MIRROR") or None
IN_CI = os.environ.get("CI") == "true"


# The longest test files, longest first (seconds of one worker's time, a full run's junit report, 2026-11-25):
# pytest-xdist hands out whole files in collection order (`--no-loadscope-reorder`), so the long ones
# start first and the short ones fill in at the end, instead of one long file running alone last.
# The first two need no folder of another's (conftest.shared): while test_baseline.py makes the real
# download (workspace.downloaded), the other worker runs test_device_run.py instead of waiting for it.
LONGEST_FIRST = (
    "test_baseline.py",  # 393: makes workspace.downloaded, then the full real `dvc repro`
    "test_device_run.py",  # 179 (before its venv had byte code): needs no shared folder
    "test_sequences.py",  # 611: makes workspace.small_snakemake_run
    "test_pipeline_e2e.py",  # 296: makes workspace.fast_dvc_run
    "test_content.py",  # 271: reads small_snakemake_run
    "test_dvc_commit.py",  # reads small_snakemake_run
    "test_benchmarks.py",  # 263
    "test_sweeps.py",  # 227
    "test_faults.py",  # 188
    "test_agreement.py",  # 182
    "test_adding.py",  # 157
    "test_views.py",  # 119
    "test_loops.py",  # 116
    "test_download.py",  # 113
    "test_report_inputs.py",  # 104
    "test_edges.py",  # 98
    "test_snakemake_cache.py",  # 92
    "test_snakemake_console.py",  # 86
    "test_explain.py",  # 77
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A real-data test is a slow one too: the real download alone takes tens of seconds, so the fast
    tier (`-m 'not slow'`) is the same with or without MNIST_MIRROR. The longest files go first."""
    for item in items:
        if item.get_closest_marker("real_data") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


def unavailable(reason: str) -> NoReturn:
    """Skip a test this machine cannot run; under CI=true fail instead, so CI cannot pass with it skipped."""
    if IN_CI:
        pytest.fail(f"CI=true and this test cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def jax_starts(platform: str) -> bool:
    """Whether JAX starts a backend on this machine under JAX_PLATFORMS=`platform`."""
    env = {**os.environ, "JAX_PLATFORMS": platform}
    probe = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], env=env, capture_output=True)
    return probe.returncode == 0


def without_root_powers() -> list[str]:
    """A prefix that makes permission bits apply, to root too (drops CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH from the command's capabilities)."""
    if os.geteuid() != 0:
        return []
    if not (Path("/usr/bin/setpriv").exists() or Path("/bin/setpriv").exists()):
        unavailable("setpriv (util-linux) is needed to test file permissions as root")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


def mirror_dir() -> Path:
    """The real MNIST files (MNIST_MIRROR). Unset: the test cannot run here. Set but missing: an error."""
    if MIRROR is None:
        unavailable("needs the real MNIST files: set MNIST_MIRROR to a folder with the four .gz files")
    if not Path(MIRROR).is_dir():
        pytest.fail(f"MNIST_MIRROR={MIRROR}: not a folder; point it at the four .gz files or unset it", pytrace=False)
    return Path(MIRROR)


@pytest.fixture(autouse=True, scope="session")
def terminal_signals():
    """The commands the tests start and stop get SIGHUP and SIGINT at their defaults, as from a terminal, also where
    the tests run under nohup or in a background job: starting a command keeps SIG_IGN but resets a Python handler."""
    for stop in (signal.SIGHUP, signal.SIGINT):
        if signal.getsignal(stop) == signal.SIG_IGN:
            signal.signal(stop, lambda *_: None)


@pytest.fixture(autouse=True, scope="session")
def own_exclusive_lock(tmp_path_factory):
    """Stages run in tests take a lock of their own, not the checkout's (a pipeline may be running)."""
    os.environ["MNIST_PIPELINE_LOCK"] = str(tmp_path_factory.mktemp("lock") / "exclusive.lock")


# JAX's persistent compilation cache, shared by every process the test session starts: the stages in the
# tests' workspaces compile the same small programs again and again (a tiny run's stages spent about a
# third of their time in XLA's compiler). Every entry is kept (no minimum compile time or size), and a
# maximum size turns on the cache's file lock, so one worker never reads an entry another is writing.
# The pipeline itself never sets it: its stages report compile times, which a cache would hide.
def compilation_cache(folder: Path) -> dict[str, str]:
    """The environment that gives a process JAX's compilation cache in `folder`."""
    return {
        "JAX_COMPILATION_CACHE_DIR": str(folder),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1",
        "JAX_COMPILATION_CACHE_MAX_SIZE": str(8 * 2**30),
    }


@pytest.fixture(autouse=True, scope="session")
def shared_compilation_cache(tmp_path_factory):
    """The session's JAX compilation cache, in the folder the workers share."""
    os.environ.update(compilation_cache(session_folder(tmp_path_factory) / "jax-compilation-cache"))


def compiling_afresh(env: dict[str, str]) -> dict[str, str]:
    """`env` without the session's compilation cache: for runs whose point is XLA's own compile."""
    settings = compilation_cache(Path())
    return {key: value for key, value in env.items() if key not in settings}


def base_params() -> dict[str, Any]:
    """The repository's params.yaml as a dict."""
    return read_yaml(ROOT / "params.yaml")


@pytest.fixture
def make_params():
    """Build validated Params from params.yaml with dotted-key overrides."""

    def make(**overrides: Any) -> Params:
        raw = copy.deepcopy(base_params())
        for dotted, value in overrides.items():
            node = raw
            *parents, last = dotted.split("__")
            for part in parents:
                node = node[part]
            node[last] = value
        return validate(raw)

    return make


def synthetic_digits(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Learnable fake digits: each class lights a different band of rows, plus noise."""
    rng = np.random.default_rng(seed)
    labels = (np.arange(count) % 10).astype(np.uint8)
    rng.shuffle(labels)
    images = rng.integers(0, 60, size=(count, 28, 28)).astype(np.uint8)
    for i, label in enumerate(labels):
        images[i, 2 * label + 4 : 2 * label + 7, 4:24] = 250
    return images, labels


MNIST_FILES = [
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
]


def write_raw(raw_dir: Path, train: int = 600, test: int = 200) -> Path:
    """A data/raw folder as the download stage leaves it, with synthetic digits."""
    arrays = raw_dir / "arrays"
    arrays.mkdir(parents=True)
    (raw_dir / "idx").mkdir()  # the download stage keeps the IDX files there; the tiny data has none
    url = "https://storage.googleapis.com/cvdf-datasets/mnist/"
    files = {
        name: {"sha256": f"{i}" * 64, "size": 1000 + i, "url": url + name}
        for i, name in enumerate(MNIST_FILES, start=1)
    }
    manifest: dict[str, Any] = {
        "dataset": "mnist",
        "tfds_version": "test",
        "builder_version": "test",
        "files": files,
        "splits": {},
    }
    for split, count, seed in (("train", train, 1), ("test", test, 2)):
        images, labels = synthetic_digits(count, seed)
        storage.save_array(arrays / f"{split}_images.npy", images)
        storage.save_array(arrays / f"{split}_labels.npy", labels)
        manifest["splits"][split] = {"count": count, "label_histogram": np.bincount(labels, minlength=10).tolist()}
    storage.write_json(raw_dir / "manifest.json", manifest)
    if raw_dir.name == "raw" and raw_dir.parent.name == "data":  # a project's data/raw: as the download stage left it
        adopt(raw_dir.parent.parent, params=validate(base_params()))
    return raw_dir


@pytest.fixture
def tiny_raw(tmp_path: Path) -> Path:
    return write_raw(tmp_path / "data" / "raw")


@pytest.fixture
def tiny_processed(tiny_raw: Path, make_params) -> Path:
    from mnist_jax_pipeline.stages.preprocess import preprocess

    out = tiny_raw.parent / "processed"
    preprocess(make_params().preprocess, tiny_raw, out)
    return out


@pytest.fixture
def mirror() -> Path:
    """The real MNIST files (MNIST_MIRROR); see mirror_dir()."""
    return mirror_dir()


def session_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test session's temporary folder, which the pytest-xdist workers share (each has its own below)."""
    session = tmp_path_factory.getbasetemp()
    return session.parent if os.environ.get("PYTEST_XDIST_WORKER") else session


def shared(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """The folder `name`, made by `build(folder)` once per test session for every pytest-xdist worker.

    The first worker to ask builds it under a file lock in the session's temporary folder, which the
    workers share (the parent of each worker's own); `name.done`, written last, marks it finished, and
    the others wait on the lock, then reuse it. A failed build leaves `name.failed`, so the others fail
    at once with its error instead of building again. Read it only: a test that changes files copies it.
    """
    where = session_folder(tmp_path_factory) / "shared"
    where.mkdir(exist_ok=True)
    folder, done, failed = where / name, where / f"{name}.done", where / f"{name}.failed"
    with filelock.FileLock(where / f"{name}.lock"):
        if failed.exists():
            pytest.fail(f"the shared {name} failed in another worker:\n{failed.read_text()}", pytrace=False)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            try:
                build(folder)
            except Exception:
                failed.write_text(traceback.format_exc()[-4000:])
                raise
            done.write_text("")
    return folder


@pytest.fixture(scope="session")
def real_raw(tmp_path_factory) -> Path:
    """The real MNIST prepared once per test session by the download stage (shared by the workers: read only)."""
    source = mirror_dir()
    from mnist_jax_pipeline.stages.download.stage import download

    return shared(tmp_path_factory, "real_raw", lambda out: download(validate(base_params()), out, str(source)))


# --- The real stages on tiny data: the inputs of the report (tests/test_report.py, test_browser.py) ---

TINY_VARIANTS = ["nojit", "jit", "jit_scan"]
TINY_TRAIN, TINY_TEST = 600, 200
FAKE_SVG = """<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg width="100%" height="100%" xmlns="http://www.w3.org/2000/svg"
 xmlns:xlink="http://www.w3.org/1999/xlink" onload="init(evt)">
<script type="text/ecmascript"><![CDATA[function init(evt) { return 1 < 2; }]]></script>
<g id="viewport" transform="scale(0.5,0.5) translate(0,0)">
<g id="graph0" class="graph" transform="scale(1 1) rotate(0) translate(4 86)">
<polygon fill="white" stroke="transparent" points="-4,4 -4,-86 216,-86 216,4 -4,4"/>
<g id="node1" class="node"><a xlink:href="https://example.com/" xlink:title="train_step">
<polygon fill="#edd5d5" stroke="#b20000" points="200,-80 10,-80 10,-10 200,-10 200,-80"/>
<text x="105" y="-40" text-anchor="middle" font-size="14">train_step 1.2MB</text></a></g>
</g></g><script xlink:href="https://example.com/svgpan.js"/></svg>
"""


def tiny_params_dict(**sections: Any) -> dict[str, Any]:
    """params.yaml for fast runs on the tiny data: a small MLP, 2 epochs, every variant."""
    raw = copy.deepcopy(base_params())
    raw["model"]["layer_sizes"] = [784, 32, 10]
    raw["train"].update(epochs=2, batch_size=64)
    raw["variants"] = list(TINY_VARIANTS)
    raw["profile"]["top_allocations"] = 5
    raw["profile"]["trace_steps"] = 3
    for section, values in sections.items():
        raw[section] = values if not isinstance(values, dict) else {**raw[section], **values}
    return raw


def write_params(path: Path, raw: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def adopt(root: Path, stage: str = "download", params: Params | None = None) -> None:
    """Record what lies at a stage's outputs under `root` (the synthetic data/raw, say) as that stage's
    work, with the provenance record the stage itself would write, so that later stages accept it."""
    from mnist_jax_pipeline.artefacts.provenance import Execution
    from mnist_jax_pipeline.config.params import load
    from mnist_jax_pipeline.orchestration import freshness, run, stage_table
    from mnist_jax_pipeline.orchestration.jobs import Job

    here = Path.cwd()
    os.chdir(root)
    try:
        checker = freshness.Checker(params or load("params.yaml"))
        job = Job(stage_table.get(stage))
        checker.write(
            job, checker.inputs(job), Execution(tool="mnist-pipeline", started=run.now(), ended=run.now(), checks_s=0)
        )
    finally:
        os.chdir(here)


def run_stages(root: Path, *commands: list[str]) -> None:
    """Run CLI commands in `root` (in this process), each of which must succeed."""
    from mnist_jax_pipeline.cli import main

    here = Path.cwd()
    os.chdir(root)
    try:
        for command in commands:
            assert main(command) == 0, f"mnist-pipeline {' '.join(command)} failed"
    finally:
        os.chdir(here)


@pytest.fixture(scope="session")
def tiny_tree(tmp_path_factory) -> Path:
    """A project folder where the real stages ran on tiny synthetic data, up to the report's inputs
    (made once for every xdist worker: read it only, or copy it)."""

    def build(root: Path) -> None:
        write_raw(root / "data" / "raw", TINY_TRAIN, TINY_TEST)
        write_params(root / "params.yaml", tiny_params_dict())
        commands = [["preprocess"]]
        for variant in TINY_VARIANTS:
            commands += [
                ["train", "--variant", variant],
                ["evaluate", "--variant", variant],
                ["profile", "--variant", variant],
            ]
        run_stages(root, *commands)

    return shared(tmp_path_factory, "tiny_tree", build)


@pytest.fixture
def report_tree(tiny_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the tiny tree, the current directory during the test."""
    tree = tmp_path / "project"
    shutil.copytree(tiny_tree, tree)
    monkeypatch.chdir(tree)
    return tree
