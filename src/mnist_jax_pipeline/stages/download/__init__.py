"""The download stage: the dataset through TFDS from the pinned IDX files."""
