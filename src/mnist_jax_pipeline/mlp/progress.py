"""Progress of the training epochs: a tqdm bar on a terminal, one plain line per epoch elsewhere. The timed loop
only counts its steps (`steps_done`); a thread moves the bar from that count a few times a second and the epoch's
figures are added after its clock stopped, so the bar adds nothing measurable to a timed epoch."""

import logging
import sys
import threading
from collections.abc import Callable
from typing import IO

from tqdm import tqdm

from ..foundation.terminal import progress_wanted, terminal_columns

log = logging.getLogger(__name__)

REFRESH_SECONDS = 0.25
# tqdm's own rate would count the untimed evaluation after the epoch; the postfix gives the timed one
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"


class EpochProgress:
    """One bar per epoch over its steps, read from the loop's counter `steps`, never pushed by the loop."""

    def __init__(
        self,
        label: str,
        epochs: int,
        steps_per_epoch: int,
        steps: Callable[[], int],
        stream: IO[str] | None = None,
        bar: bool | None = None,
    ):
        self.label, self.epochs, self.total, self.steps = label, epochs, steps_per_epoch, steps
        self.stream = stream or sys.stderr
        self.bar_on = progress_wanted(self.stream) if bar is None else bar
        self.bar: tqdm | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def epoch_started(self, epoch: int) -> None:
        """Before the epoch's clock starts: open its bar and the thread that moves it."""
        if not self.bar_on:
            return
        width = {"dynamic_ncols": True} if terminal_columns(self.stream) else {"ncols": 100}
        desc = f"{self.label} epoch {epoch}/{self.epochs}"
        self.bar = tqdm(
            total=self.total, desc=desc, file=self.stream, mininterval=REFRESH_SECONDS, bar_format=BAR_FORMAT, **width
        )
        self._stop.clear()
        self._thread = threading.Thread(target=self._follow, args=(self.bar, self.steps()), daemon=True)
        self._thread.start()

    def _follow(self, bar: tqdm, first_step: int) -> None:
        while not self._stop.wait(REFRESH_SECONDS):
            bar.n = min(self.steps() - first_step, self.total)
            bar.refresh()

    def _unfollow(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def epoch_finished(self, epoch: int, seconds: float, loss: float, train_acc: float, test_acc: float) -> None:
        """After the epoch's clock stopped: the epoch's figures on its bar, or as one log line."""
        if self.bar is None:
            summary = f"{seconds:.3f} s  loss {loss:.6f}  train {100 * train_acc:.2f}%  test {100 * test_acc:.2f}%"
            log.info("epoch %d/%d  %s", epoch, self.epochs, summary)  # the line names the job (console.py)
            return
        self._unfollow()
        self.bar.n = self.total
        summary = f"{seconds:.3f} s, {self.total / seconds:,.0f} steps/s, loss {loss:.4f}, test {100 * test_acc:.2f}%"
        self.bar.set_postfix_str(summary, refresh=False)
        self.close()

    def close(self) -> None:
        """Stop the thread and close the bar (after an error, too)."""
        self._unfollow()
        if self.bar is not None:
            self.bar.close()
            self.bar = None
