"""The download stage: a dataset fetched and prepared with TFDS into one folder replaced atomically (default
`data/raw/`): `idx/*.gz`, the four original files, SHA-256 verified; `arrays/`, the splits as uint8 .npy; and
`manifest.json`. `MNIST_MIRROR` names a folder holding the four files, which TFDS reads as its `manual_dir`; where
the bytes came from is recorded nowhere, so it never changes a stage's hash."""

import argparse
import contextlib
import io
import logging
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from ...artefacts import atomic, storage
from ...artefacts.dataset import Manifest, SourceFile, SplitCount
from ...artefacts.provenance import file_sha256
from ...config.params import Params, load
from ...foundation import console, paths
from ...foundation.errors import PipelineError
from ...foundation.terminal import progress_wanted
from .datasets import PINNED, SPLIT_FILES, PinnedFile
from .idx import read_pair

log = logging.getLogger(__name__)

MIRROR_ENV = "MNIST_MIRROR"
CONNECT_TIMEOUT_S = 3.0
TFDS_MAX_RETRIES = 1


def verify_file(path: Path, pinned: PinnedFile) -> None:
    """Check a file against its pinned SHA-256."""
    if not path.is_file():
        raise PipelineError(f"{path}: missing from the mirror; put the original {pinned.name} there ({pinned.url})")
    try:
        got = file_sha256(path)
    except OSError as err:
        raise PipelineError(
            f"{path}: cannot read ({err.strerror}); make it readable, or point {MIRROR_ENV} at a readable copy"
        ) from err
    if got != pinned.sha256:
        raise PipelineError(
            f"{path}: SHA-256 {got[:16]}... does not match the pinned {pinned.sha256[:16]}...;"
            f" replace it with the original from {pinned.url}"
        )


def mirror_from_env(setting: str | None = None) -> Path | None:
    """The mirror folder MNIST_MIRROR names (or `setting`), None when unset; set but not a folder is an error."""
    value = setting if setting is not None else os.environ.get(MIRROR_ENV)
    if not value:
        return None
    mirror = Path(value).expanduser().resolve()
    if not mirror.is_dir():
        raise PipelineError(f"{MIRROR_ENV}={value}: not a folder; point it at a folder holding the four .gz files")
    return mirror


