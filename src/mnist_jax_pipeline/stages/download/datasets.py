"""The supported datasets' original IDX files, pinned by size and SHA-256: the checksums TFDS pins in
`tensorflow_datasets/url_checksums/<name>.txt`, so a mirror is verified before TFDS verifies it again."""

from typing import NamedTuple


class PinnedFile(NamedTuple):
    name: str
    url: str
    size: int
    sha256: str


# train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz
FILE_NAMES = tuple(f"{split}-{kind}-ubyte.gz" for split in ("train", "t10k") for kind in ("images-idx3", "labels-idx1"))
SPLIT_LABELS = {"train": FILE_NAMES[1], "test": FILE_NAMES[3]}
# per dataset: where TFDS downloads it from, then each file's (size, SHA-256) in FILE_NAMES order
_SOURCES = {
    "mnist": (
        "https://storage.googleapis.com/cvdf-datasets/mnist/",
        (9912422, "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"),
        (28881, "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"),
        (1648877, "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"),
        (4542, "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"),
    ),
    "fashion_mnist": (  # TFDS pins it at a plain-HTTP address; the SHA-256 check makes it safe
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        (26421880, "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84"),
        (29515, "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845"),
        (4422102, "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073"),
        (5148, "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5"),
    ),
}
PINNED = {
    dataset: tuple(PinnedFile(name, base + name, *pin) for name, pin in zip(FILE_NAMES, pins, strict=True))
    for dataset, (base, *pins) in _SOURCES.items()
}
