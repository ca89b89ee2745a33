import contextlib
import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnist_jax_pipeline.stages.download.idx import UBYTE, IdxError, parse_idx, read_idx, read_pair


def encode_idx(array: np.ndarray) -> bytes:
    """Encode a uint8 array as IDX bytes."""
    array = np.asarray(array, dtype=np.uint8)
    header = bytes([0, 0, UBYTE, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.tobytes()


def write_idx_gz(path: str | Path, array: np.ndarray) -> None:
    """Write a gzip-compressed IDX file with a fixed mtime (reproducible bytes)."""
    Path(path).write_bytes(gzip.compress(encode_idx(array), mtime=0))


def test_roundtrip(tmp_path):
    images = np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28)
    write_idx_gz(tmp_path / "x.gz", images)
    assert np.array_equal(read_idx(tmp_path / "x.gz", ndim=3), images)


def test_written_files_are_byte_reproducible(tmp_path):
    labels = np.arange(10, dtype=np.uint8)
    write_idx_gz(tmp_path / "a.gz", labels)
    write_idx_gz(tmp_path / "b.gz", labels)
    assert (tmp_path / "a.gz").read_bytes() == (tmp_path / "b.gz").read_bytes()


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"\x00\x00", "too short"),
        (b"\x00\x01\x08\x01" + (3).to_bytes(4, "big") + b"abc", "bad IDX magic"),
        (b"\x00\x00\x0d\x01" + (3).to_bytes(4, "big") + b"abc", "bad IDX magic"),
        (b"\x00\x00\x08\x01" + (5).to_bytes(4, "big") + b"abc", r"header \(5,\) says 5"),
        (b"\x00\x00\x08\x03\x00\x00", "header truncated"),
    ],
)
def test_bad_framing(blob, message):
    with pytest.raises(IdxError, match=message):
        parse_idx(blob, "f")


def test_wrong_dimension_count():
    with pytest.raises(IdxError, match="2 dimensions, expected 3"):
        parse_idx(encode_idx(np.zeros((2, 3), np.uint8)), "f", ndim=3)


def test_truncated_gzip_names_the_file(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte.gz"
    blob = gzip.compress(encode_idx(np.zeros((4, 28, 28), np.uint8)))
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(IdxError, match="train-images-idx3-ubyte.gz: not a complete gzip file"):
        read_idx(path)


def test_label_count_mismatch(tmp_path):
    write_idx_gz(tmp_path / "i.gz", np.zeros((5, 28, 28), np.uint8))
    write_idx_gz(tmp_path / "l.gz", np.zeros(4, np.uint8))
    with pytest.raises(IdxError, match="4 labels for 5 images"):
        read_pair(tmp_path / "i.gz", tmp_path / "l.gz")


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64))
def test_fuzz_arbitrary_bytes_raise_only_idx_error(blob):
    with contextlib.suppress(IdxError):
        parse_idx(blob, "fuzz")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=3), st.binary(max_size=40))
def test_fuzz_plausible_headers(dims, tail):
    header = bytes([0, 0, 8, len(dims)]) + b"".join(d.to_bytes(4, "big") for d in dims)
    try:
        array = parse_idx(header + tail, "fuzz")
    except IdxError:
        return
    assert array.shape == tuple(dims)
