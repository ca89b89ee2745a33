"""The per-op table of a `jax.profiler` trace: every op's count, self time (its event less the op
events nested in it on its thread), share of the traced step time, wall time (start to completion,
an asynchronous thunk's tail included: its `end: <op>` marker) and, for the matrix products, the
FLOPs counted from the compiled HLO; the timeline of one step; the table as text."""

from __future__ import annotations

import bisect
import collections
import gzip
import json
import math
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...artefacts.profile_summary import MatmulTotals, OpRow, OpTable, Timeline, TimelineEvent
from ...foundation.errors import missing, remake
from .hlo import hlo_ops, module_name

Event = dict[str, Any]
Thread = tuple[Any, Any]  # (pid, tid)
STEP_ANNOTATION = "train_step"  # the jax.profiler.StepTraceAnnotation around every traced call
CONTROL_FLOW = ("while", "conditional", "call")
TIMELINE_EVENTS = 600  # at most this many events in the stored timeline of one step
SYNC_SLACK_US = 2.0  # an `end: <op>` marker this close to its event's end: the op was synchronous
WAIT_FOR_COMPLETION = "ThunkExecutor::Execute (wait for completion)"
EXECUTE = "ThunkExecutor::Execute"


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


def self_times(ops: list[Event]) -> list[float]:
    """Each op event's duration less the parts of the op events nested in it on its thread (a list
    parallel to `ops`). Only op events take part, so the profiler's own bookkeeping inside an op
    counts as the op's time."""
    result = [float(e["dur"]) for e in ops]
    by_thread: dict[Thread, list[int]] = collections.defaultdict(list)
    for i, e in enumerate(ops):
        by_thread[event_thread(e)].append(i)
    for indices in by_thread.values():
        indices.sort(key=lambda i: (ops[i]["ts"], -ops[i]["dur"]))
        stack: list[int] = []  # open events, outermost first
        for i in indices:
            start, end = float(ops[i]["ts"]), event_end(ops[i])
            while stack and start >= event_end(ops[stack[-1]]):
                stack.pop()
            if stack:  # nested in the top of the stack: charge the overlap to it, its direct parent
                parent = stack[-1]
                result[parent] -= min(end, event_end(ops[parent])) - start
            stack.append(i)
    return result


def _by_start(groups: dict[str, list[Event]] | dict[Thread, list[Event]]) -> None:
    for group in groups.values():
        group.sort(key=lambda e: e["ts"])


@dataclass
class _Markers:
    """The events that say when an asynchronous op finished, each group sorted by start: the `end: <op>`
    markers by op name, the executor's Execute events and its waits for completion by thread."""

    ends: dict[str, list[Event]] = field(default_factory=lambda: collections.defaultdict(list))
    executes: dict[Thread, list[Event]] = field(default_factory=lambda: collections.defaultdict(list))
    waits: dict[Thread, list[Event]] = field(default_factory=lambda: collections.defaultdict(list))

    @classmethod
    def of(cls, events: list[Event]) -> _Markers:
        found = cls()
        for e in events:
            name = str(e.get("name", "")) if e.get("ph") == "X" else ""
            if name.startswith("end: "):
                found.ends[name[5:]].append(e)
            elif name == EXECUTE:
                found.executes[event_thread(e)].append(e)
            elif name == WAIT_FOR_COMPLETION:
                found.waits[event_thread(e)].append(e)
        _by_start(found.ends)
        _by_start(found.executes)
        _by_start(found.waits)
        return found

    def end_marker(self, op: Event, later: float) -> Event | None:
        """The first `end: <op>` marker at or after the op's start and before `later` (its next execution);
        None when there is none (the trace was cut) or it is within SYNC_SLACK_US of the event's end."""
        group = self.ends.get(op["name"], [])
        j = bisect.bisect_left(group, op["ts"], key=lambda m: m["ts"])
        if j == len(group) or group[j]["ts"] >= later or group[j]["ts"] <= event_end(op) + SYNC_SLACK_US:
            return None
        return group[j]

    def callbacks_start(self, op: Event, marker: Event) -> float:
        """When the completion callback began running the op's ready dependents inline (the outermost
        Execute on the marker's thread that ends right at the marker), else the marker's time."""
        candidates = self.executes.get(event_thread(marker), [])
        lo = bisect.bisect_left(candidates, event_end(op), key=lambda x: x["ts"])
        hi = bisect.bisect_right(candidates, marker["ts"], key=lambda x: x["ts"])
        first = [x["ts"] for x in candidates[lo:hi] if marker["ts"] - 5.0 <= event_end(x) <= marker["ts"] + 0.01]
        return float(min(first)) if first else float(marker["ts"])

    def wait_end(self, op: Event) -> float:
        """When the executor's wait for the op right after its event (on its thread) ends; infinity when
        there is no such wait."""
        waits = self.waits.get(event_thread(op), [])
        w = bisect.bisect_left(waits, event_end(op), key=lambda x: x["ts"])
        if w < len(waits) and waits[w]["ts"] <= event_end(op) + SYNC_SLACK_US:
            return event_end(waits[w])
        return math.inf

    def done(self, op: Event, later: float) -> float:
        """When the op finished; `later` is its next execution's start."""
        marker = self.end_marker(op, later)
        if marker is None:
            return event_end(op)
        # When the executor waits for the op right after its event (an op-by-op executable of one
        # asynchronous op), it is done when the wait ends: a later marker of that name is another run's.
        return min(self.callbacks_start(op, marker), self.wait_end(op))


