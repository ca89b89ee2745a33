import numpy as np
import pytest

from mnist_jax_pipeline.artefacts.dataset import load_split, read_manifest
from mnist_jax_pipeline.data.preprocess import preprocess, split_indices
from mnist_jax_pipeline.errors import PipelineError


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
    from mnist_jax_pipeline.data.preprocess import main as preprocess_main

    raw = base_params()
    raw["data"]["dataset"] = "fashion_mnist"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    args = argparse.Namespace(params=str(tmp_path / "params.yaml"), raw=str(tiny_raw), out=str(tmp_path / "out"))
    with pytest.raises(PipelineError, match="holds mnist, but data.dataset in .* is fashion_mnist; re-run"):
        preprocess_main(args)
    assert not (tmp_path / "out").exists()
