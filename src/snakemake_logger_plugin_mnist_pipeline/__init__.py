"""Snakemake's console for this pipeline: `snakemake --logger mnist-pipeline` (profiles/default sets it).

A Snakemake logger plugin (snakemake-interface-logger-plugins): Snakemake finds it by its module name and
hands it every log record. It writes the calm console of lines.py; with `--verbose` it writes Snakemake's
own console instead. Snakemake's own log file (.snakemake/log/) is written as always.
"""

import logging
import sys

from snakemake_interface_logger_plugins.base import LogHandlerBase

from .lines import Console


class LogHandler(LogHandlerBase):
    writes_to_stream = True
    writes_to_file = False
    has_filter = True
    has_formatter = True
    needs_rulegraph = False

    def __post_init__(self) -> None:
        from snakemake.logging import ColorizingTextHandler, DefaultFilter, DefaultFormatter

        settings = self.common_settings
        self.stream = sys.stdout if settings.stdout else sys.stderr
        shown = (settings.quiet, settings.debug_dag, settings.verbose, settings.dryrun, settings.printshellcmds)
        self.addFilter(DefaultFilter(*shown))  # --quiet, --printshellcmds and --debug-dag keep their meaning
        self.snakemakes: logging.Handler | None = None
        if settings.verbose:
            formatter = DefaultFormatter(settings.quiet, settings.show_failed_logs)
            self.snakemakes = ColorizingTextHandler(nocolor=settings.nocolor, stream=self.stream, formatter=formatter)
        self.console = Console(dryrun=settings.dryrun)

    def emit(self, record: logging.LogRecord) -> None:
        if self.snakemakes is not None:
            self.snakemakes.emit(record)
            return
        try:
            line = self.console.line(record)
            if line:
                print(line, file=self.stream, flush=True)
        except Exception:
            self.handleError(record)
