"""The profile stage, per variant: an execution trace of its steady-state training steps and
device-memory snapshots (pprof) of its model.

Trace: the variant's own loop is built on the training split from the trained model, compiled
(not traced), run for a few warm-up calls, then `profile.trace_steps` training steps (jit_scan:
the whole epochs that cover them) are traced with `jax.profiler`, each call inside a step
annotation. The files keep jax.profiler's layout under `trace/` with fixed names, so
`--logdir <folder>/trace` opens in XProf or TensorBoard and `perfetto_trace.json.gz` in
ui.perfetto.dev; op_table.py parses the trace into the per-op table of summary.json.

Snapshots: on the default JAX device it replays (1) the parameter initialisation, (2) one training
step on a real batch starting from the trained model (compiled unless the variant runs op by op),
and (3) the evaluation of the test split. At each point the live arrays are blocked on, held, and
snapshotted with `jax.profiler.save_device_memory_profile` into `<point>.prof` (gzipped pprof);
summary.json holds the parsed totals, the largest buffers, the executables in one line, the train
step less init (what the step added), what the largest buffer is in model terms, and the peak
memory. With `pprof` on PATH each point is also rendered as `<point>.top.txt` and `<point>.svg`
(the train step also as `train_step.diff.*`, less init). The whole folder is replaced atomically.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...artefacts import atomic, storage
from ...artefacts.dataset import load_split
from ...artefacts.model_file import HostParams, layer_sizes_of, load_model
from ...artefacts.profile_summary import (
    INSTALL_HINT,
    Allocation,
    PeakMemory,
    PprofTools,
    ProfileSummary,
    Snapshot,
    short_frame,
)
from ...config.params import Params, load
from ...foundation import console, paths, variants
from ...foundation.dataset_facts import NUM_CLASSES
from ...foundation.errors import PipelineError
from ...foundation.runtime import peak_rss_bytes, timing_lock
from ...mlp.loops.base import TrainState, epoch_order, make_optimizer, make_update, targets_of
from ...mlp.model import MLPParams, batched_predict, init_params
from . import op_table, pprof
from .trace import initial_state, trace

log = logging.getLogger(__name__)

POINTS = paths.SNAPSHOTS
DIFF_BASE = {"train_step": "init"}  # snapshots shown less an earlier one: what the step added
WARMUP_STEPS = 2  # untraced training steps (at least one call) before the traced ones
Candidate = tuple[str, int, str]  # (expected_bytes key, bytes, what it is)


@jax.jit
def _forward(params: MLPParams, images: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Test-split log-probabilities and predicted classes."""
    log_probs = batched_predict(params, images)
    return log_probs, jnp.argmax(log_probs, axis=1)


def _init_point(config: Params) -> dict[str, Any]:
    m = config.model
    return {"params": init_params(m.layer_sizes, jax.random.PRNGKey(m.seed), m.init_scale, m.init, m.output_init)}


def _train_point(
    config: Params, model: HostParams, images: np.ndarray, labels: np.ndarray, jit: bool
) -> dict[str, Any]:
    """One update of the loaded model on the first batch of epoch 1 (compiled, or op by op)."""
    cfg = config.train
    count = len(labels)
    optimizer = make_optimizer(cfg, count)
    order = epoch_order(count, cfg, 1)
    index = np.arange(min(cfg.batch_size, count)) if order is None else order[: cfg.batch_size]
    params = jax.device_put(model)
    state = TrainState(params, optimizer.init(params))
    x = jax.device_put(images[index])
    y = targets_of(labels[index], cfg)
    update = make_update(optimizer)
    new_state = (jax.jit(update) if jit else update)(state, x, y)
    return {"state": state, "images": x, "targets": y, "new_state": new_state}


def _evaluate_point(model: HostParams, images: np.ndarray) -> dict[str, Any]:
    params = jax.device_put(model)
    x = jax.device_put(images)
    log_probs, predicted = _forward(params, x)
    return {"params": params, "images": x, "log_probs": log_probs, "predicted": predicted}


def _snapshot(path: Path, live: Any) -> None:
    """Block on `live` (the caller holds it until this returns); save the device-memory profile."""
    jax.block_until_ready(live)
    jax.profiler.save_device_memory_profile(str(path))


