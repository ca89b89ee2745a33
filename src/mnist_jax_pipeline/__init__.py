"""mnist-jax-pipeline: a reproducible, cached MNIST pipeline around the classic JAX MLP."""

__version__ = "0.1.0"
