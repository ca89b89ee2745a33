"""The model file: the MLP's arrays as safetensors (no pickle), `layer{i}.weight` (out, in) and `layer{i}.bias`
(out,), and its typed metadata as one key-sorted JSON string under one key (safetensors writes several metadata
keys in hash order, which would make two identical models differ in bytes)."""

import json
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from ..foundation.dataset_facts import IMAGE_PIXELS, NUM_CLASSES
from ..foundation.errors import missing, remake
from . import atomic
from .json_model import JsonModel

METADATA_KEY = "mnist_jax_pipeline"
HostParams = list[tuple[np.ndarray, np.ndarray]]  # (weight, bias) per layer, on the host


class ModelMetadata(JsonModel):
    variant: str
    layer_sizes: list[int]
    params_sha256: str  # digest of the model and train parameters that made it
    jax_version: str


def layer_sizes_of(params: HostParams) -> list[int]:
    """[in, hidden..., out] read off the weight shapes."""
    return [int(params[0][0].shape[1])] + [int(w.shape[0]) for w, _ in params]


def save_model(path: str | Path, params: HostParams, metadata: ModelMetadata) -> None:
    from safetensors.numpy import save

    tensors = {}
    for i, (w, b) in enumerate(params):
        tensors[f"layer{i}.weight"], tensors[f"layer{i}.bias"] = np.ascontiguousarray(w), np.ascontiguousarray(b)
    blob = save(tensors, metadata={METADATA_KEY: json.dumps(metadata.model_dump(mode="json"), sort_keys=True)})
    with atomic.atomic_file(path) as tmp:
        tmp.write_bytes(blob)


def load_model(path: str | Path, made_by: str) -> tuple[HostParams, ModelMetadata]:
    """Read a model file: its metadata, and float32 layers that chain up from the pixels to the classes as the
    metadata says, with finite weights."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_file():
        raise missing(path, made_by)

    try:
        with safe_open(str(path), framework="numpy") as handle:
            stored = (handle.metadata() or {}).get(METADATA_KEY)
            named = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
    except (SafetensorError, OSError, ValueError) as err:
        raise remake(path, f"corrupt or truncated model ({err})", made_by) from err
    if stored is None:
        raise remake(path, f"no '{METADATA_KEY}' metadata", made_by)
    try:
        metadata = ModelMetadata.model_validate_json(stored)
        params = [(named[f"layer{i}.weight"], named[f"layer{i}.bias"]) for i in range(len(named) // 2)]
    except ValidationError as err:
        raise remake(path, f"corrupt model metadata ({err.errors()[0]['msg'].lower()})", made_by) from err
    except KeyError as err:
        raise remake(path, f"missing array {err}", made_by) from err
    if not params or len(named) != 2 * len(params):
        raise remake(path, f"{len(named)} arrays, expected weight/bias pairs", made_by)
    for i, (w, b) in enumerate(params):
        if w.ndim != 2 or b.shape != (w.shape[0],) or w.dtype != np.float32 or b.dtype != np.float32:
            raise remake(path, f"layer {i} has shapes {w.shape}/{b.shape} ({w.dtype}/{b.dtype})", made_by)
    sizes = layer_sizes_of(params)
    if any(w.shape[1] != sizes[i] for i, (w, _) in enumerate(params)):
        raise remake(path, f"layer shapes {[w.shape for w, _ in params]} do not chain up", made_by)
    if sizes != metadata.layer_sizes:
        raise remake(path, f"arrays of layer sizes {sizes}, metadata says {metadata.layer_sizes}", made_by)
    if sizes[0] != IMAGE_PIXELS or sizes[-1] != NUM_CLASSES:
        raise remake(path, f"layer sizes {sizes}: the MLP maps {IMAGE_PIXELS} pixels to {NUM_CLASSES} classes", made_by)
    if not all(np.isfinite(w).all() and np.isfinite(b).all() for w, b in params):
        raise remake(path, "it holds NaN or infinite weights", made_by)
    return params, metadata
