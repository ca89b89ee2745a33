"""The training loops behind the variants: `build` imports only the loop a variant names (variants.py)."""

from ...foundation.variants import Variant
from .base import LoopInputs, TrainingLoop, TrainState

__all__ = ["LoopInputs", "TrainState", "TrainingLoop", "build"]


def build(variant: Variant, inputs: LoopInputs) -> TrainingLoop:
    """The loop of `variant`, built on what it trains on, its steps compiled when the variant says `jit`."""
    if variant.loop == "ScanLoop":
        from .scan_loop import ScanLoop

        return ScanLoop(inputs, jit=variant.jit)
    from .step_loop import StepLoop

    return StepLoop(inputs, jit=variant.jit)
