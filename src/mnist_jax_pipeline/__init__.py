"""mnist-jax-pipeline: a reproducible, cached MNIST pipeline around the classic JAX MLP."""

import time

__version__ = "0.1.0"
LOADED_NS = time.time_ns()  # when the package began to load: a code file changed after it may not be what ran
