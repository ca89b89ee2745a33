"""What the code knows about the datasets before reading them: the class count, the pixels of an
image, and the examples per split. Every layer reads these, so they live below all of them."""

NUM_CLASSES = 10
IMAGE_PIXELS = 28 * 28

# Examples per split of each dataset (the parameter checks size the splits from them).
SPLIT_SIZES: dict[str, dict[str, int]] = {
    "mnist": {"train": 60_000, "test": 10_000},
    "fashion_mnist": {"train": 60_000, "test": 10_000},
}
