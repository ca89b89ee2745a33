"""The command table of `mnist-pipeline`: each command's function, help and options."""

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from ..foundation import paths, variants


@dataclass(frozen=True)
class Option:
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


@dataclass(frozen=True)
class Command:
    module: str  # relative to the package, with `:function` where not `main(args)` runs the command
    help: str
    options: tuple[Option, ...] = field(default_factory=tuple)
    hidden: bool = False  # run by the orchestrators, not by hand: left out of the command list

    def function(self) -> Callable[[argparse.Namespace], None]:
        """The function that runs the command, its module imported now (a command loads only what it uses)."""
        module, _, name = self.module.partition(":")
        return getattr(importlib.import_module(f"{__package__.rpartition('.')[0]}.{module}"), name or "main")


VARIANT = Option("--variant", "training variant", choices=variants.names())
PROCESSED = Option("--processed", "folder of the processed arrays", paths.PROCESSED.path)
ROOT = Option("--root", "folder the stage's outputs go under (a sweep point's)", ".")

COMMANDS: dict[str, Command] = {
    "check": Command("config.params", "validate the parameters file and exit"),
    "download": Command(
        "stages.download.stage",
        "download and prepare the dataset with TFDS (honours MNIST_MIRROR)",
        (Option("--out", "output folder", paths.RAW.path),),
    ),
    "preprocess": Command(
        "stages.preprocess",
        "write the versioned training arrays",
        (
            Option("--raw", "the download stage's folder", paths.RAW.path),
            Option("--out", "output folder", paths.PROCESSED.path),
        ),
    ),
    "train": Command("stages.train", "train one variant of the MLP", (VARIANT, PROCESSED, ROOT)),
    "evaluate": Command("stages.evaluate", "evaluate one trained variant", (VARIANT, PROCESSED, ROOT)),
    "profile": Command(
        "stages.profile.stage",
        "execution trace and device-memory snapshots (pprof) of one trained variant",
        (VARIANT, PROCESSED, ROOT),
    ),
    "report": Command("stages.report.render", "render reports/report.html and reports/summary.md"),
    "sweep-point": Command(
        "config.sweeps:write_point",
        "write a sweep point's params.yaml (Snakemake runs it)",
        (Option("--sweep", "the sweep's name (sweeps/NAME.yaml)"), Option("--point", "the point's name")),
        hidden=True,
    ),
    "sweep-queue": Command(
        "config.sweeps:queue",
        "queue a sweep's points as DVC experiments",
        (Option("--file", "the sweep file, sweeps/NAME.yaml"),),
    ),
    "compare": Command(
        "comparison.compare",
        "one page comparing a sweep's points or DVC's experiments",
        (
            Option("--sweep", "a sweep's name (sweeps/NAME.yaml)", ""),
            Option("--dvc", "DVC's experiments of this commit instead", switch=True),
            Option(
                "--out",
                f"the page (default: sweeps/NAME/{paths.COMPARE_HTML}, with --dvc {paths.EXPERIMENTS_HTML})",
                "",
            ),
        ),
    ),
    "show": Command(
        "comparison.experiments",
        "DVC's experiments, the baseline and the workspace: one line per"
        " variant with test accuracy, timings and the changed parameters",
    ),
    "preset": Command(
        "config.presets",
        "merge presets/NAME.yaml over params.yaml and print each changed key",
        (Option("name", "the preset's name (presets/NAME.yaml)"),),
    ),
    "explain": Command(
        "orchestration.explain",
        "where an output came from: the job, its parameters, code and inputs, and whether it is current",
        (Option("path", "an output or provenance record, e.g. models/jit.safetensors"),),
    ),
    "crate": Command(
        "orchestration.crate.command",
        "write ro-crate-metadata.json: the last run as a Workflow Run RO-Crate",
        (
            Option("--out", "the crate's root folder, where ro-crate-metadata.json goes", "."),
            Option("--validate", "check it against the Provenance Run Crate 0.5 profile (offline)", switch=True),
        ),
    ),
    "viewer": Command(
        "stages.profile.viewer",
        "the profile's trace in XProf, served on 127.0.0.1 only (the profile-viewer extra)",
        (VARIANT, Option("--port", "the web server's port", "8791")),
    ),
    "generate": Command(
        "orchestration.generate",
        "write dvc.yaml, the Snakemake rules and the params schema from the stage table",
        (Option("--check", "only check that they are current", switch=True),),
    ),
}
