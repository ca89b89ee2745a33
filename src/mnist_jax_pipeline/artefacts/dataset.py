"""The data artefacts: the download stage's manifest and arrays, the preprocess stage's arrays and stats."""

from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import Field

from ..foundation import paths
from ..foundation.dataset_facts import IMAGE_PIXELS, NUM_CLASSES
from ..foundation.errors import remake
from . import storage
from .json_model import JsonModel

Histogram = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=NUM_CLASSES, max_length=NUM_CLASSES)]
RAW_MADE_BY, PROCESSED_MADE_BY = paths.RAW.made_by, paths.PROCESSED.made_by


class SourceFile(JsonModel):
    sha256: str
    size: int
    url: str


class SplitCount(JsonModel):
    count: int
    label_histogram: Histogram


class Manifest(JsonModel):
    """data/raw/manifest.json: what was downloaded, with which TFDS, and what it holds."""

    dataset: str
    tfds_version: str
    builder_version: str
    files: dict[str, SourceFile]
    splits: dict[str, SplitCount]


class PixelStats(JsonModel):
    mean: float
    std: float
    min: float
    max: float


class SplitStats(SplitCount):
    class_balance: Annotated[list[float], Field(min_length=NUM_CLASSES, max_length=NUM_CLASSES)]
    pixels: PixelStats | None = None  # absent for an empty split


class Stats(JsonModel):
    """data/processed/stats.json: how the arrays were made and what they hold."""

    dataset: str
    format: str
    normalize: str
    normalize_mean: float
    normalize_std: float
    image_shape: list[int]
    splits: dict[str, SplitStats]


def read_manifest(raw_dir: str | Path = paths.RAW.path) -> Manifest:
    return storage.read_model(Path(raw_dir) / paths.MANIFEST, Manifest, RAW_MADE_BY)


def read_stats(processed_dir: str | Path = paths.PROCESSED.path) -> Stats:
    path = Path(processed_dir) / paths.STATS
    stats = storage.read_model(path, Stats, PROCESSED_MADE_BY)
    if absent := [split for split in ("train", "test") if split not in stats.splits]:
        raise remake(path, f"missing split '{absent[0]}'", PROCESSED_MADE_BY)
    return stats


def load_raw_split(raw_dir: str | Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """One split as the download stage exported it: uint8 images (N, 28, 28), uint8 labels (N,)."""
    images_path, labels_path = (Path(raw_dir) / paths.ARRAYS / name for name in paths.split_files(split))
    images = storage.load_array(images_path, RAW_MADE_BY, np.uint8, (None, 28, 28))
    return images, storage.load_array(labels_path, RAW_MADE_BY, np.uint8, (images.shape[0],))


def load_split(processed_dir: str | Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """One processed split as (images (N, 784) float32, labels (N,) int32), whatever the stored shape."""
    images_path, labels_path = (Path(processed_dir) / name for name in paths.split_files(split))
    images = storage.load_array(images_path, PROCESSED_MADE_BY, np.float32)
    if images.ndim not in (2, 3) or int(np.prod(images.shape[1:])) != IMAGE_PIXELS:
        raise remake(images_path, f"shape {images.shape}, expected (N, 784) or (N, 28, 28)", PROCESSED_MADE_BY)
    if not np.isfinite(images).all():
        raise remake(images_path, "holds NaN or infinite values", PROCESSED_MADE_BY)
    labels = storage.load_array(labels_path, PROCESSED_MADE_BY, np.int32, (images.shape[0],))
    if not labels.size and split != "val":  # only the validation split may be empty (fraction 0)
        raise remake(labels_path, f"the {split} split is empty", PROCESSED_MADE_BY)
    if labels.size and not (labels.min() >= 0 and labels.max() < NUM_CLASSES):
        raise remake(labels_path, f"labels outside 0..{NUM_CLASSES - 1}", PROCESSED_MADE_BY)
    return images.reshape(len(images), IMAGE_PIXELS), labels
