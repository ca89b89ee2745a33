"""Tracing a variant's steady-state training steps with jax.profiler: the loop built from the trained
model, a few warm-up calls, then the traced calls, each in a step annotation; the files get fixed
names, and the trace's op table is parsed."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...artefacts.model_file import HostParams
from ...artefacts.profile_summary import Trace
from ...config.params import Params
from ...foundation import paths, variants
from ...foundation.errors import PipelineError
from ...mlp import loops
from ...mlp.loops.base import TrainState, loop_inputs, make_optimizer
from ...mlp.model import MLPParams
from . import op_table
from .op_table import STEP_ANNOTATION

WARMUP_STEPS = 2  # untraced training steps (at least one call) before the traced ones
WRITTEN = {
    "perfetto": "perfetto_trace.json.gz",
    "chrome": "*.trace.json.gz",
    "xplane": "*.xplane.pb",
}  # by jax.profiler


def record(call: Callable[[int], Any], calls: int, out_dir: Path, session: str, python_tracer: bool) -> dict[str, Path]:
    """Trace `call(0) ... call(calls - 1)` (each blocks on its result), each in a step annotation, into
    `out_dir` (a logdir for XProf), renamed to fixed names: the session folder `plugins/profile/<session>`
    and paths.TRACE_FILES. Returns {'perfetto', 'chrome', 'xplane': path}."""
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = int(python_tracer)
    try:
        with jax.profiler.trace(str(out_dir), create_perfetto_trace=True, profiler_options=options):
            for index in range(calls):
                with jax.profiler.StepTraceAnnotation(STEP_ANNOTATION, step_num=index):
                    call(index)
    except jax.errors.JaxRuntimeError as err:  # the profiler's own writes (a full disk, a read-only folder)
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise PipelineError(
            f"{out_dir}: jax.profiler could not write the trace ({first}); check the folder's permissions"
            " and free space"
        ) from err
    sessions = [p for p in (out_dir / "plugins" / "profile").iterdir() if p.is_dir()]
    if len(sessions) != 1:
        raise PipelineError(f"{out_dir}: jax.profiler wrote {len(sessions)} sessions, expected 1")
    folder = sessions[0].rename(sessions[0].with_name(session))
    files = {}
    for role, pattern in WRITTEN.items():
        found = list(folder.glob(pattern))
        if len(found) != 1:  # several hosts write several
            raise PipelineError(f"{folder}: jax.profiler wrote {len(found)} {role} files, expected one")
        files[role] = found[0].rename(folder / paths.TRACE_FILES[role])
    return files


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
    files = record(
        lambda i: call(warmup + i), calls, out_dir / paths.TRACE_LOGDIR, session=variant, python_tracer=spec.jit
    )
    table = op_table.parse(op_table.load_events(files["perfetto"], paths.PROFILE.stage(variant)), loop.hlo_text())
    if table.steps < calls:  # the profiler keeps at most a million events, and drops the rest silently
        raise PipelineError(
            f"{paths.PROFILE.stage(variant)}: the trace kept {table.steps} of its {calls} traced"
            f" {loop.unit()}s (the profiler's event limit); lower profile.trace_steps"
            f" (now {config.profile.trace_steps}) in params.yaml"
        )
    return Trace(
        logdir=paths.TRACE_LOGDIR,
        files={role: path.relative_to(out_dir).as_posix() for role, path in sorted(files.items())},
        calls=calls,
        unit=loop.unit(),
        train_steps=calls * per_call,
        warmup_calls=warmup,
        python_tracer=spec.jit,
        table=table,
    )
