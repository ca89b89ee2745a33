"""Read and check every artefact the report shows.

A missing required input names the stage that makes it; a corrupt one names the file and the
stage to re-run. The profile summary is optional: without it the report says how to make it.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import io, paths
from ..config import NUM_CLASSES
from ..errors import PipelineError

HISTORY_COLUMNS = ("epoch", "epoch_seconds", "train_loss", "train_accuracy", "test_accuracy")
TRAIN_KEYS = (
    "variant",
    "epochs",
    "compile_seconds",
    "first_epoch_seconds",
    "epoch_seconds_median",
    "final_test_accuracy",
    "peak_rss_bytes",
    "backend",
    "device_kind",
)
TRAIN_NUMBERS = tuple(key for key in TRAIN_KEYS if key not in ("variant", "backend", "device_kind"))
EVAL_KEYS = ("variant", "test_accuracy", "test_examples", "misclassified", "per_class")
DETAILS_KEYS = ("variant", "confusion_matrix", "misclassified_indices", "true", "predicted")


@dataclass(frozen=True)
class VariantResults:
    """Everything the train and evaluate stages wrote for one variant."""

    name: str
    train: dict[str, Any]
    history: list[dict[str, float]]
    evaluation: dict[str, Any]
    confusion: np.ndarray  # (10, 10) int counts[true, predicted]
    wrong_indices: list[int]
    wrong_true: list[int]
    wrong_predicted: list[int]


@dataclass(frozen=True)
class Artefacts:
    manifest: dict[str, Any]
    stats: dict[str, Any]
    test_images: np.ndarray  # (N, 28, 28) float32, as preprocessed
    variants: tuple[VariantResults, ...]
    profile: dict[str, Any] | None  # None when the profile stage's summary is missing
    profile_dir: Path


def _object(data: Any, keys: tuple[str, ...], path: Path, made_by: str) -> dict[str, Any]:
    """`data` must be a JSON object holding `keys`."""
    if not isinstance(data, dict):
        raise PipelineError(f"{path}: expected a JSON object; re-run the '{made_by}' stage")
    for key in keys:
        if key not in data:
            raise PipelineError(f"{path}: missing key '{key}'; re-run the '{made_by}' stage")
    return data


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _numbers(
    data: dict[str, Any],
    keys: tuple[str, ...],
    path: Path,
    made_by: str,
    nullable: tuple[str, ...] = (),
) -> None:
    for key in keys:
        value = data[key]
        if not (_is_number(value) or (value is None and key in nullable)):
            raise PipelineError(
                f"{path}: '{key}' is {value!r}, expected a number; re-run the '{made_by}' stage"
            )


def _check_variant(data: dict[str, Any], variant: str, path: Path, made_by: str) -> None:
    if data["variant"] != variant:
        raise PipelineError(
            f"{path}: holds variant '{data['variant']}', expected '{variant}';"
            f" re-run the '{made_by}' stage"
        )


def read_history(path: Path, made_by: str) -> list[dict[str, float]]:
    """The per-epoch CSV of the train stage, as floats (epoch as int)."""
    try:
        text = path.read_text()
    except FileNotFoundError as err:
        raise PipelineError(f"{path}: missing; run the '{made_by}' stage first") from err
    except UnicodeDecodeError as err:
        raise PipelineError(f"{path}: not text ({err}); re-run the '{made_by}' stage") from err
    reader = csv.DictReader(text.splitlines())
    absent = [c for c in HISTORY_COLUMNS if c not in (reader.fieldnames or [])]
    if absent:
        raise PipelineError(f"{path}: missing column '{absent[0]}'; re-run the '{made_by}' stage")
    rows = []
    for line, row in enumerate(reader, start=2):
        try:
            values = {c: float(row[c]) for c in HISTORY_COLUMNS}
        except (TypeError, ValueError) as err:
            raise PipelineError(
                f"{path}: line {line} is not numeric ({err}); re-run the '{made_by}' stage"
            ) from err
        if not all(math.isfinite(v) for v in values.values()):
            raise PipelineError(
                f"{path}: line {line} holds a non-finite value; re-run the '{made_by}' stage"
            )
        values["epoch"] = int(values["epoch"])
        rows.append(values)
    if not rows:
        raise PipelineError(f"{path}: no epochs; re-run the '{made_by}' stage")
    return rows


def read_variant(variant: str, test_count: int) -> VariantResults:
    """Train metrics, history and evaluation of one variant, checked against each other."""
    trained, evaluated = f"train@{variant}", f"evaluate@{variant}"
    train_path = Path(paths.for_variant(paths.TRAIN_METRICS, variant))
    train = _object(io.read_json(train_path, trained), TRAIN_KEYS, train_path, trained)
    _check_variant(train, variant, train_path, trained)
    _numbers(
        train,
        TRAIN_NUMBERS,
        train_path,
        trained,
        nullable=("compile_seconds",),
    )
    history = read_history(Path(paths.for_variant(paths.TRAIN_HISTORY, variant)), trained)

    eval_path = Path(paths.for_variant(paths.EVAL_METRICS, variant))
    evaluation = _object(io.read_json(eval_path, evaluated), EVAL_KEYS, eval_path, evaluated)
    _check_variant(evaluation, variant, eval_path, evaluated)
    _numbers(evaluation, ("test_accuracy", "test_examples", "misclassified"), eval_path, evaluated)
    per_class = evaluation["per_class"]
    if not isinstance(per_class, dict) or not all(
        isinstance(per_class.get(str(c)), dict) and _is_number(per_class[str(c)].get("recall"))
        for c in range(NUM_CLASSES)
    ):
        raise PipelineError(
            f"{eval_path}: 'per_class' needs a recall for each of the {NUM_CLASSES} classes;"
            f" re-run the '{evaluated}' stage"
        )

    details_path = Path(paths.for_variant(paths.EVAL_DETAILS, variant))
    details = _object(io.read_json(details_path, evaluated), DETAILS_KEYS, details_path, evaluated)
    _check_variant(details, variant, details_path, evaluated)
    try:
        confusion = np.asarray(details["confusion_matrix"], dtype=np.int64)
        wrong = [int(i) for i in details["misclassified_indices"]]
        true = [int(i) for i in details["true"]]
        predicted = [int(i) for i in details["predicted"]]
    except (TypeError, ValueError) as err:
        raise PipelineError(
            f"{details_path}: malformed ({err}); re-run the '{evaluated}' stage"
        ) from err
    if confusion.shape != (NUM_CLASSES, NUM_CLASSES):
        raise PipelineError(
            f"{details_path}: confusion matrix of shape {confusion.shape}, expected"
            f" {NUM_CLASSES}x{NUM_CLASSES}; re-run the '{evaluated}' stage"
        )
    if not len(wrong) == len(true) == len(predicted) or any(not 0 <= i < test_count for i in wrong):
        raise PipelineError(
            f"{details_path}: misclassified indices do not match the {test_count} test images"
            f" of {paths.PROCESSED_DIR}; re-run the '{evaluated}' stage"
        )
    return VariantResults(variant, train, history, evaluation, confusion, wrong, true, predicted)


def read_test_images(processed_dir: str | Path = paths.PROCESSED_DIR) -> np.ndarray:
    """The preprocessed test images as (N, 28, 28), whatever their scaling."""
    path = Path(processed_dir) / "test_images.npy"
    images = io.load_array(path, "preprocess", np.float32)
    if images.ndim not in (2, 3) or int(np.prod(images.shape[1:])) != 28 * 28:
        raise PipelineError(
            f"{path}: shape {images.shape}, expected (N, 784) or (N, 28, 28);"
            " re-run the 'preprocess' stage"
        )
    return images.reshape(len(images), 28, 28)


def read_profile(profile_dir: str | Path = paths.PROFILE_DIR) -> dict[str, Any] | None:
    """The profile stage's summary.json, or None when there is none (the report degrades)."""
    path = Path(profile_dir) / "summary.json"
    if not path.is_file():
        return None
    data = io.read_json(path, "profile")
    if not isinstance(data, dict):
        raise PipelineError(f"{path}: expected a JSON object; re-run the 'profile' stage")
    return data


def read_all(variants: tuple[str, ...]) -> Artefacts:
    """Every input of the report stage, checked."""
    manifest_path = Path(paths.RAW_DIR) / "manifest.json"
    manifest = _object(
        io.read_json(manifest_path, "download"),
        ("dataset", "files", "splits"),
        manifest_path,
        "download",
    )
    stats_path = Path(paths.PROCESSED_DIR) / "stats.json"
    stats = _object(
        io.read_json(stats_path, "preprocess"), ("dataset", "splits"), stats_path, "preprocess"
    )
    for split in ("train", "test"):
        entry = stats["splits"].get(split) if isinstance(stats["splits"], dict) else None
        if entry is None:
            raise PipelineError(
                f"{stats_path}: missing split '{split}'; re-run the 'preprocess' stage"
            )
        _object(entry, ("count", "label_histogram", "class_balance"), stats_path, "preprocess")
    images = read_test_images()
    results = tuple(read_variant(v, len(images)) for v in variants)
    return Artefacts(manifest, stats, images, results, read_profile(), Path(paths.PROFILE_DIR))