def completion_times(events: list[Event], ops: list[Event]) -> list[float]:
    """When each op really finished (parallel to `ops`), allowing for asynchronous thunks.

    Each op is paired with the first `end: <op>` marker at or after its start (and before its next
    execution). A marker within SYNC_SLACK_US of the event's end means the op was synchronous.
    Otherwise its completion callback ran the ready dependents inline before the marker (the
    `ThunkExecutor::Execute` events on the marker's thread): the op finished when the outermost of
    those that ends right at the marker began, or at the marker when there is none. An op whose
    executor waits for it right after its event (on its thread) finished no later than that wait.
    """
    markers = _Markers.of(events)
    runs: dict[str, list[int]] = collections.defaultdict(list)
    for i, e in enumerate(ops):
        runs[e["name"]].append(i)
    done = [0.0] * len(ops)
    for indices in runs.values():
        indices.sort(key=lambda i: ops[i]["ts"])
        later = [ops[i]["ts"] for i in indices[1:]] + [math.inf]
        for i, next_start in zip(indices, later, strict=True):
            done[i] = markers.done(ops[i], next_start)
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


def step_windows(events: list[Event], ops: list[Event]) -> list[tuple[float, float]]:
    """[start, end] of every traced step annotation; without annotations, one window per executable
    run (compiled code) or one over the whole trace."""
    steps = sorted(
        (float(e["ts"]), event_end(e)) for e in events if e.get("ph") == "X" and e.get("name") == STEP_ANNOTATION
    )
    if steps or not ops:
        return steps
    runs: dict[object, list[Event]] = collections.defaultdict(list)
    for e in ops:
        runs[e["args"].get("run_id")].append(e)
    if len(runs) > 1 and all(len(group) > 1 for group in runs.values()):
        return sorted((min(float(e["ts"]) for e in g), max(event_end(e) for e in g)) for g in runs.values())
    return [(min(float(e["ts"]) for e in ops), max(event_end(e) for e in ops))]


def op_name(event: Event, key: str) -> str:
    """The op's row in the table: its `key` argument ('hlo_op' or 'hlo_module'), else the event's name."""
    return str(event["args"].get(key, event["name"]))


def is_matmul(name: str, described: dict[str, tuple[int, str]], key: str) -> bool:
    """A matrix product: FLOPs counted from the HLO, or (op by op) an executable of a dot."""
    if key == "hlo_module":
        return re.fullmatch(r"jit_(dot|dot_general|matmul|einsum)", name) is not None
    return bool(described.get(name, (0, ""))[0])


