"""params.yaml: its one typed declaration, read as DVC reads it (YAML 1.2, so `1e-3` is a number for
both), checked in full; every refusal is one line naming the key. The JSON schema is written from it."""

import argparse
import functools
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..foundation import paths, variants
from ..foundation.dataset_facts import IMAGE_PIXELS, NUM_CLASSES, SPLIT_SIZES
from ..foundation.errors import PipelineError, clip, read_text

INT32_MAX = 2**31 - 1  # optax counts steps, and the scan loop epochs, in int32
MAX_PARAMETERS = 100_000_000  # 400 MB of float32 weights, before gradients and optimizer state
MAX_ACTIVATIONS = 2**29  # float32 elements of one batch's activations (2 GiB)
MAX_FILE_BYTES = 2**20  # a params.yaml, preset or sweep file holds a few KiB; /dev/zero is refused
MAX_VALUES = 10_000  # values of such a file, aliases expanded: a few hundred at most

Seed = Annotated[int, Field(ge=0, le=2**32 - 1, description="a PRNG seed, 0 to 2**32 - 1")]
PositiveInt = Annotated[int, Field(ge=1, le=INT32_MAX)]
Fraction = Annotated[float, Field(ge=0, lt=1)]
LayerSize = Annotated[int, Field(ge=1, le=16_384)]
VariantName = Literal[variants.names()]  # type: ignore[valid-type]


