"""Axes that read at a glance, for the report's and the comparison page's figures: log axes labelled in plain
numbers or times at 1-2-5 ticks that never collide (matplotlib alone labels a short decade '6×10⁰' and every
minor tick in a smear), and linear limits with a margin that stop at 100 %.
"""

import math
from collections.abc import Callable, Iterable

from matplotlib.axes import Axes
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from .formatting import plain

MOST_LABELS = 7  # labels on one log axis at most
PAD = 1.08  # the data's range is widened by this factor at each end of a log axis
ROUND, FINE = (1, 2, 5), tuple(range(1, 10))


def _ladder(lo: float, hi: float, mantissas: tuple[int, ...]) -> list[float]:
    """m * 10**e for every mantissa m, from the decade below `lo` to the decade above `hi`."""
    decades = range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2)
    return [float(f"{m * 10.0**e:.12g}") for e in decades for m in mantissas]


def _roundness(tick: float) -> int:
    """0 for a power of ten, 1 for 5, 2 for 2 (times a power of ten), 3 for any other leading digit."""
    return {"1": 0, "5": 1, "2": 2}.get(f"{tick:e}"[0], 3)


def _thin(ticks: list[float], gap: float) -> list[float]:
    """The ticks at least `gap` decades apart, rounder ones kept first."""
    kept: list[float] = []
    for tick in sorted(ticks, key=lambda t: (_roundness(t), t)):
        if all(abs(math.log10(tick / other)) >= gap - 1e-9 for other in kept):
            kept.append(tick)
    return sorted(kept)


def log_ticks(lo: float, hi: float, most: int = MOST_LABELS) -> list[float]:
    """The labelled ticks of a log axis from `lo` to `hi`: 1, 2 and 5 times powers of ten, (every n-th) power of ten
    where more than `most`, every digit where fewer than three; none closer than 1/(2 `most`) of the axis."""
    if not (0 < lo < hi) or not math.isfinite(hi):
        raise ValueError(f"log ticks need 0 < lo < hi, got {lo}, {hi}")

    def inside(mantissas: tuple[int, ...]) -> list[float]:
        return [t for t in _ladder(lo, hi, mantissas) if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]

    ticks = inside(ROUND)
    if len(ticks) > most:
        decades = inside((1,))
        ticks = decades[:: math.ceil(len(decades) / most)]
    elif len(ticks) < 3:
        ticks = inside(FINE)
    return _thin(ticks, math.log10(hi / lo) / (2 * most))


def log_axis(
    ax: Axes, which: str, values: Iterable[float], label: Callable[[float], str] = plain, headroom: float = 1.0
) -> list[float]:
    """Put `ax`'s x or y axis on a log scale fitted to the positive `values` (`headroom` widens the top), widened to
    the 1-2-5 ticks around them where fewer than two labels would show; returns the ticks `label` labels."""
    positive = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0] or [1.0]
    lo, hi = min(positive) / PAD, max(positive) * PAD * headroom
    ticks = log_ticks(lo, hi)
    if len(ticks) < 2:
        ladder = _ladder(lo, hi, ROUND)
        lo, hi = max(t for t in ladder if t <= lo), min(t for t in ladder if t >= hi)
        ticks = log_ticks(lo, hi)
    ax.set(**{f"{which}scale": "log", f"{which}lim": (lo, hi)})
    axis = getattr(ax, f"{which}axis")
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda value, _: label(value)))
    axis.set_minor_formatter(NullFormatter())
    return ticks


def within(values: list[float], top: float | None = None) -> tuple[float, float]:
    """Axis limits around the data with a small margin, never past `top` (100% for an accuracy)."""
    low, high = min(values), max(values)
    pad = (high - low) * 0.08 or max(abs(high) * 0.02, 1e-3)
    return low - pad, high + pad if top is None else min(top, high + pad)
