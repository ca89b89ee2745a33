"""Numerics every backend keeps run after run: deterministic XLA kernels (XLA's GPU autotuning and atomics
could give other bits in each process) and full float32 matmuls (not TF32, not bfloat16 passes)."""

import os
import sys

DETERMINISTIC_XLA_FLAGS = ("--xla_gpu_exclude_nondeterministic_ops=true",)
MATMUL_PRECISION = "highest"


def set_numerics() -> None:
    """Set them before JAX starts a backend; a flag XLA_FLAGS names already is kept as it is."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    named = {flag.split("=", 1)[0] for flag in flags}
    flags += [flag for flag in DETERMINISTIC_XLA_FLAGS if flag.split("=", 1)[0] not in named]
    os.environ["XLA_FLAGS"] = " ".join(flags)
    os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = MATMUL_PRECISION
    if "jax" in sys.modules:  # imported already: it has read its environment
        sys.modules["jax"].config.update("jax_default_matmul_precision", MATMUL_PRECISION)


def numerics() -> dict[str, str]:
    """The XLA flags and matmul precision in force in this process."""
    import jax

    precision = getattr(jax.config, "jax_default_matmul_precision", None) or "default"
    return {"xla_flags": os.environ.get("XLA_FLAGS", ""), "matmul_precision": str(precision)}
