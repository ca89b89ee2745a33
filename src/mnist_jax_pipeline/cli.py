"""One entry point, `mnist-pipeline`, with a subcommand per stage.

Each command (the table in commands.py) names the module whose `main(args)` runs it; the module
is imported only when its command runs, so a stage loads (and its code deps cover) only what it uses. Errors the user
can act on print one line (`error: ...`) and exit 1; `--verbose` adds the traceback. Log lines name
the job (console.py). SIGINT, SIGTERM and SIGHUP (Ctrl-C, `timeout`, Slurm, `docker stop`, a closed
terminal) stop a stage the same way: its temporary outputs are removed, it says so in one line naming
the job, and it exits with 128 + the signal's number.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import io
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any

from .artefacts import atomic
from .artefacts.atomic import discard_temps
from .foundation import console, paths
from .foundation.errors import PipelineError, clip
from .foundation.runtime import set_numerics
from .orchestration.commands import COMMANDS

if TYPE_CHECKING:
    from .orchestration.freshness import StageChecks

# the docstring's first line, as a constant: python -OO drops docstrings
DESCRIPTION = "One entry point, `mnist-pipeline`, with a subcommand per stage."


def _add_common(parser: argparse.ArgumentParser, default: bool) -> None:
    """--params and --verbose, before or after the command. After it, an option left out keeps the
    value given before it (argparse.SUPPRESS: absent from the command's namespace)."""
    parser.add_argument(
        "--params",
        default="params.yaml" if default else argparse.SUPPRESS,
        help="parameters file (default: params.yaml)",
    )
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        default=False if default else argparse.SUPPRESS,
        help="debug logging and full tracebacks",
    )


