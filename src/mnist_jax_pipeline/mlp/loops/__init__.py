"""The training loops behind the variants: `LOOPS` maps the loop name variants.py gives each variant to its class."""

from ...foundation.variants import Variant
from .base import LoopInputs, TrainingLoop, TrainState
from .scan_loop import ScanLoop
from .step_loop import StepLoop

__all__ = ["LOOPS", "LoopInputs", "ScanLoop", "StepLoop", "TrainState", "TrainingLoop", "build"]

LOOPS: dict[str, type[StepLoop] | type[ScanLoop]] = {cls.__name__: cls for cls in (StepLoop, ScanLoop)}


def build(variant: Variant, inputs: LoopInputs) -> TrainingLoop:
    """The loop of `variant`, built on what it trains on, its steps compiled when the variant says `jit`."""
    return LOOPS[variant.loop](inputs, jit=variant.jit)
