"""Writing outputs: claimed before the work, written under temporary names, put in place together.

Each file or folder is written as `.tmp-<name>.<pid>.*` beside its place and renamed there; inside
`together()` a command's outputs are put in place at its end, or not at all. A killed writer's
leftovers are swept by the next write of the same path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ..foundation.errors import PipelineError

TMP_PREFIX = ".tmp-"
_OPEN: set[Path] = set()  # this process's temporary outputs not yet in place
_PENDING: list[tuple[Path, Path, bool]] | None = None  # inside together(): (tmp, path, folder)


def _write_error(path: Path, err: OSError) -> PipelineError:
    return PipelineError(f"{path}: cannot write ({err.strerror}); check the folder's permissions and free space")


def _obstacle(path: Path, probe: bool) -> str | None:
    """A file where one of `path`'s folders belongs, or (`probe`) a folder no file can be created in."""
    folder = path.parent
    while not folder.is_dir():
        if folder.exists() or folder.is_symlink():
            return f"{folder}: not a folder, and {path} is written in it; move it away or delete it, then run again"
        folder = folder.parent
    try:
        if probe:
            tempfile.TemporaryFile(dir=folder, prefix=f"{TMP_PREFIX}probe.").close()
    except OSError as err:
        return (
            f"{folder}: cannot write ({err.strerror}), and {path} is written there; make it writable"
            f" (chmod u+w {folder}) or run in a writable copy of the project"
        )
    return None


def claim(
    *outputs: str | Path,
    probe: bool = True,
    option: str = "",
    command: str = "",
    signature: str = "",
    inside: str | None = None,
) -> None:
    """Refuse in one line, before any work, outputs that could not be written; a path given with `option`
    must also be the command's own: new, or holding its `signature` (a folder: in its file `inside`)."""
    for output in map(Path, outputs):
        if option:
            from .ownership import not_ours

            why = not_ours(output, command, signature, inside)
            if why:
                raise PipelineError(
                    f"{option} {output}: {why}; `mnist-pipeline {command}` writes only a new path or one it made"
                    " itself: choose another path"
                )
        problem = _obstacle(output, probe)
        if problem:
            raise PipelineError(problem)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _temp_prefix(path: Path) -> str:
    """`.tmp-<name>.<pid>.`: the writer's process id tells a later run an orphan when it sees one."""
    return f"{TMP_PREFIX}{path.name}.{os.getpid()}."


def _remove(tmp: Path) -> None:
    if tmp.is_dir() and not tmp.is_symlink():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.unlink(missing_ok=True)


def sweep(path: Path) -> None:
    """Remove what a killed writer of `path` left beside it; put back an earlier folder set aside between
    the two renames of its replacement if `path` is gone."""
    for orphan in sorted(path.parent.glob(f"{TMP_PREFIX}{path.name}.*")) if path.parent.is_dir() else []:
        pid = orphan.name[len(TMP_PREFIX) + len(path.name) + 1 :].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            if orphan.name.endswith(".old") and not path.exists():
                os.replace(orphan, path)
            else:
                _remove(orphan)


def discard_temps(settle: float = 1.0) -> None:
    """Remove this process's temporary outputs, again for `settle` seconds: after a failure or a stop, a
    library's worker thread (TFDS's extraction, say) may still write into a folder removed once."""
    deadline = time.monotonic() + settle
    while _OPEN:
        for tmp in list(_OPEN):
            _remove(tmp)
        if time.monotonic() > deadline:
            _OPEN.clear()
        else:
            time.sleep(0.05)


def _new_temp(path: Path, folder: bool) -> Path:
    """An empty temporary file or folder beside `path`, registered for clean-up."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep(path)
        if folder:
            tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), dir=path.parent))
        else:
            fd, name = tempfile.mkstemp(prefix=_temp_prefix(path), dir=path.parent)
            os.close(fd)
            tmp = Path(name)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, (0o777 if folder else 0o666) & ~mask)
    except OSError as err:
        raise _write_error(path, err) from err
    _OPEN.add(tmp)
    return tmp


def _put(tmp: Path, path: Path, folder: bool) -> None:
    """Rename `tmp` onto `path`; an earlier folder is set aside first and removed after."""
    try:
        if not folder:
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        elif not path.exists():
            os.replace(tmp, path)
        else:
            old = path.with_name(f"{_temp_prefix(path)}old")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
    except OSError as err:
        raise _write_error(path, err) from err
    _OPEN.discard(tmp)


@contextlib.contextmanager
def _atomic(path: Path, folder: bool) -> Iterator[Path]:
    tmp = _new_temp(path, folder)
    try:
        yield tmp
    except BaseException as err:
        _remove(tmp)
        _OPEN.discard(tmp)
        if isinstance(err, OSError):
            raise _write_error(path, err) from err
        raise
    if _PENDING is not None:  # put in place with the command's other outputs
        _PENDING.append((tmp, path, folder))
    else:
        _put(tmp, path, folder)


@contextlib.contextmanager
def together() -> Iterator[None]:
    """Outputs written inside are put in place at the end, only if all were written: a command that fails
    leaves every earlier output as it was. A command must not read back what it wrote inside."""
    global _PENDING
    if _PENDING is not None:  # already inside: the outer one puts them in place
        yield
        return
    pending: list[tuple[Path, Path, bool]] = []
    _PENDING = pending
    try:
        yield
        _PENDING = None
        while pending:
            _put(*pending.pop(0))
    except BaseException:
        for tmp, _, _ in pending:
            _remove(tmp)
            _OPEN.discard(tmp)
        raise
    finally:
        _PENDING = None


def atomic_file(path: str | Path) -> contextlib.AbstractContextManager[Path]:
    """A temporary path beside `path`; on success it is renamed onto `path`."""
    return _atomic(Path(path), folder=False)


def atomic_dir(path: str | Path) -> contextlib.AbstractContextManager[Path]:
    """An empty temporary folder beside `path`; on success it replaces `path` whole."""
    return _atomic(Path(path), folder=True)


def write_text(path: str | Path, text: str) -> None:
    """Write `text` as UTF-8, atomically."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
