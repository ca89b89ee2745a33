"""The one error type the pipeline reports as a single line, and the reading of text files through it."""

from collections.abc import Callable
from pathlib import Path


class PipelineError(Exception):
    """A failure the user can act on: the message names the file or key and the fix."""


def clip(text: str, limit: int = 80) -> str:
    """`text` cut to `limit` characters, with its length, so that a message stays one readable line."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def missing(path: object, made_by: str) -> PipelineError:
    """An artefact that is not there: the file and the stage that makes it."""
    return PipelineError(f"{path}: missing; run the '{made_by}' stage first")


def remake(path: object, what: str, made_by: str) -> PipelineError:
    """An artefact that is there but wrong: the file, what is wrong, the stage that makes it again."""
    return PipelineError(f"{path}: {what}; re-run the '{made_by}' stage")


def read_text(path: str | Path, missing: str, damaged: str, read: Callable[[Path], bytes] = Path.read_bytes) -> str:
    """A file's UTF-8 text; a missing, unreadable or non-UTF-8 file is one line, with `missing` or `damaged`
    as the fix. `read` reads the bytes (a capped read, say)."""
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
