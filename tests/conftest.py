"""Shared fixtures: tiny datasets made on the fly, the real-data mirror, a params factory."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from mnist_jax_pipeline import io
from mnist_jax_pipeline.config import Params, validate

ROOT = Path(__file__).resolve().parents[1]
MIRROR = os.environ.get("MNIST_MIRROR")


@pytest.fixture(autouse=True, scope="session")
def own_exclusive_lock(tmp_path_factory):
    """Stages run in tests take a lock of their own, not the checkout's (a pipeline may be running)."""
    os.environ["MNIST_PIPELINE_LOCK"] = str(tmp_path_factory.mktemp("lock") / "exclusive.lock")


def base_params() -> dict[str, Any]:
    """The repository's params.yaml as a dict."""
    return yaml.safe_load((ROOT / "params.yaml").read_text())


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


def write_raw(raw_dir: Path, train: int = 600, test: int = 200) -> Path:
    """A data/raw folder as the download stage leaves it, with synthetic digits."""
    arrays = raw_dir / "arrays"
    arrays.mkdir(parents=True)
    manifest: dict[str, Any] = {"dataset": "mnist", "tfds_version": "test", "builder_version": "test",
                                "files": {}, "splits": {}}
    for split, count, seed in (("train", train, 1), ("test", test, 2)):
        images, labels = synthetic_digits(count, seed)
        io.save_array(arrays / f"{split}_images.npy", images)
        io.save_array(arrays / f"{split}_labels.npy", labels)
        manifest["splits"][split] = {"count": count, "label_histogram": np.bincount(labels, minlength=10).tolist()}
    io.write_json(raw_dir / "manifest.json", manifest)
    return raw_dir


@pytest.fixture
def tiny_raw(tmp_path: Path) -> Path:
    return write_raw(tmp_path / "data" / "raw")


@pytest.fixture
def tiny_processed(tiny_raw: Path, make_params) -> Path:
    from mnist_jax_pipeline.data.preprocess import preprocess

    out = tiny_raw.parent / "processed"
    preprocess(make_params().preprocess, tiny_raw, out)
    return out


@pytest.fixture
def mirror() -> Path:
    """The real MNIST files (MNIST_MIRROR); tests that need them skip without it."""
    if not MIRROR or not Path(MIRROR).is_dir():
        pytest.skip("needs the real MNIST files: set MNIST_MIRROR to a folder with the four .gz files")
    return Path(MIRROR)


@pytest.fixture(scope="session")
def real_raw(tmp_path_factory) -> Path:
    """The real MNIST prepared once per test session by the download stage."""
    if not MIRROR or not Path(MIRROR).is_dir():
        pytest.skip("needs the real MNIST files: set MNIST_MIRROR to a folder with the four .gz files")
    from mnist_jax_pipeline.data.download import download

    out = tmp_path_factory.mktemp("real") / "raw"
    download(validate(base_params()), out, MIRROR)
    return out


# --- The report stage: a complete, tiny artefact tree (tests/test_report.py, test_browser.py) ---

REPORT_TEST_IMAGES = 50
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
MNIST_FILES = ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
               "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"]
FAKE_TIMINGS = {"nojit": (2.0, None), "jit": (0.1, 0.4), "jit_scan": (0.05, 0.6)}  # median, compile


def _fake_train_metrics(variant: str) -> dict[str, Any]:
    median, compile_s = FAKE_TIMINGS[variant]
    return {
        "variant": variant, "epochs": 3, "steps_per_epoch": 4, "examples_per_epoch": 500,
        "compile_seconds": compile_s, "first_epoch_seconds": median * 1.5,
        "epoch_seconds_median": median, "total_train_seconds": median * 3.5,
        "steps_per_second": 4 / median, "examples_per_second": 500 / median,
        "final_train_loss": 0.021, "final_train_accuracy": 0.99, "final_test_accuracy": 0.88,
        "peak_rss_bytes": 512 * 2**20, "backend": "cpu", "devices": ["TFRT_CPU_0"],
        "device_kind": "cpu", "device_count": 1, "jax_version": "0.10.2",
        "jaxlib_version": "0.10.2", "host_cpu_count": 2, "python_version": "3.11.2",
        "machine": "x86_64", "ran_alone": True, "lock_wait_seconds": 0.0,
        "loadavg_1m_at_start": 0.25,
    }


def _fake_history(variant: str) -> str:
    median = FAKE_TIMINGS[variant][0]
    rows = [(1, median * 1.5, 0.09, 0.90, 0.84), (2, median, 0.04, 0.96, 0.86),
            (3, median, 0.021, 0.99, 0.88)]
    lines = [",".join(str(x) for x in row) for row in rows]
    return "\n".join(["epoch,epoch_seconds,train_loss,train_accuracy,test_accuracy", *lines]) + "\n"


