"""Training progress: a bar on a terminal that the timed loop never waits for; plain lines elsewhere."""

from __future__ import annotations

import io
import logging
import os

import pytest

from mnist_jax_pipeline.foundation import terminal
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.mlp import progress
from mnist_jax_pipeline.mlp.progress import EpochProgress


class Counter:
    def __init__(self):
        self.steps_done = 0


def test_off_a_terminal_each_epoch_is_one_plain_line(caplog):
    stream = io.StringIO()  # no terminal behind it
    counter = Counter()
    bar = EpochProgress("train@jit", 2, 10, lambda: counter.steps_done, stream)
    assert not bar.bar_on
    with caplog.at_level(logging.INFO, logger="mnist_jax_pipeline.mlp.progress"):
        for epoch in (1, 2):
            bar.epoch_started(epoch)
            counter.steps_done += 10
            bar.epoch_finished(epoch, 0.5, 0.25, 0.9, 0.8)
    assert stream.getvalue() == ""
    assert [r.getMessage() for r in caplog.records] == [
        f"epoch {e}/2  0.500 s  loss 0.250000  train 90.00%  test 80.00%" for e in (1, 2)
    ]


class Ticks:
    """The bar's stop event, replaced: each wait returns at once after moving the loop's counter to its next
    position, and the last one stops the thread. So the test needs no clock and no sleeping."""

    def __init__(self, counter: Counter, positions: list[int]):
        self.counter, self.positions, self.timeouts = counter, list(positions), []

    def wait(self, timeout: float) -> bool:
        self.timeouts.append(timeout)
        if not self.positions:
            return True
        self.counter.steps_done = self.positions.pop(0)
        return False

    def set(self) -> None:
        self.positions = []

    def clear(self) -> None:
        pass


def test_the_bar_follows_the_loops_counter_once_per_refresh():
    stream = io.StringIO()
    counter = Counter()
    bar = EpochProgress("train@nojit", 1, 100, lambda: counter.steps_done, stream, bar=True)
    ticks = Ticks(counter, [10, 40, 70])
    bar._stop = ticks  # type: ignore[assignment]
    bar.epoch_started(1)
    assert bar._thread is not None
    bar._thread.join(timeout=30)
    assert not bar._thread.is_alive(), "the thread stops when its stop event is set"
    during = stream.getvalue()
    bar.epoch_finished(1, 1.2, 0.125, 0.95, 0.94)
    text = stream.getvalue()
    assert set(ticks.timeouts) == {progress.REFRESH_SECONDS}, "the thread waits the refresh interval each time"
    assert all(f"{n}/100" in during for n in (10, 40, 70)), "each refresh shows the counter's position"
    assert during.count("\r") <= 1 + 3, "one opening draw, then at most one draw per refresh"
    last = text.rstrip().split("\r")[-1]
    assert "train@nojit epoch 1/1" in last and "100/100" in last
    assert "1.200 s, 83 steps/s, loss 0.1250, test 94.00%" in last


@pytest.mark.parametrize(
    ("setting", "expected"), [("1", True), ("on", True), ("0", False), ("off", False), ("", False), ("auto", False)]
)
def test_the_setting_forces_or_refuses_the_bar(monkeypatch, setting, expected):
    monkeypatch.setenv(terminal.PROGRESS_ENV, setting)
    assert terminal.progress_wanted(io.StringIO()) is expected


def test_an_unknown_setting_is_one_line(monkeypatch):
    monkeypatch.setenv(terminal.PROGRESS_ENV, "yes")
    with pytest.raises(PipelineError, match="MNIST_PIPELINE_PROGRESS=yes: not a setting; use 0"):
        terminal.progress_wanted(io.StringIO())


def test_a_terminal_without_a_size_gets_plain_lines(monkeypatch):
    import fcntl
    import pty
    import struct
    import termios

    monkeypatch.delenv(terminal.PROGRESS_ENV, raising=False)
    parent, child = pty.openpty()
    with os.fdopen(parent, "rb", buffering=0), os.fdopen(child, "w") as screen:
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
        assert not terminal.progress_wanted(screen)  # a bar of width 0 would draw nothing at all
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        assert terminal.progress_wanted(screen)