def _check_network(dataset: str) -> None:
    """Without a mirror: HTTPS sources only, and their host reachable (else fail fast, naming MNIST_MIRROR)."""
    for pinned in PINNED[dataset]:
        if urlparse(pinned.url).scheme != "https":
            raise PipelineError(
                f"{dataset}: TFDS fetches {pinned.name} over plain HTTP ({pinned.url}), which this pipeline"
                f" refuses; download the four files yourself and set {MIRROR_ENV} to their folder"
            )
    host = urlparse(PINNED[dataset][0].url)
    try:
        socket.create_connection((host.hostname, host.port or 443), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as err:
        raise PipelineError(
            f"cannot reach {host.hostname} ({err}); offline, set {MIRROR_ENV} to a folder holding the"
            " four original .gz files (see README)"
        ) from err


@contextlib.contextmanager
def prints_to_details() -> Iterator[None]:
    """What a library prints on stdout meanwhile (TFDS's notes) goes to the details, line by line."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            yield
    finally:
        for line in printed.getvalue().splitlines():
            if line.strip():
                console.details.info("%s", line)


def _prepare_with_tfds(dataset: str, data_dir: Path, manual_dir: Path | None) -> Any:
    """Download (or read from `manual_dir`) and prepare `dataset` with TFDS; its builder."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import tensorflow_datasets as tfds
    from tensorflow_datasets.core.download import downloader

    downloader.MAX_RETRIES = TFDS_MAX_RETRIES
    if not progress_wanted():  # TFDS's own bars on a terminal, as the training bars
        tfds.disable_progress_bar()
    builder = tfds.builder(dataset, data_dir=str(data_dir))
    config = tfds.download.DownloadConfig(
        manual_dir=str(manual_dir) if manual_dir else None, force_checksums_validation=True
    )
    try:
        with prints_to_details():
            builder.download_and_prepare(download_config=config)
    except Exception as err:  # TFDS raises many types; keep its word, one line
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise PipelineError(f"TFDS could not prepare {dataset}: {first_line}") from err
    return builder


def _collect_downloads(downloads: Path, idx_dir: Path, dataset: str) -> None:
    """Copy the files TFDS downloaded into `idx_dir`, matched by their pinned checksum."""
    by_sha = {p.sha256: p for p in PINNED[dataset]}
    for path in downloads.rglob("*"):
        if path.is_file() and path.stat().st_size in {p.size for p in PINNED[dataset]}:
            pinned = by_sha.get(file_sha256(path))
            if pinned:
                shutil.copyfile(path, idx_dir / pinned.name)
    for pinned in PINNED[dataset]:
        verify_file(idx_dir / pinned.name, pinned)


def _export_arrays(builder: Any, out: Path) -> dict[str, SplitCount]:
    """Export each split as uint8 .npy arrays; their counts and label histograms."""
    import tensorflow_datasets as tfds

    out.mkdir()
    splits: dict[str, SplitCount] = {}
    for split in ("train", "test"):
        data = tfds.as_numpy(builder.as_dataset(split=split, batch_size=-1, shuffle_files=False))
        images = np.asarray(data["image"], dtype=np.uint8).reshape(-1, 28, 28)
        labels = np.asarray(data["label"]).astype(np.uint8)
        storage.save_array(out / f"{split}_images.npy", images)
        storage.save_array(out / f"{split}_labels.npy", labels)
        splits[split] = SplitCount(count=len(labels), label_histogram=np.bincount(labels, minlength=10).tolist())
    return splits


def _cross_check(idx_dir: Path, splits: dict[str, SplitCount]) -> None:
    """The TFDS export must hold exactly the examples of the raw IDX files (counts and labels)."""
    for split, (images_name, labels_name) in SPLIT_FILES.items():
        images, labels = read_pair(idx_dir / images_name, idx_dir / labels_name)
        histogram = np.bincount(labels, minlength=10).tolist()
        if images.shape[0] != splits[split].count or histogram != splits[split].label_histogram:
            raise PipelineError(
                f"{idx_dir / labels_name}: TFDS's {split} split disagrees with the raw IDX labels;"
                " delete data/raw and re-run 'download'"
            )


def download(params: Params, out_dir: str | Path = paths.RAW.path, mirror: str | None = None) -> Manifest:
    """Run the download stage; the manifest it wrote."""
    import tensorflow_datasets as tfds

    dataset = params.data.dataset
    pinned = PINNED[dataset]
    mirror_dir = mirror_from_env(mirror)
    if mirror_dir is None:
        _check_network(dataset)
    else:
        for item in pinned:
            verify_file(mirror_dir / item.name, item)
        log.info("using the mirror %s (checksums verified)", mirror_dir)
    started = time.perf_counter()
    with atomic.atomic_dir(out_dir) as tmp:
        idx_dir, tfds_dir = tmp / "idx", tmp / "tfds-work"
        idx_dir.mkdir()
        if mirror_dir is not None:
            for item in pinned:
                shutil.copyfile(mirror_dir / item.name, idx_dir / item.name)
                verify_file(idx_dir / item.name, item)
        # TFDS's own TFRecords are not kept: their bytes differ from run to run (the order in which
        # protobuf writes each example's feature map), and the arrays hold the same examples.
        builder = _prepare_with_tfds(dataset, tfds_dir, idx_dir if mirror_dir else None)
        if mirror_dir is None:
            _collect_downloads(tfds_dir / "downloads", idx_dir, dataset)
        splits = _export_arrays(builder, tmp / "arrays")
        shutil.rmtree(tfds_dir)
        _cross_check(idx_dir, splits)
        manifest = Manifest(
            dataset=dataset,
            tfds_version=tfds.__version__,
            builder_version=str(builder.info.version),
            files={p.name: SourceFile(sha256=p.sha256, size=p.size, url=p.url) for p in pinned},
            splits=splits,
        )
        storage.write_model(tmp / "manifest.json", manifest)
    log.info("%s prepared in %.1f s", dataset, time.perf_counter() - started)
    return manifest


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline download` (honours MNIST_MIRROR)."""
    if Path(args.out) != Path(paths.RAW.path):  # its own folder, else one it made (holds its manifest)
        atomic.claim(args.out, option="--out", command="download", signature='"tfds_version"', inside="manifest.json")
    download(load(args.params), args.out)
