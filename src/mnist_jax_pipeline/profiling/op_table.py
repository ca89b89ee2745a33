"""The per-op table of a `jax.profiler` trace: where a step's time goes, op by op.

`record` traces a few calls of a training loop, each inside a step annotation, and gives the
files fixed names. `parse` reads the Chrome-trace events (the Perfetto file) and builds the
`OpTable` of artefacts/profile_summary.py: every op's count, self time, share of the traced step
time and, for the matrix products, the achieved GFLOP/s (FLOPs counted from the compiled HLO).

What the trace holds (CPU, jax 0.10.2): an XLA op is a complete ('X') event whose `args` carry
`hlo_op`, `hlo_module` and `run_id` (one per executable run); it runs on a `tf_XLAEigen` or
`tf_XLAPjRtCpuClient` thread. Ops may overlap on different threads, and a thunk that hands its
work to a thread pool (a large `dot`, a partitioned loop fusion, a `while`) returns before the
work is done: its event ends early and its completion is marked later by an `end: <op>` event.
So an op's own time is its self time (event duration less the op events nested in it on its
thread), and its wall time runs to its completion. The traced step time is, per traced step,
the span from its first op's start to its last op's completion, summed over the steps: the
self-time sum falls short of it by the gaps between ops and the asynchronous tails.
Op-by-op code (`nojit`) runs every primitive as its own tiny executable, so its rows are the
executables (`hlo_module`), and a step's span includes the Python dispatch between them.
"""

from __future__ import annotations

import bisect
import collections
import gzip
import json
import math
import re
import shutil
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import paths
from ..artefacts.profile_summary import MatmulTotals, OpRow, OpTable, Timeline, TimelineEvent
from ..errors import PipelineError, missing, remake

Event = dict[str, Any]
STEP_ANNOTATION = "train_step"  # the jax.profiler.StepTraceAnnotation around every traced call
CONTROL_FLOW = ("while", "conditional", "call")
TIMELINE_EVENTS = 600  # at most this many events in the stored timeline of one step
SYNC_SLACK_US = 2.0  # an `end: <op>` marker this close to its event's end: the op was synchronous
WAIT_FOR_COMPLETION = "ThunkExecutor::Execute (wait for completion)"


# --- recording -------------------------------------------------------------------------------------


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
        raise PipelineError(f"{out_dir}: jax.profiler could not write the trace ({first}); check the folder's"
                            " permissions and free space") from err
    sessions = sorted(p for p in (out_dir / "plugins" / "profile").iterdir() if p.is_dir())
    if len(sessions) != 1:
        raise PipelineError(f"{out_dir}: jax.profiler wrote {len(sessions)} sessions, expected 1")
    folder = sessions[0].with_name(session)
    sessions[0].rename(folder)
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        role = ("perfetto" if path.name == paths.TRACE_FILES["perfetto"] else
                "chrome" if path.name.endswith(".trace.json.gz") else
                "xplane" if path.name.endswith(".xplane.pb") else None)
        if role is None:
            continue
        if role in found:
            raise PipelineError(f"{folder}: more than one {role} file (several hosts?); expected one")
        target = folder / paths.TRACE_FILES[role]
        if path != target:
            shutil.move(path, target)
        found[role] = target
    missing = sorted(set(paths.TRACE_FILES) - set(found))
    if missing:
        raise PipelineError(f"{folder}: jax.profiler wrote no {', '.join(missing)} file")
    return found


# --- reading -----------------------------------------------------------------------------------------


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
        if event.get("ph") == "X" and not (isinstance(event.get("ts"), int | float)
                                           and isinstance(event.get("dur"), int | float)):
            raise remake(path, f"an event without a start or duration ({event.get('name')!r})", made_by)
    return events


def thread_names(events: Iterable[Event]) -> dict[tuple[Any, Any], str]:
    return {(e.get("pid"), e.get("tid")): str(e.get("args", {}).get("name")) for e in events
            if e.get("ph") == "M" and e.get("name") == "thread_name"}


