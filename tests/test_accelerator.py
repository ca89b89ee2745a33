"""The accelerator tier (`pytest -m accelerator`): what only a GPU or TPU can show. Each test runs where
JAX finds one and otherwise skips with one line naming the missing backend; the sharding test runs on
the CPU too, over four host devices (XLA_FLAGS=--xla_force_host_platform_device_count=4), as CI runs it.

On a device it checks that `jit` and `nojit` agree there, that two runs give the same model bytes (XLA's
deterministic GPU ops, runtime.set_numerics), that the profile's snapshots hold the model's real device
allocations with the device's memory_stats() peak, and that jit_scan keeps the epoch's data on the device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, compiling_afresh, write_params
from mnist_jax_pipeline.artefacts import training
from mnist_jax_pipeline.artefacts.model_file import load_model
from mnist_jax_pipeline.artefacts.profile_summary import read_summary
from mnist_jax_pipeline.foundation import paths, variants
from mnist_jax_pipeline.foundation.backend import MATMUL_PRECISION, set_numerics
from mnist_jax_pipeline.mlp import loops
from mnist_jax_pipeline.stages import train
from mnist_jax_pipeline.stages.profile import stage as profile

pytestmark = pytest.mark.accelerator
ACCELERATORS = ("gpu", "tpu")
SHARDED_DEVICES = 4
# jit against nojit on one device: the same arithmetic, fused differently (tests/test_train.py's bound)
ATOL = 1e-6


def accelerator() -> str:
    """The backend JAX uses here, where it is a GPU or TPU; else the test skips with one line."""
    import jax

    backend = jax.default_backend()
    if backend not in ACCELERATORS:
        pytest.skip(f"accelerator tier: no GPU or TPU here (JAX's backend is {backend})")
    return backend


def _train(root: Path, params, processed: Path, variant: str) -> list[tuple[np.ndarray, np.ndarray]]:
    params_path = write_params(root / "params.yaml", params.to_dict())
    train.main(Namespace(params=params_path, variant=variant, processed=processed, root=root))
    weights, _ = load_model(paths.MODEL.at(variant, root), paths.MODEL.stage(variant))
    return weights


def test_jit_and_nojit_agree_on_the_device(tmp_path, make_params, tiny_processed):
    backend = accelerator()
    set_numerics()
    params = make_params(model__layer_sizes=[784, 64, 64, 10], train__epochs=2)
    nojit = _train(tmp_path / "nojit", params, tiny_processed, "nojit")
    jit = _train(tmp_path / "jit", params, tiny_processed, "jit")
    for (wn, bn), (wj, bj) in zip(nojit, jit, strict=True):
        np.testing.assert_allclose(wn, wj, rtol=0, atol=ATOL)
        np.testing.assert_allclose(bn, bj, rtol=0, atol=ATOL)
    run = training.read_run("jit", tmp_path / "jit")
    assert run.backend == backend and run.matmul_precision == MATMUL_PRECISION
    assert "--xla_gpu_exclude_nondeterministic_ops=true" in (run.xla_flags or "")


TRAIN_ONCE = """
import sys
from argparse import Namespace
from mnist_jax_pipeline.stages import train
from mnist_jax_pipeline.foundation.backend import set_numerics
set_numerics()
train.main(Namespace(params=sys.argv[1], variant=sys.argv[2], processed=sys.argv[3], root=sys.argv[4]))
"""


@pytest.mark.parametrize("variant", ["jit", "jit_scan"])
def test_two_runs_give_the_same_model_bytes(tmp_path, make_params, tiny_processed, variant):
    """Each run in its own process, so XLA compiles (and on a GPU, would autotune) afresh."""
    accelerator()
    params_path = write_params(
        tmp_path / "params.yaml",
        make_params(model__layer_sizes=[784, 512, 512, 10], train__epochs=2, train__shuffle=True).to_dict(),
    )
    models = []
    for run in ("a", "b"):
        done = subprocess.run(
            [sys.executable, "-c", TRAIN_ONCE, str(params_path), variant, str(tiny_processed), str(tmp_path / run)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        models.append(paths.MODEL.at(variant, tmp_path / run).read_bytes())
    assert models[0] == models[1]


def test_profile_snapshots_hold_the_models_device_allocations(tmp_path, make_params, tiny_processed):
    accelerator()
    set_numerics()
    params = make_params(model__layer_sizes=[784, 512, 512, 10], profile__trace_steps=2)
    _train(tmp_path, params, tiny_processed, "jit")
    profile.main(Namespace(params=tmp_path / "params.yaml", variant="jit", processed=tiny_processed, root=tmp_path))
    summary = read_summary("jit", tmp_path)
    assert summary is not None and summary.backend == accelerator()
    weight_bytes = 4 * sum(a * b + b for a, b in zip(summary.layer_sizes, summary.layer_sizes[1:], strict=False))
    assert summary.points["init"].total_bytes >= weight_bytes  # the parameters, on the device
    assert summary.memory_stats and summary.memory_stats["peak_bytes_in_use"] >= weight_bytes
    assert summary.peak_memory.source.startswith("device.memory_stats")


def test_jit_scan_keeps_the_epoch_on_the_device(make_params, tiny_processed):
    backend = accelerator()
    params = make_params(model__layer_sizes=[784, 16, 10])
    data = train.load_dataset(tiny_processed)
    loop = loops.build(variants.get("jit_scan"), train.loop_inputs(params, data.train_images, data.train_labels))
    for array in (loop.images, loop.targets):
        assert {device.platform for device in array.devices()} == {backend}


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
from mnist_jax_pipeline.foundation.backend import set_numerics
set_numerics()
out = Path(sys.argv[1])
write_raw(out / "raw")
raw = tiny_params_dict(model={"layer_sizes": [784, 64, 64, 10]}, train={"shuffle": True, "epochs": 2})
params_path = write_params(out / "params.yaml", raw)
preprocess(load(params_path).preprocess, out / "raw", out / "p")
train.main(Namespace(params=params_path, variant="jit_scan", processed=out / "p", root=out))
print(json.dumps({"devices": len(jax.devices()), "backend": jax.default_backend()}))
"""


