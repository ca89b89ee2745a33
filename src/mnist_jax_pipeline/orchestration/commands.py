"""The command table of `mnist-pipeline`: each command's function, help and options."""

import argparse
import importlib
from collections.abc import Callable
from typing import NamedTuple

from ..foundation import paths, variants
from ..foundation.stops import held


class Option(NamedTuple):
    flag: str  # without a leading '-': a positional argument
    help: str
    default: str | None = None  # None: the option is required
    choices: tuple[str, ...] | None = None
    switch: bool = False  # an on/off flag that takes no value

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if not self.flag.startswith("-"):
            parser.add_argument(self.flag, metavar=self.flag.upper(), help=self.help)
        elif self.switch:
            parser.add_argument(self.flag, action="store_true", help=self.help)
        else:
            shown = f"{self.help} (default: {self.default})" if self.default else self.help
            parser.add_argument(
                self.flag, default=self.default, choices=self.choices, required=self.default is None, help=shown
            )


class Command(NamedTuple):
    module: str  # relative to the package, with `:function` where not `main(args)` runs the command
    help: str
    options: tuple[Option, ...] = ()
    hidden: bool = False  # run by the orchestrators, not by hand: left out of the command list

    def function(self) -> Callable[[argparse.Namespace], None]:
        """The function that runs the command, its module imported now (a command loads only what it uses); a stop
        waits for the import, as one raised inside a library's extension would fail or crash it."""
        module, _, name = self.module.partition(":")
        with held():
            imported = importlib.import_module(f"{__package__.rpartition('.')[0]}.{module}")
        return getattr(imported, name or "main")


VARIANT = Option("--variant", "training variant", choices=variants.names())
STAGE = (
    VARIANT,
    Option("--processed", "the processed arrays", paths.PROCESSED.path),
    Option("--root", "outputs' folder", "."),
)
RAW_OUT = (Option("--out", "output folder", paths.RAW.path),)
PROCESSED_OUT = (
    Option("--raw", "the download stage's folder", paths.RAW.path),
    Option("--out", "output folder", paths.PROCESSED.path),
)
POINT = (Option("--sweep", "the sweep's name (sweeps/NAME.yaml)"), Option("--point", "the point's name"))
COMPARE = (
    Option("--sweep", "a sweep's name", ""),
    Option("--dvc", "DVC's experiments", switch=True),
    Option("--out", f"the page (default: sweeps/NAME/{paths.COMPARE_HTML}, with --dvc {paths.EXPERIMENTS_HTML})", ""),
)
CRATE = (Option("--out", "the crate's folder", "."), Option("--validate", "check it, offline", switch=True))
CHECK = (Option("--check", "only compare", switch=True),)

COMMANDS: dict[str, Command] = {
    "check": Command("config.params", "validate the parameters file (the first stage: it writes its record)"),
    "download": Command(
        "stages.download.stage", "download and prepare MNIST with TFDS (honours MNIST_MIRROR)", RAW_OUT
    ),
    "preprocess": Command("stages.preprocess", "write the versioned training arrays", PROCESSED_OUT),
    "train": Command("stages.train", "train one variant of the MLP", STAGE),
    "evaluate": Command("stages.evaluate", "evaluate one trained variant", STAGE),
    "profile": Command("stages.profile.stage", "trace and device-memory snapshots of one trained variant", STAGE),
    "report": Command("stages.report.render", "render reports/report.html and reports/summary.md"),
    "sweep-point": Command("config.sweeps:write_point", "write a sweep point's params.yaml", POINT, hidden=True),
    "sweep-queue": Command(
        "orchestration.experiment_queue:queue",
        "queue a sweep's points as DVC experiments",
        (Option("--file", "sweeps/NAME.yaml"),),
    ),
    "compare": Command(
        "orchestration.points:compare", "one page comparing a sweep's points or DVC's experiments", COMPARE
    ),
    "show": Command("comparison.experiments", "DVC's experiments, the baseline and the workspace, a line per variant"),
    "preset": Command(
        "config.presets", "merge presets/NAME.yaml over params.yaml", (Option("name", "presets/NAME.yaml"),)
    ),
    "explain": Command("orchestration.explain", "where an output came from", (Option("path", "an output or record"),)),
    "crate": Command("orchestration.crate.command", "write the last run as a Workflow Run RO-Crate", CRATE),
    "viewer": Command(
        "stages.profile.viewer", "the trace in XProf on 127.0.0.1", (VARIANT, Option("--port", "its port", "8791"))
    ),
    "generate": Command("orchestration.generate", "write dvc.yaml, the rules, the schema", CHECK),
}