def op_events(events: Iterable[Event], module: str | None = None) -> list[Event]:
    """The XLA op events, of one HLO module (e.g. 'jit_update') or of all."""
    return [e for e in events if e.get("ph") == "X" and "hlo_op" in e.get("args", {})
            and (module is None or e["args"].get("hlo_module") == module)]


def _end(event: Event) -> float:
    return float(event["ts"]) + float(event["dur"])


def self_times(ops: list[Event]) -> list[float]:
    """Each op event's duration less the parts of the op events nested in it on its thread (a list
    parallel to `ops`). Only op events take part, so the profiler's own bookkeeping inside an op
    counts as the op's time."""
    result = [float(e["dur"]) for e in ops]
    by_thread: dict[tuple[Any, Any], list[int]] = collections.defaultdict(list)
    for i, e in enumerate(ops):
        by_thread[(e.get("pid"), e.get("tid"))].append(i)
    for indices in by_thread.values():
        indices.sort(key=lambda i: (ops[i]["ts"], -ops[i]["dur"]))
        stack: list[int] = []  # open events, outermost first
        for i in indices:
            start, end = float(ops[i]["ts"]), _end(ops[i])
            while stack and start >= _end(ops[stack[-1]]):
                stack.pop()
            if stack:  # nested in the top of the stack: charge the overlap to it, its direct parent
                parent = stack[-1]
                result[parent] -= min(end, _end(ops[parent])) - start
            stack.append(i)
    return result


def completion_times(events: list[Event], ops: list[Event]) -> list[float]:
    """When each op really finished (parallel to `ops`), allowing for asynchronous thunks.

    Each op is paired with the first `end: <op>` marker at or after its start (and before its next
    execution). A marker within SYNC_SLACK_US of the event's end means the op was synchronous.
    Otherwise its completion callback ran the ready dependents inline before the marker (the
    `ThunkExecutor::Execute` events on the marker's thread): the op finished when the outermost of
    those that ends right at the marker began, or at the marker when there is none. An op whose
    executor waits for it right after its event (on its thread) finished no later than that wait.
    """
    markers: dict[str, list[Event]] = collections.defaultdict(list)
    executes: dict[Any, list[Event]] = collections.defaultdict(list)
    waits: dict[Any, list[Event]] = collections.defaultdict(list)
    for e in events:
        if e.get("ph") != "X":
            continue
        name = str(e.get("name", ""))
        if name.startswith("end: "):
            markers[name[5:]].append(e)
        elif name == "ThunkExecutor::Execute":
            executes[(e.get("pid"), e.get("tid"))].append(e)
        elif name == WAIT_FOR_COMPLETION:
            waits[(e.get("pid"), e.get("tid"))].append(e)
    for group in (*markers.values(), *executes.values(), *waits.values()):
        group.sort(key=lambda e: e["ts"])
    starts = {key: [e["ts"] for e in group] for key, group in executes.items()}
    wait_starts = {key: [e["ts"] for e in group] for key, group in waits.items()}
    marker_ts = {name: [m["ts"] for m in group] for name, group in markers.items()}
    runs: dict[str, list[int]] = collections.defaultdict(list)
    for i, e in enumerate(ops):
        runs[e["name"]].append(i)
    done = [_end(e) for e in ops]
    for name, indices in runs.items():
        indices.sort(key=lambda i: ops[i]["ts"])
        group, times = markers.get(name, []), marker_ts.get(name, [])
        for k, i in enumerate(indices):
            op = ops[i]
            j = bisect.bisect_left(times, op["ts"])
            later = ops[indices[k + 1]]["ts"] if k + 1 < len(indices) else math.inf
            if j == len(group) or group[j]["ts"] >= later or group[j]["ts"] <= _end(op) + SYNC_SLACK_US:
                continue  # no marker (the trace was cut), or a synchronous op
            marker = group[j]
            key = (marker.get("pid"), marker.get("tid"))
            candidates, begun = executes.get(key, []), starts.get(key, [])
            lo, hi = bisect.bisect_left(begun, _end(op)), bisect.bisect_right(begun, marker["ts"])
            first = [x["ts"] for x in candidates[lo:hi] if marker["ts"] - 5.0 <= _end(x) <= marker["ts"] + 0.01]
            done[i] = float(min(first)) if first else float(marker["ts"])
            # When the executor waits for the op right after its event (an op-by-op executable of one
            # asynchronous op), it is done when the wait ends: a later marker of that name is another run's.
            thread = (op.get("pid"), op.get("tid"))
            w = bisect.bisect_left(wait_starts.get(thread, []), _end(op))
            if w < len(waits[thread]) and waits[thread][w]["ts"] <= _end(op) + SYNC_SLACK_US:
                done[i] = min(done[i], _end(waits[thread][w]))
    return done


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by the intervals."""
    total, current = 0.0, None
    for start, end in sorted(intervals):
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    return total + (current[1] - current[0] if current is not None else 0.0)


# --- the compiled HLO: FLOPs of the matrix products ------------------------------------------------------

_ARRAY = re.compile(r"^\s*(?:ROOT\s+)?%(?P<name>[^\s=]+)\s*=\s*(?P<type>\w+)\[(?P<dims>[\d,]*)\]\S*\s+"
                    r"(?P<op>[\w-]+)\((?P<operands>[^)]*)\)(?P<attrs>.*)$")
_TUPLE = re.compile(r"^\s*(?:ROOT\s+)?%(?P<name>[^\s=]+)\s*=\s*\(.*?\)\s+(?P<op>[\w-]+)\(")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%(?P<name>\S+)\s*\(.*\{\s*$")
_MODULE = re.compile(r"^HloModule\s+([^\s,]+)")


@dataclass
class Instruction:
    name: str
    op: str
    dims: tuple[int, ...]
    operands: list[str]
    attrs: str
    tuple_shaped: bool = False


def module_name(hlo: str) -> str:
    """The module's name ('jit_update'): the `hlo_module` of its ops in the trace."""
    found = _MODULE.match(hlo.lstrip())
    if not found:
        raise ValueError("HLO text does not start with 'HloModule <name>'")
    return found.group(1)


