"""The preprocess stage: the download stage's splits made into the training arrays, `{train,val,test}_images.npy`
(float32, (N, 784) or (N, 28, 28)), `{train,val,test}_labels.npy` (int32) and stats.json, in one folder replaced
atomically. With the defaults (no deskewing, no normalisation, flattened, no validation split) they are the JAX
tutorial's input: raw 0..255 pixels as float32 vectors of 784."""

import argparse
from pathlib import Path

import numpy as np

from ..artefacts import atomic, storage
from ..artefacts.dataset import PixelStats, SplitStats, Stats, load_raw_split, read_manifest
from ..config.params import PreprocessConfig, load, split_sizes
from ..foundation import paths
from ..foundation.dataset_facts import NUM_CLASSES
from ..foundation.errors import PipelineError

FORMAT = "npy float32 images, int32 labels; np.load(path, allow_pickle=False)"
SIDE = 28  # MNIST's images are SIDE x SIDE
DESKEW_CHUNK = 4096  # images per vectorised deskewing pass (about 50 MB of float64 temporaries)


def split_indices(count: int, config: PreprocessConfig) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the kept training and validation examples, each in original order."""
    rng = np.random.default_rng(config.seed)
    keep = np.arange(count)
    if config.max_train_examples and config.max_train_examples < count:
        keep = np.sort(rng.permutation(count)[: config.max_train_examples])
    _, n_val = split_sizes(count, config)
    shuffled = rng.permutation(keep)
    return np.sort(shuffled[n_val:]), np.sort(shuffled[:n_val])


def deskew(images: np.ndarray) -> np.ndarray:
    """Straighten slanted digits (the "deskewing" of LeCun et al.'s MNIST table): shear each uint8 image along its
    rows so that its pixel mass has no row-column covariance, centred on its centre of mass.

    With pixel mass p(r, c), centre (r0, c0) and alpha = cov(r, c) / var(r), output pixel (r, c) is the input at
        (r + r0 - k,  c + c0 - k + alpha * (r - k)),   k = (SIDE - 1) / 2 the image centre,
    bilinearly interpolated (0 outside) and rounded to uint8. The moments are exact integer sums and the rest
    element-wise float64, so every machine gives the same bytes. A blank image, or one whose mass lies on a
    single row, is left as it is."""
    out = np.empty_like(images)
    for start in range(0, len(images), DESKEW_CHUNK):
        out[start : start + DESKEW_CHUNK] = _deskew_chunk(images[start : start + DESKEW_CHUNK])
    return out


def _deskew_chunk(images: np.ndarray) -> np.ndarray:
    count = len(images)
    pixels = images.reshape(count, SIDE, SIDE).astype(np.int64)
    index = np.arange(SIDE, dtype=np.int64)
    row_mass, col_mass = pixels.sum(axis=2), pixels.sum(axis=1)  # (count, SIDE) each
    mass, sum_r, sum_c = row_mass.sum(axis=1), row_mass @ index, col_mass @ index
    spread = mass * (row_mass @ (index * index)) - sum_r * sum_r  # m^2 var(r), exact
    skew = mass * np.einsum("nrc,r,c->n", pixels, index, index) - sum_r * sum_c  # m^2 cov(r, c), exact
    usable = spread > 0  # some mass, on more than one row
    spread, mass = np.where(usable, spread, 1), np.where(usable, mass, 1)
    centre = (SIDE - 1) / 2
    rows = index.astype(np.float64)
    source_r = rows[None, :] + (sum_r / mass - centre)[:, None]  # (count, SIDE): one source row per output row
    shift_c, alpha = (sum_c / mass - centre)[:, None, None], (skew / spread)[:, None, None]
    source_c = rows[None, None, :] + shift_c + alpha * (rows[None, :, None] - centre)  # (count, SIDE, SIDE)
    padded = np.pad(pixels, ((0, 0), (1, 1), (1, 1))).astype(np.float64)  # a ring of zeros: 0 outside the image
    top, left = np.floor(source_r).astype(np.int64)[:, :, None], np.floor(source_c).astype(np.int64)
    down, right = source_r[:, :, None] - top, source_c - left
    n = np.arange(count)[:, None, None]

    def at(r: np.ndarray, c: np.ndarray) -> np.ndarray:
        return padded[n, np.clip(r + 1, 0, SIDE + 1), np.clip(c + 1, 0, SIDE + 1)]

    value = (1 - down) * ((1 - right) * at(top, left) + right * at(top, left + 1)) + down * (
        (1 - right) * at(top + 1, left) + right * at(top + 1, left + 1)
    )
    deskewed = np.clip(np.rint(value), 0, 255).astype(np.uint8)
    return np.where(usable[:, None, None], deskewed, images.reshape(count, SIDE, SIDE)).reshape(images.shape)


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
    """Counts, class balance, and the statistics of the pixels `transform` makes (`scale` * uint8 + `offset`)."""
    histogram = np.bincount(labels, minlength=NUM_CLASSES)
    total = max(int(histogram.sum()), 1)
    pixels = None
    if images.size:
        source_mean, source_std = pixel_moments(images)
        low, high = scale * float(images.min()) + offset, scale * float(images.max()) + offset
        pixels = PixelStats(mean=scale * source_mean + offset, std=abs(scale) * source_std, min=low, max=high)
    return SplitStats(
        count=int(labels.shape[0]),
        label_histogram=histogram.tolist(),
        class_balance=[round(int(c) / total, 6) for c in histogram],
        pixels=pixels,
    )


def preprocess(config: PreprocessConfig, raw_dir: str | Path, out_dir: str | Path) -> Stats:
    """Run the preprocess stage; return the stats it wrote."""
    manifest = read_manifest(raw_dir)
    train_images, train_labels = load_raw_split(raw_dir, "train")
    test_images, test_labels = load_raw_split(raw_dir, "test")
    if config.deskew:
        train_images, test_images = deskew(train_images), deskew(test_images)
    train_idx, val_idx = split_indices(len(train_labels), config)
    if len(train_idx) == 0:
        raise PipelineError(
            f"{raw_dir}: {len(train_labels)} training examples leave none after the validation"
            " split; lower preprocess.validation_fraction in params.yaml"
        )
    mean, std = pixel_moments(train_images[train_idx]) if config.normalize == "standardize" else (0.0, 1.0)
    std = std or 1.0
    scale, offset = {"unit": (1 / 255, 0.0), "standardize": (1 / std, -mean / std)}.get(config.normalize, (1.0, 0.0))
    parts = {
        "train": (train_images[train_idx], train_labels[train_idx]),
        "val": (train_images[val_idx], train_labels[val_idx]),
        "test": (test_images, test_labels),
    }
    with atomic.atomic_dir(out_dir) as tmp:
        for split, (images, labels) in parts.items():
            images_file, labels_file = paths.split_files(split)
            storage.save_array(tmp / images_file, transform(images, config, mean, std))
            storage.save_array(tmp / labels_file, labels.astype(np.int32))
        stats = Stats(
            dataset=manifest.dataset,
            format=FORMAT,
            normalize=config.normalize,
            normalize_mean=mean,
            normalize_std=std,
            image_shape=[784] if config.flatten else [28, 28],
            splits={split: _split_stats(*part, scale, offset) for split, part in parts.items()},
        )
        storage.write_model(tmp / paths.STATS, stats)
    return stats


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline preprocess`."""
    if Path(args.out) != Path(paths.PROCESSED.path):  # its own folder, else one it made (holds its stats)
        atomic.claim(args.out, option="--out", command="preprocess", signature='"normalize_mean"', inside=paths.STATS)
    params = load(args.params)
    if (held := read_manifest(args.raw).dataset) != params.data.dataset:
        raise PipelineError(
            f"{args.raw}: holds {held}, but data.dataset in {args.params} is"
            f" {params.data.dataset}; re-run the 'download' stage"
        )
    preprocess(params.preprocess, args.raw, args.out)
