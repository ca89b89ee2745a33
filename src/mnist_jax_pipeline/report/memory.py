"""The memory section: the profile stage's summary (typed, artefacts/profile_summary.py) and its
call graphs. Without a summary the report says how to make one. Call graphs (`<point>.svg`)
are cleaned of scripts, event handlers and links, given a fixed size, and inlined as `data:` URIs.
"""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from ..artefacts.profile_summary import Allocation, ProfileSummary, Snapshot
from ..errors import PipelineError
from ..paths import SNAPSHOTS
from ..pprof import INSTALL_HINT, short_frame

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
_EXTERNAL_URL = re.compile(r"url\(\s*['\"]?\s*(?!#)", re.IGNORECASE)
_UNSAFE_TAGS = {"script", "foreignObject", "iframe"}


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
    call_graph: str | None  # data: URI of the cleaned SVG


@dataclass(frozen=True)
class MemoryView:
    present: bool  # summary.json exists
    snapshots: list[SnapshotView] = field(default_factory=list)
    device: str | None = None
    backend: str | None = None
    peak_bytes: int | None = None
    peak_source: str | None = None
    pprof_available: bool = False
    install_hint: str = INSTALL_HINT


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


def svg_data_uri(path: Path) -> str:
    """The cleaned SVG at `path` as a base64 data URI; a corrupt file names the profile stage."""
    try:
        cleaned = clean_svg(path.read_text())
    except (ET.ParseError, ValueError, UnicodeDecodeError) as err:
        raise PipelineError(
            f"{path}: not a readable SVG ({err}); re-run the 'profile' stage"
        ) from err
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


def _snapshot(name: str, snapshot: Snapshot, profile_dir: Path) -> SnapshotView:
    graph = profile_dir / f"{name}.svg"
    safe_name = Path(name).name == name and not name.startswith(".")
    return SnapshotView(
        name=name,
        file=snapshot.file,
        total_bytes=snapshot.total_bytes,
        total_allocations=snapshot.total_allocations,
        top=[_row(row) for row in snapshot.top],
        explanation=snapshot.explanation,
        call_graph=svg_data_uri(graph) if safe_name and graph.is_file() else None,
    )


def memory_view(summary: ProfileSummary | None, profile_dir: Path) -> MemoryView:
    """What the memory section shows; without a summary, an empty view with the install hint."""
    if summary is None:
        return MemoryView(present=False)
    names = [p for p in SNAPSHOTS if p in summary.points] + sorted(p for p in summary.points if p not in SNAPSHOTS)
    return MemoryView(
        present=True,
        snapshots=[_snapshot(name, summary.points[name], profile_dir) for name in names],
        device=summary.device_kind or summary.device,
        backend=summary.backend,
        peak_bytes=summary.peak_memory.bytes,
        peak_source=summary.peak_memory.source,
        pprof_available=summary.pprof.available,
        install_hint=summary.pprof.install_hint,
    )
