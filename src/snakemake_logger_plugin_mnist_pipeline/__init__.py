"""Snakemake's console for this pipeline: `snakemake --logger mnist-pipeline` (profiles/default sets it).

A Snakemake logger plugin: Snakemake finds it by its module name and hands it every log record, filtered as for
its own console. It writes the calm console of lines.py; with `--verbose`, Snakemake writes its own console.
"""

import logging
import sys

from snakemake_interface_logger_plugins.base import LogHandlerBase

from .lines import Console


class LogHandler(LogHandlerBase):
    """Prints the calm console's lines; under `--verbose` it leaves the stream to Snakemake's own console."""

    writes_to_stream = True
    writes_to_file = has_filter = has_formatter = needs_rulegraph = False

    def __post_init__(self) -> None:
        self.writes_to_stream = not self.common_settings.verbose  # if not, Snakemake adds its own console
        self.console = Console(dryrun=self.common_settings.dryrun)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.writes_to_stream and (line := self.console.line(record)):
                print(line, file=sys.stdout if self.common_settings.stdout else sys.stderr, flush=True)
        except Exception:
            self.handleError(record)