def parse_hlo(hlo: str) -> tuple[dict[str, Instruction], dict[str, list[str]]]:
    """Instructions by name (unique in a module) and the instruction names of each computation."""
    instructions: dict[str, Instruction] = {}
    members: dict[str, list[str]] = collections.defaultdict(list)
    computation = ""
    for line in hlo.splitlines():
        found = _COMPUTATION.match(line)
        if found:
            computation = found.group("name")
            continue
        array = _ARRAY.match(line)
        shaped = None if array else _TUPLE.match(line)  # while, call, tuple, ...: no array shape
        if array:
            dims = tuple(int(d) for d in array.group("dims").split(",") if d)
            operands = [o.strip().lstrip("%") for o in array.group("operands").split(",")
                        if o.strip().startswith("%")]
            ins = Instruction(array.group("name"), array.group("op"), dims, operands, array.group("attrs"))
        elif shaped:
            ins = Instruction(shaped.group("name"), shaped.group("op"), (), [], "", tuple_shaped=True)
        else:
            continue
        instructions[ins.name] = ins
        members[computation].append(ins.name)
    return instructions, dict(members)


def _dims(attrs: str, key: str) -> list[int]:
    found = re.search(key + r"=\{([\d,]*)\}", attrs)
    return [int(d) for d in found.group(1).split(",") if d] if found else []


def instruction_flops(ins: Instruction, instructions: dict[str, Instruction]) -> int:
    """FLOPs of one dot or convolution (2 per multiply-add); 0 for anything else."""
    if ins.op == "dot" and ins.operands and ins.operands[0] in instructions:
        lhs = instructions[ins.operands[0]].dims
        contracted = math.prod(lhs[d] for d in _dims(ins.attrs, "lhs_contracting_dims") if d < len(lhs))
        return 2 * math.prod(ins.dims) * contracted
    if ins.op == "convolution" and len(ins.operands) > 1 and ins.operands[1] in instructions:
        kernel = instructions[ins.operands[1]].dims
        labels = re.search(r"dim_labels=\w+_(\w+)->", ins.attrs)
        out_features = kernel[labels.group(1).index("o")] if labels and "o" in labels.group(1) else kernel[-1]
        return 2 * math.prod(ins.dims) * math.prod(kernel) // max(out_features, 1)
    return 0