def memory_stats(device: Any) -> dict[str, int] | None:
    """The device's `memory_stats()` (GPU, TPU); None where the backend provides none (CPU)."""
    try:
        stats = device.memory_stats()
    except Exception:  # backends without memory stats raise various errors
        return None
    return {str(k): int(v) for k, v in stats.items() if isinstance(v, int | float)} if stats else None


def peak_memory(stats: dict[str, int] | None) -> PeakMemory:
    """Device peak (GPU/TPU memory_stats) where the backend has one, else the process peak RSS."""
    if stats and "peak_bytes_in_use" in stats:
        return PeakMemory(bytes=int(stats["peak_bytes_in_use"]), source="device.memory_stats peak_bytes_in_use")
    return PeakMemory(bytes=peak_rss_bytes(), source="process peak RSS")


def _candidates(model: HostParams, batch: int, test: int) -> dict[str, list[Candidate]]:
    """The arrays each point holds, by point: (key, bytes, description)."""
    layers: list[Candidate] = []
    for i, (w, b) in enumerate(model):
        out_size, in_size = w.shape
        layers.append((f"layer{i}.weight", w.nbytes, f"the {out_size}x{in_size} {w.dtype} weight of layer {i}"))
        layers.append((f"layer{i}.bias", b.nbytes, f"the {out_size} {b.dtype} bias of layer {i}"))
    pixels, classes = model[0][0].shape[1], NUM_CLASSES
    return {
        "init": layers,
        "train_step": layers
        + [
            ("batch_images", batch * pixels * 4, f"a batch of {batch} images ({batch}x{pixels} float32)"),
            ("batch_targets", batch * classes * 4, f"the batch's {batch}x{classes} float32 one-hot targets"),
        ],
        "evaluate": layers
        + [
            ("test_images", test * pixels * 4, f"the {test}x{pixels} float32 test images"),
            ("test_log_probs", test * classes * 4, f"the {test}x{classes} float32 test log-probabilities"),
            ("test_predictions", test * 4, f"the {test} int32 predicted classes"),
        ],
    }


def expected_bytes(
    candidates: dict[str, list[Candidate]], model: HostParams, state: TrainState, train_count: int
) -> dict[str, int]:
    """Sizes of the model's arrays, of the training state (parameters and optimizer state), of the
    training split on the device (jit_scan holds it), and of the data each point holds."""
    pixels = model[0][0].shape[1]
    sizes = {
        "params": int(sum(w.nbytes + b.nbytes for w, b in model)),
        "state": int(sum(np.asarray(leaf).nbytes for leaf in jax.tree.leaves(state))),
        "train_images": train_count * pixels * 4,
        "train_targets": train_count * NUM_CLASSES * 4,
    }
    for point in POINTS:
        sizes.update({key: int(size) for key, size, _ in candidates[point]})
    return sizes


def _match(row: Allocation, candidates: list[Candidate]) -> str | None:
    """Describe a sample as the arrays whose sizes add up to its bytes (count of them, <= 4)."""
    if not 1 <= row.count <= 4:
        return None
    for combo in itertools.combinations_with_replacement(candidates, row.count):
        if sum(size for _, size, _ in combo) == row.bytes:
            names = [text for _, _, text in combo]
            parts = {text: names.count(text) for text in names}
            return " + ".join(text if n == 1 else f"{n} x {text}" for text, n in parts.items())
    return None


def explain(totals: pprof.Totals, candidates: list[Candidate]) -> str:
    """One sentence relating the largest allocation of a snapshot to the model and data."""
    if not totals.top or totals.top[0].bytes == 0:
        return "No device buffers were live."
    top = totals.top[0]
    share = f"{top.bytes / totals.total_bytes:.0%} of the {totals.total_bytes:,} bytes live"
    kind = top.labels.get("kind", "allocation")
    where = f", allocated in {short_frame(top.origin)}," if top.origin else ""
    what = _match(top, candidates)
    if what is None:
        return (
            f"The largest {kind}, {top.count} x {top.bytes // max(top.count, 1):,}"
            f" bytes{where} matches no model or data array ({share})."
        )
    return f"The largest {kind}, {top.bytes:,} bytes{where} is {what} ({share})."


