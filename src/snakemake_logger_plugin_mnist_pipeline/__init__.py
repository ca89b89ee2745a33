"""Snakemake's console for this pipeline: `snakemake --logger mnist-pipeline` (profiles/default sets it).

A Snakemake logger plugin (snakemake-interface-logger-plugins): Snakemake finds it by its module
name and hands it every log record. It writes the calm console of lines.py; with `--verbose` it
writes Snakemake's own console instead. Snakemake's own log file (.snakemake/log/) is written as
always, with every job's files and reasons.
"""

from __future__ import annotations

import logging
import sys

from snakemake_interface_logger_plugins.base import LogHandlerBase

from .lines import Console


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        from snakemake.logging import ColorizingTextHandler, DefaultFilter, DefaultFormatter

        settings = self.common_settings
        self.stream = sys.stdout if settings.stdout else sys.stderr
        # --quiet, --printshellcmds and --debug-dag keep their meaning
        self.addFilter(
            DefaultFilter(
                settings.quiet, settings.debug_dag, settings.verbose, settings.dryrun, settings.printshellcmds
            )
        )
        self.snakemakes: logging.Handler | None = None
        if settings.verbose:
            self.snakemakes = ColorizingTextHandler(
                nocolor=settings.nocolor,
                stream=self.stream,
                formatter=DefaultFormatter(settings.quiet, settings.show_failed_logs),
            )
        self.console = Console(dryrun=settings.dryrun)

    def emit(self, record: logging.LogRecord) -> None:
        if self.snakemakes is not None:
            self.snakemakes.emit(record)
            return
        try:
            line = self.console.line(record)
            if line:
                self.stream.write(line + "\n")
                self.stream.flush()
        except Exception:
            self.handleError(record)

    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False
