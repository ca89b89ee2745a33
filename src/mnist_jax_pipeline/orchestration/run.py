"""Running one `mnist-pipeline` command: `stage()` checks the records upstream, claims the outputs, puts
them in place together and writes the job's record last; `Outcome` makes a failure or a stop one line."""

import argparse
import atexit
import contextlib
import io
import logging
import os
import re
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Self

import psutil

from ..artefacts import atomic
from ..artefacts.provenance import Execution, files_under
from ..config.params import load
from ..foundation import console, paths, variants
from ..foundation.errors import PipelineError, clip
from ..foundation.stops import RECEIVED, SIGNALS, Stopped, handle, raise_stopped
from . import stage_table
from .commands import Command, Option
from .jobs import Job, Recorder

ORCHESTRATOR = "MNIST_PIPELINE_ORCHESTRATOR"  # the identity of the Snakemake whose jobs this process is among
CUTOFF = "MNIST_PIPELINE_CUTOFF"  # set by a Snakemake run that forces no job: a job current by content ends at once


def identity(pid: int) -> str:
    """A process's pid and start time, which no later process with its pid shares. On Linux the start time counts
    from boot: psutil adds the boot time, which moves whenever the clock is set."""
    started = psutil.Process(pid).create_time() - (psutil.boot_time() if sys.platform == "linux" else 0)
    return f"{pid} {started:.2f}"


def _alive(named: str) -> bool:
    """Whether the process of that identity runs: not gone, not a zombie, its pid not taken by another."""
    with contextlib.suppress(psutil.Error, ValueError):
        pid = int(named.split(" ", 1)[0])
        return identity(pid) == named and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    return False


def _stop_with_orchestrator(parent: int, orchestrator: str | None, done: threading.Event) -> None:
    """Until the command is `done`: stop as on SIGTERM once the process that started this one, or the Snakemake
    whose job this is (`orchestrator`, its identity), is gone. A stage never writes after its orchestrator has
    gone, though a shell between them lives on (PR_SET_PDEATHSIG would follow the parent's thread)."""
    while not done.wait(0.1):
        if os.getppid() != parent or (orchestrator is not None and not _alive(orchestrator)):
            return os.kill(os.getpid(), signal.SIGTERM)


def orchestrator() -> str | None:
    """The identity of the Snakemake whose job this is (ORCHESTRATOR), or None; another value is refused."""
    named = os.environ.get(ORCHESTRATOR) or None
    if named and not re.fullmatch(r"[0-9]+ [0-9.]+", named):
        raise PipelineError(f"{ORCHESTRATOR}={clip(named)}: not a process's pid and start time; unset it")
    return named


def check_not_stopped() -> None:
    """Raise a stop signal received meanwhile, or SIGTERM once the Snakemake whose job this is has gone:
    nothing is put in place after either."""
    named = orchestrator()
    if RECEIVED or (named and not _alive(named)):
        raise Stopped(RECEIVED[0] if RECEIVED else signal.SIGTERM)


def one_line(err: BaseException) -> str | None:
    """The one line for an error the user can act on, or None."""
    if isinstance(err, PipelineError):
        return str(err)
    if isinstance(err, UnicodeError):
        return f"a file is not UTF-8 text ({err}); re-run the stage that wrote it (--verbose names it)"
    if isinstance(err, OSError):
        where = err.filename or "a file or standard output"
        return f"{where}: {err.strerror or err}; check that it exists, its permissions and the free space"
    return None


