import numpy as np
import pytest

from mnist_jax_pipeline.artefacts.dataset import load_split, read_manifest
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.stages.preprocess import deskew, preprocess, split_indices


def test_defaults_reproduce_the_tutorial_input(tiny_raw, make_params):
    out = tiny_raw.parent / "processed"
    stats = preprocess(make_params().preprocess, tiny_raw, out)
    images = np.load(out / "train_images.npy", allow_pickle=False)
    raw = np.load(tiny_raw / "arrays/train_images.npy")
    assert images.dtype == np.float32 and images.shape == (600, 784)
    assert np.array_equal(images, raw.reshape(600, 784).astype(np.float32))
    assert stats.splits["train"].count == 600 and stats.splits["val"].count == 0
    assert stats.splits["test"].label_histogram == [20] * 10
    assert stats.splits["train"].pixels.max == 250.0
    assert np.load(out / "train_labels.npy").dtype == np.int32


def test_normalisation_options(tiny_raw, make_params):
    out = tiny_raw.parent / "unit"
    stats = preprocess(make_params(preprocess__normalize="unit").preprocess, tiny_raw, out)
    raw = np.load(tiny_raw / "arrays/train_images.npy").reshape(600, 784)
    np.testing.assert_allclose(np.load(out / "train_images.npy"), raw / np.float32(255), rtol=1e-6)
    assert stats.splits["train"].pixels.max == 250 / 255
    out = tiny_raw.parent / "std"
    preprocess(make_params(preprocess__normalize="standardize").preprocess, tiny_raw, out)
    train = np.load(out / "train_images.npy")
    assert abs(float(train.mean())) < 1e-3 and abs(float(train.std()) - 1) < 1e-3


def moments(image: np.ndarray) -> tuple[float, float, float]:
    """Centre of mass (row, column) and the row-column covariance of one image's pixel mass."""
    rows, cols = np.indices(image.shape)
    mass = image.astype(np.float64)
    r0, c0 = (mass * rows).sum() / mass.sum(), (mass * cols).sum() / mass.sum()
    return r0, c0, (mass * (rows - r0) * (cols - c0)).sum() / mass.sum()


def test_deskew_stands_a_slanted_stroke_upright_at_the_centre():
    image = np.zeros((28, 28), np.uint8)
    for row in range(4, 22):  # a "/" stroke, off centre: one column left per row down
        image[row, 20 - (row - 4) // 2 : 22 - (row - 4) // 2] = 255
    r0, c0, cov = moments(image)
    assert cov < -5 and abs(c0 - 13.5) > 2
    straight = deskew(image[None])[0]
    r1, c1, cov1 = moments(straight)
    assert abs(cov1) < 0.05 * abs(cov) and abs(r1 - 13.5) < 0.1 and abs(c1 - 13.5) < 0.1
    assert straight.dtype == np.uint8 and abs(int(straight.sum()) - int(image.sum())) < 0.02 * int(image.sum())


def test_deskew_leaves_blank_and_single_row_images_and_works_in_chunks(monkeypatch):
    import mnist_jax_pipeline.stages.preprocess as module

    blank, row = np.zeros((28, 28), np.uint8), np.zeros((28, 28), np.uint8)
    row[5, 3:9] = 200
    rng = np.random.default_rng(0)
    images = np.concatenate([np.stack([blank, row]), rng.integers(0, 256, (9, 28, 28), dtype=np.uint8)])
    whole = deskew(images)
    assert np.array_equal(whole[:2], images[:2])
    monkeypatch.setattr(module, "DESKEW_CHUNK", 4)  # three chunks: the same bytes
    assert np.array_equal(deskew(images), whole)


def test_deskewing_applies_to_every_split_before_normalisation(tiny_raw, make_params):
    out = tiny_raw.parent / "deskewed"
    config = make_params(
        preprocess__deskew=True, preprocess__validation_fraction=0.25, preprocess__normalize="unit"
    ).preprocess
    preprocess(config, tiny_raw, out)
    train_idx, val_idx = split_indices(600, config)
    raw_train = np.load(tiny_raw / "arrays/train_images.npy")
    raw_test = np.load(tiny_raw / "arrays/test_images.npy")
    expected = {"train": deskew(raw_train)[train_idx], "val": deskew(raw_train)[val_idx], "test": deskew(raw_test)}
    for split, images in expected.items():
        stored = np.load(out / f"{split}_images.npy")
        np.testing.assert_array_equal(stored, images.reshape(len(images), 784).astype(np.float32) / np.float32(255))
    assert not np.array_equal(expected["test"], raw_test)  # the tiny digits are slanted: deskewing changed them


def test_unflattened_images(tiny_raw, make_params):
    out = tiny_raw.parent / "p"
    preprocess(make_params(preprocess__flatten=False).preprocess, tiny_raw, out)
    assert np.load(out / "test_images.npy").shape == (200, 28, 28)
    images, _ = load_split(out, "test")
    assert images.shape == (200, 784)


def test_validation_split_and_subsampling(tiny_raw, make_params):
    config = make_params(preprocess__validation_fraction=0.25, preprocess__max_train_examples=400).preprocess
    train, val = split_indices(600, config)
    assert len(train) == 300 and len(val) == 100
    assert not set(train) & set(val)
    assert np.all(np.diff(train) > 0)
    stats = preprocess(config, tiny_raw, tiny_raw.parent / "p")
    assert stats.splits["train"].count == 300 and stats.splits["val"].count == 100


def test_corrupt_raw_array_names_the_stage(tiny_raw, make_params):
    (tiny_raw / "arrays/train_images.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(PipelineError, match=r"train_images.npy: corrupt or truncated.*re-run the 'download' stage"):
        preprocess(make_params().preprocess, tiny_raw, tiny_raw.parent / "p")
    assert not (tiny_raw.parent / "p").exists()


@pytest.mark.real_data
def test_real_preprocess_counts(tmp_path, make_params, real_raw):
    manifest = read_manifest(real_raw)
    stats = preprocess(make_params().preprocess, real_raw, tmp_path / "processed")
    assert stats.splits["train"].count == 60_000 and stats.splits["test"].count == 10_000
    assert stats.splits["train"].label_histogram == manifest.splits["train"].label_histogram
    assert stats.splits["train"].pixels.max == 255.0


def test_data_of_another_dataset_is_refused(tiny_raw, tmp_path):
    import argparse

    import yaml

    from conftest import base_params
    from mnist_jax_pipeline.stages.preprocess import main as preprocess_main

    raw = base_params()
    raw["data"]["dataset"] = "fashion_mnist"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    args = argparse.Namespace(params=str(tmp_path / "params.yaml"), raw=str(tiny_raw), out=str(tmp_path / "out"))
    with pytest.raises(PipelineError, match="holds mnist, but data.dataset in .* is fashion_mnist; re-run"):
        preprocess_main(args)
    assert not (tmp_path / "out").exists()