def _write_fake_data(base: Path, labels: np.ndarray, images: np.ndarray) -> None:
    processed = base / "data" / "processed"
    processed.mkdir(parents=True, exist_ok=True)
    io.save_array(processed / "test_images.npy", images.reshape(-1, 784).astype(np.float32))
    histogram = np.bincount(labels, minlength=10).tolist()
    url = "https://storage.googleapis.com/cvdf-datasets/mnist/"
    files = {name: {"sha256": f"{i}" * 64, "size": 1000 + i, "url": url + name}
             for i, name in enumerate(MNIST_FILES, start=1)}
    io.write_json(base / "data" / "raw" / "manifest.json", {
        "dataset": "mnist", "tfds_version": "4.9.10", "builder_version": "3.0.1", "files": files,
        "splits": {"train": {"count": 500, "label_histogram": [50] * 10},
                   "test": {"count": len(labels), "label_histogram": histogram}}})
    pixels = {"mean": 33.3, "std": 78.6, "min": 0.0, "max": 255.0}
    splits = {
        "train": {"count": 500, "label_histogram": [50] * 10, "class_balance": [0.1] * 10,
                  "pixels": pixels},
        "val": {"count": 0, "label_histogram": [0] * 10, "class_balance": [0.0] * 10},
        "test": {"count": len(labels), "label_histogram": histogram,
                 "class_balance": [c / len(labels) for c in histogram], "pixels": pixels},
    }
    io.write_json(processed / "stats.json",
                  {"dataset": "mnist", "normalize": "none", "image_shape": [784], "splits": splits})


def _write_fake_profile(base: Path, with_svg: bool) -> None:
    profile_dir = base / "reports" / "profile"
    origin = "_train_point /src/mnist_jax_pipeline/profile.py:61"
    row = {"bytes": 1_049_600, "count": 2, "labels": {"kind": "buffer", "device": "cpu:0"},
           "stack": [origin, "profile /src/mnist_jax_pipeline/profile.py:205"], "origin": origin}
    points = {point: {"file": f"{point}.prof", "total_bytes": 1_100_000, "total_allocations": 6,
                      "top": [row], "explanation": f"<i>{point}</i>: the largest is layer 0."}
              for point in ("init", "train_step", "evaluate")}
    io.write_json(profile_dir / "summary.json", {
        "device": "TFRT_CPU_0", "device_kind": "cpu", "backend": "cpu", "points": points,
        "peak_memory": {"bytes": 700 * 2**20, "source": "process peak RSS"},
        "pprof": {"available": with_svg, "install_hint": "apt-get install pprof-for-tests"}})
    if with_svg:
        io.write_text(profile_dir / "train_step.svg", FAKE_SVG)


def write_report_artefacts(base: Path, variants: tuple[str, ...] = ("nojit", "jit"),
                           with_profile: bool = True, with_svg: bool = True) -> None:
    """Every input of the report stage, with tiny plausible values, under `base`."""
    images, labels = synthetic_digits(REPORT_TEST_IMAGES, seed=3)
    _write_fake_data(base, labels, images)
    wrong = [3, 7, 11, 19, 23, 42]
    predicted = labels.astype(int)
    predicted[wrong] = (predicted[wrong] + 1) % 10
    matrix = np.zeros((10, 10), dtype=int)
    np.add.at(matrix, (labels, predicted), 1)
    recall = np.diag(matrix) / np.maximum(matrix.sum(axis=1), 1)
    precision = np.diag(matrix) / np.maximum(matrix.sum(axis=0), 1)
    per_class = {str(c): {"precision": float(precision[c]), "recall": float(recall[c])}
                 for c in range(10)}
    for variant in variants:
        io.write_json(base / "metrics" / "train" / f"{variant}.json", _fake_train_metrics(variant))
        io.write_text(base / "plots" / "train" / f"{variant}.csv", _fake_history(variant))
        io.write_json(base / "metrics" / "evaluate" / f"{variant}.json", {
            "variant": variant, "test_accuracy": 0.88, "test_loss": 0.0123,
            "test_examples": len(labels), "misclassified": len(wrong), "per_class": per_class})
        io.write_json(base / "metrics" / "evaluate" / f"{variant}_details.json", {
            "variant": variant, "confusion_matrix": matrix.tolist(), "misclassified_indices": wrong,
            "true": labels[wrong].astype(int).tolist(), "predicted": predicted[wrong].tolist()})
    if with_profile:
        _write_fake_profile(base, with_svg)


@pytest.fixture
def make_report_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write the report's inputs into tmp_path (options of write_report_artefacts) and cd there."""

    def make(**options: Any) -> Path:
        write_report_artefacts(tmp_path, **options)
        monkeypatch.chdir(tmp_path)
        return tmp_path

    return make


@pytest.fixture
def report_tree(make_report_tree) -> Path:
    """A project folder holding every report input; the current directory during the test."""
    return make_report_tree()
