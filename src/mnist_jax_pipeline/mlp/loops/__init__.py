"""The training loops behind the variants: variants.py names each variant's loop by its class,
and `LOOPS` maps that name to the class, so a new loop is one class added here and its name there."""

from __future__ import annotations

from ...foundation.variants import Variant
from .base import LoopInputs, TrainingLoop, TrainState
from .scan_loop import ScanLoop
from .step_loop import StepLoop

__all__ = ["LOOPS", "LoopInputs", "ScanLoop", "StepLoop", "TrainState", "TrainingLoop", "build"]

LoopClass = type[StepLoop] | type[ScanLoop]
LOOPS: dict[str, LoopClass] = {cls.__name__: cls for cls in (StepLoop, ScanLoop)}


def build(variant: Variant, inputs: LoopInputs) -> TrainingLoop:
    """The loop the registry names for `variant`, built with what it trains on."""
    return LOOPS[variant.loop].for_variant(variant, inputs)
