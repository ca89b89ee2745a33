"""The same model bytes under Python 3.11 and 3.12: the lock pins one version of every package for every
Python (pyproject's [tool.uv] constraints), so `jit` trained on the same data must give the same file.
And the same bytes again when XLA's executables come from JAX's compilation cache (the test session's).

Python 3.11 is this test's own interpreter (the locked environment); Python 3.12 gets a virtual
environment holding exactly the lock's pins of what training imports (requirements/runtime.txt, hashes
checked), with the checkout's code on PYTHONPATH. Both train in a process of their own on this machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, compilation_cache, compiling_afresh, write_params
from pythons import find_python, locked_requirements, make_venv

# what `mnist-pipeline train` imports, by name in the lock (the rest follows from uv.lock)
TRAINING_PACKAGES = [
    "jax",
    "jaxlib",
    "numpy",
    "optax",
    "safetensors",
    "pydantic",
    "ruamel.yaml",
    "pyyaml",
    "filelock",
    "psutil",
    "tqdm",
]

TRAIN = """
import json, platform, sys
from argparse import Namespace
from importlib import metadata
from mnist_jax_pipeline.stages import train
from mnist_jax_pipeline.foundation.runtime import cpu_model
from mnist_jax_pipeline.foundation.backend import set_numerics
set_numerics()
train.main(Namespace(params=sys.argv[1], variant="jit", processed=sys.argv[2], root=sys.argv[3]))
import jax
print(json.dumps({"python": platform.python_version(), "jax": jax.__version__, "jaxlib": metadata.version("jaxlib"),
                  "numpy": metadata.version("numpy"), "cpu": cpu_model(), "backend": jax.default_backend()}))
"""


@pytest.fixture(scope="module")
def python312(tmp_path_factory) -> Path:
    """Python 3.12 with the lock's versions of the training packages."""
    folder = tmp_path_factory.mktemp("py312")
    requirements = folder / "requirements.txt"
    requirements.write_text(locked_requirements(TRAINING_PACKAGES), encoding="utf-8")
    return make_venv(folder / "venv", find_python("3.12"), "--no-deps", "--require-hashes", "-r", str(requirements))


def train_jit(
    python: str | Path, root: Path, params: Path, processed: Path, cache: Path | None = None
) -> tuple[str, dict[str, str]]:
    """Train `jit` with `python` under `root` (XLA compiling afresh, or with the compilation cache `cache`):
    the model file's sha256 and what ran it."""
    env = compiling_afresh({**os.environ, "PYTHONPATH": str(ROOT / "src"), "JAX_PLATFORMS": "cpu"})
    if cache is not None:
        env |= compilation_cache(cache)
    done = subprocess.run(
        [str(python), "-c", TRAIN, str(params), str(processed), str(root)],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, f"{python}: training failed:\n{done.stderr[-3000:]}"
    model = root / "models" / "jit.safetensors"
    return hashlib.sha256(model.read_bytes()).hexdigest(), json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_jit_gives_the_same_model_bytes_on_python_311_and_312(tmp_path, make_params, tiny_processed, python312):
    params = write_params(
        tmp_path / "params.yaml", make_params(model__layer_sizes=[784, 64, 64, 10], train__epochs=2).to_dict()
    )
    runs = {}
    for name, python in (("3.11", sys.executable), ("3.12", python312)):
        root = tmp_path / name
        root.mkdir()
        runs[name] = train_jit(python, root, params, tiny_processed)
    (digest_311, ran_311), (digest_312, ran_312) = runs["3.11"], runs["3.12"]
    assert ran_311["python"].startswith("3.11.") and ran_312["python"].startswith("3.12.")
    assert {k: ran_311[k] for k in ("jax", "jaxlib", "numpy")} == {k: ran_312[k] for k in ("jax", "jaxlib", "numpy")}
    assert digest_311 == digest_312, f"other model bytes on 3.11 ({ran_311}) and 3.12 ({ran_312})"


@pytest.mark.slow
def test_jit_gives_the_same_model_bytes_with_executables_from_the_compilation_cache(
    tmp_path, make_params, tiny_processed
):
    params = write_params(
        tmp_path / "params.yaml", make_params(model__layer_sizes=[784, 64, 64, 10], train__epochs=2).to_dict()
    )
    cache = tmp_path / "cache"
    digests = {}
    for name, cached in (("compiled afresh", None), ("compiled, cache written", cache), ("read from cache", cache)):
        root = tmp_path / name.replace(" ", "_").replace(",", "")
        root.mkdir()
        digests[name], _ = train_jit(sys.executable, root, params, tiny_processed, cached)
        if cached is not None:
            assert any(cache.glob("*-cache*")), f"{name}: JAX wrote no cache entry in {cache}"
    assert len(set(digests.values())) == 1, digests