def _called(ins: Instruction) -> str | None:
    found = re.search(r"calls=%([^\s,]+)", ins.attrs)
    return found.group(1) if found else None


def hlo_ops(hlo: str) -> dict[str, tuple[int, str]]:
    """{instruction name: (FLOPs per execution, short description)}. A fusion counts the dots and
    convolutions it wraps; a `while` nothing (its body's ops are traced as events of their own)."""
    instructions, members = parse_hlo(hlo)
    memo: dict[str, int] = {}

    def computation_flops(name: str) -> int:
        if name not in memo:
            memo[name] = 0  # guards against a cycle
            memo[name] = sum(own(instructions[n]) for n in members.get(name, []) if n in instructions)
        return memo[name]

    def own(ins: Instruction) -> int:
        if ins.op == "fusion":
            called = _called(ins)
            return computation_flops(called) if called else 0
        return instruction_flops(ins, instructions)

    out = {}
    for name, ins in instructions.items():
        what = ins.op
        if ins.op == "fusion":
            inner = [instructions[n].op for n in members.get(_called(ins) or "", []) if n in instructions]
            core = [op for op in inner if op not in ("parameter", "constant", "broadcast", "bitcast")]
            kind = re.search(r"kind=(\w+)", ins.attrs)
            what = f"fusion[{kind.group(1) if kind else '?'}:{','.join(dict.fromkeys(core))}]"
        shape = "(tuple)" if ins.tuple_shaped else f"[{','.join(map(str, ins.dims))}]"
        out[name] = (own(ins), f"{shape} {what}")
    return out


# --- the table -------------------------------------------------------------------------------------------


def _step_windows(events: list[Event], ops: list[Event]) -> list[tuple[float, float]]:
    """[start, end] of every traced step annotation; without annotations, one window per executable
    run (compiled code) or one over the whole trace."""
    steps = sorted((float(e["ts"]), _end(e)) for e in events if e.get("ph") == "X" and e.get("name") == STEP_ANNOTATION)
    if steps or not ops:
        return steps
    runs: dict[Any, list[Event]] = collections.defaultdict(list)
    for e in ops:
        runs[e["args"].get("run_id")].append(e)
    if len(runs) > 1 and all(len(group) > 1 for group in runs.values()):
        return sorted((min(float(e["ts"]) for e in g), max(_end(e) for e in g)) for g in runs.values())
    return [(min(float(e["ts"]) for e in ops), max(_end(e) for e in ops))]


def _lane_names(events: list[Event], ops: list[Event]) -> dict[tuple[Any, Any], str]:
    """Short, stable names of the threads ops ran on: 'python', 'XLA client 1', 'Eigen pool 2', ..."""
    names = thread_names(events)
    lanes: dict[tuple[Any, Any], str] = {}
    counters: collections.Counter[str] = collections.Counter()
    for e in sorted(ops, key=lambda e: e["ts"]):
        key = (e.get("pid"), e.get("tid"))
        if key in lanes:
            continue
        raw = names.get(key, f"thread {e.get('tid')}")
        base = ("XLA client" if raw.startswith("tf_XLAPjRtCpuClient") else
                "Eigen pool" if raw.startswith("tf_XLAEigen") else raw.split("/")[0])
        if base == raw and base not in counters:
            counters[base] += 1
            lanes[key] = base
            continue
        counters[base] += 1
        lanes[key] = f"{base} {counters[base]}"
    return lanes


