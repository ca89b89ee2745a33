"""Starting JAX alike in every stage: deterministic XLA kernels (XLA's GPU autotuning and atomics could give
other bits in each process), full float32 matmuls (not TF32, not bfloat16 passes), and one line for a
backend that cannot start."""

import logging
import os
import sys

from .errors import PipelineError, clip

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


class OneLinePluginError(logging.Filter):
    """A JAX backend plugin that cannot start (a CUDA build without a GPU) is one warning line, not a
    traceback: JAX runs on the CPU then."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            cause = str(record.exc_info[1]).strip().splitlines()[0][:200]
            record.msg, record.args = f"{record.getMessage()}: {cause}; JAX runs on the other backends (the CPU)", None
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def quiet_plugin_errors() -> None:
    bridge = logging.getLogger("jax._src.xla_bridge")
    if not any(isinstance(f, OneLinePluginError) for f in bridge.filters):
        bridge.addFilter(OneLinePluginError())


def start() -> None:
    """Start JAX's backend with the numerics set; a JAX_PLATFORMS that JAX cannot start is one line."""
    set_numerics()
    quiet_plugin_errors()
    import jax

    try:
        jax.devices()
    except (RuntimeError, AssertionError) as failure:  # JAX_PLATFORMS=cuda without a GPU: an AssertionError
        if not (setting := os.environ.get("JAX_PLATFORMS")):
            raise
        reason = str(failure).split(" (set JAX_PLATFORMS", 1)[0] or "no such device is visible"
        raise PipelineError(
            f"JAX_PLATFORMS={clip(setting)}: JAX cannot start that backend here ({clip(reason, 160)}); set"
            " JAX_PLATFORMS=cpu, or unset it to let JAX use what this machine has (a GPU needs the"
            " .[cuda12] extra, a TPU the .[tpu] extra)"
        ) from failure
