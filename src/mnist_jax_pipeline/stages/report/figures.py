"""The report's figures, drawn on matplotlib's Agg canvas (no pyplot, no global state), as PNG bytes by file
name. The style is pinned (matplotlib's defaults plus report.mplstyle, whatever matplotlibrc says) and the
PNG carries no version, so the same inputs give the same bytes on every run.
"""

import base64
import io
import math
import os
import zlib
from collections.abc import Mapping, Sequence
from itertools import groupby
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from matplotlib import style as mpl_style
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from ...artefacts.profile_summary import Allocation, ProfileSummary, Snapshot, short_frame
from ...foundation import paths
from ...foundation.dataset_facts import NUM_CLASSES
from .formatting import plain, seconds, seconds_tick, size
from .inputs import Artefacts, VariantResults
from .ticks import log_axis

DPI = 110
SAMPLE_DIGITS = 40
MISCLASSIFIED_SHOWN = 30
DIGIT_GAP = 2  # pixels between the digits of a grid
TITLE_BAND = 11  # pixels above each digit for its title (two lines at 8 pt)
TIMELINE_LABELS = 3  # the longest events of a step are named on the figure
ICICLE_DEPTH = 10  # stack levels drawn below the frames every allocation shares
CLASSES = np.arange(NUM_CLASSES)
HALF = (5.2, 2.6)  # inches: a figure in one column of the report's two (572 px wide at DPI)
STYLE = str(Path(__file__).with_name("report.mplstyle"))  # pinned over matplotlib's defaults
T = TypeVar("T")
PLAIN = FuncFormatter(lambda value, _: plain(value))  # 0.1 rather than 10^-1 on log axes
SHARE = FuncFormatter(lambda value, _: f"{plain(100 * value)} %")  # 0.95 -> '95 %'


def laid_out(figsize: tuple[float, float], columns: int = 1) -> tuple[Figure, Any]:
    """A figure of `figsize` inches that matplotlib lays out, and its axes: one, or a row of `columns`."""
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.subplots(1, columns)


def png_bytes(fig: Figure) -> bytes:
    """Render `fig` as PNG without the 'Software' (matplotlib version) chunk."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def data_uri(data: bytes, media_type: str = "image/png") -> str:
    """Bytes (PNG unless told) as a data: URI, to inline in a page."""
    return f"data:{media_type};base64," + base64.b64encode(data).decode("ascii")


def ordered(items: Mapping[str, T], first: Sequence[str]) -> list[tuple[str, T]]:
    """The items named in `first`, in its order, then any other by name."""
    order = {name: i for i, name in enumerate(first)}
    return sorted(items.items(), key=lambda item: (order.get(item[0], len(order)), item[0]))


def digit_grid(images: np.ndarray, titles: Sequence[str] = (), empty: str = "", columns: int = 10) -> Figure:
    """Images (N, 28, 28) in rows of `columns`, each scaled to its own range, under its title if given: one
    mosaic in one axes (an axes per digit took the report stage seconds to lay out and draw)."""
    count, height, width = images.shape
    cell_w, cell_h = width + DIGIT_GAP, width + DIGIT_GAP + (TITLE_BAND if titles else 0)
    rows = max(1, math.ceil(count / columns))
    fig = Figure(figsize=(columns * 0.8, rows * 0.8 * cell_h / cell_w))
    if not count:
        fig.text(0.5, 0.5, empty, ha="center", va="center")
        return fig
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    mosaic = np.zeros((rows * cell_h, columns * cell_w))  # 0: white under gray_r
    for i, image in enumerate(images.astype(np.float64)):
        (row, column), span = divmod(i, columns), np.ptp(image)
        top, left = (row + 1) * cell_h - height - DIGIT_GAP // 2, column * cell_w + DIGIT_GAP // 2
        mosaic[top : top + height, left : left + width] = (image - image.min()) / span if span else 0.0
        if titles:
            ax.text(left + width / 2 - 0.5, top - 1, titles[i], ha="center", va="bottom", fontsize=8)
    ax.imshow(mosaic, cmap="gray_r", vmin=0.0, vmax=1.0, aspect="auto")
    return fig


def class_bars(groups: Mapping[str, Sequence[float]], figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    """A figure with a bar per group at each class, side by side in the colour cycle's order, and their legend."""
    fig, ax = laid_out(figsize)
    width = 0.8 / max(len(groups), 1)
    for i, (label, values) in enumerate(groups.items()):
        ax.bar(CLASSES + (i - (len(groups) - 1) / 2) * width, values, width, label=label)
    ax.set(xticks=CLASSES, xlabel="class")
    fig.legend(ncols=len(groups), loc="outside upper right", fontsize=8)
    return fig, ax