def _visible_devices() -> int:
    import jax

    return jax.device_count()


@pytest.mark.slow
def test_jit_scan_sharded_across_every_visible_device_equals_one_device(tmp_path):
    """On a GPU or TPU machine: every visible device against the first alone; on the CPU, four host
    devices against one."""
    import jax

    on_cpu = jax.default_backend() not in ACCELERATORS
    if not on_cpu and _visible_devices() < 2:
        pytest.skip(f"one {jax.default_backend()} device visible: sharding needs two or more")
    flags = os.environ.get("XLA_FLAGS", "")
    settings = {  # devices -> the environment that shows that many
        1: {"XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count=1"}
        if on_cpu
        else {"CUDA_VISIBLE_DEVICES": "0", "TPU_VISIBLE_CHIPS": "0"},
        SHARDED_DEVICES if on_cpu else _visible_devices(): {
            "XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count={SHARDED_DEVICES}"
        }
        if on_cpu
        else {},
    }
    models = {}
    for count, extra in settings.items():
        folder = tmp_path / f"d{count}"
        folder.mkdir()
        done = subprocess.run(
            [sys.executable, "-c", SHARDED, str(folder)],
            cwd=ROOT,
            env=compiling_afresh({**os.environ, **extra}),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout.strip().splitlines()[-1])["devices"] == count
        models[count], _ = load_model(paths.MODEL.at("jit_scan", folder), "train@jit_scan")
        assert training.read_run("jit_scan", folder).device_count == count
    one, every = models.values()
    for (w1, b1), (wn, bn) in zip(one, every, strict=True):
        np.testing.assert_allclose(w1, wn, rtol=0, atol=ATOL)
        np.testing.assert_allclose(b1, bn, rtol=0, atol=ATOL)
