"""The download stage: the dataset through TFDS from the pinned IDX files (stage.py), the datasets'
names and checksums (datasets.py) and the IDX format's parser (idx.py)."""