class Section(BaseModel):
    """Strict: an integer is an integer (not 1.0, not true), a number is finite, no unknown key."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class DataConfig(Section):
    dataset: Literal["mnist", "fashion_mnist"] = Field(description="TFDS name; both have pinned IDX files")


class PreprocessConfig(Section):
    deskew: bool = Field(description="shear each image upright about its centre of mass, before normalize")
    normalize: Literal["none", "unit", "standardize"]
    flatten: bool
    validation_fraction: Fraction
    max_train_examples: Annotated[int, Field(ge=0, le=INT32_MAX, description="0 keeps all")]
    seed: Seed


class ModelConfig(Section):
    layer_sizes: Annotated[tuple[LayerSize, ...], Field(strict=False, min_length=2, max_length=10)]
    init: Literal["normal", "he"] = Field(description="normal: init_scale * normal (the tutorial); he: He-normal")
    init_scale: Annotated[float, Field(gt=0, le=10, description="the normal init's scale")]
    output_init: Literal["same", "zeros"] = Field(description="zeros: the output layer starts at 0")
    seed: Seed

    @model_validator(mode="after")
    def _fits_the_data(self) -> Self:
        sizes, count = self.layer_sizes, parameter_count(self.layer_sizes)
        if sizes[0] != IMAGE_PIXELS:
            raise ValueError(f"model.layer_sizes starts at {sizes[0]}; start it at {IMAGE_PIXELS} (28x28 pixels)")
        if sizes[-1] != NUM_CLASSES:
            raise ValueError(f"model.layer_sizes ends at {sizes[-1]}; end it at {NUM_CLASSES} (the class count)")
        if count > MAX_PARAMETERS:
            raise ValueError(f"model.layer_sizes make {count:,} parameters; keep to {MAX_PARAMETERS:,} or fewer")
        return self


class TrainConfig(Section):
    optimizer: Literal["sgd", "momentum", "adam"]
    step_size: Annotated[float, Field(gt=0, description="the step size, or the peak of a schedule")]
    momentum: Annotated[Fraction, Field(description="momentum's decay; Adam's b1")]
    beta2: Annotated[Fraction, Field(description="Adam's b2")]
    nesterov: bool = Field(description="Nesterov momentum, for momentum and adam")
    schedule: Literal["constant", "cosine", "onecycle"] = Field(
        description="cosine: decay to 0; onecycle: warm up over warmup_fraction of the steps, then decay to 0"
    )
    warmup_fraction: Annotated[float, Field(ge=0, le=1)]
    label_smoothing: Annotated[Fraction, Field(description="targets (1 - s) * one_hot + s / classes")]
    batch_size: PositiveInt
    epochs: PositiveInt
    shuffle: bool
    shuffle_seed: Seed


class ProfileConfig(Section):
    top_allocations: Annotated[int, Field(ge=1, le=10_000)]
    trace_steps: Annotated[int, Field(ge=1, le=200, description="training steps traced (jit_scan: whole epochs)")]


class Params(Section):
    data: DataConfig
    preprocess: PreprocessConfig
    model: ModelConfig
    train: TrainConfig
    variants: Annotated[tuple[VariantName, ...], Field(strict=False, min_length=1)]  # type: ignore[valid-type]
    profile: ProfileConfig

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        train_count, _ = split_sizes(SPLIT_SIZES[self.data.dataset]["train"], self.preprocess)
        batch = min(self.train.batch_size, train_count)
        steps = steps_per_epoch(train_count, self.train.batch_size) * self.train.epochs
        if len(set(self.variants)) != len(self.variants):
            raise ValueError("variants: a variant is listed twice; list each once")
        if train_count < 1:
            raise ValueError(
                "preprocess.validation_fraction: no training example is left after max_train_examples"
                f" ({self.preprocess.max_train_examples}) and the validation split; lower validation_fraction"
                " or raise max_train_examples"
            )
        if steps > INT32_MAX:
            raise ValueError(
                f"train: {steps:,} steps in all (epochs x batches) exceed {INT32_MAX:,};"
                " lower train.epochs or raise train.batch_size"
            )
        if batch * sum(self.model.layer_sizes) > MAX_ACTIVATIONS:
            raise ValueError(
                f"train.batch_size: a batch of {batch:,} holds {batch * sum(self.model.layer_sizes):,}"
                f" activations, more than {MAX_ACTIVATIONS:,}; lower it"
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def digest(self, *sections: str) -> str:
        """SHA-256 of the canonical JSON of the given sections (all when none are given)."""
        chosen = self.model_dump(mode="json", include=set(sections) or None)
        return hashlib.sha256(json.dumps(chosen, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


SECTIONS = tuple(Params.model_fields)


def steps_per_epoch(count: int, batch_size: int) -> int:
    """Batches in one epoch of `count` examples, the last one partial (as the loops cut them)."""
    return -(-count // batch_size)


def parameter_count(layer_sizes: tuple[int, ...]) -> int:
    """Weights and biases of the MLP with these layer sizes."""
    return sum(m * n + n for m, n in zip(layer_sizes[:-1], layer_sizes[1:], strict=False))


def split_sizes(available: int, config: PreprocessConfig) -> tuple[int, int]:
    """(training, validation) example counts after sub-sampling and the validation split."""
    kept = min(config.max_train_examples, available) if config.max_train_examples else available
    held_out = int(round(kept * config.validation_fraction))
    return kept - held_out, held_out


def validate(raw: Any, source: str = paths.PARAMS) -> Params:
    """Validate raw parameters; one line naming the key where they are not valid."""
    if not isinstance(raw, dict):
        raise PipelineError(
            f"{source}: expected a mapping of section names to parameters"
            f" ({', '.join(Params.model_fields)}); start from the repository's params.yaml"
        )
    try:
        return Params.model_validate(raw)
    except ValidationError as err:
        # the most specific error: a bad item before the list's length it caused, a present key before a missing one
        from .refusals import describe  # loaded only for a refusal

        first = min(err.errors(), key=lambda e: (e["type"] == "missing", e["type"] == "too_short", len(e["loc"])))
        raise PipelineError(f"{source}: {describe(first, Params)}") from err


def yaml_text(path: str | Path, missing: str = "run from the project root, or give --params a file") -> str:
    """The UTF-8 text of a parameters, preset or sweep file, refused past MAX_FILE_BYTES."""
    return read_text(path, missing, "save the file as UTF-8", MAX_FILE_BYTES)


def _values(node: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """Every value of a loaded YAML document with its dotted key, depth first, aliases expanded."""
    yield key, node
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for name, child in children:
        yield from _values(child, f"{key}.{name}" if key else str(name))


def parse_yaml(text: str, path: str | Path) -> Any:
    """YAML text read as DVC reads params.yaml, with no set (its values would reach a stage in any order) and at
    most MAX_VALUES values once aliases are expanded; `path` names it in a refusal."""
    from ruamel.yaml import YAML, YAMLError

    try:
        data = YAML(typ="safe").load(text)
        for count, (where, value) in enumerate(_values(data)):
            if count == MAX_VALUES:
                raise PipelineError(f"{path}: more than {MAX_VALUES:,} values, aliases expanded; write fewer")
            if isinstance(value, set | frozenset):
                where = clip(where) or "(top level)"
                raise PipelineError(f"{path}: {where}: a set (!!set) has no order; write a list [a, b, ...]")
    except YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        line = f" at line {mark.line + 1}" if mark else ""
        problem = str(getattr(err, "problem", None) or "").partition(" with value")[0]  # its values may be wrong
        line += f" ({clip(problem)})" if problem else ""  # the parser's reason
        raise PipelineError(f"{path}: not valid YAML{line}; fix the syntax") from err
    except RecursionError:
        raise PipelineError(f"{path}: nested too deeply, or an alias inside itself; fix the syntax") from None
    return data


def read_yaml(path: str | Path, missing: str = "run from the project root, or give --params a file") -> Any:
    """A YAML file read as DVC reads params.yaml; `missing` is the fix an absent file's line gives."""
    return parse_yaml(yaml_text(path, missing), path)


def load(path: str | Path = paths.PARAMS) -> Params:
    """Read and validate a params file, once per process while the file stays as it is."""
    try:
        info = os.stat(path)
    except OSError:
        return validate(read_yaml(path), source=str(path))
    return _load(str(path), (info.st_ino, info.st_size, info.st_mtime_ns))


@functools.lru_cache(maxsize=8)
def _load(path: str, key: tuple[int, int, int]) -> Params:
    return validate(read_yaml(path), source=path)


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline check`: validate the parameters file."""
    print(f"{args.params}: valid (sha256 {load(args.params).digest()[:12]})")
