"""Atomic writes: every output is written under a temporary name (`.tmp-*`) in its own folder, then
renamed into place, so an interrupted or failed stage never leaves a half-written file behind.

A folder replaces an earlier one in one step where Linux can (renameat2 RENAME_EXCHANGE, through
ctypes), else by two renames that a later run repairs (sweep()); together() puts a stage's outputs
in place all at once or not at all.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..foundation import paths
from ..foundation.errors import PipelineError

TMP_PREFIX = ".tmp-"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_OPEN: set[Path] = set()  # this process's temporary outputs not yet renamed into place


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_error(path: Path, err: OSError) -> PipelineError:
    return PipelineError(f"{path}: cannot write ({err.strerror}); check the folder's permissions and free space")


def _mkdir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PipelineError(f"{path}: cannot create folder ({err.strerror}); check its permissions") from err


def check_writable(*paths: str | Path) -> None:
    """Fail at once, before a stage's work, where one of its outputs could not be written (a read-only
    checkout, a full disk): each output's folder is created and a file is created and removed in it."""
    for path in paths:
        folder = Path(path).parent
        _mkdir(folder)
        try:
            with tempfile.TemporaryFile(dir=folder, prefix=_temp_prefix(Path(path))):
                pass
        except OSError as err:
            raise _write_error(Path(path), err) from err


def obstacle(paths: Iterable[str | Path], probe: bool = True) -> str | None:
    """One line on the first of `paths` that could not be written, None when all could, writing nothing:
    the nearest existing path above it is a file (`models` a file, where models/jit.safetensors goes),
    or (`probe`) no file can be created in that folder (a read-only folder or file system; probed with
    a file that has no name)."""
    probed: set[Path] = set()
    for path in map(Path, paths):
        folder = path.parent
        while not folder.is_dir():
            if folder.exists() or folder.is_symlink():
                return (
                    f"{folder}: not a folder, and the pipeline keeps {path} in it; move it away or delete it,"
                    " then run again"
                )
            folder = folder.parent
        if not probe or folder in probed:
            continue
        probed.add(folder)
        try:
            with tempfile.TemporaryFile(dir=folder, prefix=f"{TMP_PREFIX}probe."):
                pass
        except OSError as err:
            return (
                f"{folder}: cannot write ({err.strerror}), and {path} is written there; make it writable"
                f" (chmod u+w {folder}) or run in a writable copy of the project"
            )
    return None


def _temp_prefix(path: Path) -> str:
    """`.tmp-<name>.<pid>.`: the writing process's id, so a later run knows an orphan when it sees one."""
    return f"{TMP_PREFIX}{path.name}.{os.getpid()}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def sweep(path: Path) -> None:
    """Remove what a killed writer of `path` left beside it (`.tmp-<name>.<pid>.*` of a dead pid). An
    earlier output set aside between the two renames of a replacement is put back if `path` is gone."""
    if not path.parent.is_dir():
        return
    for orphan in sorted(path.parent.glob(f"{TMP_PREFIX}{path.name}.*")):
        pid = orphan.name[len(TMP_PREFIX) + len(path.name) + 1 :].split(".", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            if orphan.name.endswith(".old") and not path.exists():
                os.replace(orphan, path)
            elif orphan.is_dir() and not orphan.is_symlink():
                shutil.rmtree(orphan)
            else:
                orphan.unlink()


def discard_temps(settle: float = 1.0) -> None:
    """Remove this process's temporary outputs, and keep removing them for `settle` seconds: after a
    stage failed or was stopped, a library's worker thread (TFDS's extraction, say) may still write
    into a folder the first clean-up removed."""
    if not _OPEN:
        return
    deadline = time.monotonic() + settle
    while True:
        for tmp in _OPEN:
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    _OPEN.clear()


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one atomic step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _replace_dir(tmp: Path, path: Path) -> None:
    """Put the folder `tmp` at `path`; an earlier `path` is swapped out atomically where the system can,
    else set aside as `<tmp prefix>old` for the two renames (sweep() puts it back after a kill between them)."""
    if not path.exists():
        os.replace(tmp, path)
    elif _exchange(tmp, path):
        shutil.rmtree(tmp, ignore_errors=True)  # now the earlier output
    else:
        old = path.with_name(f"{_temp_prefix(path)}old")
        os.replace(path, old)
        try:
            os.replace(tmp, path)
        except OSError:
            os.replace(old, path)  # put the earlier output back
            raise
        shutil.rmtree(old, ignore_errors=True)
    _fsync_dir(path.parent)


def _new_temp(path: Path, folder: bool) -> Path:
    """An empty temporary file (or folder) beside `path`, named for this process and registered for
    clean-up, after what a killed writer of `path` left there is swept away."""
    _mkdir(path.parent)
    sweep(path)
    try:
        if folder:
            tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), dir=path.parent))
        else:
            fd, name = tempfile.mkstemp(prefix=_temp_prefix(path), dir=path.parent)
            os.close(fd)
            tmp = Path(name)
    except OSError as err:
        raise _write_error(path, err) from err
    _OPEN.add(tmp)
    os.chmod(tmp, (0o777 if folder else 0o666) & ~_umask())
    return tmp


