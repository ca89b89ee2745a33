"""Reading the IDX format of the original MNIST files, gzip-compressed or not: two zero bytes, a type byte
(0x08 = unsigned byte), a dimension count, one big-endian uint32 per dimension, then the values in row-major order."""

import gzip
import struct
import zlib
from pathlib import Path

import numpy as np

from ...foundation.errors import PipelineError

UBYTE = 0x08


class IdxError(PipelineError):
    """A file that is not a well-formed IDX file of the expected shape."""


def parse_idx(blob: bytes, name: str = "<bytes>", ndim: int | None = None) -> np.ndarray:
    """Parse raw (uncompressed) IDX bytes into a uint8 array."""
    if len(blob) < 4:
        raise IdxError(f"{name}: too short for an IDX header ({len(blob)} bytes); re-download it")
    dims = blob[3]
    if blob[:3] != bytes([0, 0, UBYTE]):
        raise IdxError(f"{name}: bad IDX magic number {blob[:4].hex()}; expected 000008xx, re-download it")
    if ndim is not None and dims != ndim:
        raise IdxError(f"{name}: {dims} dimensions, expected {ndim}; is it the right file?")
    if dims == 0:
        raise IdxError(f"{name}: an IDX file needs at least one dimension; re-download it")
    header = 4 + 4 * dims
    if len(blob) < header:
        raise IdxError(f"{name}: header truncated; re-download it")
    shape = struct.unpack(f">{dims}I", blob[4:header])
    expected = int(np.prod(shape, dtype=np.int64))
    if len(blob) - header != expected:
        raise IdxError(
            f"{name}: {len(blob) - header} data bytes, but the header {shape} says {expected}; re-download it"
        )
    return np.frombuffer(blob, dtype=np.uint8, offset=header).reshape(shape)


def read_idx(path: str | Path, ndim: int | None = None) -> np.ndarray:
    """Read an IDX file, gunzipping it when its name ends in .gz."""
    path = Path(path)
    try:
        blob = path.read_bytes()
    except FileNotFoundError as err:
        raise IdxError(f"{path}: not found") from err
    if path.suffix == ".gz":
        try:
            blob = gzip.decompress(blob)
        except (OSError, EOFError, zlib.error) as err:
            raise IdxError(f"{path}: not a complete gzip file ({err}); re-download it") from err
    return parse_idx(blob, str(path), ndim)


def read_pair(images_path: str | Path, labels_path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read matching image (N, rows, cols) and label (N,) files, checking their counts agree."""
    images = read_idx(images_path, ndim=3)
    labels = read_idx(labels_path, ndim=1)
    if images.shape[0] != labels.shape[0]:
        raise IdxError(
            f"{labels_path}: {labels.shape[0]} labels for {images.shape[0]} images in {images_path};"
            " the pair does not match, re-download both"
        )
    return images, labels
