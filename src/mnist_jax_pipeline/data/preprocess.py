"""The preprocess stage: turn the prepared splits into the versioned training arrays.

Output folder (default `data/processed/`), replaced atomically:
  {train,val,test}_images.npy   float32, (N, 784) or (N, 28, 28)
  {train,val,test}_labels.npy   int32, (N,)
  stats.json                    counts, class balance and pixel statistics per split

All arrays are plain .npy files: `np.load(path, allow_pickle=False)` reads them.
With the defaults (no normalisation, flattened, no validation split) the arrays are the
classic JAX tutorial's input: raw 0..255 pixels as float32 vectors of 784.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .. import io
from ..config import NUM_CLASSES, PreprocessConfig
from ..errors import PipelineError

SPLITS = ("train", "val", "test")
MADE_BY = "download"


def load_raw(raw_dir: str | Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Read the exported uint8 splits written by the download stage."""
    arrays = Path(raw_dir) / "arrays"
    out = {}
    for split in ("train", "test"):
        images = io.load_array(arrays / f"{split}_images.npy", MADE_BY, np.uint8, (None, 28, 28))
        labels = io.load_array(arrays / f"{split}_labels.npy", MADE_BY, np.uint8, (images.shape[0],))
        out[split] = (images, labels)
    return out


def split_indices(count: int, config: PreprocessConfig) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the kept training and validation examples, each in original order."""
    rng = np.random.default_rng(config.seed)
    keep = np.arange(count)
    if config.max_train_examples and config.max_train_examples < count:
        keep = np.sort(rng.permutation(count)[: config.max_train_examples])
    n_val = int(round(len(keep) * config.validation_fraction))
    if n_val == 0:
        return keep, keep[:0]
    shuffled = rng.permutation(keep)
    return np.sort(shuffled[n_val:]), np.sort(shuffled[:n_val])


def affine(config: PreprocessConfig, mean: float, std: float) -> tuple[float, float]:
    """(scale, offset) of the per-pixel map value -> scale * value + offset that preprocessing applies."""
    if config.normalize == "unit":
        return 1 / 255, 0.0
    if config.normalize == "standardize":
        return 1 / std, -mean / std
    return 1.0, 0.0


def transform(images: np.ndarray, config: PreprocessConfig, mean: float, std: float) -> np.ndarray:
    """Scale uint8 images as configured and flatten them when asked."""
    out = images.astype(np.float32)
    if config.normalize == "unit":
        out /= np.float32(255.0)
    elif config.normalize == "standardize":
        out = (out - np.float32(mean)) / np.float32(std)
    return out.reshape(len(out), 28 * 28) if config.flatten else out


def pixel_moments(images: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation of uint8 pixels, exactly, from their 256-bin histogram."""
    counts = np.bincount(images.ravel(), minlength=256).astype(np.float64)
    values = np.arange(256, dtype=np.float64)
    mean = float(counts @ values / counts.sum())
    return mean, float(np.sqrt(counts @ (values - mean) ** 2 / counts.sum()))


def _split_stats(images: np.ndarray, labels: np.ndarray, scale: float, offset: float) -> dict[str, Any]:
    """Counts, class balance, and the processed pixels' statistics (derived from the uint8 source)."""
    histogram = np.bincount(labels, minlength=NUM_CLASSES)
    total = max(int(histogram.sum()), 1)
    stats: dict[str, Any] = {
        "count": int(labels.shape[0]),
        "label_histogram": histogram.tolist(),
        "class_balance": [round(int(c) / total, 6) for c in histogram],
    }
    if images.size:
        mean, std = pixel_moments(images)
        low, high = scale * float(images.min()) + offset, scale * float(images.max()) + offset
        stats["pixels"] = {"mean": scale * mean + offset, "std": abs(scale) * std, "min": low, "max": high}
    return stats


def preprocess(config: PreprocessConfig, raw_dir: str | Path = "data/raw",
               out_dir: str | Path = "data/processed") -> dict[str, Any]:
    """Run the preprocess stage; return the stats it wrote."""
    raw = load_raw(raw_dir)
    train_images, train_labels = raw["train"]
    train_idx, val_idx = split_indices(len(train_labels), config)
    mean, std = 0.0, 1.0
    if config.normalize == "standardize":
        mean, std = pixel_moments(train_images[train_idx])
        std = std or 1.0
    scale, offset = affine(config, mean, std)
    parts = {
        "train": (train_images[train_idx], train_labels[train_idx]),
        "val": (train_images[val_idx], train_labels[val_idx]),
        "test": raw["test"],
    }
    manifest = io.read_json(Path(raw_dir) / "manifest.json", MADE_BY)
    stats: dict[str, Any] = {
        "dataset": manifest["dataset"],
        "format": "npy float32 images, int32 labels; np.load(path, allow_pickle=False)",
        "normalize": config.normalize,
        "normalize_mean": mean,
        "normalize_std": std,
        "image_shape": [784] if config.flatten else [28, 28],
        "splits": {},
    }
    with io.atomic_dir(out_dir) as tmp:
        for split in SPLITS:
            images, labels = parts[split]
            processed = transform(images, config, mean, std)
            io.save_array(tmp / f"{split}_images.npy", processed)
            io.save_array(tmp / f"{split}_labels.npy", labels.astype(np.int32))
            stats["splits"][split] = _split_stats(images, labels, scale, offset)
        io.write_json(tmp / "stats.json", stats)
    return stats


def load_split(processed_dir: str | Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Load one processed split as (images (N, 784) float32, labels (N,) int32)."""
    base = Path(processed_dir)
    images = io.load_array(base / f"{split}_images.npy", "preprocess", np.float32)
    if images.ndim not in (2, 3) or int(np.prod(images.shape[1:])) != 784:
        raise PipelineError(
            f"{base / f'{split}_images.npy'}: shape {images.shape}, expected (N, 784) or (N, 28, 28);"
            " re-run the 'preprocess' stage"
        )
    labels = io.load_array(base / f"{split}_labels.npy", "preprocess", np.int32, (images.shape[0],))
    return images.reshape(len(images), -1), labels