def step_timeline(
    ops: list[Event],
    done: list[float],
    step_index: list[int],
    lanes: dict[Thread, str],
    described: dict[str, tuple[int, str]],
    key: str,
) -> Timeline:
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
    events = [
        TimelineEvent(
            lane=lanes[event_thread(ops[i])],
            op=op_name(ops[i], key),
            start_us=round(float(ops[i]["ts"]) - start, 3),
            end_us=round(event_end(ops[i]) - start, 3),
            done_us=round(done[i] - start, 3),
            matmul=is_matmul(op_name(ops[i], key), described, key),
        )
        for i in chosen[:TIMELINE_EVENTS]
    ]
    return Timeline(title=title, duration_us=round(stop - start, 3), events=events)


def lane_names(events: list[Event], ops: list[Event]) -> dict[Thread, str]:
    """Short, stable names of the threads ops ran on: 'python', 'XLA client 1', 'Eigen pool 2', ..."""
    names = thread_names(events)
    lanes: dict[Thread, str] = {}
    counters: collections.Counter[str] = collections.Counter()
    for e in sorted(ops, key=lambda e: e["ts"]):
        key = event_thread(e)
        if key in lanes:
            continue
        raw = names.get(key, f"thread {e.get('tid')}")
        base = (
            "XLA client"
            if raw.startswith("tf_XLAPjRtCpuClient")
            else "Eigen pool"
            if raw.startswith("tf_XLAEigen")
            else raw.split("/")[0]
        )
        if base == raw and base not in counters:
            counters[base] += 1
            lanes[key] = base
            continue
        counters[base] += 1
        lanes[key] = f"{base} {counters[base]}"
    return lanes


def _in_steps(ops: list[Event], windows: list[tuple[float, float]]) -> tuple[list[Event], list[int]]:
    """The ops that start inside a step window, and the index of each one's window (parallel lists)."""
    starts = [w[0] for w in windows]
    kept: list[Event] = []
    step_index: list[int] = []
    for e in ops:
        i = bisect.bisect_right(starts, float(e["ts"])) - 1
        if i >= 0 and float(e["ts"]) <= windows[i][1]:
            kept.append(e)
            step_index.append(i)
    return kept, step_index


def _step_spans(ops: list[Event], done: list[float], step_index: list[int], control: set[str]) -> tuple[float, float]:
    """The traced step time (per step, first op start to last op completion) and the time the ops
    other than control flow were busy, each summed over the steps."""
    by_step: dict[int, list[int]] = collections.defaultdict(list)
    for i, step in enumerate(step_index):
        by_step[step].append(i)
    step_us = busy_us = 0.0
    for indices in by_step.values():
        step_us += max(done[i] for i in indices) - min(float(ops[i]["ts"]) for i in indices)
        leaves = [i for i in indices if ops[i]["name"] not in control]
        busy_us += union_length((float(ops[i]["ts"]), done[i]) for i in leaves)
    return step_us, busy_us


def _rows(
    ops: list[Event],
    key: str,
    selfs: list[float],
    done: list[float],
    described: dict[str, tuple[int, str]],
    step_us: float,
) -> list[OpRow]:
    """One row per op name, the largest self time first."""
    self_sum: dict[str, float] = collections.defaultdict(float)
    wall: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    for i, e in enumerate(ops):
        name = op_name(e, key)
        self_sum[name] += selfs[i]
        wall[name] += done[i] - float(e["ts"])
        count[name] += 1
    rows = []
    for name, micros in sorted(self_sum.items(), key=lambda item: (-item[1], item[0])):
        flops, what = described.get(name, (0, ""))
        rate = flops * count[name] / (wall[name] * 1e3) if flops and wall[name] > 0 else None
        rows.append(
            OpRow(
                op=name,
                count=count[name],
                self_us=round(micros, 3),
                share=round(micros / step_us, 6) if step_us else 0.0,
                wall_us=round(wall[name], 3),
                flops=flops or None,
                gflops_per_s=None if rate is None else round(rate, 6),
                hlo=what,
            )
        )
    return rows


def _matmul(rows: list[OpRow]) -> MatmulTotals | None:
    """The matrix products' totals, None when there are none."""
    products = [r for r in rows if r.flops]
    if not products:
        return None
    work = sum((r.flops or 0) * r.count for r in products)
    walls = sum(r.wall_us for r in products)
    return MatmulTotals(
        ops=len(products),
        flops=work,
        self_us=round(sum(r.self_us for r in products), 3),
        wall_us=round(walls, 3),
        gflops_per_s=round(work / walls / 1e3, 6) if walls else 0.0,
    )


