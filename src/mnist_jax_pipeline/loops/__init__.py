"""The training loops behind the variants (variants.py names each variant's loop)."""

from __future__ import annotations

from ..variants import Variant
from .base import LoopInputs, TrainingLoop, TrainState
from .scan_loop import ScanLoop
from .step_loop import StepLoop

__all__ = ["LoopInputs", "ScanLoop", "StepLoop", "TrainState", "TrainingLoop", "build"]


def build(variant: Variant, inputs: LoopInputs) -> TrainingLoop:
    """The loop the registry names for `variant`, built with what it trains on."""
    if variant.loop == "ScanLoop":
        return ScanLoop(inputs)
    return StepLoop(inputs, jit=variant.jit)
