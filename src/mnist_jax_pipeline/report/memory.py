"""The memory section: the profile stage's summary, read defensively, and its call graphs.

Every key of `reports/profile/summary.json` is optional: what is missing is left out, and the
report says how to get it. Call graphs (`<point>.svg`) are cleaned of scripts, event handlers
and links, given a fixed size, and inlined as `data:` URIs.
"""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import PipelineError
from ..pprof import INSTALL_HINT, short_frame

POINT_ORDER = ("init", "train_step", "evaluate")  # the profile stage's order; others follow
SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
_EXTERNAL_URL = re.compile(r"url\(\s*['\"]?\s*(?!#)", re.IGNORECASE)
_UNSAFE_TAGS = {"script", "foreignObject", "iframe"}


@dataclass(frozen=True)
class Allocation:
    bytes: int | None
    count: int | None
    kind: str
    device: str
    origin: str  # innermost frame of the pipeline's own code, else the innermost frame
    frames: list[str]  # leaf first, as 'function (file.py:line)'


@dataclass(frozen=True)
class Snapshot:
    name: str
    file: str | None
    total_bytes: int | None
    total_allocations: int | None
    top: list[Allocation]
    explanation: str | None
    call_graph: str | None  # data: URI of the cleaned SVG


@dataclass(frozen=True)
class MemoryView:
    present: bool  # summary.json exists
    snapshots: list[Snapshot] = field(default_factory=list)
    device: str | None = None
    backend: str | None = None
    explanation: str | None = None
    peak_bytes: int | None = None
    peak_source: str | None = None
    pprof_available: bool = False
    install_hint: str = INSTALL_HINT


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return (
        str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else None
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


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


def _allocation(row: Any) -> Allocation:
    row = _dict(row)
    labels = _dict(row.get("labels"))
    raw_stack = row.get("stack") if isinstance(row.get("stack"), list) else []
    stack = [short_frame(f) for f in raw_stack if isinstance(f, str)]
    where = _str(row.get("origin"))
    return Allocation(
        _int(row.get("bytes")),
        _int(row.get("count")),
        _str(labels.get("kind")) or "",
        _str(labels.get("device")) or "",
        short_frame(where) if where else (stack[0] if stack else ""),
        stack,
    )


def _snapshot(name: str, point: Any, profile_dir: Path) -> Snapshot:
    point = _dict(point)
    graph = profile_dir / f"{name}.svg"
    safe_name = Path(name).name == name and not name.startswith(".")
    rows = point.get("top") if isinstance(point.get("top"), list) else []
    return Snapshot(
        name=name,
        file=_str(point.get("file")),
        total_bytes=_int(point.get("total_bytes")),
        total_allocations=_int(point.get("total_allocations")),
        top=[_allocation(row) for row in rows],
        explanation=_str(point.get("explanation")),
        call_graph=svg_data_uri(graph) if safe_name and graph.is_file() else None,
    )


def memory_view(summary: dict[str, Any] | None, profile_dir: Path) -> MemoryView:
    """What the memory section shows; without a summary, an empty view with the install hint."""
    if summary is None:
        return MemoryView(present=False)
    pprof = _dict(summary.get("pprof"))
    peak = _dict(summary.get("peak_memory"))
    points = _dict(summary.get("points"))
    names = [p for p in POINT_ORDER if p in points] + sorted(
        str(p) for p in points if p not in POINT_ORDER
    )
    return MemoryView(
        present=True,
        snapshots=[_snapshot(name, points[name], profile_dir) for name in names],
        device=_str(summary.get("device_kind")) or _str(summary.get("device")),
        backend=_str(summary.get("backend")),
        explanation=_str(summary.get("explanation")),
        peak_bytes=_int(peak.get("bytes")),
        peak_source=_str(peak.get("source")),
        pprof_available=pprof.get("available") is True,
        install_hint=_str(pprof.get("install_hint")) or INSTALL_HINT,
    )
