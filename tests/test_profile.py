"""The profile stage on tiny data: three snapshots, summary.json, explanations, pprof rendering."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest
import yaml

from conftest import unavailable
from mnist_jax_pipeline import paths, pprof
from mnist_jax_pipeline.artefacts import storage
from mnist_jax_pipeline.artefacts.model_file import ModelMetadata, save_model
from mnist_jax_pipeline.artefacts.profile_summary import read_summary
from mnist_jax_pipeline.config import Params, validate
from mnist_jax_pipeline.errors import PipelineError
from mnist_jax_pipeline.model import init_params
from mnist_jax_pipeline.profile import POINTS, profile

ROOT = Path(__file__).resolve().parents[1]
SIZES = [784, 32, 10]
BATCH = 64


def tiny_params(layer_sizes: list[int] = SIZES) -> Params:
    raw = copy.deepcopy(yaml.safe_load((ROOT / "params.yaml").read_text()))
    raw["model"]["layer_sizes"] = layer_sizes
    raw["train"]["batch_size"] = BATCH
    raw["profile"]["top_allocations"] = 5
    return validate(raw)


def write_tiny(base: Path, train: int = 256, test: int = 64) -> tuple[Path, Path]:
    """Processed arrays with the stage's file names, and a jit model saved as train@jit does."""
    rng = np.random.default_rng(0)
    processed = base / "processed"
    processed.mkdir(parents=True)
    for split, count in (("train", train), ("test", test)):
        images = rng.uniform(0, 255, size=(count, 784)).astype(np.float32)
        storage.save_array(processed / f"{split}_images.npy", images)
        labels = rng.integers(0, 10, count).astype(np.int32)
        storage.save_array(processed / f"{split}_labels.npy", labels)
    model = paths.MODEL.at("jit", base)
    params = [(np.asarray(w), np.asarray(b)) for w, b in init_params(SIZES, jax.random.PRNGKey(1), 0.01)]
    save_model(model, params, ModelMetadata(variant="jit", layer_sizes=SIZES, params_sha256="0" * 64,
                                            jax_version="test"))
    return processed, model


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("profile")
    processed, model = write_tiny(base)
    summary = profile(tiny_params(), "jit", processed, base)
    out = base / paths.PROFILE.path
    return {"base": base, "processed": processed, "model": model, "out": out,
            "summary": summary.model_dump(mode="json")}


def test_writes_one_snapshot_per_point_and_the_summary(run: dict[str, Any]) -> None:
    out = run["out"]
    for point in POINTS:
        assert (out / f"{point}.prof").read_bytes()[:2] == b"\x1f\x8b"  # gzip
    on_disk = json.loads((out / "summary.json").read_text())
    assert read_summary(out).model_dump(mode="json") == run["summary"]
    assert sorted(on_disk["points"]) == sorted(POINTS)
    assert not [p for p in out.parent.iterdir() if p.name.startswith(storage.TMP_PREFIX)]


def test_summary_schema_and_expected_sizes(run: dict[str, Any]) -> None:
    s = run["summary"]
    assert s["backend"] == jax.default_backend() and s["device"]
    assert s["batch_size"] == BATCH and s["layer_sizes"] == SIZES
    weights = 32 * 784 + 32 + 10 * 32 + 10
    assert s["expected_bytes"]["params"] == weights * 4
    assert s["expected_bytes"]["batch_images"] == BATCH * 784 * 4
    assert s["expected_bytes"]["layer0.weight"] == 32 * 784 * 4
    for point in POINTS:
        entry = s["points"][point]
        assert entry["file"] == f"{point}.prof"
        assert entry["total_bytes"] > 0 and entry["total_allocations"] > 0
        assert 0 < len(entry["top"]) <= 5
        assert entry["explanation"]
        row = entry["top"][0]
        assert set(row) >= {"bytes", "count", "labels", "stack", "origin"}
        assert all(" " in frame and ":" in frame for frame in row["stack"])
    assert s["points"]["init"]["total_bytes"] >= s["expected_bytes"]["params"]


def test_train_step_top_allocation_is_a_model_array(run: dict[str, Any]) -> None:
    s = run["summary"]
    top = s["points"]["train_step"]["top"][0]
    assert top["bytes"] >= s["expected_bytes"]["layer0.weight"]
    assert top["labels"]["kind"] == "buffer"
    assert "32x784 float32 weight of layer 0" in s["points"]["init"]["explanation"]
    # the step holds a batch of 64x784 floats (200,704 bytes), the largest array at these sizes
    assert top["bytes"] % (BATCH * 784 * 4) == 0
    assert f"a batch of {BATCH} images" in s["points"]["train_step"]["explanation"]


def test_peak_memory_names_its_source(run: dict[str, Any]) -> None:
    peak = run["summary"]["peak_memory"]
    assert peak["bytes"] > 0
    assert peak["source"] in ("device.memory_stats peak_bytes_in_use", "process peak RSS")
    if jax.default_backend() == "cpu":
        assert peak["source"] == "process peak RSS"


def test_pprof_renders_top_and_svg(run: dict[str, Any]) -> None:
    if shutil.which("pprof") is None:
        unavailable("pprof not on PATH; install it with .ci/install-pprof.sh")
    out, info = run["out"], run["summary"]["pprof"]
    for point in POINTS:
        assert "space" in (out / f"{point}.top.txt").read_text()
        if shutil.which("dot"):
            assert (out / f"{point}.svg").read_text().lstrip().startswith("<?xml")
    assert info["available"] is bool(shutil.which("dot"))


def test_missing_pprof_still_succeeds(run: dict[str, Any], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pprof, "tools", lambda: {"pprof": None, "dot": None})
    shutil.copytree(run["base"] / "models", tmp_path / "models")
    summary = profile(tiny_params(), "jit", run["processed"], tmp_path)
    out = tmp_path / paths.PROFILE.path
    assert summary.pprof.available is False
    assert "go install github.com/google/pprof@latest" in summary.pprof.install_hint
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{p}.prof" for p in POINTS] + ["summary.json"])


def test_model_not_matching_params_is_one_line_error(run: dict[str, Any], tmp_path: Path) -> None:
    shutil.copytree(run["base"] / "models", tmp_path / "models")
    with pytest.raises(PipelineError, match=r"jit.safetensors.*model.layer_sizes.*train@jit"):
        profile(tiny_params([784, 64, 10]), "jit", run["processed"], tmp_path)
    assert not (tmp_path / paths.PROFILE.path).exists()


def test_missing_model_names_the_stage(run: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match=r"missing.*train@jit"):
        profile(tiny_params(), "jit", run["processed"], tmp_path)
