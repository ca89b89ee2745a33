"""Number formats shared by the HTML and Markdown templates (registered as Jinja filters) and by
the figures' tick labels: bytes in binary units, seconds as ms or s, never scientific notation."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

MISSING = "—"
MINUS = "−"  # U+2212, as wide as '+' in tabular figures


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
    """Bytes in binary units, three significant digits: 1536 -> '1.50 KiB', 540_000_000 -> '515 MiB'."""
    if value is None:
        return MISSING
    amount = float(value)
    if abs(amount) < 1024:
        return f"{amount:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        amount /= 1024
        if abs(amount) < 1000 or unit == "GiB":
            return f"{_three_digits(amount)} {unit}"
    raise AssertionError("unreachable")


def _signed(text: str, value: float) -> str:
    return f"+{text}" if value > 0 else f"{MINUS}{text.lstrip('-')}" if value < 0 else text


def signed_size(value: Any) -> str:
    """A change in bytes, its sign always shown: 2678824 -> '+2.55 MiB', -2048 -> '−2.00 KiB', 0 -> '0 B'."""
    return MISSING if value is None else _signed(size(value), float(value))


def signed(value: Any) -> str:
    """A change in a count: 3 -> '+3', -1 -> '−1', 0 -> '0'."""
    return MISSING if value is None else _signed(f"{int(value):,}", int(value))


_BYTE_COUNT = re.compile(r"\b(\d{1,3}(?:,\d{3})+|\d+) bytes\b")


def sizes_in(text: str) -> str:
    """A sentence of the profile stage with its byte counts in binary units:
    'the 5,764,278 bytes live' -> 'the 5.50 MiB live'."""
    return _BYTE_COUNT.sub(lambda match: size(int(match.group(1).replace(",", ""))), text)


def signed_percent(value: Any, digits: int = 1) -> str:
    """A relative change, its sign always shown: 0.027 -> '+2.7 %', -0.01 -> '−1.0 %'."""
    if value is None:
        return MISSING
    text = f"{100 * float(value):.{digits}f}"
    return f"{_signed(text, float(text))} %"


def load(value: Any) -> str:
    """A load average: 1.251953125 -> '1.25'."""
    return MISSING if value is None else f"{float(value):.2f}"


def ratio(value: Any) -> str:
    """A speedup: 31.234 -> '31.2×'."""
    return MISSING if value is None else f"{_three_digits(float(value))}×"


def thousands(value: Any) -> str:
    """Thousands separated: 60000 -> '60,000'."""
    return MISSING if value is None else f"{int(value):,}"


def flops(value: Any) -> str:
    """Floating-point operations in SI units: 2.054e9 -> '2.05 GFLOP'."""
    if value is None:
        return MISSING
    amount = float(value)
    for unit in ("FLOP", "kFLOP", "MFLOP", "GFLOP"):
        if abs(amount) < 1000:
            return f"{amount:.0f} {unit}" if unit == "FLOP" else f"{_three_digits(amount)} {unit}"
        amount /= 1000
    return f"{_three_digits(amount)} TFLOP"


def memory_stat(value: Any, key: str) -> str:
    """A value of a device's memory_stats() under `key`: bytes for the byte keys, else a count."""
    byte_key = "bytes" in key or key.endswith("_size")
    return size(value) if byte_key else thousands(value)


def plain(value: float) -> str:
    """A tick label without scientific notation: 0.009 -> '0.009', 20 -> '20', 12000 -> '12,000'."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    rounded = float(f"{value:.6g}")
    if abs(rounded) >= 1:
        return f"{rounded:,.6g}" if abs(rounded) < 1e6 else f"{rounded:,.0f}"
    decimals = max(0, 5 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:.{decimals}f}".rstrip("0").rstrip(".")


def seconds_tick(value: float) -> str:
    """A tick label of a time axis: 0.2 -> '200 ms', 2 -> '2 s', 60 -> '60 s'."""
    if value == 0:
        return "0"
    return f"{plain(value * 1000)} ms" if abs(value) < 1 else f"{plain(value)} s"


def href(target: str | Path, page: str | Path, *, folder: bool = False) -> str:
    """The relative link from the page at `page` to `target` (both relative to the project root),
    percent-encoded, with '/' separators and a trailing '/' for a folder:
    ('reports/profile/jit/trace', 'reports/report.html', folder=True) -> 'profile/jit/trace/'."""
    relative = quote(Path(os.path.relpath(Path(target), Path(page).parent)).as_posix())
    return f"{relative}/" if folder else relative


FILTERS = {
    "percent": percent,
    "seconds": seconds,
    "micros": micros,
    "size": size,
    "signed_size": signed_size,
    "signed": signed,
    "ratio": ratio,
    "signed_percent": signed_percent,
    "load": load,
    "thousands": thousands,
    "flops": flops,
    "memory_stat": memory_stat,
    "sizes_in": sizes_in,
}