def class_balance(art: Artefacts) -> Figure:
    """Share of each class in every non-empty split."""
    splits = ordered(art.stats.splits, paths.SPLITS)
    fig, ax = class_bars({f"{n} ({s.count:,})": s.class_balance for n, s in splits if s.count}, (7, 2.6))
    ax.set(ylabel="share of split")
    return fig


def training_curves(variants: Sequence[VariantResults]) -> Figure:
    """Loss and train/test accuracy per epoch. Identical runs overlap: wider lines go first."""
    fig, (loss_ax, acc_ax) = laid_out(HALF, 2)
    for i, v in enumerate(variants):
        epochs = [h.epoch for h in v.history]
        style = {"color": f"C{i}", "linewidth": max(3.2 - 1.1 * i, 1.0), "alpha": 0.85}
        loss_ax.plot(epochs, [h.train_loss for h in v.history], marker="o", markersize=3, label=v.name, **style)
        acc_ax.plot(epochs, [h.train_accuracy for h in v.history], **style)
        acc_ax.plot(epochs, [h.test_accuracy for h in v.history], linestyle="--", **style)
    loss_ax.set(title="training loss", xlabel="epoch")
    loss_ax.yaxis.set_major_formatter(PLAIN)
    acc_ax.set(title="accuracy", xlabel="epoch", ylim=(None, min(acc_ax.get_ylim()[1], 1.0)))  # no share past 100 %
    acc_ax.yaxis.set_major_formatter(SHARE)
    for ax in (loss_ax, acc_ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    handles = loss_ax.get_legend_handles_labels()[0] + [
        Line2D([], [], color="grey", label="train accuracy"),
        Line2D([], [], color="grey", linestyle="--", label="test accuracy"),
    ]
    fig.legend(handles=handles, ncols=len(handles), loc="outside upper right", fontsize=8)
    return fig


def epoch_times(variants: Sequence[VariantResults]) -> Figure:
    """Seconds per epoch, then first and median epoch and compile time per variant (log scales, in ms and s)."""
    fig, (line_ax, bar_ax) = laid_out(HALF, 2)
    for i, v in enumerate(variants):
        epochs, times = [h.epoch for h in v.history], [h.epoch_seconds for h in v.history]
        line_ax.plot(epochs, times, marker="o", markersize=3, color=f"C{i}", label=v.name)
    line_ax.set(title="time per epoch (log)", xlabel="epoch")
    line_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    log_axis(line_ax, "y", [h.epoch_seconds for v in variants for h in v.history], seconds_tick)
    kinds = (
        ("first_epoch_seconds", "first epoch", "//"),
        ("epoch_seconds_median", "median epoch", ""),
        ("compile_seconds", "compile (apart)", ".."),
    )
    x, width, colors = np.arange(len(variants)), 0.8 / len(kinds), [f"C{i}" for i in range(len(variants))]
    for k, (key, _, hatch) in enumerate(kinds):
        heights = [getattr(v.train, key) or 0.0 for v in variants]
        style = {"hatch": hatch, "color": colors, "edgecolor": "black", "linewidth": 0.5, "alpha": 0.55 + 0.2 * k}
        bars = bar_ax.bar(x + (k - 1) * width, heights, width, **style)
        # the labels turned: upright ones would overlap
        bar_ax.bar_label(bars, fmt=lambda value: seconds(value) if value else "", padding=2, rotation=90, fontsize=6.5)
    bar_ax.set(title="epoch and compile time (log)", xticks=x, xticklabels=[v.name for v in variants])
    log_axis(bar_ax, "y", [getattr(v.train, key) for v in variants for key, _, _ in kinds], seconds_tick, headroom=4)
    bar_ax.grid(axis="x", visible=False)
    handles = line_ax.get_legend_handles_labels()[0]
    handles += [Patch(facecolor="white", edgecolor="black", hatch=hatch, label=label) for _, label, hatch in kinds]
    ncols = len(handles) if len(handles) <= 5 else math.ceil(len(handles) / 2)
    fig.legend(handles=handles, ncols=ncols, loc="outside upper right", fontsize=7)
    return fig


def confusion(v: VariantResults) -> Figure:
    """Counts of (actual, predicted), actual on y as in DVC's template; a log colour scale, so off-diagonal cells
    show, and zero cells blank."""
    fig, ax = laid_out((4.4, 3.8))
    counts: np.ndarray = np.asarray(v.details.confusion_matrix, dtype=np.int64)  # [actual, predicted]
    top = max(int(counts.max()), 2)
    norm = LogNorm(vmin=1, vmax=top)
    image = ax.imshow(np.ma.masked_equal(counts, 0), cmap="Blues", norm=norm)
    for (row, col), value in np.ndenumerate(counts):
        if value:
            color = "white" if norm(value) > 0.6 else "black"
            ax.text(col, row, str(value), ha="center", va="center", fontsize=7.5, color=color)
    ax.set(title=f"confusion matrix: {v.name}", xlabel="predicted", ylabel="actual", xticks=CLASSES, yticks=CLASSES)
    ax.grid(False)
    bar = fig.colorbar(image, ax=ax, shrink=0.8, label="examples (log scale)")
    if top < 10:  # less than a decade: label every count
        bar.set_ticks(range(1, top + 1))
    bar.ax.yaxis.set_major_formatter(PLAIN)
    bar.ax.yaxis.set_minor_formatter(NullFormatter())
    return fig


def per_class_recall(variants: Sequence[VariantResults]) -> Figure:
    """Recall of every class, one bar per variant."""
    recalls = {v.name: [v.evaluation.per_class[str(c)].recall for c in CLASSES] for v in variants}
    fig, ax = class_bars(recalls, HALF)
    lowest = min(min(recall) for recall in recalls.values())
    ax.set(title="recall per class", ylim=(max(0.0, math.floor((lowest - 0.02) * 20) / 20), 1.0))
    ax.yaxis.set_major_formatter(SHARE)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    return fig


def misclassified(v: VariantResults, images: np.ndarray) -> Figure:
    """The first misclassified test digits, titled with the predicted and the actual class."""
    shown = v.details.misclassified_indices[:MISCLASSIFIED_SHOWN]
    titles = [f"pred {p}\nactual {t}" for p, t in zip(v.details.predicted, v.details.true, strict=False)]
    return digit_grid(images[shown], titles[: len(shown)], empty="no misclassified test examples", columns=6)


def _micros_tick(value: float, _: object) -> str:
    return "0" if value == 0 else f"{plain(value / 1000)} ms" if value >= 1000 else f"{plain(value)} µs"


def step_timeline(profiles: dict[str, ProfileSummary]) -> Figure:
    """One traced step per variant, op events by thread: matrix products red, other ops blue, and a thin line
    from an asynchronous op's event end to when it really finished."""
    timelines = {name: profile.trace.table.timeline for name, profile in profiles.items()}
    lanes = {name: sorted({e.lane for e in timeline.events}) for name, timeline in timelines.items()}
    heights = [max(len(threads), 1) * 0.25 + 0.55 for threads in lanes.values()]
    fig = Figure(figsize=(HALF[0], max(sum(heights) + 0.3, 1.2)), layout="constrained")
    if not timelines:
        fig.text(0.5, 0.5, "no execution trace: run the profile stage", ha="center", va="center")
        return fig
    axes = np.atleast_1d(fig.subplots(len(timelines), 1, gridspec_kw={"height_ratios": heights}))
    for ax, (name, timeline) in zip(axes, timelines.items(), strict=True):
        rows = {lane: i for i, lane in enumerate(lanes[name])}
        for e in timeline.events:
            y, color = rows[e.lane], "C3" if e.matmul else "C0"
            width = max(e.end_us - e.start_us, 0.0)
            ax.barh(y, width, left=e.start_us, height=0.6, color=color, edgecolor="white", linewidth=0.3)
            if e.done_us > e.end_us:
                ax.plot([e.end_us, e.done_us], [y, y], color=color, linewidth=0.8, alpha=0.6)
        for e in sorted(timeline.events, key=lambda e: (-(e.end_us - e.start_us), e.op))[:TIMELINE_LABELS]:
            # named where the name fits in its box (about 3.8 pt per character on a ~280 pt wide axis)
            if (e.end_us - e.start_us) / max(timeline.duration_us, 1e-9) * 280 > 3.8 * len(e.op):
                x = (e.start_us + e.end_us) / 2
                ax.text(x, rows[e.lane], e.op, ha="center", va="center", fontsize=6.5, color="white", clip_on=True)
        ax.set(yticks=range(len(rows)), yticklabels=list(rows), xlim=(0, max(timeline.duration_us, 1.0)))
        ax.set(ylim=(len(rows) - 0.5, -0.5), title=f"{name}: {timeline.title}")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
        ax.xaxis.set_major_formatter(FuncFormatter(_micros_tick))
        ax.grid(axis="y", visible=False)
    axes[-1].set_xlabel("time from the window's start")
    handles = [Patch(color="C3", label="matrix product"), Patch(color="C0", label="other op")]
    fig.legend(handles=handles, loc="outside upper right", ncols=2, fontsize=8)
    return fig


def icicle_rows(snapshot: Snapshot) -> list[Allocation]:
    """The buffers an icicle of the snapshot shows: what it added to its base, or what it holds."""
    return [row for row in (snapshot.diff.rows if snapshot.diff else snapshot.top) if row.bytes > 0]


def icicle(rows: Sequence[Allocation], title: str) -> Figure:
    """The live bytes by call stack, root at the top, each frame as wide as the bytes below it: from the last
    frame every stack shares (where they part) down at most ICICLE_DEPTH levels."""
    stacks = [([short_frame(f) for f in reversed(r.stack)], r.bytes) for r in rows if r.bytes > 0]
    total = sum(nbytes for _, nbytes in stacks)
    # how many frames every stack shares, each keeping at least one of its own
    shared = min([len(os.path.commonprefix([s for s, _ in stacks]))] + [len(s) - 1 for s, _ in stacks])
    first = max(shared - 1, 0)
    drawn = sorted(((tuple(s[first : first + ICICLE_DEPTH]), nbytes) for s, nbytes in stacks), key=lambda p: p[0])
    depth = max((len(s) for s, _ in drawn), default=1)
    fig, ax = laid_out((9, 0.8 + 0.3 * depth))
    ax.set_axis_off()
    ax.set(title=f"{title} ({size(total)})", xlim=(0, 1), ylim=(depth, 0))
    for level in range(depth):
        start = 0.0
        for prefix, group in groupby(drawn, key=lambda pair: pair[0][: level + 1]):  # neighbours that share frames
            width = sum(nbytes for _, nbytes in group)
            if len(prefix) > level:
                color = f"C{zlib.crc32(prefix[-1].encode()) % 10}"
                box = (start / total, level + 0.04), width / total, 0.92
                ax.add_patch(Rectangle(*box, linewidth=0.5, facecolor=color, edgecolor="white", alpha=0.75))
                if width / total > 0.07:
                    label = prefix[-1] if len(prefix[-1]) * 0.0075 < width / total else prefix[-1].split(" ")[0]
                    x_mid = (start + width / 2) / total
                    ax.text(x_mid, level + 0.5, label, ha="center", va="center", fontsize=6.5, clip_on=True)
            start += width
    return fig


def icicle_png(variant: str, point: str, snapshot: Snapshot) -> bytes:
    """The icicle of a snapshot that has no pprof call graph, as PNG in the pinned style."""
    what = f"{point} less {snapshot.diff.base}: what the step added" if snapshot.diff else point
    with mpl_style.context(["default", STYLE]):
        return png_bytes(icicle(icicle_rows(snapshot), f"{variant}, {what}: live bytes by call stack"))


def all_figures(art: Artefacts) -> dict[str, Figure]:
    """Every figure of the report (paths.REPORT_FIGURES), by file name; call inside the pinned style."""
    figures = {
        "dataset_samples.png": digit_grid(art.test_images[:SAMPLE_DIGITS]),
        "class_balance.png": class_balance(art),
        "training_curves.png": training_curves(art.variants),
        "epoch_times.png": epoch_times(art.variants),
        "per_class_recall.png": per_class_recall(art.variants),
        "step_timeline.png": step_timeline(art.profiles),
        **{f"confusion_{v.name}.png": confusion(v) for v in art.variants},
        **{f"misclassified_{v.name}.png": misclassified(v, art.test_images) for v in art.variants},
    }
    return {name: figures[name] for name in paths.REPORT_FIGURES.file_names(tuple(v.name for v in art.variants))}


def draw_all(art: Artefacts) -> dict[str, bytes]:
    """Every figure of the report (paths.REPORT_FIGURES) as PNG bytes, by file name."""
    with mpl_style.context(["default", STYLE]):  # matplotlib defaults, whatever matplotlibrc says
        return {name: png_bytes(fig) for name, fig in all_figures(art).items()}
