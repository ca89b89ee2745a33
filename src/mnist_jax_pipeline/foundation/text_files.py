"""Reading a text file as one line of error or its UTF-8 text: the parameters files and every
artefact read through it (artefacts/storage.py), so it lives below both."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .errors import PipelineError


def read_text(path: str | Path, missing: str, damaged: str, read: Callable[[Path], bytes] = Path.read_bytes) -> str:
    """A file's UTF-8 text. A missing, unreadable or non-UTF-8 file is one line; `missing` and
    `damaged` say what to do about the first and the last. `read` reads the bytes (a capped read, say)."""
    path = Path(path)
    try:
        return read(path).decode("utf-8")
    except FileNotFoundError as err:
        raise PipelineError(f"{path}: missing; {missing}") from err
    except IsADirectoryError as err:
        raise PipelineError(f"{path}: is a folder, not a file; {missing}") from err
    except OSError as err:
        raise PipelineError(f"{path}: cannot read ({err.strerror}); check its permissions") from err
    except UnicodeDecodeError as err:
        line = err.object.count(b"\n", 0, err.start) + 1
        raise PipelineError(
            f"{path}: byte 0x{err.object[err.start]:02x} on line {line} is not UTF-8; {damaged}"
        ) from err
