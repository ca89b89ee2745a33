"""The per-op table of a `jax.profiler` trace (its Chrome-trace events): every op's count, self time
(its event less the op events nested in it on its thread), share of the traced step time, wall time
(to its completion, an asynchronous thunk's `end: <op>` marker) and the matrix products' FLOPs (hlo.py);
the timeline of one step; the table as text. Our own reading: XProf's op profile is empty on CPU."""

import bisect
import collections
import math
import re
from operator import itemgetter
from typing import Any, Literal

from ...artefacts.profile_summary import MatmulTotals, OpRow, OpTable, Timeline, TimelineEvent
from .hlo import hlo_ops
from .trace_files import STEP_ANNOTATION, Event

Thread = tuple[Any, Any]  # (pid, tid)
Steps = dict[int, list[int]]  # by traced step: the indices of its op events
CONTROL_FLOW = ("while", "conditional", "call")
TIMELINE_EVENTS = 600  # at most this many events in the stored timeline of one step
SYNC_SLACK_US = 2.0  # an `end: <op>` marker this close to its event's end: the op was synchronous
WAIT_FOR_COMPLETION = "ThunkExecutor::Execute (wait for completion)"
EXECUTE = "ThunkExecutor::Execute"
_start = itemgetter("ts")


def _thread(event: Event) -> Thread:
    return event.get("pid"), event.get("tid")


def _end(event: Event) -> float:
    return float(event["ts"]) + float(event["dur"])


def self_times(ops: list[Event]) -> list[float]:
    """Each op's duration less the parts of the op events nested in it on its thread (parallel to `ops`);
    the profiler's own events inside an op count as the op's time."""
    result = [float(e["dur"]) for e in ops]
    stack: list[int] = []  # the open events of one thread, outermost first
    for i in sorted(range(len(ops)), key=lambda i: (_thread(ops[i]), ops[i]["ts"], -ops[i]["dur"])):
        while stack and (_thread(ops[stack[-1]]) != _thread(ops[i]) or ops[i]["ts"] >= _end(ops[stack[-1]])):
            stack.pop()
        if stack:  # nested in the top of the stack, its direct parent
            result[stack[-1]] -= min(_end(ops[i]), _end(ops[stack[-1]])) - ops[i]["ts"]
        stack.append(i)
    return result


