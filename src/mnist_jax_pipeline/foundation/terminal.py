"""Whether progress bars are drawn: on a terminal that has a width, unless MNIST_PIPELINE_PROGRESS says."""

import os
import sys
from typing import IO

from .errors import PipelineError

PROGRESS_ENV = "MNIST_PIPELINE_PROGRESS"  # 0/off: never a bar, 1/on: always, unset/auto: on a terminal only
PROGRESS_SETTINGS = {"0": False, "off": False, "1": True, "on": True, "": None, "auto": None}


def terminal_columns(stream: IO[str]) -> int:
    """The terminal's width, 0 where it is not a terminal or reports no size."""
    try:
        return os.get_terminal_size(stream.fileno()).columns  # OSError: not a terminal
    except (AttributeError, OSError, ValueError):
        return 0


def progress_wanted(stream: IO[str] = sys.stderr) -> bool:
    """Progress bars on a terminal that has a width, unless MNIST_PIPELINE_PROGRESS says otherwise."""
    setting = os.environ.get(PROGRESS_ENV, "")
    if (choice := setting.strip().lower()) not in PROGRESS_SETTINGS:
        raise PipelineError(f"{PROGRESS_ENV}={setting}: not a setting; use 0 (or off), 1 (or on) or auto")
    forced = PROGRESS_SETTINGS[choice]
    return forced if forced is not None else terminal_columns(stream) > 0
