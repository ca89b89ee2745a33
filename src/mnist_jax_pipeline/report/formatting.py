"""Number formats shared by the HTML and Markdown templates (registered as Jinja filters)."""

from __future__ import annotations

from typing import Any

MISSING = "—"


def _three_digits(value: float) -> str:
    """Three significant digits, trailing zeros kept: 2 -> '2.00', 12.34 -> '12.3'."""
    magnitude = abs(value)
    decimals = 2 if magnitude < 10 else 1 if magnitude < 100 else 0
    return f"{value:.{decimals}f}"


def percent(value: Any, digits: int = 2) -> str:
    """0.98123 -> '98.12 %'."""
    return MISSING if value is None else f"{100 * float(value):.{digits}f} %"


def seconds(value: Any) -> str:
    """Seconds with three significant digits; milliseconds below one second."""
    if value is None:
        return MISSING
    value = float(value)
    return f"{_three_digits(value * 1000)} ms" if abs(value) < 1 else f"{_three_digits(value)} s"


def micros(value: Any) -> str:
    """Microseconds with three significant digits; milliseconds from 1000 µs, seconds from 1000 ms."""
    if value is None:
        return MISSING
    value = float(value)
    if abs(value) >= 1e6:
        return f"{_three_digits(value / 1e6)} s"
    if abs(value) >= 1e3:
        return f"{_three_digits(value / 1e3)} ms"
    return f"{_three_digits(value)} µs"


def size(value: Any) -> str:
    """Bytes in binary units: 1536 -> '1.5 KiB'."""
    if value is None:
        return MISSING
    amount = float(value)
    for unit in ("B", "KiB", "MiB"):
        if abs(amount) < 1024:
            return f"{amount:.0f} B" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GiB"


def ratio(value: Any) -> str:
    """A speedup: 31.234 -> '31.2×'."""
    return MISSING if value is None else f"{_three_digits(float(value))}×"


def thousands(value: Any) -> str:
    """Thousands separated: 60000 -> '60,000'."""
    return MISSING if value is None else f"{int(value):,}"


FILTERS = {
    "percent": percent,
    "seconds": seconds,
    "micros": micros,
    "size": size,
    "ratio": ratio,
    "thousands": thousands,
}