def completion_times(events: list[Event], ops: list[Event]) -> list[float]:
    """When each op finished (parallel to `ops`): its event's end, or later for an asynchronous thunk, whose
    completion the trace marks with an `end: <op>` event."""
    markers: dict[tuple[str, Any], list[Event]] = collections.defaultdict(list)  # each list by start
    for e in sorted((e for e in events if e.get("ph") == "X"), key=_start):
        name = str(e.get("name", ""))
        if name.startswith("end: "):
            markers["end", name[5:]].append(e)
        elif name in (EXECUTE, WAIT_FOR_COMPLETION):
            markers[name, _thread(e)].append(e)

    def finished(op: Event, later: float) -> float:
        # its marker: the first after its start and before its next run; none, or one right at its event's end:
        # the op was synchronous
        ends = markers.get(("end", op["name"]), [])
        j = bisect.bisect_left(ends, op["ts"], key=_start)
        if j == len(ends) or ends[j]["ts"] >= later or ends[j]["ts"] <= _end(op) + SYNC_SLACK_US:
            return _end(op)
        # its completion callback ran the ready dependents inline before the marker: it finished when the
        # outermost Execute on the marker's thread ending at the marker began (else at the marker), and no
        # later than the end of the executor's wait for it right after its event
        at = ends[j]["ts"]
        runs = markers.get((EXECUTE, _thread(ends[j])), [])
        runs = runs[bisect.bisect_left(runs, _end(op), key=_start) : bisect.bisect_right(runs, at, key=_start)]
        inline = [x["ts"] for x in runs if at - 5.0 <= _end(x) <= at + 0.01]
        waited = markers.get((WAIT_FOR_COMPLETION, _thread(op)), [])
        w = bisect.bisect_left(waited, _end(op), key=_start)
        wait_end = _end(waited[w]) if w < len(waited) and waited[w]["ts"] <= _end(op) + SYNC_SLACK_US else math.inf
        return min(float(min(inline, default=at)), wait_end)

    done, next_run = [0.0] * len(ops), dict[str, float]()  # by op name, the start of its next run
    for i in reversed(sorted(range(len(ops)), key=lambda i: ops[i]["ts"])):
        done[i] = finished(ops[i], next_run.get(ops[i]["name"], math.inf))
        next_run[ops[i]["name"]] = ops[i]["ts"]
    return done


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by the intervals."""
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        total, reach = total + max(0.0, end - max(start, reach)), max(reach, end)
    return total


def lane_names(events: list[Event], ops: list[Event]) -> dict[Thread, str]:
    """Short, stable names of the threads ops ran on: 'python', 'XLA client 1', 'Eigen pool 2', ..."""
    names = {_thread(e): str(e.get("args", {}).get("name")) for e in events if e.get("name") == "thread_name"}
    lanes: dict[Thread, str] = {}
    counts: collections.Counter[str] = collections.Counter()
    for thread in dict.fromkeys(_thread(e) for e in sorted(ops, key=_start)):  # in the order of their first ops
        raw = names.get(thread, f"thread {thread[1]}")
        head = raw.split("/")[0]
        base = {"tf_XLAPjRtCpuClient": "XLA client", "tf_XLAEigen": "Eigen pool"}.get(head, head)
        counts[base] += 1
        lanes[thread] = base if base == raw and counts[base] == 1 else f"{base} {counts[base]}"
    return lanes


def _timeline(
    ops: list[Event], done: list[float], rows: list[str], by_step: Steps, matmuls: set[str], lanes: dict[Thread, str]
) -> Timeline:
    """The ops of the last traced step, or of one iteration in its middle when that step is one executable
    run in which ops repeat (a scanned epoch)."""
    if not by_step:
        return Timeline(title="no op events", duration_us=0.0, events=[])
    last = sorted(by_step[max(by_step)], key=lambda i: ops[i]["ts"])
    start, stop, steps = float(ops[last[0]]["ts"]), max(done[i] for i in last), len(by_step)
    title = f"step {steps} of {steps} traced"
    anchor, most = collections.Counter(ops[i]["name"] for i in last).most_common(1)[0]
    if most > 2 and len({ops[i]["args"].get("run_id") for i in last}) == 1:
        # the iteration: between two starts of the op that repeats most often and starts first
        marks = [float(ops[i]["ts"]) for i in last if ops[i]["name"] == anchor]
        start, stop = marks[len(marks) // 2 - 1], marks[len(marks) // 2]
        title = f"iteration {len(marks) // 2} of {most} in the last traced call"
        last = [i for i in last if start <= ops[i]["ts"] < stop]
    events = [
        TimelineEvent(
            lane=lanes[_thread(ops[i])],
            op=rows[i],
            start_us=round(float(ops[i]["ts"]) - start, 3),
            end_us=round(_end(ops[i]) - start, 3),
            done_us=round(done[i] - start, 3),
            matmul=rows[i] in matmuls,
        )
        for i in last[:TIMELINE_EVENTS]
    ]
    return Timeline(title=title, duration_us=round(stop - start, 3), events=events)


def _rows(
    names: list[str], selfs: list[float], walls: list[float], described: dict[str, tuple[int, str]], step_us: float
) -> list[OpRow]:
    """One row per name in `names` (each op's, parallel to `selfs` and `walls`), the largest self time first;
    `described`: hlo_ops' (FLOPs per execution, description) by instruction."""
    by_name: dict[str, list[int]] = collections.defaultdict(list)
    for i, name in enumerate(names):
        by_name[name].append(i)
    times = {name: (sum(selfs[i] for i in g), sum(walls[i] for i in g)) for name, g in by_name.items()}
    rows = []
    for name, (self_us, wall) in sorted(times.items(), key=lambda item: (-item[1][0], item[0])):
        (flops, what), count = described.get(name, (0, "")), len(by_name[name])
        rows.append(
            OpRow(
                op=name,
                count=count,
                self_us=round(self_us, 3),
                share=round(self_us / step_us, 6) if step_us else 0.0,
                wall_us=round(wall, 3),
                flops=flops or None,
                gflops_per_s=round(flops * count / (wall * 1e3), 6) if flops and wall > 0 else None,
                hlo=what,
            )
        )
    return rows


def parse(events: list[Event], hlo: str | None = None) -> OpTable:
    """The per-op table of the traced steps: with `hlo` (the compiled unit's `as_text()`), a row per HLO
    instruction of that module, with the matrix products' FLOPs; without (op by op), a row per executable."""
    module = hlo.split(None, 2)[1].rstrip(",") if hlo else None  # 'HloModule jit_update, ...'
    key: Literal["hlo_op", "hlo_module"] = "hlo_op" if hlo else "hlo_module"
    windows = sorted((float(e["ts"]), _end(e)) for e in events if e.get("name") == STEP_ANNOTATION)
    ops: list[Event] = []
    by_step: Steps = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and "hlo_op" in e.get("args", {}) and module in (None, e["args"].get("hlo_module")):
            step = bisect.bisect_right(windows, float(e["ts"]), key=itemgetter(0)) - 1
            if step >= 0 and e["ts"] <= windows[step][1]:
                by_step[step].append(len(ops))
                ops.append(e)
    selfs, done = self_times(ops), completion_times(events, ops)
    rows = [str(e["args"].get(key, e["name"])) for e in ops]
    described = hlo_ops(hlo) if hlo else {}
    control = {name for name, (_, what) in described.items() if what.split(" ", 1)[1] in CONTROL_FLOW}
    step_us = busy_us = 0.0
    for g in by_step.values():
        step_us += max(done[i] for i in g) - min(float(ops[i]["ts"]) for i in g)
        busy_us += union_length([(float(ops[i]["ts"]), done[i]) for i in g if ops[i]["name"] not in control])
    table = _rows(rows, selfs, [done[i] - float(e["ts"]) for i, e in enumerate(ops)], described, step_us)
    products = [r for r in table if r.flops]
    work, walls = sum((r.flops or 0) * r.count for r in products), sum(r.wall_us for r in products)
    matmul = MatmulTotals(
        ops=len(products),
        flops=work,
        self_us=round(sum(r.self_us for r in products), 3),
        wall_us=round(walls, 3),
        gflops_per_s=round(work / walls / 1e3, 6) if walls else 0.0,
    )
    matmuls = {r.op for r in products} | {r for r in rows if re.fullmatch(r"jit_(dot|dot_general|matmul|einsum)", r)}
    lanes = lane_names(events, ops)
    return OpTable(
        module=module,
        grouped_by=key,
        steps=len(by_step),
        runs=len({e["args"].get("run_id") for e in ops}),
        step_us=round(step_us, 3),
        annotated_us=round(sum(end - start for start, end in windows), 3),
        self_us=round(sum(selfs), 3),
        busy_us=round(busy_us, 3),
        rows=table,
        matmul=matmul if products else None,
        timeline=_timeline(ops, done, rows, by_step, matmuls, lanes),
        threads=dict(sorted(collections.Counter(lanes[_thread(e)] for e in ops).items())),
    )


def format_table(table: OpTable, top: int) -> str:
    """The table as text, its `top` rows and one for the rest (the stage log's and the benchmark's view)."""
    step, shown, rest = table.step_us or 1.0, table.rows[:top], table.rows[top:]
    what = f"module {table.module}" if table.module else "op by op (one row per executable)"
    lines = [
        f"{what}: {table.steps} traced step(s), {table.runs} executable run(s); traced step time {step / 1e3:.3f} ms"
        f" (first op start -> last op completion, per step, summed; annotated {table.annotated_us / 1e3:.3f} ms)",
        f"  self-time sum {table.self_us / 1e3:.3f} ms = {100 * table.self_share:.1f}% of it; ops busy (asynchronous"
        f" tails included) {100 * table.busy_us / step:.1f}%",
        f"{'self ms':>9} {'share':>6} {'count':>6} {'us/call':>8} {'wall ms':>8} {'GFLOP/s':>8} {'MFLOP':>7}  op",
    ]
    for r in shown:
        rate = f"{r.gflops_per_s:8.1f}" if r.gflops_per_s else ""
        mflop = f"{r.flops / 1e6:7.1f}" if r.flops else ""
        lines.append(
            f"{r.self_us / 1e3:9.3f} {100 * r.share:5.1f}% {r.count:6d} {r.self_us / r.count:8.1f}"
            f" {r.wall_us / 1e3:8.3f} {rate:8} {mflop:7}  {r.op}  {r.hlo}".rstrip()
        )
    if rest:
        lines.append(
            f"{sum(r.self_us for r in rest) / 1e3:9.3f} {100 * sum(r.share for r in rest):5.1f}%"
            f" {sum(r.count for r in rest):6d}  ({len(rest)} more ops)"
        )
    if m := table.matmul:
        lines.append(
            f"matrix products ({m.ops} ops): self {m.self_us / 1e3:.3f} ms ({100 * m.self_us / step:.1f}% of the step),"
            f" {m.flops / 1e9:.3f} GFLOP at {m.gflops_per_s:.1f} GFLOP/s over their wall time;"
            f" {m.flops / step / 1e3:.1f} GFLOP/s over the whole step"
        )
    return "\n".join(lines)
