"""What every other package stands on; it imports nothing else of the package."""

import contextlib
import time
from importlib import metadata

LOADED_NS = time.time_ns()  # when the package began to load: a code file changed after it may not be what ran
NOT_INSTALLED = "not installed"  # a record's version of a package it could not find
PACKAGES = "jax jaxlib numpy optax safetensors tensorflow-datasets matplotlib mnist-jax-pipeline snakemake dvc"


def package_version(name: str) -> str | None:
    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(name)
    return None


def versions() -> dict[str, str]:
    """The installed versions of the packages a result depends on (PACKAGES), from their metadata."""
    return {name: package_version(name) or NOT_INSTALLED for name in PACKAGES.split()}
