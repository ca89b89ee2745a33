"""What a stage says on the console, and under which name.

Every log line of a stage names its job: `train@jit`, and for a sweep point also the point,
`train@jit_scan [step_size/step_size=0.05]`, so the lines of jobs running side by side can be told
apart. Snakemake's console names its jobs the same way (src/snakemake_logger_plugin_mnist_pipeline).

Details (the profile stage's op table, its memory explanations) go to the `details` logger: under
Snakemake, whose rules set MNIST_PIPELINE_LOG to the job's log file, they are written there and not
to the console; elsewhere (dvc repro, a stage run by hand) they are logged like any other line. The
report shows them too. Whether progress bars are drawn at all (MNIST_PIPELINE_PROGRESS, a terminal)
is decided here too, for training's bars and TFDS's alike. This module imports nothing heavy:
Snakemake loads it at every start.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .errors import PipelineError

LOG_ENV = "MNIST_PIPELINE_LOG"  # the job's log file (Snakemake's `log:`), set by the rules' commands
SWEEPS = Path("sweeps")  # sweep points live in sweeps/<sweep>/<point>/ (sweeps.py)
HANDLER = "mnist-pipeline"  # the name of the handlers configure() installs, so a second call replaces them
details = logging.getLogger("mnist_jax_pipeline.details")


def job_label(stage: str, variant: str | None = None, root: str | Path = ".") -> str:
    """`stage@variant`, with the sweep point (its folder under sweeps/) or the other root in brackets."""
    name = f"{stage}@{variant}" if variant else stage
    where = Path(root)
    if where == Path("."):
        return name
    if SWEEPS in where.parents:
        where = where.relative_to(SWEEPS)
    return f"{name} [{where.as_posix()}]"


def _replace(logger: logging.Logger, handler: logging.Handler) -> None:
    for old in [h for h in logger.handlers if h.name == HANDLER]:
        logger.removeHandler(old)
        old.close()
    handler.name = HANDLER
    logger.addHandler(handler)


class OneLinePluginError(logging.Filter):
    """JAX logs a backend plugin that cannot start (a CUDA build on a machine without a GPU) with its
    traceback, then runs on the CPU: one line says so instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            cause = str(record.exc_info[1]).strip().splitlines()[0][:200]
            record.msg, record.args = f"{record.getMessage()}: {cause}; JAX runs on the other backends (the CPU)", None
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"  # a fallback, not a failure
        return True


def quiet_backend_fallback() -> None:
    """Make JAX's report of a backend it cannot start one line (OneLinePluginError)."""
    logger = logging.getLogger("jax._src.xla_bridge")
    if not any(isinstance(f, OneLinePluginError) for f in logger.filters):
        logger.addFilter(OneLinePluginError())


NOISY = ("absl", "jax._src", "matplotlib", "PIL", "tensorflow")  # libraries heard from at WARNING and above


def configure(label: str, verbose: bool = False) -> None:
    """Log lines as `HH:MM:SS LEVEL <label> message` on stderr; details to MNIST_PIPELINE_LOG when it is set;
    the libraries' chatter quiet, and a backend JAX cannot start one line."""
    fmt = logging.Formatter(f"%(asctime)s %(levelname)s {label.replace('%', '%%')} %(message)s", "%H:%M:%S")
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    on_console = logging.StreamHandler(sys.stderr)
    on_console.setFormatter(fmt)
    _replace(root, on_console)
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    quiet_backend_fallback()
    log_file = os.environ.get(LOG_ENV)
    details.propagate = not log_file
    if log_file:
        # appended: the rule's `tee -a` writes the console's lines into the same file
        into_log = logging.FileHandler(log_file, mode="a", encoding="utf-8", delay=True)
        into_log.setFormatter(fmt)
        _replace(details, into_log)
    else:
        for old in [h for h in details.handlers if h.name == HANDLER]:
            details.removeHandler(old)
            old.close()


@contextlib.contextmanager
def prints_to_details() -> Iterator[None]:
    """What a library prints on stdout meanwhile (TFDS's notes) goes to the details, line by line."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            yield
    finally:
        for line in printed.getvalue().splitlines():
            if line.strip():
                details.info("%s", line)


PROGRESS_ENV = "MNIST_PIPELINE_PROGRESS"  # 0/off: never a bar, 1/on: always, unset/auto: on a terminal only
PROGRESS_SETTINGS = {"0": False, "off": False, "1": True, "on": True, "": None, "auto": None}


def terminal_columns(stream: IO[str]) -> int:
    """The terminal's width, 0 where it is not a terminal or reports no size."""
    try:
        return os.get_terminal_size(stream.fileno()).columns if os.isatty(stream.fileno()) else 0
    except (AttributeError, OSError, ValueError):
        return 0


def progress_wanted(stream: IO[str] = sys.stderr) -> bool:
    """Progress bars (training's, TFDS's) on a terminal that has a width, unless MNIST_PIPELINE_PROGRESS
    says otherwise."""
    setting = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if setting not in PROGRESS_SETTINGS:
        raise PipelineError(
            f"{PROGRESS_ENV}={os.environ[PROGRESS_ENV]}: not a setting; use 0 (or off), 1 (or on) or auto"
        )
    forced = PROGRESS_SETTINGS[setting]
    return forced if forced is not None else terminal_columns(stream) > 0