def _check_shapes(config: Params, model_path: Path, model: HostParams, made_by: str) -> None:
    """The model's layers are those params.yaml names (its 784 inputs, 10 outputs: load_model checks)."""
    sizes = layer_sizes_of(model)
    if tuple(sizes) != tuple(config.model.layer_sizes):
        raise PipelineError(
            f"{model_path}: layer sizes {sizes} differ from model.layer_sizes"
            f" {list(config.model.layer_sizes)} in params.yaml; re-run '{made_by}'"
        )


def profile(params: Params, variant: str, processed_dir: str | Path, root: str | Path = ".") -> ProfileSummary:
    """Run the profile stage of one variant: the trace, `<point>.prof` per point and summary.json."""
    stage = paths.PROFILE.stage(variant)
    spec = variants.get(variant)
    made_by, model_path = paths.MODEL.stage(variant), paths.MODEL.at(variant, root)
    model, _ = load_model(model_path, made_by)  # host arrays: each snapshot holds just its point's arrays
    train_x, train_y = load_split(processed_dir, "train")
    test_x, _ = load_split(processed_dir, "test")
    _check_shapes(params, model_path, model, made_by)
    batch = min(params.train.batch_size, len(train_y))
    candidates = _candidates(model, batch, len(test_x))
    steps: dict[str, Callable[[], Any]] = {
        "init": lambda: _init_point(params),
        "train_step": lambda: _train_point(params, model, train_x, train_y, spec.jit),
        "evaluate": lambda: _evaluate_point(model, test_x),
    }
    device = jax.devices()[0]
    found = pprof.tools()
    points: dict[str, Snapshot] = {}
    rendered: list[str] = []
    out_dir = paths.PROFILE.at(variant, root)
    with atomic.atomic_dir(out_dir) as tmp:
        gc.collect()  # device buffers of unreachable objects would show in the first snapshot
        for point, step in steps.items():
            live = step()
            _snapshot(tmp / f"{point}.prof", live)
            del live
            gc.collect()
            totals = pprof.summarize(tmp / f"{point}.prof", params.profile.top_allocations, stage)
            base = DIFF_BASE.get(point)
            points[point] = Snapshot(
                file=f"{point}.prof",
                total_bytes=totals.total_bytes,
                total_allocations=totals.total_allocations,
                samples=totals.samples,
                explanation=explain(totals, candidates[point]),
                top=totals.top,
                executables=totals.executables,
                diff=pprof.diff(tmp / f"{point}.prof", tmp / f"{base}.prof", params.profile.top_allocations, stage)
                if base
                else None,
            )
            rendered += pprof.render(tmp / f"{point}.prof", tmp, tmp / f"{base}.prof" if base else None)
            console.details.info("%s: %s", point, points[point].explanation)
        available = found["pprof"] is not None and found["dot"] is not None
        if not available:
            log.warning(
                "pprof or Graphviz dot not on PATH: no .top.txt/.svg call graphs (the report says how to install them)"
            )
            console.details.info("install pprof and Graphviz: %s", INSTALL_HINT)
        traced = trace(params, variant, model, train_x, train_y, tmp)
        console.details.info(
            "op table of the traced %s calls\n%s", traced.unit, op_table.format_table(traced.table, top=12)
        )
        log.info(
            "traced %d %s call(s), step time %.3f ms; the op table and the memory snapshots are in the report",
            traced.calls,
            traced.unit,
            traced.table.step_us / 1e3,
        )
        stats = memory_stats(device)
        state = initial_state(params, model, len(train_y))
        summary = ProfileSummary(
            variant=variant,
            device=str(device),
            device_kind=device.device_kind,
            backend=jax.default_backend(),
            jax_version=jax.__version__,
            model=str(model_path),
            batch_size=batch,
            layer_sizes=layer_sizes_of(model),
            expected_bytes=expected_bytes(candidates, model, state, len(train_y)),
            points=points,
            peak_memory=peak_memory(stats),
            memory_stats=stats,
            pprof=PprofTools(
                available=available,
                binary=found["pprof"],
                dot=found["dot"],
                rendered=rendered,
                install_hint=INSTALL_HINT,
            ),
            trace=traced,
        )
        storage.write_model(tmp / "summary.json", summary)
    return summary


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline profile --variant V`: the variant's trace and device-memory snapshots."""
    params = load(args.params)
    with timing_lock(paths.PROFILE.stage(args.variant)):
        profile(params, args.variant, args.processed, args.root)
