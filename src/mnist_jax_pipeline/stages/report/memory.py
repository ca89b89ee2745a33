"""The trace and memory sections: the profile stage's summaries (artefacts/profile_summary.py), their pprof call
graphs cleaned of scripts, handlers and links and inlined at a fixed size (without one, the report's own icicle
of the stacks), and XLA's analysis of each compiled step (the train stage's metrics)."""

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ...artefacts.profile_summary import INSTALL_HINT, Allocation, ProfileSummary, Snapshot, short_frame
from ...foundation import paths, variants
from ...foundation.errors import remake
from .figures import data_uri, icicle_png, icicle_rows, ordered
from .formatting import href, size
from .inputs import Artefacts

SVG_NS = "http://www.w3.org/2000/svg"
EXTERNAL_URL = re.compile(r"url\(\s*['\"]?\s*(?!#)", re.IGNORECASE)
UNSAFE_TAGS = {"script", "foreignObject", "iframe"}
TOP_OPS = 12  # rows of each op table shown; the rest are summed in one line
ARGUMENTS = {  # a compiled call's arguments by what it runs: key of the profile's expected_bytes -> in words
    "epoch": {"state": "training state", "train_images": "training images", "train_targets": "one-hot targets"},
    "step": {"state": "training state", "batch_images": "batch images", "batch_targets": "batch targets"},
}
XLA_NOTES = {
    "epoch": "the state is donated: its buffers are reused for the output (alias); XLA's cost analysis counts the"
    " scanned body once, not once per step, so its FLOPs are not the epoch's",
    "step": "one compiled update of a full batch; nothing donated",
}


class Profiled(NamedTuple):
    """One variant's profile summary and what the report draws of it."""

    name: str
    summary: ProfileSummary
    snapshots: dict[str, Snapshot]  # in SNAPSHOTS' order, then any other
    graphs: dict[str, str]  # snapshot -> data: URI of its cleaned pprof call graph
    icicles: dict[str, str]  # snapshot -> data: URI of the report's icicle, where it has no call graph
    busy_share: float  # of the traced step time: some op running or finishing
    matmul_share: float | None  # of the traced step time: the matrix products' self time
    logdir: str  # the trace's folder and Perfetto file, from the project root
    perfetto: str
    logdir_href: str  # the same, relative to the report
    perfetto_href: str


def _local(name: str) -> str:
    return name.rsplit("}", 1)[-1]


def _undo_pan_zoom(root: ET.Element) -> None:
    """pprof -svg drops Graphviz's size and viewBox and zooms to 50% for its pan script: restore the drawing at
    1:1 with a viewBox from the graph's background polygon."""
    if (viewport := root.find(f".//{{{SVG_NS}}}g[@id='viewport']")) is not None:
        viewport.attrib.pop("transform", None)
    if (graph := root.find(f".//{{{SVG_NS}}}g[@id='graph0']")) is None or root.get("viewBox"):
        return
    background = graph.find(f"{{{SVG_NS}}}polygon")
    points = background.get("points", "") if background is not None else ""
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", points)]
    if len(numbers) < 4:
        return
    xs, ys = numbers[0::2], numbers[1::2]
    scale = re.search(r"scale\(\s*([\d.]+)[\s,]*([\d.]+)?", graph.get("transform", ""))
    sx, sy = (float(scale.group(1)), float(scale.group(2) or scale.group(1))) if scale else (1.0, 1.0)
    root.set("viewBox", f"0 0 {(max(xs) - min(xs)) * sx:g} {(max(ys) - min(ys)) * sy:g}")


def clean_svg(text: str) -> str:
    """Drop scripts, handlers and outside references; give the picture an absolute size."""
    root = ET.fromstring(text)
    if _local(root.tag) != "svg":
        raise ValueError(f"root element is <{_local(root.tag)}>, not <svg>")
    for element in list(root.iter()):
        for child in list(element):
            tag = _local(child.tag)
            if tag in UNSAFE_TAGS or (tag == "style" and EXTERNAL_URL.search(child.text or "")):
                element.remove(child)
        for name, value in list(element.attrib.items()):
            local = _local(name)
            handler, link = local.lower().startswith("on"), local == "href" and not value.startswith("#")
            if handler or link or EXTERNAL_URL.search(value):
                del element.attrib[name]
    _undo_pan_zoom(root)
    box = root.get("viewBox", "").replace(",", " ").split()
    for attr, value in zip(("width", "height"), box[2:] if len(box) == 4 else [], strict=False):
        if (root.get(attr) or "%").endswith("%"):  # none, empty or relative: the viewBox's
            root.set(attr, f"{float(value):g}pt")
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")
    return ET.tostring(root, encoding="unicode")


