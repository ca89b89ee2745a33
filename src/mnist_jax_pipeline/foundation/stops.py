"""Stop signals (Ctrl-C, `timeout` or Slurm's SIGTERM, a closed terminal) raised as `Stopped` where the
command is, so that every clean-up runs; `held()` defers them while a library must not be unwound."""

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RECEIVED: list[int] = []  # the stop signals the command received: a library may drop or replace the exception
_held: list[bool] = []


class Stopped(BaseException):
    """A stop signal, raised where the command is (as KeyboardInterrupt)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def raise_stopped(signum: int, frame: object) -> None:
    """The handler of SIGNALS: Stopped, now or at the end of `held()`."""
    RECEIVED.append(signum)
    if _held:
        return
    threading.Timer(1.0, _again, (signum,)).start()
    raise Stopped(signum)


def _again(signum: int) -> None:
    """Send the stop again while the command has not ended (`Outcome` clears RECEIVED): Python drops an
    exception raised in a garbage-collection callback, and JAX has one."""
    if RECEIVED:
        os.kill(os.getpid(), signum)


def handle(handler: Callable[[int, Any], None], signals: tuple[int, ...] = SIGNALS) -> dict[int, Any]:
    """Set `handler` for `signals`, but one ignored (`nohup`'s SIGHUP) stays ignored; the handlers it replaced."""
    return {s: signal.signal(s, handler) for s in signals if signal.getsignal(s) is not signal.SIG_IGN}


def keep(signum: int, frame: object) -> None:
    """The console script's handler while the command's modules import: the stop is raised once it runs."""
    RECEIVED.append(signum)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """A stop received inside the block is raised when it ends: jax.profiler's stop_trace hangs when a stop
    unwinds its trace."""
    _held.append(True)
    try:
        yield
    finally:
        _held.pop()
    if RECEIVED and not _held:
        raise Stopped(RECEIVED[0])
