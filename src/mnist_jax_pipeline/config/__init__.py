"""The parameter files: params.yaml's schema and validation (params.py), the named presets applied
to it (presets.py) and the sweeps' points and queue (sweeps.py)."""
