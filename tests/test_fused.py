"""jit_scan: same arithmetic as jit (within the stated tolerance), on one device or sharded over two."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from mnist_jax_pipeline.evaluate import load_model
from mnist_jax_pipeline.train import train

# Same bound as jit vs nojit (tests/test_train.py): the scan reorders no arithmetic, XLA only
# fuses it differently. Measured difference on the tiny data: 0.0 (bit-identical), shuffled or not.
JIT_SCAN_ATOL = 1e-6


def run(tmp_path, params, processed, variant):
    return train(params, variant, processed, tmp_path / f"{variant}.safetensors", tmp_path / f"{variant}.json",
                 tmp_path / f"{variant}.csv")


@pytest.mark.parametrize("shuffle", [False, True])
def test_jit_scan_agrees_with_jit(tmp_path, make_params, tiny_processed, shuffle):
    # 600 examples, batch 64: 9 full batches in the scan plus a partial one of 24, as in the loop
    params = make_params(model__layer_sizes=[784, 64, 64, 10], train__epochs=3, train__batch_size=64,
                         train__step_size=0.01, train__shuffle=shuffle)
    run(tmp_path, params, tiny_processed, "jit")
    metrics = run(tmp_path, params, tiny_processed, "jit_scan")
    assert metrics["compile_seconds"] > 0 and metrics["steps_per_epoch"] == 10
    scan, _ = load_model(tmp_path / "jit_scan.safetensors")
    step, _ = load_model(tmp_path / "jit.safetensors")
    for (ws, bs), (wj, bj) in zip(scan, step, strict=True):
        np.testing.assert_allclose(ws, wj, rtol=0, atol=JIT_SCAN_ATOL)
        np.testing.assert_allclose(bs, bj, rtol=0, atol=JIT_SCAN_ATOL)


SHARDED = """
import json, sys
import jax, numpy as np
sys.path.insert(0, "tests")
from conftest import write_raw, base_params
from mnist_jax_pipeline.config import validate
from mnist_jax_pipeline.data.preprocess import preprocess
from mnist_jax_pipeline.train import train
from pathlib import Path
out = Path(sys.argv[1])
write_raw(out / "raw")
raw = base_params(); raw["model"]["layer_sizes"] = [784, 64, 64, 10]
raw["train"].update(epochs=2, batch_size=64, step_size=0.01, shuffle=True)
params = validate(raw)
preprocess(params.preprocess, out / "raw", out / "p")
train(params, "jit_scan", out / "p", out / "m.safetensors", out / "m.json", out / "m.csv")
print(json.dumps({"devices": len(jax.devices())}))
"""


def test_sharded_over_two_cpu_devices_equals_one_device(tmp_path):
    results = {}
    for count in (1, 2):
        folder = tmp_path / f"d{count}"
        folder.mkdir()
        env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={count}"}
        done = subprocess.run([sys.executable, "-c", SHARDED, str(folder)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout.strip().splitlines()[-1])["devices"] == count
        results[count], _ = load_model(folder / "m.safetensors")
    for (w1, b1), (w2, b2) in zip(results[1], results[2], strict=True):
        np.testing.assert_allclose(w1, w2, rtol=0, atol=JIT_SCAN_ATOL)
        np.testing.assert_allclose(b1, b2, rtol=0, atol=JIT_SCAN_ATOL)
    metrics = json.loads((tmp_path / "d2" / "m.json").read_text())
    assert metrics["device_count"] == 2


def test_benchmark_smoke_run():
    done = subprocess.run([sys.executable, "benchmarks/bench_train.py", "--synthetic", "--examples", "1024",
                           "--epochs", "2", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert set(report["epoch_seconds"]) == {"nojit", "jit", "jit_scan"}
    assert report["compile_seconds"]["nojit"] is None and report["compile_seconds"]["jit_scan"] > 0
    assert report["epoch_gflop"] == pytest.approx(192.5 * 1024 / 60_000, rel=0.01)
    for key in ("gemm_gflops", "roofline_ratio", "speedup_vs_step_loop", "device", "backend", "versions"):
        assert report[key]