def svg_data_uri(path: Path, made_by: str) -> str:
    """The cleaned SVG at `path` as a base64 data URI; a corrupt file names the stage that wrote it."""
    try:
        cleaned = clean_svg(path.read_text(encoding="utf-8"))
    except (ET.ParseError, ValueError, UnicodeDecodeError) as err:
        raise remake(path, f"not a readable SVG ({err})", made_by) from err
    return data_uri(cleaned.encode(), "image/svg+xml")


def call_graph_file(profile_dir: Path, name: str, snapshot: Snapshot) -> Path | None:
    """The pprof SVG the report shows for a snapshot (its difference from the base, if it has one)."""
    if Path(name).name != name or name.startswith("."):
        return None
    stems = ([f"{name}.diff"] if snapshot.diff else []) + [name]
    return next((path for stem in stems if (path := profile_dir / f"{stem}.svg").is_file()), None)


def origin(row: Allocation) -> str:
    """Where a buffer was allocated: the innermost frame of the pipeline's own code, else the innermost frame."""
    return short_frame(row.origin or (row.stack[0] if row.stack else ""))


def _profiled(name: str, summary: ProfileSummary) -> Profiled:
    """A variant's summary with its call graphs cleaned and inlined (else its icicles), its trace's shares and files."""
    points = dict(ordered(summary.points, paths.SNAPSHOTS))
    folder, made_by = paths.PROFILE.at(name), paths.PROFILE.stage(name)
    files = {point: call_graph_file(folder, point, snapshot) for point, snapshot in points.items()}
    graphs = {point: svg_data_uri(path, made_by) for point, path in files.items() if path}
    drawn = {p: data_uri(icicle_png(name, p, s)) for p, s in points.items() if not files[p] and icicle_rows(s)}
    table = summary.trace.table
    logdir, perfetto = folder / summary.trace.logdir, folder / summary.trace.files["perfetto"]
    step = table.step_us or 1.0
    return Profiled(
        name,
        summary,
        points,
        graphs,
        drawn,
        busy_share=table.busy_us / step,
        matmul_share=table.matmul.self_us / step if table.matmul else None,
        logdir=logdir.as_posix(),
        perfetto=perfetto.as_posix(),
        logdir_href=href(logdir, paths.REPORT_HTML.path, folder=True),
        perfetto_href=href(perfetto, paths.REPORT_HTML.path),
    )


def _xla(art: Artefacts) -> Iterator[dict[str, Any]]:
    """XLA's analysis of each compiled variant, with what its arguments are and whether the profile's sizes of
    them add up to XLA's argument bytes (None: no profile to check against)."""
    for v in art.variants:
        if v.train.xla is None:
            continue
        unit, summary = variants.get(v.name).call_unit, art.profiles.get(v.name)
        sizes = {label: summary.expected_bytes.get(key) if summary else None for key, label in ARGUMENTS[unit].items()}
        known = None not in sizes.values()
        parts = [f"{label} {size(part)}" for label, part in sizes.items()] if known else sizes
        yield {
            "name": v.name,
            "unit": unit,
            "xla": v.train.xla,
            "arguments": " + ".join(parts),
            "matches": sum(part or 0 for part in sizes.values()) == v.train.xla.argument_bytes if known else None,
            "note": XLA_NOTES[unit],
        }


def memory_view(art: Artefacts) -> dict[str, Any]:
    """What the trace and memory sections show; without summaries, the hint how to install pprof."""
    shown = [_profiled(name, summary) for name, summary in art.profiles.items()]
    snapshots = [(m, point, snapshot) for m in shown for point, snapshot in m.snapshots.items()]
    return {
        "variants": shown,
        "missing": [v.name for v in art.variants if v.name not in art.profiles],
        "xla": list(_xla(art)),
        "peak": max((m.summary.peak_memory for m in shown), key=lambda peak: peak.bytes, default=None),
        "pprof_available": any(m.summary.pprof.available for m in shown),
        "install_hint": shown[0].summary.pprof.install_hint if shown else INSTALL_HINT,
        # a snapshot with buffers that shows neither pprof's call graph nor the report's icicle
        "graphs_missing": any(s.top and p not in m.graphs and p not in m.icicles for m, p, s in snapshots),
        "top_ops": TOP_OPS,
    }
