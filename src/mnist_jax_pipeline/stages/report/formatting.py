"""Number formats of the HTML and Markdown templates (registered as Jinja filters) and of the figures'
tick labels: bytes in binary units, times in µs, ms or s, never scientific notation; and relative links."""

import math
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

MISSING = "—"
MINUS = "−"  # U+2212, as wide as '+' in tabular figures
BYTE_COUNT = re.compile(r"\b(\d{1,3}(?:,\d{3})+|\d+) bytes\b")


def _three_digits(value: float) -> str:
    """Three significant digits, trailing zeros kept: 2 -> '2.00', 12.34 -> '12.3'."""
    return f"{value:.{2 if abs(value) < 10 else 1 if abs(value) < 100 else 0}f}"


def _scaled(amount: float, base: int, units: tuple[str, ...]) -> str:
    """Whole in units[0] below `base`; else three digits in the first further unit (each `base` times the
    one before) that keeps it under 1000, or the last."""
    if abs(amount) < base:
        return f"{amount:.0f} {units[0]}"
    for unit in units[1:-1]:
        amount /= base
        if abs(amount) < 1000:
            return f"{_three_digits(amount)} {unit}"
    return f"{_three_digits(amount / base)} {units[-1]}"


def _signed(text: str, value: float) -> str:
    return f"+{text}" if value > 0 else f"{MINUS}{text.lstrip('-')}" if value < 0 else text


def percent(value: Any, digits: int = 2) -> str:
    """0.98123 -> '98.12 %'."""
    return MISSING if value is None else f"{100 * float(value):.{digits}f} %"


def signed_percent(value: Any, digits: int = 1) -> str:
    """A relative change, its sign always shown: 0.027 -> '+2.7 %', -0.01 -> '−1.0 %'."""
    text = percent(value, digits)
    return text if value is None else _signed(text, float(text.removesuffix(" %")))


def seconds(value: Any) -> str:
    """Seconds with three significant digits; milliseconds below one second."""
    if value is None:
        return MISSING
    value = float(value)
    return f"{_three_digits(value * 1000)} ms" if abs(value) < 1 else f"{_three_digits(value)} s"


def micros(value: Any) -> str:
    """Microseconds with three significant digits; as `seconds` from 1000 µs."""
    if value is None:
        return MISSING
    value = float(value)
    return f"{_three_digits(value)} µs" if abs(value) < 1e3 else seconds(value / 1e6)


def size(value: Any) -> str:
    """Bytes in binary units, three significant digits: 1536 -> '1.50 KiB', 540_000_000 -> '515 MiB'."""
    return MISSING if value is None else _scaled(float(value), 1024, ("B", "KiB", "MiB", "GiB"))


def flops(value: Any) -> str:
    """Floating-point operations in SI units: 2.054e9 -> '2.05 GFLOP'."""
    return MISSING if value is None else _scaled(float(value), 1000, ("FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP"))


def signed_size(value: Any) -> str:
    """A change in bytes, its sign always shown: 2678824 -> '+2.55 MiB', -2048 -> '−2.00 KiB', 0 -> '0 B'."""
    return MISSING if value is None else _signed(size(value), float(value))


def signed(value: Any) -> str:
    """A change in a count: 3 -> '+3', -1 -> '−1', 0 -> '0'."""
    return MISSING if value is None else _signed(f"{int(value):,}", int(value))


def sizes_in(text: str) -> str:
    """A sentence of the profile stage with its byte counts in binary units: 'the 5,764,278 bytes live' -> 'the
    5.50 MiB live'."""
    return BYTE_COUNT.sub(lambda match: size(int(match.group(1).replace(",", ""))), text)


def load(value: Any) -> str:
    """A load average: 1.251953125 -> '1.25'."""
    return MISSING if value is None else f"{float(value):.2f}"


def ratio(value: Any) -> str:
    """A speedup: 31.234 -> '31.2×'."""
    return MISSING if value is None else f"{_three_digits(float(value))}×"


def thousands(value: Any) -> str:
    """Thousands separated: 60000 -> '60,000'."""
    return MISSING if value is None else f"{int(value):,}"


def memory_stat(value: Any, key: str) -> str:
    """A value of a device's memory_stats() under `key`: bytes for the byte keys, else a count."""
    return size(value) if "bytes" in key or key.endswith("_size") else thousands(value)


def plain(value: float) -> str:
    """A tick label without scientific notation: 0.009 -> '0.009', 20 -> '20', 12000 -> '12,000'."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    rounded = float(f"{value:.6g}")
    if abs(rounded) >= 1:
        return f"{rounded:,.6g}" if abs(rounded) < 1e6 else f"{rounded:,.0f}"
    decimals = 5 - math.floor(math.log10(abs(rounded)))
    return f"{rounded:.{decimals}f}".rstrip("0").rstrip(".")


def seconds_tick(value: float) -> str:
    """A tick label of a time axis: 0.2 -> '200 ms', 2 -> '2 s', 60 -> '60 s'."""
    return "0" if value == 0 else f"{plain(value * 1000)} ms" if abs(value) < 1 else f"{plain(value)} s"


def href(target: str | Path, page: str | Path, *, folder: bool = False) -> str:
    """The percent-encoded link from the page at `page` to `target`, both from the project root, a folder's ending in
    '/': ('reports/profile/jit/trace', 'reports/report.html', folder=True) -> 'profile/jit/trace/'."""
    relative = quote(Path(os.path.relpath(Path(target), Path(page).parent)).as_posix())
    return f"{relative}/" if folder else relative


FILTERS = {
    f.__name__: f
    for f in (percent, signed_percent, seconds, micros, size, flops, signed_size, signed, sizes_in, load, ratio)
    + (thousands, memory_stat)
}