def _put_file(tmp: Path, path: Path) -> None:
    with open(tmp, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


_PENDING: list[tuple[Path, Path, bool]] | None = None  # inside together(): (tmp, path, folder) to put in place


def _put(tmp: Path, path: Path, folder: bool) -> None:
    try:
        (_replace_dir if folder else _put_file)(tmp, path)
    except OSError as err:
        raise _write_error(path, err) from err
    _OPEN.discard(tmp)


def _remove(tmp: Path, folder: bool) -> None:
    if folder:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _atomic(path: Path, folder: bool) -> Iterator[Path]:
    tmp = _new_temp(path, folder)
    try:
        yield tmp
        if _PENDING is not None:  # written; put in place with the stage's other outputs
            if not folder:
                with open(tmp, "rb+") as handle:
                    os.fsync(handle.fileno())
            _PENDING.append((tmp, path, folder))
            return
    except BaseException as err:
        _remove(tmp, folder)
        if isinstance(err, OSError):
            raise _write_error(path, err) from err
        raise
    _put(tmp, path, folder)


@contextlib.contextmanager
def together() -> Iterator[None]:
    """Outputs written inside are put in place together at the end, only if all were written: a
    stage that fails (a full disk, a bad input found late) leaves every earlier output as it was,
    not some new beside some old. A stage must not read back what it wrote inside."""
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
            tmp, path, folder = pending[0]
            _put(tmp, path, folder)
            pending.pop(0)
    except BaseException:
        for tmp, _, folder in pending:
            _remove(tmp, folder)
        raise
    finally:
        _PENDING = None


def pending() -> dict[Path, Path]:
    """Inside together(): {temporary path: the path it will be put at} of what was written so far."""
    return {tmp: path for tmp, path, _ in _PENDING or ()}


def atomic_file(path: str | Path) -> contextlib.AbstractContextManager[Path]:
    """A temporary path beside `path`; on success it is renamed onto `path`."""
    return _atomic(Path(path), folder=False)


def atomic_dir(path: str | Path) -> contextlib.AbstractContextManager[Path]:
    """An empty temporary folder beside `path`; on success it replaces `path` whole."""
    return _atomic(Path(path), folder=True)


def write_text(path: str | Path, text: str) -> None:
    """Write `text`, atomically."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


MARKER_BYTES = 1 << 24  # how much of a file is searched for the mark of the command that made it


def _holds(path: Path, marker: str) -> bool:
    """Whether the file at `path` holds `marker` (in its first MARKER_BYTES)."""
    try:
        with path.open("rb") as file:
            return marker.encode() in file.read(MARKER_BYTES)
    except OSError:
        return False


def _tracked(path: Path) -> bool:
    """Whether git tracks `path`, or a file inside it."""
    where = path if path.is_dir() else path.parent
    try:
        done = subprocess.run(
            ["git", "-C", str(where), "ls-files", "-z", "--", str(path.resolve())], capture_output=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout)


def _new_or_own(target: Path, marker: str, inside: str | None) -> bool:
    """Whether `target` is new, an empty folder, or holds `marker` (a folder: in its file `inside`)."""
    if not target.exists():
        return True
    if target.is_dir() and not any(target.iterdir()):
        return True
    return _holds(target / inside if inside else target, marker)


def refuse_foreign(path: str | Path, option: str, command: str, marker: str, inside: str | None = None) -> None:
    """Before `mnist-pipeline COMMAND` writes to `path`, given on its command line as `option`: refuse in one
    line unless the path is new (or an empty folder) or holds what the command made: a file holding its
    `marker` (a folder: its file `inside` holding it). Nothing inside .git/ is ever written."""
    target = Path(path)
    resolved = target.resolve()
    if ".git" in resolved.parts:
        reason = "inside .git/, git's own files"
    elif _new_or_own(target, marker, inside):
        return
    elif _tracked(target):
        reason = "tracked by git"
    elif resolved.name == paths.POINT_PARAMS:  # the project's params.yaml, or a sweep point's
        reason = "a parameters file"
    elif (owner := paths.owner(target)) is not None:
        reason = f"an output of the '{owner}' stage"
    else:
        reason = f"a {'folder' if target.is_dir() else 'file'} `mnist-pipeline {command}` did not make"
    raise PipelineError(
        f"{option} {path}: {reason}; `mnist-pipeline {command}` writes only a new path or one it"
        " made itself: choose another path"
    )
