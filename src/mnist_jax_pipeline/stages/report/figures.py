"""The report's figures, drawn on matplotlib's Agg canvas (no pyplot, no global state).

`draw_all` returns PNG bytes by file name. The style is pinned (matplotlib defaults plus the
overrides below, whatever the user's matplotlibrc says) and the PNG metadata carries no
version, so the same inputs give the same bytes on every run.
"""

from __future__ import annotations

import io
import math
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from matplotlib import style as mpl_style
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from ...artefacts.dataset import SplitStats, Stats
from ...artefacts.profile_summary import Allocation, ProfileSummary, short_frame
from ...foundation import paths
from ...foundation.dataset_facts import NUM_CLASSES
from .formatting import plain, seconds, seconds_tick
from .formatting import size as byte_size
from .inputs import Artefacts, VariantResults
from .memory import icicle_rows
from .ticks import cap_axis, log_axis

DPI = 110
SAMPLE_DIGITS = 40
SPLIT_ORDER = ("train", "val", "test")
MISCLASSIFIED_SHOWN = 30
GRID_COLUMNS = 10
DIGIT_GAP = 2  # pixels between the digits of a grid
TITLE_BAND = 11  # pixels above each digit for its title (two lines at 8 pt)
STYLE: dict[str, Any] = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "image.interpolation": "nearest",
    "svg.hashsalt": "mnist-jax-pipeline",
}
PLAIN = FuncFormatter(lambda value, _: plain(value))  # 0.1 rather than 10^-1 on log axes
HALF = (5.2, 2.6)  # inches: a figure in one column of the report's two (572 px wide at DPI)
SHARE = FuncFormatter(lambda value, _: f"{plain(100 * value)} %")  # 0.95 -> '95 %'


def png_bytes(fig: Figure) -> bytes:
    """Render `fig` as PNG without the 'Software' (matplotlib version) chunk."""
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def ordered_splits(stats: Stats) -> list[tuple[str, SplitStats]]:
    """The splits of stats.json as train, val, test, then any other."""
    splits = stats.splits
    names = [n for n in SPLIT_ORDER if n in splits] + sorted(n for n in splits if n not in SPLIT_ORDER)
    return [(name, splits[name]) for name in names]


def variant_color(index: int) -> str:
    return f"C{index % 10}"


def digit_grid(
    images: np.ndarray,
    titles: Sequence[str] | None = None,
    empty: str = "",
    columns: int = GRID_COLUMNS,
) -> Figure:
    """Images (N, 28, 28) in rows of `columns`, each scaled to its own range; optional titles.

    One mosaic in one axes, not an axes per digit: the same picture, drawn several times faster
    (a 40-digit grid of axes cost the report stage about a second and a half to lay out and draw).
    """
    count = len(images)
    rows = max(1, math.ceil(count / columns))
    cell_w = images.shape[2] + DIGIT_GAP if count else 1
    cell_h = cell_w + (TITLE_BAND if titles else 0)
    fig = Figure(figsize=(columns * 0.8, rows * 0.8 * cell_h / cell_w))
    if count == 0:
        fig.text(0.5, 0.5, empty, ha="center", va="center")
        return fig
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.imshow(digit_mosaic(images, columns, cell_h), cmap="gray_r", vmin=0.0, vmax=1.0, aspect="auto")
    for i, title in enumerate((titles or [])[:count]):
        row, column = divmod(i, columns)
        image_top = row * cell_h + cell_h - cell_w + DIGIT_GAP // 2  # as digit_mosaic places it
        ax.text(column * cell_w + cell_w / 2 - 0.5, image_top - 1, title, ha="center", va="bottom", fontsize=8)
    return fig


def digit_mosaic(images: np.ndarray, columns: int, cell_h: int) -> np.ndarray:
    """The images in one array, each scaled to [0, 1] by its own range, at the bottom right of a
    (cell_h, width + DIGIT_GAP) cell (the rest 0: white under gray_r)."""
    count, height, width = images.shape
    cell_w = width + DIGIT_GAP
    rows = math.ceil(count / columns)
    mosaic = np.zeros((rows * cell_h, columns * cell_w))
    for i, image in enumerate(images.astype(np.float64)):
        row, column = divmod(i, columns)
        low, span = image.min(), np.ptp(image)
        top, left = row * cell_h + cell_h - height - DIGIT_GAP // 2, column * cell_w + DIGIT_GAP // 2
        mosaic[top : top + height, left : left + width] = (image - low) / span if span else 0.0
    return mosaic


