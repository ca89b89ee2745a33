"""Dataset acquisition (TFDS + pinned IDX files), IDX parsing and preprocessing."""
