"""Ctrl-C under Snakemake, from the start of the workflow on.

A Ctrl-C reaches Snakemake and every job in its process group. Each stage stops itself (it removes
its temporary files and says so in one line), and Snakemake is asked to stop as on SIGTERM: no new
job starts, the running ones are waited for. Snakemake's own handling, a KeyboardInterrupt raised
wherever it is, leaves tracebacks of its event loops when the interrupt lands in one (a second
Ctrl-C, say). Before any job runs, Snakemake is still starting: the run stops with one line.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from types import FrameType


class Stopper:
    """The SIGINT handler of a Snakemake run; `signals` lists those received."""

    def __init__(self) -> None:
        self.signals: list[int] = []

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        graceful = signal.getsignal(signal.SIGTERM)  # the scheduler's, once it runs jobs
        if callable(graceful):
            if not self.signals:
                print(f"{name}: stopping; the running jobs stop and clean up, no new job starts", file=sys.stderr)
            self.signals.append(signum)
            # from a thread: the handler takes a lock the interrupted code may hold
            threading.Thread(target=graceful, args=(signal.SIGTERM, None), daemon=True).start()
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # parsing: stop now
            raise SystemExit(f"error: stopped by {name} before any job started") from None
        self.signals.append(signum)  # building the DAG, in an event loop: stop before the first job (onstart)

    def stopped_before_start(self) -> None:
        """Called as the first job is about to start: stop with one line if a signal came while the DAG was built."""
        if self.signals:
            raise SystemExit(f"error: stopped by {signal.Signals(self.signals[0]).name} before any job started")


def install() -> Stopper:
    """Handle SIGINT in this process from now on; the handler."""
    stopper = Stopper()
    signal.signal(signal.SIGINT, stopper)
    return stopper
