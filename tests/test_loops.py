"""The training loops: one interface, jit_scan's arithmetic equal to jit's (within the stated
tolerance), on one device or sharded over two; the benchmark's smoke run."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import typing
from argparse import Namespace

import numpy as np
import optax
import pytest

from conftest import ROOT, write_params
from mnist_jax_pipeline.artefacts import training
from mnist_jax_pipeline.artefacts.model_file import load_model
from mnist_jax_pipeline.foundation import paths, variants
from mnist_jax_pipeline.mlp import loops
from mnist_jax_pipeline.mlp.loops.base import TrainingLoop, make_optimizer, onecycle_schedule
from mnist_jax_pipeline.stages import train

# Same bound as jit vs nojit (tests/test_train.py): the scan reorders no arithmetic, XLA only
# fuses it differently. Measured difference on the tiny data: 0.0 (bit-identical), shuffled or not.
JIT_SCAN_ATOL = 1e-6


def run(root, params, processed, variant):
    params_path = write_params(root / "params.yaml", params.to_dict())
    train.main(Namespace(params=params_path, variant=variant, processed=processed, root=root))
    return training.read_metrics(variant, root)


def test_every_variant_has_a_loop_with_the_protocol(make_params, tiny_processed):
    params = make_params(model__layer_sizes=[784, 16, 10])
    data = train.load_dataset(tiny_processed)
    inputs = train.loop_inputs(params, data.train_images, data.train_labels)
    wanted = {name for name, member in inspect.getmembers(TrainingLoop) if not name.startswith("_")}
    for variant in variants.VARIANTS:
        loop = loops.build(variant, inputs)
        assert type(loop).__name__ == variant.loop
        for name in wanted:
            signature = inspect.signature(getattr(loop, name))
            protocol = inspect.signature(getattr(TrainingLoop, name))
            assert list(signature.parameters) == list(protocol.parameters)[1:], (variant.name, name)


def test_every_loop_name_has_its_class_and_what_one_call_runs(make_params, tiny_processed):
    """Each variants.LoopName builds its own class, and names what one compiled call of it runs."""
    params = make_params(model__layer_sizes=[784, 16, 10])
    data = train.load_dataset(tiny_processed)
    inputs = train.loop_inputs(params, data.train_images, data.train_labels)
    names = set(typing.get_args(variants.LoopName))
    for name in names:
        loop = loops.build(variants.Variant("any", "", name, jit=True), inputs)
        assert type(loop).__name__ == name, "a LoopName that builds another loop's class"
    assert set(variants.CALL_UNIT) == names, "a LoopName without its CALL_UNIT in variants.py"
    assert {v.loop for v in variants.VARIANTS} <= names


@pytest.mark.slow
def test_every_loop_uses_the_epoch(make_params, tiny_processed):
    """Each loop's epochs differ when shuffling is on: the epoch number is used, not ignored."""
    params = make_params(model__layer_sizes=[784, 16, 10], train__shuffle=True, train__epochs=2)
    data = train.load_dataset(tiny_processed)
    inputs = train.loop_inputs(params, data.train_images, data.train_labels)
    for variant in variants.VARIANTS:
        loop = loops.build(variant, inputs)
        state = loop.place(train.initial_state(params, inputs))
        loop.compile(state)
        first = loop.run_epoch(train.initial_state(params, inputs), 1)
        second = loop.run_epoch(loop.place(train.initial_state(params, inputs)), 2)
        assert not np.array_equal(first.params[0][0], second.params[0][0]), variant.name


@pytest.mark.slow
@pytest.mark.parametrize("shuffle", [False, True])
def test_jit_scan_agrees_with_jit(tmp_path, make_params, tiny_processed, shuffle):
    # 600 examples, batch 64: 9 full batches in the scan plus a partial one of 24, as in the loop
    params = make_params(
        model__layer_sizes=[784, 64, 64, 10],
        train__epochs=3,
        train__batch_size=64,
        train__step_size=0.01,
        train__shuffle=shuffle,
    )
    run(tmp_path, params, tiny_processed, "jit")
    metrics = run(tmp_path, params, tiny_processed, "jit_scan")
    assert metrics.compile_seconds > 0 and metrics.steps_per_epoch == 10
    scan, _ = load_model(paths.MODEL.at("jit_scan", tmp_path), "train@jit_scan")
    step, _ = load_model(paths.MODEL.at("jit", tmp_path), "train@jit")
    for (ws, bs), (wj, bj) in zip(scan, step, strict=True):
        np.testing.assert_allclose(ws, wj, rtol=0, atol=JIT_SCAN_ATOL)
        np.testing.assert_allclose(bs, bj, rtol=0, atol=JIT_SCAN_ATOL)


