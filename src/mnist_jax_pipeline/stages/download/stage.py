"""The download stage: a dataset fetched and prepared with TFDS into one folder replaced atomically (default
`data/raw/`): `idx/*.gz`, the four original files, SHA-256 verified; `arrays/`, the splits as uint8 .npy; and
`manifest.json`. `MNIST_MIRROR` names a folder holding the four files, which TFDS reads as its `manual_dir`; where
the bytes came from is recorded nowhere, so it never changes a stage's hash."""

import argparse
import contextlib
import gzip
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
from .datasets import PINNED, SPLIT_LABELS, PinnedFile

log = logging.getLogger(__name__)

MIRROR_ENV = "MNIST_MIRROR"
CONNECT_TIMEOUT_S = 3.0


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
    """Without a mirror: an HTTPS source (one host serves a dataset's files), reachable, else fail fast."""
    first = PINNED[dataset][0]
    url = urlparse(first.url)
    if url.scheme != "https":
        raise PipelineError(
            f"{dataset}: TFDS fetches {first.name} over plain HTTP ({first.url}), which this pipeline"
            f" refuses; download the four files yourself and set {MIRROR_ENV} to their folder"
        )
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as err:
        raise PipelineError(
            f"cannot reach {url.hostname} ({err}); offline, set {MIRROR_ENV} to a folder holding the"
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
        for line in filter(str.strip, printed.getvalue().splitlines()):
            console.details.info("%s", line)


def _prepare_with_tfds(dataset: str, data_dir: Path, manual_dir: Path | None) -> Any:
    """Download (or read from `manual_dir`) and prepare `dataset` with TFDS; its builder."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import tensorflow_datasets as tfds
    from tensorflow_datasets.core.download import downloader

    downloader.MAX_RETRIES = 1  # the host was just reached; a failure is reported, not retried at length
    if not progress_wanted():  # TFDS's own bars on a terminal, as the training bars
        tfds.disable_progress_bar()
    builder = tfds.builder(dataset, data_dir=str(data_dir))
    config = tfds.download.DownloadConfig(manual_dir=manual_dir, force_checksums_validation=True)
    try:
        with prints_to_details():
            builder.download_and_prepare(download_config=config)
    except Exception as err:  # TFDS raises many types; keep its word, one line
        first_line = (str(err).strip() or type(err).__name__).splitlines()[0]
        raise PipelineError(f"TFDS could not prepare {dataset}: {first_line}") from err
    return builder


def _keep_originals(dataset: str, mirror: Path | None, downloads: Path, idx_dir: Path) -> None:
    """Copy the pinned files into `idx_dir`, from the mirror or from TFDS's downloads (found by checksum), verified."""
    sizes = {p.size for p in PINNED[dataset]}
    found = {file_sha256(p): p for p in downloads.rglob("*") if p.is_file() and p.stat().st_size in sizes}
    idx_dir.mkdir()
    for pinned in PINNED[dataset]:
        if source := (mirror / pinned.name if mirror else found.get(pinned.sha256)):
            shutil.copyfile(source, idx_dir / pinned.name)
        verify_file(idx_dir / pinned.name, pinned)


def _export_arrays(builder: Any, idx_dir: Path, out: Path) -> dict[str, SplitCount]:
    """Each split as uint8 .npy arrays, its labels checked against the verified IDX file's; their counts and label
    histograms."""
    import tensorflow_datasets as tfds

    out.mkdir()
    splits: dict[str, SplitCount] = {}
    for split, labels_name in SPLIT_LABELS.items():
        data = tfds.as_numpy(builder.as_dataset(split=split, batch_size=-1, shuffle_files=False))
        images = np.asarray(data["image"], dtype=np.uint8).reshape(-1, 28, 28)
        labels = np.asarray(data["label"]).astype(np.uint8)
        histogram = np.bincount(labels, minlength=10).tolist()
        # a labels file past its 8-byte IDX header (magic number, count): its bytes are the pinned ones
        raw_labels = np.frombuffer(gzip.decompress((idx_dir / labels_name).read_bytes()), np.uint8, offset=8)
        if np.bincount(raw_labels, minlength=10).tolist() != histogram:
            raise PipelineError(
                f"{labels_name}: TFDS's {split} split disagrees with these pinned labels; nothing was written;"
                " install the locked tensorflow-datasets (uv sync --locked), then run 'download' again"
            )
        for name, array in zip(paths.split_files(split), (images, labels), strict=True):
            storage.save_array(out / name, array)
        splits[split] = SplitCount(count=len(labels), label_histogram=histogram)
    return splits


def download(params: Params, out_dir: str | Path = paths.RAW.path, mirror: str | None = None) -> Manifest:
    """Run the download stage; the manifest it wrote."""
    import tensorflow_datasets as tfds

    dataset = params.data.dataset
    mirror_dir = mirror_from_env(mirror)
    if mirror_dir is None:
        _check_network(dataset)
    else:
        for pinned in PINNED[dataset]:
            verify_file(mirror_dir / pinned.name, pinned)
        log.info("using the mirror %s (checksums verified)", mirror_dir)
    started = time.perf_counter()
    with atomic.atomic_dir(out_dir) as tmp:
        # TFDS's own TFRecords are not kept: their bytes differ from run to run (the order in which
        # protobuf writes each example's feature map), and the arrays hold the same examples.
        builder = _prepare_with_tfds(dataset, tmp / "tfds-work", mirror_dir)
        _keep_originals(dataset, mirror_dir, tmp / "tfds-work" / "downloads", tmp / paths.IDX)
        splits = _export_arrays(builder, tmp / paths.IDX, tmp / paths.ARRAYS)
        shutil.rmtree(tmp / "tfds-work")
        manifest = Manifest(
            dataset=dataset,
            tfds_version=tfds.__version__,
            builder_version=str(builder.info.version),
            files={p.name: SourceFile(sha256=p.sha256, size=p.size, url=p.url) for p in PINNED[dataset]},
            splits=splits,
        )
        storage.write_model(tmp / paths.MANIFEST, manifest)
    log.info("%s prepared in %.1f s", dataset, time.perf_counter() - started)
    return manifest


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline download` (honours MNIST_MIRROR)."""
    if Path(args.out) != Path(paths.RAW.path):  # its own folder, else one it made (holds its manifest)
        atomic.claim(args.out, option="--out", command="download", signature='"tfds_version"', inside=paths.MANIFEST)
    download(load(args.params), args.out)