def parse(events: list[Event], hlo: str | None = None) -> OpTable:
    """The per-op table of a trace. With `hlo` (the compiled unit's `as_text()`) the rows are that
    module's HLO instructions, with FLOPs and GFLOP/s for the matrix products; without it (op-by-op
    code) they are the executables. The traced step time is summed over the step annotations."""
    module = module_name(hlo) if hlo else None
    key = "hlo_op" if hlo else "hlo_module"
    everything = op_events(events, module)
    windows = _step_windows(events, everything)
    starts = [w[0] for w in windows]

    def step_of(e: Event) -> int | None:
        i = bisect.bisect_right(starts, float(e["ts"])) - 1
        return i if i >= 0 and float(e["ts"]) <= windows[i][1] else None

    placed = [(step_of(e), e) for e in everything]
    ops = [e for step, e in placed if step is not None]
    step_index = [step for step, _ in placed if step is not None]
    selfs = self_times(ops)
    done = completion_times(events, ops)
    described = hlo_ops(hlo) if hlo else {}
    control = {n for n, (_, what) in described.items() if what.split(" ", 1)[1] in CONTROL_FLOW}
    lanes = _lane_names(events, ops)

    self_sum: dict[str, float] = collections.defaultdict(float)
    wall: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    by_step: dict[int, list[int]] = collections.defaultdict(list)
    for i, e in enumerate(ops):
        name = str(e["args"].get(key, e["name"]))
        self_sum[name] += selfs[i]
        wall[name] += done[i] - float(e["ts"])
        count[name] += 1
        threads[lanes[(e.get("pid"), e.get("tid"))]] += 1
        by_step[step_index[i]].append(i)
    step_us = busy_us = 0.0
    for indices in by_step.values():
        step_us += max(done[i] for i in indices) - min(float(ops[i]["ts"]) for i in indices)
        leaves = [i for i in indices if ops[i]["name"] not in control]
        busy_us += union_length((float(ops[i]["ts"]), done[i]) for i in leaves)
    rows = []
    for name, micros in sorted(self_sum.items(), key=lambda item: (-item[1], item[0])):
        flops, what = described.get(name, (0, ""))
        rate = flops * count[name] / (wall[name] * 1e3) if flops and wall[name] > 0 else None
        rows.append(OpRow(op=name, count=count[name], self_us=round(micros, 3),
                          share=round(micros / step_us, 6) if step_us else 0.0, wall_us=round(wall[name], 3),
                          flops=flops or None, gflops_per_s=None if rate is None else round(rate, 6), hlo=what))
    products = [r for r in rows if r.flops]
    matmul = None
    if products:
        work = sum((r.flops or 0) * r.count for r in products)
        walls = sum(r.wall_us for r in products)
        matmul = MatmulTotals(ops=len(products), flops=work, self_us=round(sum(r.self_us for r in products), 3),
                              wall_us=round(walls, 3), gflops_per_s=round(work / walls / 1e3, 6) if walls else 0.0)
    return OpTable(
        module=module, grouped_by="hlo_op" if hlo else "hlo_module", steps=len(by_step),
        runs=len({e["args"].get("run_id") for e in ops}), step_us=round(step_us, 3),
        annotated_us=round(sum(end - start for start, end in windows), 3), self_us=round(sum(selfs), 3),
        busy_us=round(busy_us, 3), rows=rows, matmul=matmul,
        timeline=_timeline(ops, done, step_index, lanes, described, key), threads=dict(sorted(threads.items())))


