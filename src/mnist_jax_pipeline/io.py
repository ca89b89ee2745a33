"""Atomic writes and the artefact formats (JSON, .npy arrays, safetensors models).

Every output is written under a temporary name in its own folder, then renamed into
place, so an interrupted or failed stage never leaves a half-written file behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .errors import PipelineError

TMP_PREFIX = ".tmp-"


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


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success rename it onto `path`."""
    path = Path(path)
    _mkdir(path.parent)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{path.name}.", dir=path.parent)
    except OSError as err:
        raise _write_error(path, err) from err
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_umask())
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise _write_error(path, err) from err
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield an empty temporary folder beside `path`; on success it replaces `path` whole."""
    path = Path(path)
    _mkdir(path.parent)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{path.name}.", dir=path.parent))
    except OSError as err:
        raise _write_error(path, err) from err
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        old = None
        if path.exists():
            old = path.with_name(f"{TMP_PREFIX}{path.name}.old-{os.getpid()}")
            os.replace(path, old)
        try:
            os.replace(tmp, path)
        except OSError:
            if old is not None:  # put the earlier output back
                os.replace(old, path)
            raise
        _fsync_dir(path.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _write_error(path, err) from err
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path: str | Path, data: Any) -> None:
    """Write `data` as indented, key-sorted JSON, atomically."""
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_text(path: str | Path, text: str) -> None:
    """Write `text`, atomically."""
    with atomic_file(path) as tmp:
        tmp.write_text(text)


def read_json(path: str | Path, made_by: str) -> Any:
    """Read a JSON artefact; a missing or corrupt one names the stage that makes it."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as err:
        raise PipelineError(f"{path}: missing; run the '{made_by}' stage first") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise PipelineError(f"{path}: corrupt JSON ({err}); re-run the '{made_by}' stage") from err


def save_array(path: Path, array: np.ndarray) -> None:
    """Save one array as .npy (no pickle)."""
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)


def load_array(
    path: str | Path,
    made_by: str,
    dtype: np.dtype | type | None = None,
    shape: tuple[int | None, ...] | None = None,
) -> np.ndarray:
    """Load a .npy array without pickle, checking dtype and shape (None = any size)."""
    path = Path(path)
    try:
        array = np.load(path, allow_pickle=False)
    except FileNotFoundError as err:
        raise PipelineError(f"{path}: missing; run the '{made_by}' stage first") from err
    except (ValueError, OSError, EOFError) as err:
        raise PipelineError(f"{path}: corrupt or truncated array ({err}); re-run the '{made_by}' stage") from err
    if dtype is not None and array.dtype != np.dtype(dtype):
        raise PipelineError(f"{path}: dtype {array.dtype}, expected {np.dtype(dtype)}; re-run the '{made_by}' stage")
    if shape is not None and (
        array.ndim != len(shape)
        or any(want is not None and got != want for got, want in zip(array.shape, shape, strict=True))
    ):
        raise PipelineError(f"{path}: shape {array.shape}, expected {shape}; re-run the '{made_by}' stage")
    return array


METADATA_KEY = "mnist_jax_pipeline"


def save_params(path: str | Path, arrays: Mapping[str, np.ndarray], metadata: Mapping[str, str]) -> None:
    """Save model arrays as safetensors (no pickle), atomically.

    The metadata travels as one key-sorted JSON string: safetensors writes several metadata
    keys in hash order, which would make two identical models differ in bytes.
    """
    from safetensors.numpy import save

    tensors = {name: np.ascontiguousarray(value) for name, value in arrays.items()}
    blob = save(tensors, metadata={METADATA_KEY: json.dumps(dict(metadata), sort_keys=True)})
    with atomic_file(path) as tmp:
        tmp.write_bytes(blob)


def load_params(path: str | Path, made_by: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Load a safetensors model and its metadata; a corrupt file names the stage to re-run."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    path = Path(path)
    try:
        blob = path.read_bytes()
    except FileNotFoundError as err:
        raise PipelineError(f"{path}: missing; run the '{made_by}' stage first") from err
    try:
        arrays = load(blob)
        header_len = int.from_bytes(blob[:8], "little")
        header = json.loads(blob[8 : 8 + header_len])
    except (SafetensorError, ValueError, UnicodeDecodeError) as err:
        raise PipelineError(f"{path}: corrupt or truncated model ({err}); re-run the '{made_by}' stage") from err
    stored = header.get("__metadata__", {}).get(METADATA_KEY, "{}")
    try:
        metadata = json.loads(stored)
    except json.JSONDecodeError as err:
        raise PipelineError(f"{path}: corrupt model metadata; re-run the '{made_by}' stage") from err
    return arrays, metadata
