"""The profile stage's summary.json (one per variant): the parsed device-memory snapshots, the
per-op table of the execution trace, and the device's memory figures."""

from pathlib import Path
from typing import Literal

from ..foundation import paths
from ..foundation.errors import remake
from . import storage
from .json_model import JsonModel

# How to install pprof and Graphviz, written into the summary and shown by the report when missing
INSTALL_HINT = (
    "go install github.com/google/pprof@latest, or offline from Debian: apt-get install golang-go"
    " golang-github-google-pprof-dev graphviz && GO111MODULE=off GOPATH=/usr/share/gocode"
    " go build -o /usr/local/bin/pprof github.com/google/pprof"
)


class Allocation(JsonModel):
    """One sample of a snapshot: bytes and count of live buffers sharing labels and stack."""

    bytes: int
    count: int
    labels: dict[str, str | int]
    stack: list[str]  # 'function /path/file.py:line', innermost first
    origin: str | None = None  # the innermost frame of the caller's own code (None: none of it)


def short_frame(frame: str) -> str:
    """'function /long/path/file.py:12' -> 'function (file.py:12)'."""
    name, _, place = frame.rpartition(" ")
    return f"{name} ({Path(place).name})" if name and place else frame


class Executables(JsonModel):
    """The compiled executables live at a snapshot, folded into one line (the CPU backend gives them
    0 bytes: it does not report code size to the profiler)."""

    samples: int
    count: int
    bytes: int


class SnapshotDiff(JsonModel):
    """A snapshot minus an earlier one (pprof's -diff_base): what the step added. Rows are matched
    by kind and stack, as pprof matches them; bytes and counts are signed."""

    base: str  # the point subtracted, e.g. 'init'
    total_bytes: int  # this snapshot's total minus the base's
    rows: list[Allocation]  # largest change first (absolute bytes), executables left out


class Snapshot(JsonModel):
    file: str
    total_bytes: int
    total_allocations: int
    samples: int
    explanation: str  # the largest allocation in model terms
    top: list[Allocation]  # device buffers, largest first
    executables: Executables | None = None  # absent when none was live
    diff: SnapshotDiff | None = None


class PeakMemory(JsonModel):
    bytes: int
    source: str  # device memory_stats, or the process's peak RSS


class PprofTools(JsonModel):
    available: bool
    binary: str | None = None  # None: not on PATH
    dot: str | None = None
    rendered: list[str]
    install_hint: str


class OpRow(JsonModel):
    """One op of the traced steps: an HLO instruction of the compiled step, or (op by op) one
    executable. Times are summed over every traced step."""

    op: str
    count: int  # executions in the traced steps
    self_us: float  # its events' duration less the op events nested in them
    share: float  # self time / traced step time
    wall_us: float  # start to completion, the tail of an asynchronous op included
    flops: int | None = None  # per execution, for matrix products (counted from the compiled HLO)
    gflops_per_s: float | None = None  # flops x count / wall time
    hlo: str = ""  # shape and kind, e.g. '[128,512] fusion[kCustom:dot]'


class MatmulTotals(JsonModel):
    """The matrix products of the traced steps together."""

    ops: int
    flops: int  # in all traced steps
    self_us: float
    wall_us: float
    gflops_per_s: float  # flops / wall time


class TimelineEvent(JsonModel):
    lane: str  # the thread it ran on
    op: str
    start_us: float  # from the window's start
    end_us: float  # its event's end
    done_us: float  # when it really finished (later than end_us for an asynchronous op)
    matmul: bool


class Timeline(JsonModel):
    """The op events of one step (the last traced; for a scanned epoch, one iteration in its middle)."""

    title: str
    duration_us: float
    events: list[TimelineEvent]


class OpTable(JsonModel):
    """Where the traced steps' time went, op by op."""

    module: str | None = None  # the compiled step's HLO module; None: op by op, one row per executable
    grouped_by: Literal["hlo_op", "hlo_module"]
    steps: int  # traced calls (each inside a step annotation)
    runs: int  # executable runs in them
    step_us: float  # sum over the steps of first op start -> last op completion
    annotated_us: float  # sum of the step annotations (the host's view: dispatch and waiting included)
    self_us: float  # sum of every op's self time
    busy_us: float  # time some op was running or finishing, summed over the steps
    rows: list[OpRow]  # every op, by self time
    matmul: MatmulTotals | None = None  # None: no matrix product identified (op-by-op code)
    timeline: Timeline
    threads: dict[str, int]  # op events per thread

    @property
    def self_share(self) -> float:
        """Self-time sum / traced step time."""
        return self.self_us / self.step_us if self.step_us else 0.0


class Trace(JsonModel):
    """The execution trace the stage recorded (files relative to the variant's profile folder)."""

    logdir: str  # open with XProf or TensorBoard: --logdir <profile folder>/<logdir>
    files: dict[str, str]  # 'perfetto' (ui.perfetto.dev), 'chrome', 'xplane' (XProf) -> path
    calls: int  # traced calls of the loop's unit
    unit: str  # what one call runs: 'step' or 'epoch'
    train_steps: int  # training steps the traced calls ran
    warmup_calls: int  # untraced calls before (compilation is excluded too)
    python_tracer: bool
    table: OpTable


class ProfileSummary(JsonModel):
    variant: str
    device: str
    device_kind: str
    backend: str
    jax_version: str
    model: str
    batch_size: int
    layer_sizes: list[int]
    expected_bytes: dict[str, int]
    points: dict[str, Snapshot]
    peak_memory: PeakMemory
    memory_stats: dict[str, int] | None = None  # device.memory_stats(), where the backend provides it
    pprof: PprofTools
    trace: Trace


def read_summary(variant: str, root: str | Path = ".") -> ProfileSummary | None:
    """A variant's summary, or None when its profile stage has not run (the report says how to run it)."""
    path, stage = paths.PROFILE.at(variant, root) / paths.PROFILE_SUMMARY, paths.PROFILE.stage(variant)
    if not path.is_file():
        return None
    summary = storage.read_model(path, ProfileSummary, stage)
    if summary.variant != variant:
        raise remake(path, f"holds variant '{summary.variant}', expected '{variant}'", stage)
    return summary
