"""The profile stage, per variant: device-memory snapshots (pprof) while the arrays of each point of
the model's life are live (the parameters' initialisation, one training step from the trained model,
the test split's evaluation), a jax.profiler trace of its steady-state training steps with its op
table, and summary.json, the report's input. The variant's folder is replaced whole."""

import argparse
import gc
import logging
import math
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...artefacts import atomic, storage
from ...artefacts.dataset import load_split
from ...artefacts.model_file import HostParams, layer_sizes_of, load_model
from ...artefacts.profile_summary import INSTALL_HINT, PeakMemory, PprofTools, ProfileSummary, Snapshot, Trace
from ...config.params import Params, load
from ...foundation import backend, console, paths, variants
from ...foundation.dataset_facts import NUM_CLASSES
from ...foundation.errors import PipelineError
from ...foundation.runtime import peak_rss_bytes, timing_lock
from ...mlp import loops
from ...mlp.loops.base import TrainState, epoch_order, loop_inputs, make_optimizer, make_update, targets_of
from ...mlp.model import MLPParams, batched_predict, init_params
from . import op_table, pprof, trace_files

log = logging.getLogger(__name__)

WARMUP_STEPS = 2  # untraced training steps (at least one call) before the traced ones
ByPoint = dict[str, list[pprof.KnownArray]]  # the arrays each snapshot point holds


