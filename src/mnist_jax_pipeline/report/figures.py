"""The report's figures, drawn on matplotlib's Agg canvas (no pyplot, no global state).

`draw_all` returns PNG bytes by file name. The style is pinned (matplotlib defaults plus the
overrides below, whatever the user's matplotlibrc says) and the PNG metadata carries no
version, so the same inputs give the same bytes on every run.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from matplotlib import style as mpl_style
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from .. import paths
from ..artefacts.dataset import SplitStats, Stats
from ..config import NUM_CLASSES
from .formatting import seconds
from .inputs import Artefacts, VariantResults

DPI = 110
SAMPLE_DIGITS = 40
SPLIT_ORDER = ("train", "val", "test")
MISCLASSIFIED_SHOWN = 30
GRID_COLUMNS = 10
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
PLAIN = FuncFormatter(lambda value, _: f"{value:g}")  # 0.1 rather than 10^-1 on log axes
NO_LABEL = FuncFormatter(lambda value, _: "")


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
    """Images (N, 28, 28) in rows of `columns`, each scaled to its own range; optional titles."""
    count = len(images)
    rows = max(1, math.ceil(count / columns))
    cell_h = 1.1 if titles else 0.8
    fig = Figure(figsize=(columns * 0.8, rows * cell_h), layout="constrained")
    if count == 0:
        fig.text(0.5, 0.5, empty, ha="center", va="center")
        return fig
    axes = np.atleast_1d(fig.subplots(rows, columns)).ravel()
    for i, ax in enumerate(axes):
        ax.set_axis_off()
        if i < count:
            ax.imshow(images[i], cmap="gray_r")
            if titles:
                ax.set_title(titles[i], fontsize=8, pad=2)
    return fig


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
    fig = Figure(figsize=(9, 3.3), layout="constrained")
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
        acc_ax.plot(
            epochs, [h.train_accuracy for h in v.history], label=f"{v.name} train", **style
        )
        acc_ax.plot(
            epochs,
            [h.test_accuracy for h in v.history],
            linestyle="--",
            label=f"{v.name} test",
            **style,
        )
    loss_ax.set(title="training loss", xlabel="epoch", ylabel="loss")
    acc_ax.set(title="accuracy (solid: train, dashed: test)", xlabel="epoch", ylabel="accuracy")
    for ax in (loss_ax, acc_ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=8)
    return fig


def _annotate_bars(ax, bars, values: Sequence[float | None]) -> None:
    for bar, value in zip(bars, values, strict=True):
        if value:
            ax.annotate(
                seconds(value),
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=7,
                xytext=(0, 2),
                textcoords="offset points",
            )


def epoch_times(variants: Sequence[VariantResults]) -> Figure:
    """Seconds per epoch (log scale), then first/median epoch and compile time per variant."""
    fig = Figure(figsize=(9, 3.3), layout="constrained")
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
    line_ax.set(title="seconds per epoch", xlabel="epoch", ylabel="seconds (log)", yscale="log")
    line_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    line_ax.yaxis.set_major_formatter(PLAIN)
    line_ax.legend(fontsize=8)

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
    bar_ax.set(
        title="epoch and compile time",
        ylabel="seconds (log)",
        yscale="log",
        xticks=x,
        xticklabels=[v.name for v in variants],
    )
    bar_ax.margins(y=0.15)
    bar_ax.yaxis.set_major_formatter(PLAIN)
    handles = [
        Patch(facecolor="white", edgecolor="black", hatch=hatch, label=label)
        for _, label, hatch in kinds
    ]
    bar_ax.legend(handles=handles, fontsize=8, loc="upper right")
    return fig


def confusion(v: VariantResults) -> Figure:
    """Counts of (true, predicted); the colour is logarithmic, zero cells are blank."""
    fig = Figure(figsize=(4.8, 4.1), layout="constrained")
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
        ylabel="true",
        xticks=ticks,
        yticks=ticks,
    )
    ax.grid(False)
    bar = fig.colorbar(image, ax=ax, shrink=0.8, label="examples (log scale)")
    if top < 10:  # less than a decade: label every count
        bar.set_ticks(range(1, top + 1))
    bar.ax.yaxis.set_major_formatter(PLAIN)
    bar.ax.yaxis.set_minor_formatter(NO_LABEL)
    return fig


def per_class_recall(variants: Sequence[VariantResults]) -> Figure:
    """Recall of every class, one bar per variant."""
    fig = Figure(figsize=(9, 2.9), layout="constrained")
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
    ax.set(
        title="recall per class", xlabel="class", ylabel="recall", xticks=classes, ylim=(floor, 1.0)
    )
    fig.legend(ncols=len(variants), loc="outside upper right", fontsize=8)
    return fig


def misclassified(v: VariantResults, images: np.ndarray) -> Figure:
    """The first misclassified test digits, titled with the predicted and the true class."""
    details = v.details
    shown = details.misclassified_indices[:MISCLASSIFIED_SHOWN]
    titles = [f"pred {p}\ntrue {t}" for p, t in zip(details.predicted, details.true, strict=False)]
    return digit_grid(
        images[shown], titles[: len(shown)], empty="no misclassified test examples", columns=6
    )


def draw_all(art: Artefacts) -> dict[str, bytes]:
    """Every figure of the report (paths.REPORT_FIGURES) as PNG bytes, by file name."""
    variants = art.variants
    drawers: dict[str, Callable[[], Figure]] = {
        "dataset_samples": lambda: digit_grid(art.test_images[:SAMPLE_DIGITS]),
        "class_balance": lambda: class_balance(art),
        "training_curves": lambda: training_curves(variants),
        "epoch_times": lambda: epoch_times(variants),
        "per_class_recall": lambda: per_class_recall(variants),
    }
    per_variant: dict[str, Callable[[VariantResults], Figure]] = {
        "confusion": confusion,
        "misclassified": lambda v: misclassified(v, art.test_images),
    }
    with mpl_style.context(["default", STYLE]):  # matplotlib defaults, whatever matplotlibrc says
        figures = {f"{name}.png": drawers[name]() for name in paths.FIGURES}
        for kind in paths.VARIANT_FIGURES:
            figures.update({f"{kind}_{v.name}.png": per_variant[kind](v) for v in variants})
        return {name: png_bytes(fig) for name, fig in figures.items()}
