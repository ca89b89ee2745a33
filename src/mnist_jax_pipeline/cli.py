"""`mnist-pipeline`: parse the command line, then run the command inside its checks (orchestration/run.py)."""

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from .foundation import console, package_version, paths
from .orchestration import run
from .orchestration.commands import COMMANDS

DESCRIPTION = "A reproducible MNIST pipeline: one command per stage, and its tools."


def _common(parser: argparse.ArgumentParser, default: bool) -> None:
    """--params and --verbose, before or after the command (after it, an option left out keeps its value)."""
    params, verbose = (paths.PARAMS, False) if default else (argparse.SUPPRESS, argparse.SUPPRESS)
    parser.add_argument("--params", default=params, help="parameters file (default: params.yaml)")
    parser.add_argument("--verbose", "-v", action="store_true", default=verbose, help="debug logs, full tracebacks")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mnist-pipeline", description=DESCRIPTION)
    version = package_version("mnist-jax-pipeline") or "unknown (not installed; uv sync)"
    parser.add_argument("--version", action="version", version=f"%(prog)s {version}")
    _common(parser, default=True)
    after = argparse.ArgumentParser(add_help=False)
    _common(after, default=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        listed: dict[str, Any] = {} if command.hidden else {"help": command.help}
        options = sub.add_parser(name, description=command.help, parents=[after], **listed)
        for option in command.options:
            option.add_to(options)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    label = console.job_label(args.command, getattr(args, "variant", None), getattr(args, "root", "."))
    console.configure(label, args.verbose)
    with run.Outcome(label, args.verbose) as outcome, run.stage(args, COMMANDS[args.command]) as function:
        function(args)
        print(end="", flush=True)  # here, so that a reader that went away (`| head`) is seen by the command
    return outcome.status


def entry() -> None:
    """The console script: after a stop it exits at once, without waiting for library threads that would
    write again."""
    status = main()
    if status > 128:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    entry()