def version() -> str:
    """The installed package's version."""
    try:
        return metadata.version("mnist-jax-pipeline")
    except metadata.PackageNotFoundError:
        return "unknown (not installed; pip install -e .)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mnist-pipeline", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    _add_common(parser, default=True)
    common = argparse.ArgumentParser(add_help=False)  # the same options after the command, too
    _add_common(common, default=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        # A hidden command is given no help: argparse lists a command under COMMAND only when add_parser
        # gets one (help=argparse.SUPPRESS would print "==SUPPRESS==" there on Python 3.11).
        listed: dict[str, Any] = {} if command.hidden else {"help": command.help}
        p = sub.add_parser(name, description=command.help, parents=[common], **listed)
        for option in command.options:
            option.add_to(p)
    return parser


class Stopped(BaseException):
    """A stop signal, raised where the stage is (like KeyboardInterrupt), so every `finally` and
    every atomic write's clean-up runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: object) -> None:
    if _stopping:  # the clean-up is running: a second signal must not interrupt it
        return
    # Python drops an exception raised inside a garbage-collection callback (JAX has one): should that
    # happen to this one, the same signal comes again a second later, somewhere else.
    threading.Timer(1.0, os.kill, (os.getpid(), signum)).start()
    raise Stopped(signum)


_stopping = False


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """Say nothing of a stop dropped in a garbage-collection callback: its signal comes again."""
    if not isinstance(unraisable.exc_value, Stopped):
        sys.__unraisablehook__(unraisable)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PARENT_POLL_S = 0.1


def _stop_with_parent(parent: int) -> None:
    """Stop this process as on SIGTERM once the process that started it is gone (its parent changes: the
    orphan is handed to init or a subreaper): a job's shell killed under Snakemake or DVC takes its stage
    with it, so a stage never writes after its orchestrator has gone. Polled on a daemon thread rather than
    PR_SET_PDEATHSIG, which would fire when the thread that started the process ends."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os.kill(os.getpid(), signal.SIGTERM)


def _one_line(err: OSError | UnicodeError) -> str:
    """An OS or encoding error no stage turned into a PipelineError, in the same one-line form."""
    if isinstance(err, UnicodeError):
        return f"a file is not UTF-8 text ({err}); re-run the stage that wrote it (--verbose names it)"
    where = err.filename or "a file"
    return f"{where}: {err.strerror or err}; check that it exists, its permissions and the free space"


def refuse_owned(args: argparse.Namespace) -> None:
    """One line where --out or --root names another stage's output: the command would write over it."""
    own = {a.path for a in paths.ARTEFACTS if a.made_by == args.command}
    for option in ("out", "root"):
        value = getattr(args, option, None)
        if not value or value == "." or value in own:
            continue
        owner = paths.owner(value)
        if owner is not None:
            raise PipelineError(
                f"--{option} {value}: the '{owner}' stage writes there; choose a path outside the pipeline's outputs"
            )


@contextlib.contextmanager
def provenance_of(checks: StageChecks | None) -> Iterator[None]:
    """Around a stage: its inputs checked first (every job upstream current, by content), its provenance
    record written with its outputs after."""
    if checks is None:
        yield
        return
    inputs = checks.finish()
    yield
    checks.record(inputs)


def begin_checks(args: argparse.Namespace) -> StageChecks | None:
    """A stage's checks, under way while it imports its code; None for a command that is no stage."""
    from .orchestration.freshness import StageChecks  # the stage table: imported when a command runs, not for --help

    return StageChecks.begin(args)


def _backend_failure() -> str | None:
    """One line when JAX cannot start the backend JAX_PLATFORMS names (a GPU or TPU this machine or this
    JAX install lacks), else None. JAX fails at a stage's first array operation, wherever that is, with a
    RuntimeError or (cuda without a visible GPU) an AssertionError: asking it for its devices again tells."""
    setting, jax = os.environ.get("JAX_PLATFORMS"), sys.modules.get("jax")
    if not setting or jax is None:
        return None
    try:
        jax.devices()
    except Exception as err:
        reason = str(err).split(" (set JAX_PLATFORMS", 1)[0] or "no such device is visible"
        return (
            f"JAX_PLATFORMS={clip(setting)}: JAX cannot start that backend here ({clip(reason, 160)}); set"
            " JAX_PLATFORMS=cpu, or unset it to let JAX use what this machine has (a GPU needs the"
            " .[cuda12] extra, a TPU the .[tpu] extra)"
        )
    return None


def _message(err: Exception) -> str | None:
    """The one line for an error the user can act on, or None."""
    if isinstance(err, PipelineError):
        return str(err)
    if isinstance(err, OSError | UnicodeError):
        return _one_line(err)
    return _backend_failure()


def main(argv: Sequence[str] | None = None) -> int:
    global _stopping
    _stopping = False
    args = build_parser().parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a character the locale cannot encode (LC_ALL=C) prints as \uXXXX
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    label = console.job_label(args.command, getattr(args, "variant", None), getattr(args, "root", "."))
    console.configure(label, args.verbose)
    previous = {sig: signal.signal(sig, _stop) for sig in STOP_SIGNALS}
    threading.Thread(target=_stop_with_parent, args=(os.getppid(),), daemon=True, name="parent-watch").start()
    sys.unraisablehook = _unraisable
    set_numerics()  # before any stage starts a JAX backend
    try:
        module_name, _, function = COMMANDS[args.command].module.partition(":")
        checks = begin_checks(args)  # its files hashed while the stage imports its code
        module = importlib.import_module(f"{__package__}.{module_name}")
        refuse_owned(args)
        # a stage's outputs, its provenance record last, are put in place together, or none is
        with atomic.together(), provenance_of(checks):
            getattr(module, function or "main")(args)
    except (PipelineError, OSError, UnicodeError, RuntimeError, AssertionError) as err:
        message = _message(err)
        if message is None:  # not one the user can act on: the traceback, as for any other error
            raise
        discard_temps()
        atexit.register(discard_temps)  # again after worker threads are joined at exit
        if args.verbose:
            traceback.print_exc()
        print(f"error: {message}", file=sys.stderr)
        return 1
    except (Stopped, KeyboardInterrupt) as err:
        _stopping = True
        discard_temps()
        signum = err.signum if isinstance(err, Stopped) else signal.SIGINT
        name = signal.Signals(signum).name
        print(
            f"error: {label} stopped by {name}; its temporary files were removed, nothing is half-written",
            file=sys.stderr,
        )
        return 128 + signum
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sys.unraisablehook = sys.__unraisablehook__
    return 0


def entry() -> None:
    """The `mnist-pipeline` console script. After a stop signal it exits at once, without waiting
    for library worker threads (TFDS's extraction pool, say) that would write again."""
    status = main()
    if status > 128:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    entry()