class Outcome:
    """Around a command: stop signals raise Stopped; a failure or a stop is one line; `status` the exit status."""

    def __init__(self, label: str, verbose: bool):
        self.label, self.verbose, self.status = label, verbose, 0
        self.previous: dict[int, object] = {}
        self.done = threading.Event()  # ends the orchestrator watch

    def __enter__(self) -> Self:
        # a stop raised here is kept in RECEIVED: the command's first check, or the signal sent again, raises it;
        # a bad setting is refused by the command's first check too
        with contextlib.suppress(Stopped, PipelineError):
            for stream in (sys.stdout, sys.stderr):  # a character the locale cannot encode prints as \uXXXX
                if isinstance(stream, io.TextIOWrapper):
                    stream.reconfigure(errors="backslashreplace")
            sys.unraisablehook = lambda u: None if isinstance(u.exc_value, Stopped) else sys.__unraisablehook__(u)
            self.previous = handle(raise_stopped)
            watch = (os.getppid(), orchestrator(), self.done)
            threading.Thread(target=_stop_with_orchestrator, args=watch, daemon=True).start()
        return self

    def __exit__(self, kind: type | None, err: BaseException | None, tb: TracebackType | None) -> bool:
        self.done.set()
        if RECEIVED and not isinstance(err, Stopped):  # its exception was dropped, or a library turned it into its own
            err = Stopped(RECEIVED[0])
        RECEIVED.clear()
        if isinstance(err, Stopped | KeyboardInterrupt):
            for stop in SIGNALS:  # the clean-up must not be interrupted again
                signal.signal(stop, signal.SIG_IGN)
            signum = signal.Signals(err.signum if isinstance(err, Stopped) else signal.SIGINT)
            atomic.discard_temps()
            console.say(
                f"error: {self.label} stopped by {signum.name}; its temporary files were removed, nothing half-written"
            )
            self.status = 128 + signum
        elif isinstance(err, BrokenPipeError):  # standard output's reader went (`| head`): quiet, as on SIGPIPE
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            atomic.discard_temps()
            self.status = 128 + signal.SIGPIPE
        elif err is not None:
            message = one_line(err)
            if message is None:
                return False  # not one the user can act on: the traceback, as for any other error
            atomic.discard_temps()
            atexit.register(atomic.discard_temps)  # again after library threads are joined at exit
            if self.verbose:
                traceback.print_exception(err)
            console.say("error: " + message.replace("\r", "\\r").replace("\n", "\\n"))  # one line, whatever it names
            self.status = 1
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        sys.unraisablehook = sys.__unraisablehook__
        return True


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def running_tool() -> str:
    """Which tool runs this stage: Snakemake (its rules name the job's log), DVC (it sets DVC_STAGE), or a person."""
    return "snakemake" if os.getenv(console.LOG_ENV) else "dvc" if os.getenv("DVC_STAGE") else "mnist-pipeline"


def job_for(args: argparse.Namespace, job: Job, checker: Recorder) -> Job | None:
    """The job a stage's command runs, or None when no record can list what it writes: its outputs moved off the
    table's paths (--out), or made from other inputs or parameters than the pipeline's, which never replace
    outputs a record lists."""
    moved = Path(getattr(args, "out", job.stage.outputs[0].path)) != Path(job.stage.outputs[0].path)  # elsewhere
    pipeline = {"raw": paths.RAW.path, "processed": paths.PROCESSED.path}
    pipeline |= {"params": paths.PARAMS} if job.root == Path(".") else {}  # a sweep point's parameters are its own
    other = [f"--{key} {got}" for key, path in pipeline.items() if Path(got := getattr(args, key, path)) != Path(path)]
    if other and not moved and job.stage.artefacts and job.record_path.exists():
        where = "--root DIR" if hasattr(args, "root") else "--out DIR" if hasattr(args, "out") else ""
        fix = f"write this run elsewhere with {where}" if where else f"run it with {paths.PARAMS}"
        raise PipelineError(f"{other[0]}: '{job.name}' would replace what {job.record_path} lists, unrecorded; {fix}")
    if other or moved:
        return None
    if job.variant is not None and job.variant not in checker.params.variants:
        raise PipelineError(
            f"--variant {job.variant}: not among {args.params}'s variants ({', '.join(checker.params.variants)});"
            " add it there, so that both orchestrators track its outputs"
        )
    return job


