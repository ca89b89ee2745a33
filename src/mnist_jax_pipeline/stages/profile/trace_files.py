"""A jax.profiler trace's files: recorded around a few calls, each in a step annotation, under fixed
names (a logdir for XProf), and their Chrome-trace events read back."""

import gzip
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from ...foundation import paths, stops
from ...foundation.errors import PipelineError, missing, remake

Event = dict[str, Any]
STEP_ANNOTATION = "train_step"  # the jax.profiler.StepTraceAnnotation around every traced call
# the files jax.profiler writes in its session folder, by role
WRITTEN = {"perfetto": "perfetto_trace.json.gz", "chrome": "*.trace.json.gz", "xplane": "*.xplane.pb"}


def record(call: Callable[[int], Any], calls: range, logdir: Path, run: str, python_tracer: bool) -> dict[str, Path]:
    """Trace `call(index)` for each index in `calls` (each blocks on its result), in step annotations from 0,
    into `logdir` under fixed names: XProf's run `plugins/profile/<run>` and paths.TRACE_FILES."""
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = int(python_tracer)
    try:
        with stops.held(), jax.profiler.trace(str(logdir), create_perfetto_trace=True, profiler_options=options):
            for step, index in enumerate(calls):
                with jax.profiler.StepTraceAnnotation(STEP_ANNOTATION, step_num=step):
                    call(index)
    except jax.errors.JaxRuntimeError as err:  # the profiler's own writes (a full disk, a read-only folder)
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise PipelineError(
            f"{logdir}: jax.profiler could not write the trace ({first}); check the folder's permissions and free space"
        ) from err
    sessions = [p for p in (logdir / paths.TRACE_RUNS).iterdir() if p.is_dir()]
    if len(sessions) != 1:
        raise PipelineError(f"{logdir}: jax.profiler wrote {len(sessions)} sessions, expected 1")
    folder = sessions[0].rename(sessions[0].with_name(run))
    files = {}
    for role, pattern in WRITTEN.items():
        found = list(folder.glob(pattern))
        if len(found) != 1:  # several hosts write several
            raise PipelineError(f"{folder}: jax.profiler wrote {len(found)} {role} files, expected one")
        files[role] = found[0].rename(folder / paths.TRACE_FILES[role])
    return files


def unzipped(path: Path, made_by: str) -> bytes:
    """A file's bytes, gunzipped where gzipped (the profiler writes both); a missing or damaged file is one
    line naming it and the stage that writes it."""
    try:
        blob = path.read_bytes()
    except FileNotFoundError as err:
        raise missing(path, made_by) from err
    try:  # a file that cannot be read is an OSError, said as such (run.one_line)
        return gzip.decompress(blob) if blob[:2] == b"\x1f\x8b" else blob
    except (OSError, EOFError, zlib.error) as err:
        raise remake(path, f"corrupt or truncated gzip ({err})", made_by) from err


def load_events(path: Path, made_by: str = "profile") -> list[Event]:
    """The events of a Chrome-trace JSON file, gzipped or not; a missing or damaged file is one line
    naming it and the stage that writes it."""
    try:
        data = json.loads(unzipped(path, made_by))
    except ValueError as err:  # JSON and UTF-8 errors
        raise remake(path, f"not a Chrome-trace JSON file ({err})", made_by) from err
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise remake(path, "no list of trace events", made_by)
    for e in events:
        if e.get("ph") == "X" and not all(isinstance(e.get(k), int | float) for k in ("ts", "dur")):
            raise remake(path, f"an event without a start or duration ({e.get('name')!r})", made_by)
    return events
