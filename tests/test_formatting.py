"""Number formats of the report and the comparison page, and the tick labels of their log axes: human
units, signed byte changes, relative links, plain labels that never collide."""

from __future__ import annotations

import pytest
from matplotlib import style as mpl_style
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from mnist_jax_pipeline.stages.report.figures import STYLE
from mnist_jax_pipeline.stages.report.formatting import (
    flops,
    href,
    memory_stat,
    plain,
    seconds,
    seconds_tick,
    signed,
    signed_size,
    size,
    sizes_in,
)
from mnist_jax_pipeline.stages.report.ticks import log_axis, log_ticks

SCIENTIFIC = ("e+", "e-", "×", "10^", "$")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1536, "1.50 KiB"),
        (2_678_824, "2.55 MiB"),
        (540_000_000, "515 MiB"),
        (1023 * 1024, "1.00 MiB"),
        (3 * 1024**3, "3.00 GiB"),
        (5 * 1024**4, "5120 GiB"),
        (None, "—"),
    ],
)
def test_bytes_in_binary_units(value, text):
    assert size(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2_678_824, "+2.55 MiB"),
        (-2048, "−2.00 KiB"),
        (-12, "−12 B"),
        (0, "0 B"),
        (None, "—"),
    ],
)
def test_byte_changes_carry_their_sign(value, text):
    assert signed_size(value) == text


def test_byte_counts_in_a_sentence_read_in_binary_units():
    sentence = (
        "The largest buffer, 1,605,632 bytes, allocated in update (base.py:121), is the 512x784 float32 weight"
        " of layer 0 (28% of the 5,764,278 bytes live); 3 x 512 bytes more."
    )
    assert sizes_in(sentence) == (
        "The largest buffer, 1.53 MiB, allocated in update (base.py:121), is the 512x784"
        " float32 weight of layer 0 (28% of the 5.50 MiB live); 3 x 512 B more."
    )


def test_count_changes_carry_their_sign():
    assert [signed(n) for n in (3, -1, 0, 12_000)] == ["+3", "−1", "0", "+12,000"]


def test_seconds_and_flops_in_human_units():
    assert [seconds(s) for s in (0.2834, 2.517, 744e-3, 61.0)] == ["283 ms", "2.52 s", "744 ms", "61.0 s"]
    assert [flops(f) for f in (300, 2.054e9, 4.2e12)] == ["300 FLOP", "2.05 GFLOP", "4.20 TFLOP"]
    assert memory_stat(1536, "peak_bytes_in_use") == "1.50 KiB" and memory_stat(1536, "num_allocs") == "1,536"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.009, "0.009"),
        (0.004, "0.004"),
        (1e-5, "0.00001"),
        (0.1 + 0.2, "0.3"),
        (5.0, "5"),
        (20, "20"),
        (12_000, "12,000"),
        (2e6, "2,000,000"),
    ],
)
def test_plain_tick_labels_have_no_exponent(value, text):
    assert plain(value) == text


def test_time_tick_labels_are_ms_or_s():
    assert [seconds_tick(s) for s in (0.005, 0.2, 0.5, 1, 2, 10, 20)] == [
        "5 ms",
        "200 ms",
        "500 ms",
        "1 s",
        "2 s",
        "10 s",
        "20 s",
    ]


def test_links_are_relative_to_the_page():
    page = "reports/report.html"
    assert href("reports/profile/jit/trace", page, folder=True) == "profile/jit/trace/"
    assert (
        href("reports/profile/jit/trace/plugins/profile/jit/perfetto_trace.json.gz", page)
        == "profile/jit/trace/plugins/profile/jit/perfetto_trace.json.gz"
    )
    assert href("sweeps/lr/results.csv", page) == "../sweeps/lr/results.csv"
    assert href("reports/a b#c.json", page) == "a%20b%23c.json"


@pytest.mark.parametrize(
    ("lo", "hi", "ticks"),
    [
        (0.26, 14.5, [0.5, 1, 2, 5, 10]),
        (0.0037, 0.0097, [0.004, 0.005, 0.006, 0.007, 0.008, 0.009]),  # a short axis: every digit
        (1e-6, 1e6, [1e-6, 1e-4, 1e-2, 1, 1e2, 1e4, 1e6]),  # a long one: every other power of ten
    ],
)
def test_log_ticks(lo, hi, ticks):
    assert log_ticks(lo, hi) == pytest.approx(ticks)


def _labels(ax, which: str) -> list[tuple[str, object]]:
    """The tick labels an axis draws (non-empty, inside the axes), with their boxes on the canvas."""
    canvas = FigureCanvasAgg(ax.figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    axis = ax.yaxis if which == "y" else ax.xaxis
    drawn = []
    for tick in axis.get_ticklabels(which="both"):
        box = tick.get_window_extent(renderer)
        middle = (box.y0 + box.y1) / 2 if which == "y" else (box.x0 + box.x1) / 2
        low, high = (frame.y0, frame.y1) if which == "y" else (frame.x0, frame.x1)
        if tick.get_visible() and tick.get_text() and low - 3 <= middle <= high + 3:
            drawn.append((tick.get_text(), box))
    return drawn


def _collide(labels: list[tuple[str, object]]) -> bool:
    boxes = [box for _, box in labels]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


@pytest.mark.parametrize(
    ("values", "label"),
    [
        ([6.2, 7.0, 9.4], seconds_tick),  # less than a decade: matplotlib alone labels it 6×10⁰
        ([2.5, 2.9], seconds_tick),  # no 1-2-5 tick inside: widened to the ticks around it
        ([0.28, 0.35, 2.5, 13.4], seconds_tick),  # the report's epoch times: ms and s
        ([0.0042, 0.0055, 0.0071, 0.0089], plain),  # the comparison page's losses, once a smear of labels
        ([0.04, 0.076], plain),
        ([0.004, 0.03, 0.3], plain),  # two decades
    ],
)
@pytest.mark.parametrize("height", [1.6, 2.6, 4.0])
def test_log_axis_labels_are_plain_and_never_collide(values, label, height):
    with mpl_style.context(["default", STYLE]):
        fig = Figure(figsize=(4.5, height), layout="constrained")
        ax = fig.subplots()
        ax.plot(range(len(values)), values)
        ticks = log_axis(ax, "y", values, label)
        labels = _labels(ax, "y")
    texts = [text for text, _ in labels]
    assert texts == [label(t) for t in ticks] and len(texts) >= 2
    assert not any(mark in text for text in texts for mark in SCIENTIFIC), texts
    low, high = ax.get_ylim()
    assert low <= min(values) and max(values) <= high  # every value shows
    assert low >= min(values) / 2.5 and high <= max(values) * 2.5  # at most to the 1-2-5 ticks around the data
    assert not _collide(labels), texts


def test_matplotlib_alone_collides_where_log_axis_does_not():
    """The comparison page's loss axis before: every minor tick labelled, 0.007 0.008 0.009 in a smear."""
    values = [0.004, 0.03, 0.3]
    with mpl_style.context(["default", STYLE]):
        fig = Figure(figsize=(4.5, 2.6), layout="constrained")
        ax = fig.subplots()
        ax.plot(range(3), values)
        ax.set_yscale("log")
        every = FuncFormatter(lambda value, _: f"{value:g}")
        ax.yaxis.set_major_formatter(every)
        ax.yaxis.set_minor_formatter(every)
        assert _collide(_labels(ax, "y"))
        log_axis(ax, "y", values)
        assert not _collide(_labels(ax, "y"))