def _timeline(ops: list[Event], done: list[float], step_index: list[int], lanes: dict[tuple[Any, Any], str],
              described: dict[str, tuple[int, str]], key: str) -> Timeline:
    """The events of the last traced step; when that step is one executable run in which ops repeat
    (a scanned epoch), one iteration in its middle: between two starts of the op that repeats most
    often and starts first."""
    if not ops:
        return Timeline(title="no op events", duration_us=0.0, events=[])
    last = max(step_index)
    chosen = sorted((i for i in range(len(ops)) if step_index[i] == last), key=lambda i: ops[i]["ts"])
    steps = len(set(step_index))
    title = f"step {steps} of {steps} traced"
    start, stop = float(ops[chosen[0]]["ts"]), max(done[i] for i in chosen)
    repeats = collections.Counter(ops[i]["name"] for i in chosen)
    if key == "hlo_op" and len({ops[i]["args"].get("run_id") for i in chosen}) == 1 and max(repeats.values()) > 2:
        most = max(repeats.values())
        first_seen: dict[str, float] = {}
        for i in chosen:
            first_seen.setdefault(ops[i]["name"], float(ops[i]["ts"]))
        anchor = min((n for n, c in repeats.items() if c == most), key=lambda n: first_seen[n])
        marks = [float(ops[i]["ts"]) for i in chosen if ops[i]["name"] == anchor]
        middle = len(marks) // 2
        start, stop = marks[middle - 1], marks[middle]
        title = f"iteration {middle} of {most} in the last traced call"
        chosen = [i for i in chosen if start <= float(ops[i]["ts"]) < stop]
    events = [TimelineEvent(lane=lanes[(ops[i].get("pid"), ops[i].get("tid"))],
                            op=str(ops[i]["args"].get(key, ops[i]["name"])),
                            start_us=round(float(ops[i]["ts"]) - start, 3), end_us=round(_end(ops[i]) - start, 3),
                            done_us=round(done[i] - start, 3),
                            matmul=_is_matmul(str(ops[i]["args"].get(key, ops[i]["name"])), described, key))
              for i in chosen[:TIMELINE_EVENTS]]
    return Timeline(title=title, duration_us=round(stop - start, 3), events=events)


def _is_matmul(name: str, described: dict[str, tuple[int, str]], key: str) -> bool:
    """A matrix product: FLOPs counted from the HLO, or (op by op) an executable of a dot."""
    if key == "hlo_module":
        return re.fullmatch(r"jit_(dot|dot_general|matmul|einsum)", name) is not None
    return bool(described.get(name, (0, ""))[0])


def format_table(table: OpTable, top: int | None = None) -> str:
    """The table as text (the benchmark's and the stage log's view)."""
    step = table.step_us or 1.0
    what = f"module {table.module}" if table.module else "op by op (one row per executable)"
    lines = [f"{what}: {table.steps} traced step(s), {table.runs} executable run(s); traced step time"
             f" {step / 1e3:.3f} ms (first op start -> last op completion, per step, summed;"
             f" annotated {table.annotated_us / 1e3:.3f} ms)",
             f"  self-time sum {table.self_us / 1e3:.3f} ms = {100 * table.self_share:.1f}% of it;"
             f" ops busy (asynchronous tails included) {100 * table.busy_us / step:.1f}%",
             f"{'self ms':>9} {'share':>6} {'count':>6} {'us/call':>8} {'wall ms':>8} {'GFLOP/s':>8} {'MFLOP':>7}  op"]
    shown = table.rows if top is None else table.rows[:top]
    for row in shown:
        rate = f"{row.gflops_per_s:8.1f}" if row.gflops_per_s else f"{'':8}"
        mflop = f"{row.flops / 1e6:7.1f}" if row.flops else f"{'':7}"
        lines.append(f"{row.self_us / 1e3:9.3f} {100 * row.share:5.1f}% {row.count:6d} {row.self_us / row.count:8.1f}"
                     f" {row.wall_us / 1e3:8.3f} {rate} {mflop}  {row.op}" + (f"  {row.hlo}" if row.hlo else ""))
    rest = table.rows[len(shown):]
    if rest:
        lines.append(f"{sum(r.self_us for r in rest) / 1e3:9.3f} {100 * sum(r.share for r in rest):5.1f}%"
                     f" {sum(r.count for r in rest):6d}  ({len(rest)} more ops)")
    if table.matmul:
        m = table.matmul
        lines.append(f"matrix products ({m.ops} ops): self {m.self_us / 1e3:.3f} ms ({100 * m.self_us / step:.1f}% of"
                     f" the step), {m.flops / 1e9:.3f} GFLOP at {m.gflops_per_s:.1f} GFLOP/s over their wall time;"
                     f" {m.flops / step / 1e3:.1f} GFLOP/s over the whole step")
    return "\n".join(lines)
