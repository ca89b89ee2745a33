"""The JAX core: the tutorial's MLP (model.py), the training loops behind the variants (loops/) and
the per-epoch progress lines (progress.py). It knows nothing of stages, files or orchestrators."""