def class_balance(art: Artefacts) -> Figure:
    """Share of each class in every non-empty split."""
    fig = Figure(figsize=(7, 2.6), layout="constrained")
    ax = fig.subplots()
    splits = [(name, s) for name, s in ordered_splits(art.stats) if s.count]
    width = 0.8 / max(len(splits), 1)
    classes = np.arange(NUM_CLASSES)
    for i, (name, split) in enumerate(splits):
        ax.bar(
            classes + (i - (len(splits) - 1) / 2) * width,
            split.class_balance,
            width,
            label=f"{name} ({split.count:,})",
        )
    ax.set(xticks=classes, xlabel="class", ylabel="share of split")
    fig.legend(ncols=len(splits), loc="outside upper right", fontsize=8)
    return fig


def training_curves(variants: Sequence[VariantResults]) -> Figure:
    """Loss and train/test accuracy per epoch. Identical runs overlap: wider lines go first."""
    fig = Figure(figsize=HALF, layout="constrained")
    loss_ax, acc_ax = fig.subplots(1, 2)
    for i, v in enumerate(variants):
        epochs = [h.epoch for h in v.history]
        style = {"color": variant_color(i), "linewidth": max(3.2 - 1.1 * i, 1.0), "alpha": 0.85}
        loss_ax.plot(
            epochs,
            [h.train_loss for h in v.history],
            marker="o",
            markersize=3,
            label=v.name,
            **style,
        )
        acc_ax.plot(epochs, [h.train_accuracy for h in v.history], **style)
        acc_ax.plot(epochs, [h.test_accuracy for h in v.history], linestyle="--", **style)
    loss_ax.set(title="training loss", xlabel="epoch")
    loss_ax.yaxis.set_major_formatter(PLAIN)
    acc_ax.set(title="accuracy", xlabel="epoch")
    acc_ax.yaxis.set_major_formatter(SHARE)
    cap_axis(acc_ax, 1.0)
    for ax in (loss_ax, acc_ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    handles = loss_ax.get_legend_handles_labels()[0] + [
        Line2D([], [], color="grey", label="train accuracy"),
        Line2D([], [], color="grey", linestyle="--", label="test accuracy"),
    ]
    fig.legend(handles=handles, ncols=len(handles), loc="outside upper right", fontsize=8)
    return fig


def _annotate_bars(ax, bars, values: Sequence[float | None]) -> None:
    for bar, value in zip(bars, values, strict=True):
        if value:
            ax.annotate(
                seconds(value),
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                rotation=90,  # side by side, upright labels of narrow bars would overlap
                fontsize=6.5,
                xytext=(0, 2),
                textcoords="offset points",
            )


def epoch_times(variants: Sequence[VariantResults]) -> Figure:
    """Seconds per epoch (log scale), then first/median epoch and compile time per variant (log scale,
    labelled in ms and s)."""
    fig = Figure(figsize=HALF, layout="constrained")
    line_ax, bar_ax = fig.subplots(1, 2)
    for i, v in enumerate(variants):
        line_ax.plot(
            [h.epoch for h in v.history],
            [h.epoch_seconds for h in v.history],
            marker="o",
            markersize=3,
            color=variant_color(i),
            label=v.name,
        )
    line_ax.set(title="time per epoch (log)", xlabel="epoch")
    line_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    log_axis(line_ax, "y", [h.epoch_seconds for v in variants for h in v.history], seconds_tick)

    kinds = (
        ("first_epoch_seconds", "first epoch", "//"),
        ("epoch_seconds_median", "median epoch", ""),
        ("compile_seconds", "compile (apart)", ".."),
    )
    x = np.arange(len(variants))
    width = 0.8 / len(kinds)
    for k, (key, label, hatch) in enumerate(kinds):
        values = [getattr(v.train, key) for v in variants]
        heights = [value or 0.0 for value in values]
        bars = bar_ax.bar(
            x + (k - 1) * width,
            heights,
            width,
            label=label,
            hatch=hatch,
            color=[variant_color(i) for i in range(len(variants))],
            edgecolor="black",
            linewidth=0.5,
            alpha=0.55 + 0.2 * k,
        )
        _annotate_bars(bar_ax, bars, values)
    bar_ax.set(title="epoch and compile time (log)", xticks=x, xticklabels=[v.name for v in variants])
    log_axis(bar_ax, "y", [getattr(v.train, key) for v in variants for key, _, _ in kinds], seconds_tick, headroom=4)
    bar_ax.grid(axis="x", visible=False)
    handles = [Patch(facecolor="white", edgecolor="black", hatch=hatch, label=label) for _, label, hatch in kinds]
    lines = line_ax.get_legend_handles_labels()
    entries = len(variants) + len(kinds)
    fig.legend(
        lines[0] + handles,
        lines[1] + [h.get_label() for h in handles],
        ncols=entries if entries <= 5 else math.ceil(entries / 2),
        loc="outside upper right",
        fontsize=7,
    )
    return fig


def confusion(v: VariantResults) -> Figure:
    """Counts of (actual, predicted): actual class on y, predicted on x, as DVC's template draws them;
    the colour is logarithmic, so the off-diagonal cells show, and zero cells are blank."""
    fig = Figure(figsize=(4.4, 3.8), layout="constrained")
    ax = fig.subplots()
    counts = v.confusion
    top = max(int(counts.max()), 2)
    norm = LogNorm(vmin=1, vmax=top)
    image = ax.imshow(np.ma.masked_equal(counts, 0), cmap="Blues", norm=norm)
    for (row, col), value in np.ndenumerate(counts):
        if value:
            dark = norm(value) > 0.6
            ax.text(
                col,
                row,
                str(value),
                ha="center",
                va="center",
                fontsize=7.5,
                color="white" if dark else "black",
            )
    ticks = np.arange(NUM_CLASSES)
    ax.set(
        title=f"confusion matrix: {v.name}",
        xlabel="predicted",
        ylabel="actual",
        xticks=ticks,
        yticks=ticks,
    )
    ax.grid(False)
    bar = fig.colorbar(image, ax=ax, shrink=0.8, label="examples (log scale)")
    if top < 10:  # less than a decade: label every count
        bar.set_ticks(range(1, top + 1))
    bar.ax.yaxis.set_major_formatter(PLAIN)
    bar.ax.yaxis.set_minor_formatter(NullFormatter())
    return fig


def per_class_recall(variants: Sequence[VariantResults]) -> Figure:
    """Recall of every class, one bar per variant."""
    fig = Figure(figsize=HALF, layout="constrained")
    ax = fig.subplots()
    classes = np.arange(NUM_CLASSES)
    width = 0.8 / len(variants)
    lowest = 1.0
    for i, v in enumerate(variants):
        recall = [v.evaluation.per_class[str(c)].recall for c in classes]
        lowest = min(lowest, *recall)
        ax.bar(
            classes + (i - (len(variants) - 1) / 2) * width,
            recall,
            width,
            label=v.name,
            color=variant_color(i),
        )
    floor = max(0.0, math.floor((lowest - 0.02) * 20) / 20)
    ax.set(title="recall per class", xlabel="class", xticks=classes, ylim=(floor, 1.0))
    ax.yaxis.set_major_formatter(SHARE)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    fig.legend(ncols=len(variants), loc="outside upper right", fontsize=8)
    return fig


def misclassified(v: VariantResults, images: np.ndarray) -> Figure:
    """The first misclassified test digits, titled with the predicted and the actual class."""
    details = v.details
    shown = details.misclassified_indices[:MISCLASSIFIED_SHOWN]
    titles = [f"pred {p}\nactual {t}" for p, t in zip(details.predicted, details.true, strict=False)]
    return digit_grid(images[shown], titles[: len(shown)], empty="no misclassified test examples", columns=6)


def _ticks_us(value: float, _: object) -> str:
    return "0" if value == 0 else f"{plain(value / 1000)} ms" if value >= 1000 else f"{plain(value)} µs"


TIMELINE_LABELS = 3  # the longest events of a step are named on the figure


def step_timeline(profiles: dict[str, ProfileSummary], order: Sequence[str]) -> Figure:
    """One traced step per variant, op events by thread: matrix products red, other ops blue, and
    a thin line from an asynchronous op's event end to when it really finished."""
    shown = [name for name in order if name in profiles]
    lanes = {name: sorted({e.lane for e in profiles[name].trace.table.timeline.events}) for name in shown}
    heights = [max(len(lanes[name]), 1) * 0.25 + 0.55 for name in shown]
    fig = Figure(figsize=(HALF[0], max(sum(heights) + 0.3, 1.2)), layout="constrained")
    if not shown:
        fig.text(0.5, 0.5, "no execution trace: run the profile stage", ha="center", va="center")
        return fig
    axes = np.atleast_1d(fig.subplots(len(shown), 1, gridspec_kw={"height_ratios": heights}))
    for ax, name in zip(axes, shown, strict=True):
        timeline = profiles[name].trace.table.timeline
        rows = {lane: i for i, lane in enumerate(lanes[name])}
        for event in timeline.events:
            y = rows[event.lane]
            color = "C3" if event.matmul else "C0"
            ax.barh(
                y,
                max(event.end_us - event.start_us, 0.0),
                left=event.start_us,
                height=0.6,
                color=color,
                edgecolor="white",
                linewidth=0.3,
            )
            if event.done_us > event.end_us:
                ax.plot([event.end_us, event.done_us], [y, y], color=color, linewidth=0.8, alpha=0.6)
        longest = sorted(timeline.events, key=lambda e: (-(e.end_us - e.start_us), e.op))[:TIMELINE_LABELS]
        for event in longest:
            # named where the name fits in its box (about 3.8 pt per character on a ~280 pt wide axis)
            width_pt = (event.end_us - event.start_us) / max(timeline.duration_us, 1e-9) * 280
            if width_pt > 3.8 * len(event.op):
                ax.text(
                    (event.start_us + event.end_us) / 2,
                    rows[event.lane],
                    event.op,
                    ha="center",
                    va="center",
                    fontsize=6.5,
                    color="white",
                    clip_on=True,
                )
        ax.set(
            yticks=range(len(rows)),
            yticklabels=list(rows),
            xlim=(0, max(timeline.duration_us, 1.0)),
            ylim=(len(rows) - 0.5, -0.5),
            title=f"{name}: {timeline.title}",
        )
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
        ax.xaxis.set_major_formatter(FuncFormatter(_ticks_us))
        ax.grid(axis="y", visible=False)
    axes[-1].set_xlabel("time from the window's start")
    handles = [Patch(color="C3", label="matrix product"), Patch(color="C0", label="other op")]
    fig.legend(handles=handles, loc="outside upper right", ncols=2, fontsize=8)
    return fig


ICICLE_DEPTH = 10  # stack levels drawn below the frames every allocation shares


def _frame_color(name: str) -> str:
    return f"C{zlib.crc32(name.encode()) % 10}"


Stack = tuple[str, ...]  # frames, root first
Span = tuple[Stack, float, float]  # (frames down to this level, start, width) in bytes


def _icicle_paths(rows: Sequence[Allocation]) -> tuple[list[tuple[Stack, int]], int]:
    """Each allocation's stack, root first, from the last frame every stack shares, at most ICICLE_DEPTH
    frames, with its bytes, sorted by stack; and the bytes of them all."""
    stacks = [([short_frame(f) for f in reversed(r.stack)], r.bytes) for r in rows if r.bytes > 0]
    total = sum(size for _, size in stacks)
    shared = 0
    while stacks and all(len(s) > shared + 1 for s, _ in stacks) and len({s[shared] for s, _ in stacks}) == 1:
        shared += 1
    first = max(shared - 1, 0)
    return sorted(((tuple(s[first : first + ICICLE_DEPTH]), size) for s, size in stacks), key=lambda p: p[0]), total


def _level_spans(paths_: list[tuple[Stack, int]], level: int) -> list[Span]:
    """The boxes of one level: a box per run of neighbouring stacks that share their frames down to it."""
    x = 0.0
    spans: list[Span] = []
    for path, size in paths_:
        if len(path) > level:
            prefix = path[: level + 1]
            if spans and spans[-1][0] == prefix and math.isclose(spans[-1][1] + spans[-1][2], x):
                spans[-1] = (prefix, spans[-1][1], spans[-1][2] + size)
            else:
                spans.append((prefix, x, size))
        x += size
    return spans


def icicle(rows: Sequence[Allocation], title: str) -> Figure:
    """The live bytes by call stack, root at the top, each frame as wide as the bytes below it. The
    frames every stack shares are left out but the last (the first row is where the stacks part),
    and at most ICICLE_DEPTH levels are drawn."""
    paths_, total = _icicle_paths(rows)
    depth = max((len(p) for p, _ in paths_), default=1)
    fig = Figure(figsize=(9, 0.8 + 0.3 * depth), layout="constrained")
    ax = fig.subplots()
    ax.set_axis_off()
    ax.set_title(f"{title} ({byte_size(total)})")
    if not total:
        ax.text(0.5, 0.5, "no device buffers", ha="center", va="center", transform=ax.transAxes)
        return fig
    for level in range(depth):
        for prefix, start, width in _level_spans(paths_, level):
            ax.add_patch(
                Rectangle(
                    (start / total, level + 0.04),
                    width / total,
                    0.92,
                    linewidth=0.5,
                    facecolor=_frame_color(prefix[-1]),
                    edgecolor="white",
                    alpha=0.75,
                )
            )
            if width / total > 0.07:
                label = prefix[-1] if len(prefix[-1]) * 0.0075 < width / total else prefix[-1].split(" ")[0]
                ax.text(
                    (start + width / 2) / total,
                    level + 0.5,
                    label,
                    ha="center",
                    va="center",
                    fontsize=6.5,
                    clip_on=True,
                )
    ax.set(xlim=(0, 1), ylim=(depth, 0))
    return fig


def draw_icicles(art: Artefacts, wanted: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
    """Icicle PNGs of the (variant, snapshot) pairs that have no pprof call graph."""
    out = {}
    with mpl_style.context(["default", STYLE]):
        for variant, point in wanted:
            snapshot = art.profiles[variant].points[point]
            rows = icicle_rows(snapshot)
            what = f"{point} less {snapshot.diff.base}: what the step added" if snapshot.diff else point
            out[(variant, point)] = png_bytes(icicle(rows, f"{variant}, {what}: live bytes by call stack"))
    return out


def all_figures(art: Artefacts) -> dict[str, Figure]:
    """Every figure of the report (paths.REPORT_FIGURES), by file name; call inside the pinned style."""
    variants = art.variants
    drawers: dict[str, Callable[[], Figure]] = {
        "dataset_samples": lambda: digit_grid(art.test_images[:SAMPLE_DIGITS]),
        "class_balance": lambda: class_balance(art),
        "training_curves": lambda: training_curves(variants),
        "epoch_times": lambda: epoch_times(variants),
        "per_class_recall": lambda: per_class_recall(variants),
        "step_timeline": lambda: step_timeline(art.profiles, [v.name for v in variants]),
    }
    per_variant: dict[str, Callable[[VariantResults], Figure]] = {
        "confusion": confusion,
        "misclassified": lambda v: misclassified(v, art.test_images),
    }
    figures = {f"{name}.png": drawers[name]() for name in paths.FIGURES}
    for kind in paths.VARIANT_FIGURES:
        figures.update({f"{kind}_{v.name}.png": per_variant[kind](v) for v in variants})
    return figures


def draw_all(art: Artefacts) -> dict[str, bytes]:
    """Every figure of the report (paths.REPORT_FIGURES) as PNG bytes, by file name."""
    with mpl_style.context(["default", STYLE]):  # matplotlib defaults, whatever matplotlibrc says
        return {name: png_bytes(fig) for name, fig in all_figures(art).items()}