SHARDED = """
import json, sys
from argparse import Namespace
from pathlib import Path
import jax
sys.path.insert(0, "tests")
from conftest import write_raw, tiny_params_dict, write_params
from mnist_jax_pipeline.config.params import load
from mnist_jax_pipeline.stages.preprocess import preprocess
from mnist_jax_pipeline.stages import train
out = Path(sys.argv[1])
write_raw(out / "raw")
raw = tiny_params_dict(model={"layer_sizes": [784, 64, 64, 10]}, train={"shuffle": True})
params_path = write_params(out / "params.yaml", raw)
preprocess(load(params_path).preprocess, out / "raw", out / "p")
train.main(Namespace(params=params_path, variant="jit_scan", processed=out / "p", root=out))
print(json.dumps({"devices": len(jax.devices())}))
"""


@pytest.mark.slow
def test_sharded_over_two_cpu_devices_equals_one_device(tmp_path):
    results = {}
    for count in (1, 2):
        folder = tmp_path / f"d{count}"
        folder.mkdir()
        env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={count}"}
        done = subprocess.run(
            [sys.executable, "-c", SHARDED, str(folder)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout.strip().splitlines()[-1])["devices"] == count
        results[count], _ = load_model(paths.MODEL.at("jit_scan", folder), "train@jit_scan")
    for (w1, b1), (w2, b2) in zip(results[1], results[2], strict=True):
        np.testing.assert_allclose(w1, w2, rtol=0, atol=JIT_SCAN_ATOL)
        np.testing.assert_allclose(b1, b2, rtol=0, atol=JIT_SCAN_ATOL)
    assert training.read_run("jit_scan", tmp_path / "d2").device_count == 2


@pytest.mark.slow
def test_benchmark_smoke_run():
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_train.py", "--synthetic", "--examples", "1024", "--rounds", "2", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 3), done.stderr[-3000:]  # 3: a round's epoch beat its reference (a loaded machine)
    report = json.loads(done.stdout)
    assert set(report["epoch_seconds"]) == {"tutorial", *variants.names()}
    assert report["compile_seconds"]["nojit"] is None and report["compile_seconds"]["jit_scan"] > 0
    assert report["epoch_gflop"] == pytest.approx(192.5 * 1024 / 60_000, rel=0.01)
    assert (report["roofline_ratio"] is None) == (done.returncode == 3)
    for key in ("large_gemm", "speedup_vs_tutorial", "speedup_vs_step_loop", "device", "backend", "versions"):
        assert report[key]


def train_config(make_params, **overrides):
    return make_params(**{f"train__{key}": value for key, value in overrides.items()}).train


def test_onecycle_rises_linearly_to_the_peak_then_falls_to_zero(make_params):
    # 10 steps per epoch, 5 epochs: 50 steps, warm-up over the first 20 (40%)
    config = train_config(make_params, schedule="onecycle", step_size=0.5, warmup_fraction=0.4, epochs=5)
    optimizer = make_optimizer(config, 10 * config.batch_size)
    rate = onecycle_schedule(0.5, 50, 0.4)
    values = {step: float(rate(step)) for step in (0, 10, 20, 35, 49, 50)}
    assert values == pytest.approx({0: 0.0, 10: 0.25, 20: 0.5, 35: 0.25, 49: 0.5 / 30, 50: 0.0}, abs=1e-7)
    # the optimizer uses it: one SGD step at count 10 moves a parameter by rate(10) * grad
    params = {"w": np.float32(1.0)}
    state = optimizer.init(params)
    for _ in range(10):
        _, state = optimizer.update({"w": np.float32(0.0)}, state, params)
    updates, _ = optimizer.update({"w": np.float32(2.0)}, state, params)
    assert float(updates["w"]) == pytest.approx(-0.25 * 2.0)


@pytest.mark.parametrize("fraction", [0.0, 1.0])
def test_onecycle_edges_have_no_division_by_zero(fraction):
    rate = onecycle_schedule(1.0, 10, fraction)
    values = [float(rate(step)) for step in range(11)]
    assert all(np.isfinite(values)) and max(values) == pytest.approx(1.0)
    assert values[0] == (1.0 if fraction == 0 else 0.0) and values[10] == (0.0 if fraction == 0 else 1.0)


@pytest.mark.parametrize(
    ("optimizer", "nesterov", "reference"),
    [
        ("momentum", True, lambda: optax.sgd(0.1, momentum=0.7, nesterov=True)),
        ("adam", True, lambda: optax.adam(0.1, b1=0.7, b2=0.9, nesterov=True)),
        ("adam", False, lambda: optax.adam(0.1, b1=0.7, b2=0.9)),
    ],
)
def test_optimizer_keys_reach_optax(make_params, optimizer, nesterov, reference):
    """Adam's b1 is train.momentum and its b2 train.beta2; nesterov reaches momentum and Adam."""
    config = train_config(make_params, optimizer=optimizer, step_size=0.1, momentum=0.7, beta2=0.9, nesterov=nesterov)
    ours, theirs = make_optimizer(config, 10), reference()
    params = {"w": np.ones(3, np.float32)}
    state_a, state_b = ours.init(params), theirs.init(params)
    for step in range(4):
        grads = {"w": np.array([1.0, -2.0, 0.5], np.float32) * (step + 1)}
        update_a, state_a = ours.update(grads, state_a, params)
        update_b, state_b = theirs.update(grads, state_b, params)
        np.testing.assert_array_equal(update_a["w"], update_b["w"])


def test_nesterov_changes_the_momentum_and_adam_updates(make_params):
    for optimizer in ("momentum", "adam"):
        updates = []
        for nesterov in (False, True):
            opt = make_optimizer(train_config(make_params, optimizer=optimizer, nesterov=nesterov), 10)
            params = {"w": np.ones(2, np.float32)}
            state = opt.init(params)
            for _ in range(3):
                update, state = opt.update({"w": np.array([1.0, -1.0], np.float32)}, state, params)
            updates.append(np.asarray(update["w"]))
        assert not np.allclose(*updates), optimizer


LEVERS = {
    "he init, zero output": {"model__init": "he", "model__output_init": "zeros"},
    "normal init, zero output": {"model__output_init": "zeros"},
    "adam nesterov, onecycle, smoothing": {
        "train__optimizer": "adam",
        "train__step_size": 0.003,
        "train__nesterov": True,
        "train__momentum": 0.8,
        "train__beta2": 0.95,
        "train__schedule": "onecycle",
        "train__label_smoothing": 0.1,
    },
    "momentum nesterov, onecycle": {
        "train__optimizer": "momentum",
        "train__nesterov": True,
        "train__schedule": "onecycle",
        "train__warmup_fraction": 0.2,
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("levers", list(LEVERS))
@pytest.mark.parametrize("shuffle", [False, True])
def test_every_lever_runs_alike_in_every_variant(tmp_path, make_params, tiny_processed, levers, shuffle):
    params = make_params(
        model__layer_sizes=[784, 32, 10],
        train__epochs=2,
        train__batch_size=64,
        train__shuffle=shuffle,
        **LEVERS[levers],
    )
    models = {}
    for variant in variants.names():
        run(tmp_path, params, tiny_processed, variant)
        models[variant], _ = load_model(paths.MODEL.at(variant, tmp_path), f"train@{variant}")
    for variant in ("nojit", "jit_scan"):
        for (w, b), (wj, bj) in zip(models[variant], models["jit"], strict=True):
            np.testing.assert_allclose(w, wj, rtol=0, atol=JIT_SCAN_ATOL)
            np.testing.assert_allclose(b, bj, rtol=0, atol=JIT_SCAN_ATOL)
    assert training.read_metrics("jit_scan", tmp_path).final_test_accuracy > 0.8


@pytest.mark.slow
def test_time_to_accuracy_benchmark_smoke_run():
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_time_to_accuracy.py",
            "--synthetic",
            "--examples",
            "1024",
            "--seeds",
            "0,1",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["target"] == 0.985 and report["seeds"] == 2 and report["epochs"] == 2
    assert report["evaluated_on"] == "test" and report["loop"] == "jit_scan"
    assert 0.8 < report["min_test_accuracy"] <= report["mean_test_accuracy"] <= 1  # the synthetic digits are easy
    assert report["passed"] == (report["min_test_accuracy"] >= 0.985)
    low, high = report["train_seconds_range"]
    assert 0 < low <= report["median_train_seconds"] <= high
    assert [r["seed"] for r in report["per_seed"]] == [0, 1]
    assert all(len(r["epoch_seconds"]) == 2 and r["compile_seconds"] > 0 for r in report["per_seed"])
    assert report["config"]["train"]["schedule"] == "onecycle" and report["config"]["model"]["init"] == "he"
    for key in ("device", "backend", "versions", "date", "load_average_start"):
        assert report[key]


@pytest.mark.slow
def test_time_to_accuracy_benchmark_on_the_download_stages_data_matches_the_pipeline(tmp_path):
    """With --raw the benchmark trains on exactly what the pipeline trains on: seed 0 is train@jit_scan."""
    from conftest import write_raw
    from mnist_jax_pipeline.config.params import load
    from mnist_jax_pipeline.mlp.model import loss_and_accuracy
    from mnist_jax_pipeline.stages.preprocess import preprocess

    raw = write_raw(tmp_path / "raw")
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_time_to_accuracy.py", "--raw", str(raw), "--seeds", "0", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["data"].endswith("(the download stage)") and report["train_examples"] == 600
    preset = load(ROOT / "presets" / "time-to-accuracy.yaml")
    preprocess(preset.preprocess, raw, tmp_path / "processed")
    metrics = run(tmp_path, preset, tmp_path / "processed", "jit_scan")
    assert report["per_seed"][0]["accuracy"] == round(metrics.final_test_accuracy, 6)
    model, _ = load_model(paths.MODEL.at("jit_scan", tmp_path), "train@jit_scan")
    test = train.load_dataset(tmp_path / "processed")
    loss, _ = loss_and_accuracy(model, test.test_images, test.test_labels)
    assert report["per_seed"][0]["loss"] == pytest.approx(loss, rel=1e-6)  # the same model, to rounding