@jax.jit
def _forward(params: MLPParams, images: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Test-split log-probabilities and predicted classes."""
    log_probs = batched_predict(params, images)
    return log_probs, jnp.argmax(log_probs, axis=1)


def _train_point(config: Params, model: HostParams, images: np.ndarray, labels: np.ndarray, jit: bool) -> Any:
    """One update of the loaded model on the first batch of epoch 1 (compiled, or op by op)."""
    cfg, count = config.train, len(labels)
    order = epoch_order(count, cfg, 1)
    index = np.arange(min(cfg.batch_size, count)) if order is None else order[: cfg.batch_size]
    state = initial_state(config, model, count)
    x, y = jax.device_put(images[index]), targets_of(labels[index], cfg)
    update = make_update(make_optimizer(cfg, count))
    return state, x, y, (jax.jit(update) if jit else update)(state, x, y)


def _evaluate_point(model: HostParams, images: np.ndarray) -> Any:
    """The model's predictions for the test split, with their inputs."""
    params, x = jax.device_put(model), jax.device_put(images)
    return params, x, _forward(params, x)


def device_memory(device: Any) -> tuple[PeakMemory, dict[str, int] | None]:
    """The peak (the device's where `memory_stats()` has one: GPU, TPU; else the process's peak RSS) and
    the device's `memory_stats()`, None where the backend provides none (CPU)."""
    try:
        stats = {str(k): int(v) for k, v in (device.memory_stats() or {}).items() if isinstance(v, int | float)}
    except Exception:  # backends without memory stats raise various errors
        stats = {}
    if "peak_bytes_in_use" in stats:
        return PeakMemory(bytes=stats["peak_bytes_in_use"], source="device.memory_stats peak_bytes_in_use"), stats
    return PeakMemory(bytes=peak_rss_bytes(), source="process peak RSS"), stats or None


def known_arrays(model: HostParams, batch: int, test: int) -> ByPoint:
    """The arrays each point holds, by point: (expected_bytes key, bytes, description)."""
    layers: list[pprof.KnownArray] = []
    for i, (w, b) in enumerate(model):
        layers.append((f"layer{i}.weight", w.nbytes, f"the {w.shape[0]}x{w.shape[1]} {w.dtype} weight of layer {i}"))
        layers.append((f"layer{i}.bias", b.nbytes, f"the {b.shape[0]} {b.dtype} bias of layer {i}"))
    pixels, classes = model[0][0].shape[1], NUM_CLASSES
    batch_data = [
        ("batch_images", batch * pixels * 4, f"a batch of {batch} images ({batch}x{pixels} float32)"),
        ("batch_targets", batch * classes * 4, f"the batch's {batch}x{classes} float32 one-hot targets"),
    ]
    test_data = [
        ("test_images", test * pixels * 4, f"the {test}x{pixels} float32 test images"),
        ("test_log_probs", test * classes * 4, f"the {test}x{classes} float32 test log-probabilities"),
        ("test_predictions", test * 4, f"the {test} int32 predicted classes"),
    ]
    return {"init": layers, "train_step": layers + batch_data, "evaluate": layers + test_data}


def expected_bytes(arrays: ByPoint, config: Params, model: HostParams, train: int) -> dict[str, int]:
    """Sizes of the model, of the training state (parameters and optimizer state), of the training
    split on the device (jit_scan holds it), and of every array a point holds."""
    return {
        "params": int(sum(w.nbytes + b.nbytes for w, b in model)),
        "state": int(sum(np.asarray(leaf).nbytes for leaf in jax.tree.leaves(initial_state(config, model, train)))),
        "train_images": train * model[0][0].shape[1] * 4,
        "train_targets": train * NUM_CLASSES * 4,
        **{key: int(size) for point in paths.SNAPSHOTS for key, size, _ in arrays[point]},
    }


def initial_state(config: Params, model: HostParams, train_count: int) -> TrainState:
    """The trained model with a fresh optimizer state, as the device holds it."""
    weights: MLPParams = [(jnp.asarray(w), jnp.asarray(b)) for w, b in model]
    return TrainState(weights, make_optimizer(config.train, train_count).init(weights))


def trace(
    config: Params, variant: str, model: HostParams, images: np.ndarray, labels: np.ndarray, out_dir: Path
) -> Trace:
    """Trace the variant's steady-state steps into `out_dir/trace` and parse the op table."""
    spec = variants.get(variant)
    loop = loops.build(spec, loop_inputs(config, images, labels))
    state = jax.block_until_ready(loop.place(initial_state(config, model, len(labels))))
    loop.compile(state)
    per_call = loop.steps_per_call()
    warmup, calls = math.ceil(WARMUP_STEPS / per_call), math.ceil(config.profile.trace_steps / per_call)

    def call(index: int) -> None:
        nonlocal state
        state = jax.block_until_ready(loop.run_call(state, index))

    for index in range(warmup):
        call(index)
    files = trace_files.record(call, range(warmup, warmup + calls), out_dir / paths.TRACE_LOGDIR, variant, spec.jit)
    table = op_table.parse(trace_files.load_events(files["perfetto"], paths.PROFILE.stage(variant)), loop.hlo_text())
    if table.steps < calls:  # the profiler keeps at most a million events, and drops the rest silently
        raise PipelineError(
            f"{paths.PROFILE.stage(variant)}: the trace kept {table.steps} of its {calls} traced"
            f" {spec.call_unit}s (the profiler's event limit); lower profile.trace_steps"
            f" (now {config.profile.trace_steps}) in params.yaml"
        )
    return Trace(
        logdir=paths.TRACE_LOGDIR,
        files={role: path.relative_to(out_dir).as_posix() for role, path in sorted(files.items())},
        calls=calls,
        unit=spec.call_unit,
        train_steps=calls * per_call,
        warmup_calls=warmup,
        python_tracer=spec.jit,
        table=table,
    )


def profile(params: Params, variant: str, processed_dir: str | Path, root: str | Path = ".") -> ProfileSummary:
    """Run the profile stage of one variant: `<point>.prof` per point, the trace and summary.json."""
    stage = paths.PROFILE.stage(variant)
    made_by, model_path = paths.MODEL.stage(variant), paths.MODEL.at(variant, root)
    model, _ = load_model(model_path, made_by)  # host arrays: each snapshot holds just its point's arrays
    train_x, train_y = load_split(processed_dir, "train")
    test_x, _ = load_split(processed_dir, "test")
    sizes = layer_sizes_of(model)  # its 784 inputs and 10 outputs load_model checks; its hidden layers here
    if tuple(sizes) != tuple(params.model.layer_sizes):
        raise PipelineError(
            f"{model_path}: layer sizes {sizes} differ from model.layer_sizes"
            f" {list(params.model.layer_sizes)} in params.yaml; re-run '{made_by}'"
        )
    batch = min(params.train.batch_size, len(train_y))
    arrays = known_arrays(model, batch, len(test_x))
    m = params.model
    hold = {
        "init": lambda: init_params(m.layer_sizes, jax.random.PRNGKey(m.seed), m.init_scale, m.init, m.output_init),
        "train_step": lambda: _train_point(params, model, train_x, train_y, variants.get(variant).jit),
        "evaluate": lambda: _evaluate_point(model, test_x),
    }
    device, found = jax.devices()[0], pprof.tools()
    points: dict[str, Snapshot] = {}
    rendered: list[str] = []
    with atomic.atomic_dir(paths.PROFILE.at(variant, root)) as tmp:
        gc.collect()  # device buffers of unreachable objects would show in the first snapshot
        snapshots = {point: tmp / paths.SNAPSHOT_FILE.format(point=point) for point in paths.SNAPSHOTS}
        for point, prof in snapshots.items():
            live = jax.block_until_ready(hold[point]())
            jax.profiler.save_device_memory_profile(str(prof))
            del live
            gc.collect()
            base = snapshots["init"] if point == "train_step" else None  # shown less init: what the step added
            points[point] = pprof.summarize(prof, params.profile.top_allocations, stage, arrays[point], base)
            rendered += pprof.render(prof, tmp, base)
            console.details.info("%s: %s", point, points[point].explanation)
        available = None not in found.values()
        if not available:
            log.warning(
                "pprof or Graphviz dot not on PATH: no .top.txt/.svg call graphs (the report says how to install them)"
            )
            console.details.info("install pprof and Graphviz: %s", INSTALL_HINT)
        traced = trace(params, variant, model, train_x, train_y, tmp)
        console.details.info(
            "op table of the traced %s calls\n%s", traced.unit, op_table.format_table(traced.table, 12)
        )
        log.info(
            "traced %d %s call(s), step time %.3f ms; the op table and the memory snapshots are in the report",
            traced.calls,
            traced.unit,
            traced.table.step_us / 1e3,
        )
        peak, stats = device_memory(device)
        summary = ProfileSummary(
            variant=variant,
            device=str(device),
            device_kind=device.device_kind,
            backend=jax.default_backend(),
            jax_version=jax.__version__,
            model=str(model_path),
            batch_size=batch,
            layer_sizes=sizes,
            expected_bytes=expected_bytes(arrays, params, model, len(train_y)),
            points=points,
            peak_memory=peak,
            memory_stats=stats,
            pprof=PprofTools(available=available, rendered=rendered, install_hint=INSTALL_HINT, **found),
            trace=traced,
        )
        storage.write_model(tmp / paths.PROFILE_SUMMARY, summary)
    return summary


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline profile --variant V`: the variant's trace and device-memory snapshots."""
    params = load(args.params)
    with timing_lock(paths.PROFILE.stage(args.variant)):
        backend.start()
        profile(params, args.variant, args.processed, args.root)
