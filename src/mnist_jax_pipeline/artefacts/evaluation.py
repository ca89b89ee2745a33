"""The evaluate stage's artefacts: test metrics (numbers only), the mistakes, the confusion rows."""

from pathlib import Path
from typing import Annotated

from pydantic import Field

from ..foundation import paths
from ..foundation.dataset_facts import NUM_CLASSES
from ..foundation.errors import remake
from . import storage
from .json_model import JsonModel

Fraction = Annotated[float, Field(ge=0, le=1)]


class ClassScores(JsonModel):
    precision: Fraction
    recall: Fraction


class EvalHeadline(JsonModel):
    """metrics/evaluate/<variant>.json, the figures DVC lists as metrics."""

    test_accuracy: Fraction
    test_loss: float


class EvalMetrics(EvalHeadline):
    """metrics/evaluate/<variant>.full.json: the headline and the per-class scores."""

    test_examples: int
    misclassified: int
    per_class: dict[str, ClassScores]  # keyed "0".."9"

    def headline(self) -> EvalHeadline:
        return EvalHeadline(test_accuracy=self.test_accuracy, test_loss=float(f"{self.test_loss:.4g}"))


class EvalDetails(JsonModel):
    """metrics/evaluate/<variant>_details.json: the confusion matrix and every misclassified example."""

    confusion_matrix: Annotated[list[list[int]], Field(min_length=NUM_CLASSES, max_length=NUM_CLASSES)]
    misclassified_indices: list[int]
    true: list[int]
    predicted: list[int]


class ConfusionRow(JsonModel):
    """One row of plots/confusion/<variant>.csv (DVC's confusion template)."""

    actual: int
    predicted: int


def read_metrics(variant: str, root: str | Path = ".") -> EvalMetrics:
    path, made_by = paths.EVAL_METRICS.at(variant, root), paths.EVAL_METRICS.stage(variant)
    metrics = storage.read_model(path, EvalMetrics, made_by)
    if sorted(metrics.per_class, key=int) != [str(c) for c in range(NUM_CLASSES)]:
        raise remake(path, f"'per_class' needs each of the {NUM_CLASSES} classes", made_by)
    return metrics


def read_details(variant: str, test_count: int, root: str | Path = ".") -> EvalDetails:
    """The details, checked against the test split they index into."""
    path, made_by = paths.EVAL_DETAILS.at(variant, root), paths.EVAL_DETAILS.stage(variant)
    details = storage.read_model(path, EvalDetails, made_by)
    if any(len(row) != NUM_CLASSES for row in details.confusion_matrix):
        raise remake(path, f"the confusion matrix is not {NUM_CLASSES}x{NUM_CLASSES}", made_by)
    wrong = details.misclassified_indices
    if not len(wrong) == len(details.true) == len(details.predicted) or any(not 0 <= i < test_count for i in wrong):
        raise remake(
            path, f"misclassified indices do not match the {test_count} test images of {paths.PROCESSED.path}", made_by
        )
    return details
