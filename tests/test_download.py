import gzip
import socket
from pathlib import Path

import numpy as np
import pytest

from conftest import unavailable
from mnist_jax_pipeline.artefacts.dataset import read_manifest
from mnist_jax_pipeline.artefacts.provenance import file_sha256
from mnist_jax_pipeline.foundation.dataset_facts import SPLIT_SIZES
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.stages.download import stage as dl
from mnist_jax_pipeline.stages.download.datasets import PINNED


@pytest.mark.parametrize("dataset", ["mnist", "fashion_mnist"])
def test_pinned_checksums_equal_the_ones_tfds_pins(dataset):
    import tensorflow_datasets as tfds

    table = Path(tfds.__file__).parent / "url_checksums" / f"{dataset}.txt"
    tfds_pins = {}
    for line in table.read_text().splitlines():
        url, size, sha, _ = line.split("\t")
        tfds_pins[url] = (int(size), sha)
    assert {p.url: (p.size, p.sha256) for p in PINNED[dataset]} == tfds_pins


def fake_mirror(folder: Path) -> Path:
    folder.mkdir()
    for pinned in PINNED["mnist"]:
        (folder / pinned.name).write_bytes(b"not the real file")
    return folder


def test_mirror_with_a_wrong_checksum_fails_and_writes_nothing(tmp_path, make_params):
    mirror = fake_mirror(tmp_path / "mirror")
    out = tmp_path / "data" / "raw"
    with pytest.raises(PipelineError) as err:
        dl.download(make_params(), out_dir=out, mirror=str(mirror))
    message = str(err.value)
    assert "train-images-idx3-ubyte.gz: SHA-256" in message and "does not match the pinned" in message
    assert "\n" not in message
    assert not out.exists()
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


def test_earlier_good_download_stays_intact(tmp_path, make_params):
    out = tmp_path / "raw"
    out.mkdir()
    (out / "manifest.json").write_text("{}")
    with pytest.raises(PipelineError):
        dl.download(make_params(), out_dir=out, mirror=str(fake_mirror(tmp_path / "mirror")))
    assert (out / "manifest.json").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mirror", "raw"]


def test_mirror_that_is_not_a_folder(tmp_path, make_params):
    with pytest.raises(PipelineError, match="MNIST_MIRROR=.*not a folder"):
        dl.download(make_params(), out_dir=tmp_path / "raw", mirror=str(tmp_path / "nope"))


def test_offline_without_mirror_fails_fast_naming_the_setting(tmp_path, make_params, monkeypatch):
    attempts = []

    def offline(address, timeout=None, *args, **kwargs):
        attempts.append(timeout)
        raise OSError("Network is unreachable")

    monkeypatch.delenv("MNIST_MIRROR", raising=False)
    monkeypatch.setattr(dl, "_prepare_with_tfds", lambda *a, **k: pytest.fail("TFDS was asked to download"))
    monkeypatch.setattr(socket, "create_connection", offline)
    with pytest.raises(PipelineError, match="MNIST_MIRROR") as err:
        dl.download(make_params(), out_dir=tmp_path / "raw")
    assert attempts == [dl.CONNECT_TIMEOUT_S], "one connection attempt, bounded by its timeout, no retries"
    assert "cannot reach storage.googleapis.com" in str(err.value)
    assert not (tmp_path / "raw").exists()


@pytest.mark.real_data
def test_real_download_through_tfds(real_raw, mirror):
    out = real_raw
    manifest = read_manifest(out)
    for split in ("train", "test"):
        assert manifest.splits[split].count == SPLIT_SIZES["mnist"][split]
    for pinned in PINNED["mnist"]:
        assert file_sha256(out / "idx" / pinned.name) == pinned.sha256
    labels = np.frombuffer(gzip.decompress((out / "idx/train-labels-idx1-ubyte.gz").read_bytes()), np.uint8, offset=8)
    assert manifest.splits["train"].label_histogram == np.bincount(labels, minlength=10).tolist()
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted(
        ["manifest.json"]
        + [f"idx/{p.name}" for p in PINNED["mnist"]]
        + [f"arrays/{split}_{kind}.npy" for split in ("train", "test") for kind in ("images", "labels")]
    )
    assert str(mirror) not in (out / "manifest.json").read_text()


@pytest.mark.real_data
def test_two_downloads_are_byte_identical(real_raw, mirror, make_params, tmp_path):
    again = tmp_path / "raw"
    dl.download(make_params(), again, str(mirror))
    files = sorted(p.relative_to(real_raw) for p in real_raw.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert all(file_sha256(real_raw / f) == file_sha256(again / f) for f in files)


@pytest.mark.real_data
def test_labels_that_disagree_with_the_pinned_file_write_nothing(mirror, make_params, tmp_path, monkeypatch):
    swapped = {"train": "t10k-labels-idx1-ubyte.gz", "test": "train-labels-idx1-ubyte.gz"}
    monkeypatch.setattr(dl, "SPLIT_LABELS", swapped)
    out = tmp_path / "raw"
    with pytest.raises(PipelineError) as err:
        dl.download(make_params(), out, str(mirror))
    message = str(err.value)
    assert message.startswith("t10k-labels-idx1-ubyte.gz: TFDS's train split disagrees") and "\n" not in message
    assert "nothing was written" in message and "uv sync --locked" in message and "delete" not in message
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_plain_http_sources_are_refused_without_a_mirror(tmp_path, make_params, monkeypatch):
    monkeypatch.delenv("MNIST_MIRROR", raising=False)
    with pytest.raises(PipelineError, match="plain HTTP.*set MNIST_MIRROR"):
        dl.download(make_params(data__dataset="fashion_mnist"), out_dir=tmp_path / "raw")
    assert not (tmp_path / "raw").exists()


def test_every_mnist_url_is_https():
    assert all(p.url.startswith("https://") for p in PINNED["mnist"])


@pytest.mark.real_data
def test_fashion_mnist_from_its_mirror(tmp_path, make_params, mirror):
    fashion = mirror.parent / "fashion_mnist"
    if not fashion.is_dir():
        unavailable(f"no Fashion-MNIST mirror beside {mirror}")
    manifest = dl.download(make_params(data__dataset="fashion_mnist"), tmp_path / "raw", str(fashion))
    assert manifest.dataset == "fashion_mnist"
    assert manifest.splits["train"].count == 60_000 and manifest.splits["test"].count == 10_000
    assert manifest.splits["test"].label_histogram == [1000] * 10
