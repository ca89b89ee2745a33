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

import argparse
from pathlib import Path

import numpy as np

from .. import paths
from ..artefacts import storage
from ..artefacts.dataset import PixelStats, SplitStats, Stats, load_raw_split, read_manifest
from ..config import PreprocessConfig, load, split_sizes
from ..dataset_facts import NUM_CLASSES
from ..errors import PipelineError

FORMAT = "npy float32 images, int32 labels; np.load(path, allow_pickle=False)"


def split_indices(count: int, config: PreprocessConfig) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the kept training and validation examples, each in original order."""
    rng = np.random.default_rng(config.seed)
    keep = np.arange(count)
    if config.max_train_examples and config.max_train_examples < count:
        keep = np.sort(rng.permutation(count)[: config.max_train_examples])
    _, n_val = split_sizes(count, config)
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


def _split_stats(images: np.ndarray, labels: np.ndarray, scale: float, offset: float) -> SplitStats:
    """Counts, class balance, and the processed pixels' statistics (derived from the uint8 source)."""
    histogram = np.bincount(labels, minlength=NUM_CLASSES)
    total = max(int(histogram.sum()), 1)
    pixels = None
    if images.size:
        mean, std = pixel_moments(images)
        low, high = scale * float(images.min()) + offset, scale * float(images.max()) + offset
        pixels = PixelStats(mean=scale * mean + offset, std=abs(scale) * std, min=low, max=high)
    return SplitStats(count=int(labels.shape[0]), label_histogram=histogram.tolist(),
                      class_balance=[round(int(c) / total, 6) for c in histogram], pixels=pixels)


def preprocess(config: PreprocessConfig, raw_dir: str | Path = paths.RAW.path,
               out_dir: str | Path = paths.PROCESSED.path) -> Stats:
    """Run the preprocess stage; return the stats it wrote."""
    manifest = read_manifest(raw_dir)
    train_images, train_labels = load_raw_split(raw_dir, "train")
    train_idx, val_idx = split_indices(len(train_labels), config)
    if len(train_idx) == 0:
        raise PipelineError(f"{raw_dir}: {len(train_labels)} training examples leave none after the validation"
                            " split; lower preprocess.validation_fraction in params.yaml")
    mean, std = 0.0, 1.0
    if config.normalize == "standardize":
        mean, std = pixel_moments(train_images[train_idx])
        std = std or 1.0
    scale, offset = affine(config, mean, std)
    parts = {
        "train": (train_images[train_idx], train_labels[train_idx]),
        "val": (train_images[val_idx], train_labels[val_idx]),
        "test": load_raw_split(raw_dir, "test"),
    }
    splits: dict[str, SplitStats] = {}
    with storage.atomic_dir(out_dir) as tmp:
        for split in paths.SPLITS:
            images, labels = parts[split]
            storage.save_array(tmp / f"{split}_images.npy", transform(images, config, mean, std))
            storage.save_array(tmp / f"{split}_labels.npy", labels.astype(np.int32))
            splits[split] = _split_stats(images, labels, scale, offset)
        stats = Stats(dataset=manifest.dataset, format=FORMAT,
                      normalize=config.normalize, normalize_mean=mean, normalize_std=std,
                      image_shape=[784] if config.flatten else [28, 28], splits=splits)
        storage.write_model(tmp / "stats.json", stats)
    return stats


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline preprocess`."""
    params = load(args.params)
    held = read_manifest(args.raw).dataset
    if held != params.data.dataset:
        raise PipelineError(f"{args.raw}: holds {held}, but data.dataset in {args.params} is"
                            f" {params.data.dataset}; re-run the 'download' stage")
    preprocess(params.preprocess, args.raw, args.out)
