"""The one error type the pipeline reports as a single line, and the reading of text files through it."""

import os
from pathlib import Path

MAX_READ_BYTES = 2**26  # a record or metrics file holds a few KiB; /dev/zero is refused, not read for ever


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


def read_bytes(path: str | Path, limit: int) -> bytes:
    """At most `limit` + 1 bytes of a file; a pipe with no writer reads as empty rather than waiting for one."""
    with open(fd := os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
        os.set_blocking(fd, True)
        return handle.read(limit + 1)


def read_text(path: str | Path, missing: str = "", damaged: str = "", limit: int = MAX_READ_BYTES) -> str:
    """A file's UTF-8 text; a missing, unreadable, oversized or non-UTF-8 file is one line, with `missing` or
    `damaged` as the fix."""
    path = Path(path)
    try:
        if len(data := read_bytes(path, limit)) > limit:
            raise PipelineError(f"{path}: more than {limit // 2**20} MiB, more than such a file holds; check the path")
        return data.decode("utf-8")
    except FileNotFoundError as err:
        raise PipelineError(f"{path}: missing; {missing}") from err
    except IsADirectoryError as err:
        raise PipelineError(f"{path}: is a folder, not a file; {missing}") from err
    except OSError as err:
        raise PipelineError(f"{path}: cannot read ({err.strerror}); check the path and its permissions") from err
    except UnicodeDecodeError as err:
        line = err.object.count(b"\n", 0, err.start) + 1
        raise PipelineError(
            f"{path}: byte 0x{err.object[err.start]:02x} on line {line} is not UTF-8; {damaged}"
        ) from err
