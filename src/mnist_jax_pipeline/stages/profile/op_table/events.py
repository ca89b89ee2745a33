"""Recording a trace and reading its events: the files jax.profiler writes, given fixed names, and
the Chrome-trace events of one of them, with the XLA op events picked out."""

from __future__ import annotations

import gzip
import json
import shutil
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ....foundation import paths
from ....foundation.errors import PipelineError, missing, remake

Event = dict[str, Any]
Thread = tuple[Any, Any]  # (pid, tid)
STEP_ANNOTATION = "train_step"  # the jax.profiler.StepTraceAnnotation around every traced call


def record(call: Callable[[int], Any], calls: int, out_dir: Path, session: str, python_tracer: bool) -> dict[str, Path]:
    """Trace `call(0) ... call(calls - 1)` (each must block on its result), each inside a step
    annotation, into `out_dir` (a logdir for XProf and TensorBoard). The timestamped session folder
    becomes `plugins/profile/<session>` and the host's files `host.*`, so every file has a fixed
    name. Returns {'perfetto', 'chrome', 'xplane': path}."""
    import jax

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 1 if python_tracer else 0
    try:
        with jax.profiler.trace(str(out_dir), create_perfetto_trace=True, profiler_options=options):
            for index in range(calls):
                with jax.profiler.StepTraceAnnotation(STEP_ANNOTATION, step_num=index):
                    call(index)
    except jax.errors.JaxRuntimeError as err:  # the profiler's own writes (a full disk, a read-only folder)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise PipelineError(
            f"{out_dir}: jax.profiler could not write the trace ({first}); check the folder's"
            " permissions and free space"
        ) from err
    sessions = sorted(p for p in (out_dir / "plugins" / "profile").iterdir() if p.is_dir())
    if len(sessions) != 1:
        raise PipelineError(f"{out_dir}: jax.profiler wrote {len(sessions)} sessions, expected 1")
    folder = sessions[0].with_name(session)
    sessions[0].rename(folder)
    return _fixed_names(folder)


def _fixed_names(folder: Path) -> dict[str, Path]:
    """Rename the session's trace files to paths.TRACE_FILES' names; {role: path}."""
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        role = (
            "perfetto"
            if path.name == paths.TRACE_FILES["perfetto"]
            else "chrome"
            if path.name.endswith(".trace.json.gz")
            else "xplane"
            if path.name.endswith(".xplane.pb")
            else None
        )
        if role is None:
            continue
        if role in found:
            raise PipelineError(f"{folder}: more than one {role} file (several hosts?); expected one")
        target = folder / paths.TRACE_FILES[role]
        if path != target:
            shutil.move(path, target)
        found[role] = target
    absent = sorted(set(paths.TRACE_FILES) - set(found))
    if absent:
        raise PipelineError(f"{folder}: jax.profiler wrote no {', '.join(absent)} file")
    return found


def load_events(path: str | Path, made_by: str = "profile") -> list[Event]:
    """The events of a Chrome-trace JSON file (gzipped or not). A missing or damaged file is one line
    naming it and the stage that writes it."""
    path = Path(path)
    try:
        blob = path.read_bytes()
        if blob[:2] == b"\x1f\x8b":
            blob = gzip.decompress(blob)
        data = json.loads(blob)
    except FileNotFoundError as err:
        raise missing(path, made_by) from err
    except (OSError, EOFError, zlib.error) as err:
        raise remake(path, f"corrupt or truncated gzip ({err})", made_by) from err
    except (ValueError, UnicodeDecodeError) as err:
        raise remake(path, f"not a Chrome-trace JSON file ({err})", made_by) from err
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise remake(path, "no list of trace events", made_by)
    for event in events:
        if event.get("ph") == "X" and not (
            isinstance(event.get("ts"), int | float) and isinstance(event.get("dur"), int | float)
        ):
            raise remake(path, f"an event without a start or duration ({event.get('name')!r})", made_by)
    return events


def thread_names(events: Iterable[Event]) -> dict[Thread, str]:
    return {
        (e.get("pid"), e.get("tid")): str(e.get("args", {}).get("name"))
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }


def op_events(events: Iterable[Event], module: str | None = None) -> list[Event]:
    """The XLA op events, of one HLO module (e.g. 'jit_update') or of all."""
    return [
        e
        for e in events
        if e.get("ph") == "X"
        and "hlo_op" in e.get("args", {})
        and (module is None or e["args"].get("hlo_module") == module)
    ]


def event_thread(event: Event) -> Thread:
    """The (pid, tid) the event ran on."""
    return event.get("pid"), event.get("tid")


def event_end(event: Event) -> float:
    """When a complete ('X') event ends."""
    return float(event["ts"]) + float(event["dur"])
