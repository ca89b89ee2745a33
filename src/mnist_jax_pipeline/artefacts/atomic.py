"""Writing outputs: claimed before the work, written under temporary names, put in place together.

`claim` refuses in one line, before any work, an output that could not be written or that is not the
command's to write. Every file or folder is written as `.tmp-<name>.<pid>.*` beside its place and
renamed there; inside `together()` a stage's outputs are put in place at its end, the provenance
record last, or not at all. A killed writer's leftovers are swept by the next write of the same path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ..foundation import paths
from ..foundation.errors import PipelineError

TMP_PREFIX = ".tmp-"
NEVER_WRITTEN = {  # folders no command writes into on a path given on its command line
    ".git": "git's own files",
    ".dvc": "DVC's own files",
    ".snakemake": "Snakemake's own files",
    paths.PROVENANCE: "the provenance records",
}
SIGNATURE_BYTES = 1 << 24  # how much of a file is searched for the signature of the command that made it
_OPEN: set[Path] = set()  # this process's temporary outputs not yet in place
_PENDING: list[tuple[Path, Path, bool]] | None = None  # inside together(): (tmp, path, folder)


def _write_error(path: Path, err: OSError) -> PipelineError:
    return PipelineError(f"{path}: cannot write ({err.strerror}); check the folder's permissions and free space")


def _obstacle(path: Path, probe: bool) -> str | None:
    """Why `path` could not be written: a file where one of its folders belongs, or (`probe`) a folder in
    which no file can be created; None when nothing stands in the way. Writes nothing that stays."""
    folder = path.parent
    while not folder.is_dir():
        if folder.exists() or folder.is_symlink():
            return f"{folder}: not a folder, and {path} is written in it; move it away or delete it, then run again"
        folder = folder.parent
    if probe:
        try:
            with tempfile.TemporaryFile(dir=folder, prefix=f"{TMP_PREFIX}probe."):
                pass
        except OSError as err:
            return (
                f"{folder}: cannot write ({err.strerror}), and {path} is written there; make it writable"
                f" (chmod u+w {folder}) or run in a writable copy of the project"
            )
    return None


def _tracked(path: Path) -> bool:
    """Whether git tracks `path`, or a file inside it."""
    where = path if path.is_dir() else path.parent
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        done = subprocess.run(
            ["git", "-C", str(where), "ls-files", "-z", "--", str(path.resolve())], capture_output=True
        )
        return done.returncode == 0 and bool(done.stdout)
    return False


def _made_by(target: Path, signature: str, inside: str | None) -> bool:
    """Whether `target` is new, an empty folder, or holds `signature` (a folder: in its file `inside`)."""
    if not target.exists():
        return True
    if target.is_dir() and not any(target.iterdir()):
        return True
    with contextlib.suppress(OSError), open(target / inside if inside else target, "rb") as file:
        return signature.encode() in file.read(SIGNATURE_BYTES)
    return False


def _not_ours(target: Path, command: str, signature: str, inside: str | None) -> str | None:
    """Why `mnist-pipeline COMMAND` may not write the path named on its command line, or None."""
    resolved, here = target.resolve(), Path.cwd().resolve()
    inner = resolved.relative_to(here).parts if resolved.is_relative_to(here) else ()
    folder = next((part for part in inner if part in NEVER_WRITTEN), ".git" if ".git" in resolved.parts else None)
    if folder:
        return f"inside {folder}/, {NEVER_WRITTEN[folder]}"
    if target.exists() and _tracked(target):
        return "tracked by git"
    if resolved.name == paths.POINT_PARAMS:
        return "a parameters file"
    owner = paths.owner(target)
    if owner is not None and owner != command:
        return f"an output of the '{owner}' stage"
    if not _made_by(target, signature, inside):
        return f"a {'folder' if target.is_dir() else 'file'} `mnist-pipeline {command}` did not make"
    return None


def claim(
    *outputs: str | Path,
    probe: bool = True,
    option: str = "",
    command: str = "",
    signature: str = "",
    inside: str | None = None,
) -> None:
    """Refuse in one line, before any work, outputs that could not be written. With `option`, the one path
    given there must also be the command's own: new, an empty folder, or holding its `signature`."""
    for output in map(Path, outputs):
        why = _not_ours(output, command, signature, inside) if option else None
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
    """`.tmp-<name>.<pid>.`: the writer's process id, so a later run knows an orphan when it sees one."""
    return f"{TMP_PREFIX}{path.name}.{os.getpid()}."


def sweep(path: Path) -> None:
    """Remove what a killed writer of `path` left beside it; an earlier output set aside between the two
    renames of a folder's replacement is put back if `path` is gone."""
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


def _remove(tmp: Path) -> None:
    if tmp.is_dir() and not tmp.is_symlink():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.unlink(missing_ok=True)


def discard_temps(settle: float = 1.0) -> None:
    """Remove this process's temporary outputs, again for `settle` seconds: after a failure or a stop, a
    library's worker thread (TFDS's extraction, say) may still write into a folder removed once."""
    deadline = time.monotonic() + settle
    while _OPEN:
        for tmp in _OPEN:
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
    """Rename `tmp` onto `path`; an earlier folder is set aside first and removed after (sweep() puts it back
    after a kill between the two renames)."""
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
    if _PENDING is not None:  # put in place with the stage's other outputs
        _PENDING.append((tmp, path, folder))
    else:
        _put(tmp, path, folder)


@contextlib.contextmanager
def together() -> Iterator[None]:
    """Outputs written inside are put in place at the end, only if all were written: a stage that fails
    leaves every earlier output as it was. A stage must not read back what it wrote inside."""
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
            _put(*pending[0])
            pending.pop(0)
    except BaseException:
        for tmp, _, _ in pending:
            _remove(tmp)
            _OPEN.discard(tmp)
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
    """Write `text` as UTF-8, atomically."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
