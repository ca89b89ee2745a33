"""What a command says, and under which name: `HH:MM:SS LEVEL train@jit message` on stderr.

Under Snakemake, whose rules name the job's log file in MNIST_PIPELINE_LOG, every line goes to that
file too, and the details (the profile's op table, say) go there only.
"""

import contextlib
import logging
import os
import sys
from pathlib import Path

from .errors import PipelineError, clip
from .paths import SWEEPS, job_name

LOG_ENV = "MNIST_PIPELINE_LOG"
HANDLER = "mnist-pipeline"  # the name of the handlers configure() installs, so a second call replaces them
NOISY = ("absl", "jax._src", "matplotlib", "PIL", "tensorflow")  # heard from at WARNING and above
details = logging.getLogger("mnist_jax_pipeline.details")


def job_label(stage: str, variant: str | None = None, root: str | Path = ".") -> str:
    """`stage@variant`, with the sweep point (its folder under sweeps/) or the other root in brackets."""
    name, where = job_name(stage, variant), Path(root)
    shown = where.relative_to(SWEEPS) if SWEEPS in where.parents else where
    return name if where == Path(".") else f"{name} [{shown.as_posix()}]"


def log_file() -> Path | None:
    """The job's log file (MNIST_PIPELINE_LOG), which must be a `.log` file in a folder; None when unset."""
    if not (setting := os.environ.get(LOG_ENV, "")):
        return None
    path = Path(setting)
    with contextlib.suppress(OSError):  # a name too long for the file system, say, is refused too
        if setting.endswith(".log") and path.parent.is_dir() and (path.is_file() or not path.exists()):
            return path
    raise PipelineError(f"{LOG_ENV}={clip(setting)}: not a .log file in a folder; unset it (Snakemake's rules set it)")


def _install(logger: logging.Logger, handlers: list[logging.Handler], fmt: logging.Formatter) -> None:
    """Put `handlers`, formatted by `fmt`, on `logger` in place of those an earlier call put there."""
    for old in [h for h in logger.handlers if h.name == HANDLER]:
        logger.removeHandler(old)
        old.close()
    for handler in handlers:
        handler.name = HANDLER
        handler.setFormatter(fmt)
        logger.addHandler(handler)


def configure(label: str, verbose: bool = False) -> None:
    """Log lines naming the job on stderr, and into the job's log file when there is one; libraries quiet."""
    fmt = logging.Formatter(f"%(asctime)s %(levelname)s {label.replace('%', '%%')} %(message)s", "%H:%M:%S")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    with contextlib.suppress(PipelineError):  # a bad setting is refused as the command starts (run.stage)
        if path := log_file():
            handlers.append(logging.FileHandler(path, encoding="utf-8", delay=True))
    logging.getLogger().setLevel(logging.DEBUG if verbose else logging.INFO)
    _install(logging.getLogger(), handlers, fmt)
    details.propagate = len(handlers) == 1
    _install(details, handlers[1:], fmt)
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(logging.WARNING)


def say(line: str) -> None:
    """A command's own line (its error, its stop) on stderr and in the job's log file."""
    print(line, file=sys.stderr)
    with contextlib.suppress(PipelineError, OSError):
        if path := log_file():
            with path.open("a", encoding="utf-8") as log:
                log.write(line + "\n")