def parse(events: list[Event], hlo: str | None = None) -> OpTable:
    """The per-op table of a trace. With `hlo` (the compiled unit's `as_text()`) the rows are that
    module's HLO instructions, with FLOPs and GFLOP/s for the matrix products; without it (op-by-op
    code) they are the executables. The traced step time is summed over the step annotations."""
    module = module_name(hlo) if hlo else None
    key = "hlo_op" if hlo else "hlo_module"
    everything = op_events(events, module)
    windows = step_windows(events, everything)
    ops, step_index = _in_steps(everything, windows)
    selfs = self_times(ops)
    done = completion_times(events, ops)
    described = hlo_ops(hlo) if hlo else {}
    control = {n for n, (_, what) in described.items() if what.split(" ", 1)[1] in CONTROL_FLOW}
    lanes = lane_names(events, ops)
    step_us, busy_us = _step_spans(ops, done, step_index, control)
    rows = _rows(ops, key, selfs, done, described, step_us)
    threads = collections.Counter(lanes[event_thread(e)] for e in ops)
    return OpTable(
        module=module,
        grouped_by="hlo_op" if hlo else "hlo_module",
        steps=len(set(step_index)),
        runs=len({e["args"].get("run_id") for e in ops}),
        step_us=round(step_us, 3),
        annotated_us=round(sum(end - start for start, end in windows), 3),
        self_us=round(sum(selfs), 3),
        busy_us=round(busy_us, 3),
        rows=rows,
        matmul=_matmul(rows),
        timeline=step_timeline(ops, done, step_index, lanes, described, key),
        threads=dict(sorted(threads.items())),
    )


def format_table(table: OpTable, top: int | None = None) -> str:
    """The table as text (the benchmark's and the stage log's view)."""
    step = table.step_us or 1.0
    what = f"module {table.module}" if table.module else "op by op (one row per executable)"
    lines = [
        f"{what}: {table.steps} traced step(s), {table.runs} executable run(s); traced step time"
        f" {step / 1e3:.3f} ms (first op start -> last op completion, per step, summed;"
        f" annotated {table.annotated_us / 1e3:.3f} ms)",
        f"  self-time sum {table.self_us / 1e3:.3f} ms = {100 * table.self_share:.1f}% of it;"
        f" ops busy (asynchronous tails included) {100 * table.busy_us / step:.1f}%",
        f"{'self ms':>9} {'share':>6} {'count':>6} {'us/call':>8} {'wall ms':>8} {'GFLOP/s':>8} {'MFLOP':>7}  op",
    ]
    shown = table.rows if top is None else table.rows[:top]
    for row in shown:
        rate = f"{row.gflops_per_s:8.1f}" if row.gflops_per_s else f"{'':8}"
        mflop = f"{row.flops / 1e6:7.1f}" if row.flops else f"{'':7}"
        lines.append(
            f"{row.self_us / 1e3:9.3f} {100 * row.share:5.1f}% {row.count:6d} {row.self_us / row.count:8.1f}"
            f" {row.wall_us / 1e3:8.3f} {rate} {mflop}  {row.op}" + (f"  {row.hlo}" if row.hlo else "")
        )
    rest = table.rows[len(shown) :]
    if rest:
        lines.append(
            f"{sum(r.self_us for r in rest) / 1e3:9.3f} {100 * sum(r.share for r in rest):5.1f}%"
            f" {sum(r.count for r in rest):6d}  ({len(rest)} more ops)"
        )
    if table.matmul:
        m = table.matmul
        lines.append(
            f"matrix products ({m.ops} ops): self {m.self_us / 1e3:.3f} ms ({100 * m.self_us / step:.1f}% of"
            f" the step), {m.flops / 1e9:.3f} GFLOP at {m.gflops_per_s:.1f} GFLOP/s over their wall time;"
            f" {m.flops / step / 1e3:.1f} GFLOP/s over the whole step"
        )
    return "\n".join(lines)
