"""Numerics every backend keeps run after run: deterministic XLA kernels and full-precision float32 matmuls.

On a GPU, XLA's autotuning may pick another kernel in each process and scatters may use atomics; the
flag below makes XLA use deterministic kernels only. Matrix products run at full float32 precision
(not TF32 on an NVIDIA GPU, not bfloat16 passes on a TPU).
"""

from __future__ import annotations

import os
import sys

DETERMINISTIC_XLA_FLAGS = ("--xla_gpu_exclude_nondeterministic_ops=true",)
MATMUL_PRECISION = "highest"


def set_numerics() -> None:
    """Set the deterministic XLA flags (kept where XLA_FLAGS names them) and the matmul precision, before JAX
    starts a backend."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    named = {flag.split("=", 1)[0] for flag in flags}
    flags += [flag for flag in DETERMINISTIC_XLA_FLAGS if flag.split("=", 1)[0] not in named]
    os.environ["XLA_FLAGS"] = " ".join(flags)
    os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = MATMUL_PRECISION
    jax = sys.modules.get("jax")
    if jax is not None:  # imported already: it has read its environment
        jax.config.update("jax_default_matmul_precision", MATMUL_PRECISION)


def numerics() -> dict[str, str]:
    """The XLA flags and matmul precision in force in this process."""
    import jax

    return {
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "matmul_precision": str(getattr(jax.config, "jax_default_matmul_precision", None) or "default"),
    }
