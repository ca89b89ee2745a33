"""When each op ran: its self time, its completion (allowing for asynchronous thunks), the traced
steps' windows, and the stored timeline of one step."""

from __future__ import annotations

import bisect
import collections
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ....artefacts.profile_summary import Timeline, TimelineEvent
from .events import STEP_ANNOTATION, Event, Thread, event_end, event_thread

TIMELINE_EVENTS = 600  # at most this many events in the stored timeline of one step
SYNC_SLACK_US = 2.0  # an `end: <op>` marker this close to its event's end: the op was synchronous
WAIT_FOR_COMPLETION = "ThunkExecutor::Execute (wait for completion)"
EXECUTE = "ThunkExecutor::Execute"


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
