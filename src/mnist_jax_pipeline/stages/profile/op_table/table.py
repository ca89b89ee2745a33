"""The per-op table of a trace: every op's count, self time, share of the traced step time, wall
time and, for the matrix products, GFLOP/s; and the table as text."""

from __future__ import annotations

import bisect
import collections

from ....artefacts.profile_summary import MatmulTotals, OpRow, OpTable
from .events import Event, Thread, event_thread, op_events, thread_names
from .hlo import hlo_ops, module_name
from .timeline import completion_times, op_name, self_times, step_timeline, step_windows, union_length

CONTROL_FLOW = ("while", "conditional", "call")


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