def refuse_strays(args: argparse.Namespace, job: Job) -> None:
    """Refuse a file in a folder the stage replaces whole that it neither declares nor recorded: it would be lost."""
    record = job.read_record()  # lists what the stage wrote beside what it declares (pprof's views, where pprof runs)
    recorded = set(record.outputs) if record else set()
    for artefact in (a for a in job.stage.artefacts if a.files or a.folders):
        folder = Path(args.out) if hasattr(args, "out") else artefact.at(job.variant, job.root)
        ours = {n.format(variant=v) for n in (*artefact.files, *artefact.variant_files) for v in variants.names()}
        if not any((folder / name).exists() for name in (*ours, *artefact.folders)):
            continue  # no output of the stage's: whose it is, the stage's own claim says
        for file in files_under(folder):
            name = file.relative_to(folder)
            if name.as_posix() in ours or name.parts[0] in artefact.folders or file.as_posix() in recorded:
                continue
            raise PipelineError(f"{file}: no stage's output, in {folder}/, which {args.command} replaces; move it away")


@contextlib.contextmanager
def stage(args: argparse.Namespace, command: Command) -> Iterator[Callable[[argparse.Namespace], None]]:
    """The command's function, its outputs put in place together; a stage's inside its checks and record."""
    check_not_stopped()
    console.log_file()  # a setting that is not a log file is refused
    started, clock = now(), time.perf_counter()
    for option in (*command.options, Option("--params", "", paths.PARAMS)):
        given, key = getattr(args, option.flag.lstrip("-"), None), option.flag.lstrip("-")
        if option.default and given and Path(given).resolve() == Path(option.default).resolve():
            setattr(args, key, option.default)  # the pipeline's own path, written another way
    if Path(getattr(args, "root", ".")) != Path("."):
        atomic.claim(args.root, option="--root", command=args.command, signature="")  # a stages' root (ownership.py)
        (Path(args.root) / paths.PROVENANCE).mkdir(parents=True, exist_ok=True)  # which marks it so
    row = next((row for row in stage_table.STAGES if row.name == args.command), None)  # the stage table's
    planned = Job(row, getattr(args, "variant", None), Path(getattr(args, "root", "."))) if row else None
    if planned:
        refuse_strays(args, planned)
    checker = Recorder(load(args.params), str(args.params)) if planned else None
    job = job_for(args, planned, checker) if planned and checker else None
    if checker is None or job is None:
        with atomic.together():
            yield command.function()
            check_not_stopped()
        return
    upstream = [p for producer, _ in job.producers(checker.params.variants) for p in producer.outputs()]
    hashing = threading.Thread(target=checker.hashes.prefetch, args=(upstream,), daemon=True)
    hashing.start()
    checker.check_installed(job.stage)  # the code's digests, taken before the stage's code is imported
    spent = time.perf_counter() - clock
    function = command.function()  # its imports take a second or more: the hashing runs meanwhile
    clock = time.perf_counter()
    hashing.join()
    inputs: dict[str, str] = {}
    if job.stage.inputs:  # the jobs upstream must be current; freshness is loaded only for them
        from .freshness import Checker

        fresh = Checker(checker.params, checker.params_path, checker.hashes)
        inputs = fresh.check_inputs(job)
        if os.environ.get(CUTOFF) and not fresh.problems(job):  # planned after a job upstream wrote the same bytes
            logging.getLogger(__name__).info("current by content, as %s lists; not run again", job.record_path)
            yield lambda _: None
            return
    atomic.claim(*job.outputs(), job.record_path)
    spent += time.perf_counter() - clock
    with atomic.together():
        yield function
        check_not_stopped()
        checker.check_unchanged(job)  # before the outputs are put in place
    checker.write(job, inputs, Execution(tool=running_tool(), started=started, ended=now(), checks_s=round(spent, 4)))
