"""The JAX core: the tutorial's MLP, the training loops behind the variants, their progress lines."""
