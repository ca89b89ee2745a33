"""The parameter files: params.yaml, its presets and its sweeps."""
