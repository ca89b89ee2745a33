"""Load params.yaml, validate it against the JSON schema, and freeze it into dataclasses."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .errors import PipelineError

DEFAULT_PARAMS = Path("params.yaml")
NUM_CLASSES = 10
IMAGE_PIXELS = 28 * 28


@dataclass(frozen=True)
class DataConfig:
    dataset: str


@dataclass(frozen=True)
class PreprocessConfig:
    normalize: str
    flatten: bool
    validation_fraction: float
    max_train_examples: int
    seed: int


@dataclass(frozen=True)
class ModelConfig:
    layer_sizes: tuple[int, ...]
    init_scale: float
    seed: int


@dataclass(frozen=True)
class TrainConfig:
    optimizer: str
    step_size: float
    momentum: float
    schedule: str
    batch_size: int
    epochs: int
    shuffle: bool
    shuffle_seed: int


@dataclass(frozen=True)
class ProfileConfig:
    top_allocations: int


@dataclass(frozen=True)
class Params:
    data: DataConfig
    preprocess: PreprocessConfig
    model: ModelConfig
    train: TrainConfig
    variants: tuple[str, ...]
    profile: ProfileConfig

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def digest(self, *sections: str) -> str:
        """SHA-256 of the canonical JSON of the given top-level sections (all when none are given)."""
        values = self.to_dict()
        chosen = {key: values[key] for key in sections} if sections else values
        canonical = json.dumps(chosen, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def schema() -> dict[str, Any]:
    """The JSON schema of params.yaml (workflow/schemas/params.schema.yaml)."""
    text = resources.files(__package__).joinpath("params.schema.yaml").read_text()
    return yaml.safe_load(text)


def _where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(part) for part in error.absolute_path) or "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    """One line: the dotted key at fault and what is allowed there."""
    where = _where(error)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        key = f"{where}.{extra[0]}" if where != "(top level)" else extra[0]
        return f"unknown key '{key}'; allowed keys here: {', '.join(allowed)}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    if error.validator == "enum":
        allowed = ", ".join(json.dumps(v) for v in error.validator_value)
        return f"{where}: {json.dumps(error.instance)} is not allowed; use one of {allowed}"
    if error.validator == "type":
        return f"{where}: {json.dumps(error.instance)} has the wrong type; expected {error.validator_value}"
    return f"{where}: {error.message}"


def validate(raw: Any, source: str = "params.yaml") -> Params:
    """Validate raw parameters; raise PipelineError with one line naming the key."""
    if not isinstance(raw, dict):
        raise PipelineError(f"{source}: expected a mapping of stage names to parameters")
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(raw), key=lambda e: (list(e.absolute_path), e.validator))
    if errors:
        deepest = max(errors, key=lambda e: len(e.absolute_path))
        raise PipelineError(f"{source}: {_describe(deepest)}")
    params = Params(
        data=DataConfig(**raw["data"]),
        preprocess=PreprocessConfig(**raw["preprocess"]),
        model=ModelConfig(**{**raw["model"], "layer_sizes": tuple(raw["model"]["layer_sizes"])}),
        train=TrainConfig(**raw["train"]),
        variants=tuple(raw["variants"]),
        profile=ProfileConfig(**raw["profile"]),
    )
    if "jit" not in params.variants:
        raise PipelineError(f"{source}: variants must include jit (the profile stage profiles the jit model)")
    sizes = params.model.layer_sizes
    if sizes[0] != IMAGE_PIXELS:
        raise PipelineError(
            f"{source}: model.layer_sizes must start at {IMAGE_PIXELS} (28x28 pixels), not {sizes[0]}"
        )
    if sizes[-1] != NUM_CLASSES:
        raise PipelineError(
            f"{source}: model.layer_sizes must end at {NUM_CLASSES} (the class count), not {sizes[-1]}"
        )
    return params


def load(path: str | Path = DEFAULT_PARAMS) -> Params:
    """Read and validate a params file."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError as err:
        raise PipelineError(f"{path}: not found; run from the project root or pass --params") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark else ""
        raise PipelineError(f"{path}: not valid YAML{line}; fix the syntax") from err
    return validate(raw, source=str(path))
