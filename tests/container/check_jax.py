"""Run inside an image (or a venv): its JAX build imports and, for a GPU build, its CUDA plugin matches
jaxlib, loads, and without a GPU JAX falls back to the CPU with at most one warning line and no traceback
(a TPU build: it falls back without a traceback; libtpu's own lines are counted, not refused).

    python check_jax.py TARGET      (cpu, cuda12, cuda13 or tpu; the Dockerfile's JAX_EXTRA)

Prints one line saying what it found; exits 1 with one line naming what is wrong.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from importlib import metadata

STAGE_START = """
from mnist_jax_pipeline.foundation import backend, console
console.configure("check_jax")  # mnist-pipeline's logging, as every stage sets it
backend.start()  # as the JAX stages start JAX
import jax
print(jax.default_backend())
"""


def fail(message: str) -> None:
    print(f"error: {message}")
    sys.exit(1)


def main(target: str) -> None:
    jaxlib = metadata.version("jaxlib")
    found = [f"jax {metadata.version('jax')}", f"jaxlib {jaxlib}"]
    if target.startswith("cuda"):
        plugin = f"jax-{target}-plugin"
        try:
            version = metadata.version(plugin)
        except metadata.PackageNotFoundError:
            fail(f"{plugin} is not installed in the {target} image")
        if version != jaxlib:
            fail(f"{plugin} {version} does not match jaxlib {jaxlib}")
        importlib.import_module(f"jax_plugins.xla_{target}")  # the plugin's shared library loads
        found.append(f"{plugin} {version} (loads)")
    # A fresh process that starts JAX as a stage does (mnist-pipeline's logging, then backend.start()):
    # on a machine without the accelerator JAX must fall back to the CPU, saying so in one line.
    done = subprocess.run([sys.executable, "-c", STAGE_START], capture_output=True, text=True, timeout=300)
    backend = done.stdout.strip()
    said = [line for line in done.stderr.splitlines() if line.strip()]
    if done.returncode != 0 or "Traceback" in done.stderr:
        fail(f"JAX does not start: {(said or ['no output'])[-1]}")
    if target == "tpu":  # libtpu itself writes its search for a TPU to stderr, outside Python's logging
        found.append(f"backend {backend} (libtpu wrote {len(said)} lines of its own)")
    elif len(said) > 1:
        fail(f"JAX's start prints {len(said)} lines, not at most one: {' | '.join(said)[:300]}")
    else:
        found.append(f"backend {backend}" + (f" (said: {said[0][:160]})" if said else ""))
    print(", ".join(found))


if __name__ == "__main__":
    main(sys.argv[1])
