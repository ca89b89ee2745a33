"""The memory and trace sections: the profile stage's summaries (typed, artefacts/profile_summary.py),
their call graphs, and XLA's analysis of each compiled step (the train stage's metrics). Without a
summary the report says how to make one. Call graphs (`<point>.svg`, the train step's
`train_step.diff.svg`) are cleaned of scripts, event handlers and links, given a fixed size, and
inlined as `data:` URIs; without them the report draws an icicle of the stacks itself.
"""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from ...artefacts.profile_summary import INSTALL_HINT, Allocation, OpRow, ProfileSummary, Snapshot, short_frame
from ...artefacts.training import XlaAnalysis
from ...foundation import paths, variants
from ...foundation.errors import remake
from ...foundation.paths import SNAPSHOTS
from .formatting import href, size
from .inputs import Artefacts

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
_EXTERNAL_URL = re.compile(r"url\(\s*['\"]?\s*(?!#)", re.IGNORECASE)
_UNSAFE_TAGS = {"script", "foreignObject", "iframe"}


TOP_OPS = 12  # rows of each op table shown; the rest are summed in one line


@dataclass(frozen=True)
class AllocationRow:
    bytes: int
    count: int
    kind: str
    device: str
    origin: str  # innermost frame of the pipeline's own code, else the innermost frame
    frames: list[str]  # leaf first, as 'function (file.py:line)'


@dataclass(frozen=True)
class SnapshotView:
    name: str
    file: str
    total_bytes: int
    total_allocations: int
    top: list[AllocationRow]
    explanation: str
    executables: tuple[int, int] | None  # (live executables, their bytes), folded into one line
    diff_base: str | None  # the snapshot subtracted in `diff`
    diff_total: int | None
    diff: list[AllocationRow]
    call_graph: str | None  # data: URI of the cleaned pprof SVG (of the difference, when there is one)
    icicle: str | None = None  # data: URI of the report's own icicle PNG, when there is no call graph


@dataclass(frozen=True)
class TraceView:
    """One variant's op table and where its trace files are."""

    variant: str
    unit: str
    calls: int
    train_steps: int
    module: str | None
    step_us: float
    annotated_us: float
    self_share: float
    busy_share: float
    rows: list[OpRow]
    rest: tuple[int, float, float] | None  # (ops, self time, share) of the rows not shown
    matmul_share: float | None
    matmul_gflops: float | None
    logdir: str  # paths from the project root
    perfetto: str
    logdir_href: str  # the same, relative to the report's folder
    perfetto_href: str


@dataclass(frozen=True)
class VariantMemory:
    name: str
    device: str
    backend: str
    peak_bytes: int
    peak_source: str
    memory_stats: dict[str, int] | None
    pprof_available: bool
    install_hint: str
    snapshots: list[SnapshotView]
    trace: TraceView


@dataclass(frozen=True)
class XlaRow:
    """XLA's analysis of one variant's compiled step, and what its arguments are in model terms."""

    name: str
    unit: str
    xla: XlaAnalysis
    arguments: str  # what the argument bytes are, checked against the profile's sizes
    matches: bool | None  # None: no profile to check against
    note: str


@dataclass(frozen=True)
class MemoryView:
    present: bool  # at least one profile summary exists
    variants: list[VariantMemory] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # variants without a profile summary
    xla: list[XlaRow] = field(default_factory=list)
    peak_bytes: int | None = None  # the largest peak over the profiles
    peak_source: str | None = None
    pprof_available: bool = False
    install_hint: str = INSTALL_HINT
    graphs_missing: bool = False  # a snapshot with buffers shows neither pprof's call graph nor an icicle


def _local(name: str) -> str:
    return name.rsplit("}", 1)[-1]


