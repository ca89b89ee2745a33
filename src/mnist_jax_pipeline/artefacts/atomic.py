"""Writing outputs: claimed before the work, written under temporary names beside their place, renamed
there, inside `together()` all at the end or none. A killed writer's leftovers are swept by the next."""

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import psutil

from ..foundation.errors import PipelineError
from ..foundation.stops import held

TMP_PREFIX = ".tmp-"
_OPEN: set[Path] = set()  # this process's temporary outputs not yet in place
_PENDING: list[tuple[Path, Path]] | None = None  # inside together(): (tmp, path)


def claim(*outputs: str | Path, probe: bool = True, option: str = "", command: str = "", **owned: str) -> None:
    """Refuse in one line, before any work, an output whose folder is a file or (`probe`) cannot be written;
    with `command`, a path must also be the command's own (ownership.py; `owned`: its signature), and
    `option` names the option that gave it."""
    for output in map(Path, outputs):
        if command:
            from .ownership import not_ours  # git and the signatures: loaded only by a command that takes a path

            if why := not_ours(output, command, **owned):
                raise PipelineError(
                    f"{option} {output}: {why}; `mnist-pipeline {command}` writes only a new path or one it made"
                    f" itself: {'choose another path' if option else 'move it away'}".lstrip()
                )
        folder = output.parent
        while not folder.is_dir():
            if folder.exists() or folder.is_symlink():
                fix = f"choose another {option}" if option else "move it away or delete it, then run again"
                raise PipelineError(f"{folder}: not a folder, and {output} is written in it; {fix}")
            folder = folder.parent
        try:
            if probe:
                tempfile.TemporaryFile(dir=folder, prefix=f"{TMP_PREFIX}probe.").close()
        except OSError as err:
            raise PipelineError(
                f"{folder}: cannot write ({err.strerror}), and {output} is written there; make it writable"
                f" (chmod u+w {folder}) or run in a writable copy of the project"
            ) from err


def _cannot_write(path: Path, err: OSError) -> PipelineError:
    return PipelineError(f"{path}: cannot write ({err.strerror}); check the folder's permissions and free space")


def _remove(tmp: Path) -> None:
    if tmp.is_dir() and not tmp.is_symlink():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.unlink(missing_ok=True)


def _abandon(tmps: Iterable[Path]) -> None:
    """Remove temporary outputs that will not be put in place."""
    for tmp in tmps:
        _remove(tmp)
        _OPEN.discard(tmp)


def sweep(path: Path) -> None:
    """Remove what a killed writer of `path` left beside it (`.tmp-<name>.<dead pid>.*`); an earlier folder
    set aside between the two renames of its replacement goes back if `path` is gone."""
    for orphan in sorted(path.parent.glob(f"{TMP_PREFIX}{path.name}.*")) if path.parent.is_dir() else []:
        pid = orphan.name[len(TMP_PREFIX) + len(path.name) + 1 :].split(".", 1)[0]
        if not pid.isdigit() or psutil.pid_exists(int(pid)):
            continue
        with contextlib.suppress(OSError):
            if orphan.name.endswith(".old") and not path.exists():
                os.replace(orphan, path)
            else:
                _remove(orphan)


def discard_temps(settle: float = 1.0) -> None:
    """Remove this process's temporary outputs, again for `settle` seconds: after a failure or a stop, a
    library's worker thread (TFDS's extraction, say) may still write into a folder removed once."""
    deadline = time.monotonic() + settle
    while _OPEN:
        for tmp in _OPEN:
            _remove(tmp)
        if time.monotonic() > deadline:
            _OPEN.clear()
        time.sleep(0.05)


def _put(pending: list[tuple[Path, Path]]) -> None:
    """Rename each temporary onto its path, what was there set aside and removed once all are in place; when one
    cannot be put, every earlier one goes back. A stop waits for either end."""
    aside: list[tuple[Path, Path | None]] = []
    with held():
        try:
            for tmp, path in pending:
                old = path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}.old")
                if there := path.exists() or path.is_symlink():
                    if path.is_dir() != tmp.is_dir():  # replacing it would lose what the user put there
                        kind = "a folder where a file" if path.is_dir() else "a file where a folder"
                        raise PipelineError(f"{path}: {kind} is written; move it away, then run again")
                    os.replace(path, old)
                aside.append((path, old if there else None))
                os.replace(tmp, path)
        except BaseException as err:
            for put, was in reversed(aside):
                with contextlib.suppress(OSError):
                    _remove(put)
                    if was is not None:
                        os.replace(was, put)
            _abandon(tmp for tmp, _ in pending)
            if isinstance(err, OSError):
                raise _cannot_write(path, err) from err
            raise
        for (tmp, _), (_, was) in zip(pending, aside, strict=True):
            _OPEN.discard(tmp)
            if was is not None:
                _remove(was)


@contextlib.contextmanager
def _atomic(path: Path, folder: bool) -> Iterator[Path]:
    """A temporary file or folder beside `path`, named for this process, put at `path` once written."""
    prefix = f"{TMP_PREFIX}{path.name}.{os.getpid()}."
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep(path)
        with held():  # a stop between creating the temporary and listing it would leave it behind
            if folder:
                tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=path.parent))
            else:
                with tempfile.NamedTemporaryFile(prefix=prefix, dir=path.parent, delete=False) as handle:
                    tmp = Path(handle.name)
            _OPEN.add(tmp)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, (0o777 if folder else 0o666) & ~mask)
    except OSError as err:
        raise _cannot_write(path, err) from err
    try:
        yield tmp
    except BaseException as err:
        _abandon([tmp])
        if isinstance(err, OSError):
            raise _cannot_write(path, err) from err
        raise
    if not folder:
        with open(tmp, "rb+") as written:
            os.fsync(written.fileno())
    if _PENDING is None:
        _put([(tmp, path)])
    else:
        _PENDING.append((tmp, path))


@contextlib.contextmanager
def together() -> Iterator[None]:
    """Outputs written inside are put in place at the end, only if all were written: a command that fails
    leaves every earlier output as it was (a reader of its output that goes away is no failure). A command must
    not read back what it wrote inside."""
    global _PENDING
    if _PENDING is not None:  # already inside: the outer one puts them in place
        yield
        return
    pending: list[tuple[Path, Path]] = []
    _PENDING = pending
    try:
        yield
    except BrokenPipeError:  # standard output's reader went (`| head`): what it wrote stands
        _put(pending)
        raise
    except BaseException:
        _abandon(tmp for tmp, _ in pending)
        raise
    finally:
        _PENDING = None
    _put(pending)


def atomic_file(path: str | Path) -> contextlib.AbstractContextManager[Path]:
    return _atomic(Path(path), folder=False)


def atomic_dir(path: str | Path) -> contextlib.AbstractContextManager[Path]:
    """An empty folder that replaces `path` whole."""
    return _atomic(Path(path), folder=True)


def write_text(path: str | Path, text: str) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
