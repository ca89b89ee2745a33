"""mnist-jax-pipeline: a reproducible, cached MNIST pipeline around the classic JAX MLP."""

__version__ = "0.1.0"


def entry() -> None:
    """The console script: a stop that comes while the command's modules import is kept for the command."""
    from .foundation.stops import handle, keep

    handle(keep)
    from .cli import entry as run

    run()