def _undo_pan_zoom(root: ET.Element) -> None:
    """pprof -svg drops Graphviz's size and viewBox and zooms to 50% for its pan script; restore
    the drawing at 1:1 with a viewBox from the graph's background polygon."""
    groups = {g.get("id"): g for g in root.iter(f"{{{SVG_NS}}}g") if g.get("id")}
    if "viewport" in groups:
        groups["viewport"].attrib.pop("transform", None)
    graph = groups.get("graph0")
    if root.get("viewBox") or graph is None:
        return
    background = graph.find(f"{{{SVG_NS}}}polygon")
    numbers = (
        [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", background.get("points", ""))]
        if (background is not None)
        else []
    )
    if len(numbers) < 4:
        return
    xs, ys = numbers[0::2], numbers[1::2]
    scale = re.search(r"scale\(\s*([\d.]+)[\s,]*([\d.]+)?", graph.get("transform", ""))
    sx = float(scale.group(1)) if scale else 1.0
    sy = float(scale.group(2) or sx) if scale else 1.0
    root.set("viewBox", f"0 0 {(max(xs) - min(xs)) * sx:g} {(max(ys) - min(ys)) * sy:g}")


def clean_svg(text: str) -> str:
    """Drop scripts, handlers and outside references; give the picture an absolute size."""
    root = ET.fromstring(text)
    if _local(root.tag) != "svg":
        raise ValueError(f"root element is <{_local(root.tag)}>, not <svg>")
    for parent in list(root.iter()):
        for child in list(parent):
            if _local(child.tag) in _UNSAFE_TAGS or (
                _local(child.tag) == "style" and _EXTERNAL_URL.search(child.text or "")
            ):
                parent.remove(child)
    for element in root.iter():
        for name in list(element.attrib):
            value = element.attrib[name]
            local = _local(name)
            if (
                local.lower().startswith("on")
                or (local == "href" and not value.startswith("#"))
                or _EXTERNAL_URL.search(value)
            ):
                del element.attrib[name]
    _undo_pan_zoom(root)
    box = root.get("viewBox", "").replace(",", " ").split()
    if len(box) == 4:
        for attr, value in (("width", box[2]), ("height", box[3])):
            if not root.get(attr) or root.get(attr, "").endswith("%"):
                root.set(attr, f"{float(value):g}pt")
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    return ET.tostring(root, encoding="unicode")


def svg_data_uri(path: Path, made_by: str = "profile") -> str:
    """The cleaned SVG at `path` as a base64 data URI; a corrupt file names the stage that wrote it."""
    try:
        cleaned = clean_svg(path.read_text(encoding="utf-8"))
    except (ET.ParseError, ValueError, UnicodeDecodeError) as err:
        raise remake(path, f"not a readable SVG ({err})", made_by) from err
    return "data:image/svg+xml;base64," + base64.b64encode(cleaned.encode()).decode("ascii")


def _row(allocation: Allocation) -> AllocationRow:
    stack = [short_frame(f) for f in allocation.stack]
    return AllocationRow(
        bytes=allocation.bytes,
        count=allocation.count,
        kind=str(allocation.labels.get("kind", "")),
        device=str(allocation.labels.get("device", "")),
        origin=short_frame(allocation.origin) if allocation.origin else (stack[0] if stack else ""),
        frames=stack,
    )


def call_graph_file(profile_dir: Path, name: str, snapshot: Snapshot) -> Path | None:
    """The pprof SVG the report shows for a snapshot (its difference from the base, if it has one)."""
    if Path(name).name != name or name.startswith("."):
        return None
    for stem in ([f"{name}.diff"] if snapshot.diff else []) + [name]:
        path = profile_dir / f"{stem}.svg"
        if path.is_file():
            return path
    return None


def icicle_rows(snapshot: Snapshot) -> list[Allocation]:
    """The buffers an icicle of the snapshot shows: what it added to its base, or what it holds."""
    rows = snapshot.diff.rows if snapshot.diff else snapshot.top
    return [row for row in rows if row.bytes > 0]


def missing_graphs(art: Artefacts) -> list[tuple[str, str]]:
    """(variant, snapshot) pairs without a pprof call graph: the report draws their icicles."""
    return [
        (variant, name)
        for variant, summary in art.profiles.items()
        for name, snapshot in summary.points.items()
        if call_graph_file(paths.PROFILE.at(variant, art.root), name, snapshot) is None and icicle_rows(snapshot)
    ]


def _snapshot(name: str, snapshot: Snapshot, profile_dir: Path, made_by: str, icicle: str | None) -> SnapshotView:
    graph = call_graph_file(profile_dir, name, snapshot)
    return SnapshotView(
        name=name,
        file=snapshot.file,
        total_bytes=snapshot.total_bytes,
        total_allocations=snapshot.total_allocations,
        top=[_row(row) for row in snapshot.top],
        explanation=snapshot.explanation,
        executables=(snapshot.executables.count, snapshot.executables.bytes) if snapshot.executables else None,
        diff_base=snapshot.diff.base if snapshot.diff else None,
        diff_total=snapshot.diff.total_bytes if snapshot.diff else None,
        diff=[_row(row) for row in snapshot.diff.rows] if snapshot.diff else [],
        call_graph=svg_data_uri(graph, made_by) if graph else None,
        icicle=None if graph else icicle,
    )


def _trace(variant: str, summary: ProfileSummary) -> TraceView:
    trace, table = summary.trace, summary.trace.table
    logdir, perfetto = paths.PROFILE.at(variant) / trace.logdir, paths.PROFILE.at(variant) / trace.files["perfetto"]
    rest = table.rows[TOP_OPS:]
    step = table.step_us or 1.0
    return TraceView(
        variant=variant,
        unit=trace.unit,
        calls=trace.calls,
        train_steps=trace.train_steps,
        module=table.module,
        step_us=table.step_us,
        annotated_us=table.annotated_us,
        self_share=table.self_share,
        busy_share=table.busy_us / step,
        rows=table.rows[:TOP_OPS],
        rest=(len(rest), sum(r.self_us for r in rest), sum(r.share for r in rest)) if rest else None,
        matmul_share=table.matmul.self_us / step if table.matmul else None,
        matmul_gflops=table.matmul.gflops_per_s if table.matmul else None,
        logdir=logdir.as_posix(),
        perfetto=perfetto.as_posix(),
        logdir_href=href(logdir, paths.REPORT_HTML.path, folder=True),
        perfetto_href=href(perfetto, paths.REPORT_HTML.path),
    )


def _arguments(name: str, xla: XlaAnalysis, summary: ProfileSummary | None) -> tuple[str, bool | None]:
    """What a compiled step's arguments are, and whether XLA's argument bytes are exactly that."""
    scan = variants.get(name).call_unit == "epoch"
    parts = (
        (("state", "training state"), ("train_images", "training images"), ("train_targets", "one-hot targets"))
        if scan
        else (("state", "training state"), ("batch_images", "batch images"), ("batch_targets", "batch targets"))
    )
    if summary is None:
        return " + ".join(label for _, label in parts), None
    sizes = [summary.expected_bytes.get(key) for key, _ in parts]
    if any(size is None for size in sizes):
        return " + ".join(label for _, label in parts), None
    text = " + ".join(f"{label} {size(part)}" for (_, label), part in zip(parts, sizes, strict=True))
    return text, sum(part or 0 for part in sizes) == xla.argument_bytes


def _xla_rows(art: Artefacts) -> list[XlaRow]:
    rows = []
    for v in art.variants:
        if v.train.xla is None:
            continue
        spec = variants.get(v.name)
        arguments, matches = _arguments(v.name, v.train.xla, art.profiles.get(v.name))
        scan = spec.call_unit == "epoch"
        note = (
            "the state is donated: its buffers are reused for the output (alias); XLA's cost analysis"
            " counts the scanned body once, not once per step, so its FLOPs are not the epoch's"
            if scan
            else "one compiled update of a full batch; nothing donated"
        )
        rows.append(
            XlaRow(name=v.name, unit=spec.call_unit, xla=v.train.xla, arguments=arguments, matches=matches, note=note)
        )
    return rows


def graphs_missing(shown: list[VariantMemory]) -> bool:
    """Whether a snapshot with buffers shows neither pprof's call graph nor the report's icicle."""
    return any(snap.top and not (snap.call_graph or snap.icicle) for m in shown for snap in m.snapshots)


def memory_view(art: Artefacts, icicles: dict[tuple[str, str], str] | None = None) -> MemoryView:
    """What the memory and trace sections show; without summaries, an empty view with the install hint."""
    icicles = icicles or {}
    shown: list[VariantMemory] = []
    for v in art.variants:
        summary = art.profiles.get(v.name)
        if summary is None:
            continue
        made_by = paths.PROFILE.stage(v.name)
        profile_dir = paths.PROFILE.at(v.name, art.root)
        names = [p for p in SNAPSHOTS if p in summary.points] + sorted(p for p in summary.points if p not in SNAPSHOTS)
        shown.append(
            VariantMemory(
                name=v.name,
                device=summary.device_kind or summary.device,
                backend=summary.backend,
                peak_bytes=summary.peak_memory.bytes,
                peak_source=summary.peak_memory.source,
                memory_stats=summary.memory_stats,
                pprof_available=summary.pprof.available,
                install_hint=summary.pprof.install_hint,
                snapshots=[
                    _snapshot(n, summary.points[n], profile_dir, made_by, icicles.get((v.name, n))) for n in names
                ],
                trace=_trace(v.name, summary),
            )
        )
    peak = max(shown, key=lambda m: m.peak_bytes, default=None)
    return MemoryView(
        present=bool(shown),
        variants=shown,
        missing=[v.name for v in art.variants if v.name not in art.profiles],
        xla=_xla_rows(art),
        peak_bytes=peak.peak_bytes if peak else None,
        peak_source=peak.peak_source if peak else None,
        pprof_available=any(m.pprof_available for m in shown) if shown else False,
        install_hint=shown[0].install_hint if shown else INSTALL_HINT,
        graphs_missing=graphs_missing(shown),
    )
