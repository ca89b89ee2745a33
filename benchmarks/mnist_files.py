"""MNIST's original IDX files read straight into arrays, for the benchmarks that take MNIST_MIRROR's files."""

import gzip
from pathlib import Path

import numpy as np

FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")}
FILES["test"] = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def read_idx(path: Path) -> np.ndarray:
    """One gzipped IDX file: a big-endian header (zero, zero, the type 0x08 for uint8, the dimension count,
    then each dimension), then the values."""
    data = gzip.decompress(path.read_bytes())
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def read_split(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """uint8 images (N, 28, 28) and labels (N,) of `split` ('train' or 'test') from the original files."""
    images, labels = (read_idx(folder / name) for name in FILES[split])
    return images, labels
