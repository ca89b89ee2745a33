"""The training variants, declared once: name, one-line description and training loop.

Everything else derives from this registry: the `variants` choices of params.yaml, the CLI's
`--variant` choices, the DVC plots, and the report's wording. The loop is named by its class
in `mnist_jax_pipeline.mlp.loops` (whose `LOOPS` builds each from its class; a test checks that every
name here has its class there), so this module stays light (no JAX import): the parameter check,
the CLI and the report read it without loading the training code. What one compiled call of a loop
runs (a step or a whole epoch) is declared here too, for the report's wording.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import PipelineError

LoopName = Literal["StepLoop", "ScanLoop"]  # a class in mnist_jax_pipeline.mlp.loops
CallUnit = Literal["step", "epoch"]
# What one compiled call of each loop runs: what XLA's analysis of it covers
CALL_UNIT: dict[LoopName, CallUnit] = {"StepLoop": "step", "ScanLoop": "epoch"}


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    loop: LoopName  # the class in mnist_jax_pipeline.mlp.loops that trains it
    jit: bool  # whether the training step is compiled (XLA's analysis exists for it)

    @property
    def call_unit(self) -> CallUnit:
        """What one compiled call of its loop runs: one step, or a whole epoch."""
        return CALL_UNIT[self.loop]


VARIANTS: tuple[Variant, ...] = (
    Variant("nojit", "the tutorial's loop op by op, nothing compiled", "StepLoop", jit=False),
    Variant("jit", "the tutorial's loop with each training step compiled once by jax.jit", "StepLoop", jit=True),
    Variant("jit_scan", "one compiled, donated lax.scan per epoch over device-resident data", "ScanLoop", jit=True),
)
BASELINE = "nojit"  # the variant every speedup is measured against


def names() -> tuple[str, ...]:
    """Every variant's name, in registry order."""
    return tuple(v.name for v in VARIANTS)


def get(name: str) -> Variant:
    """The variant called `name`; an unknown name is one line listing the known ones."""
    for variant in VARIANTS:
        if variant.name == name:
            return variant
    raise PipelineError(f"unknown variant '{name}'; use one of {', '.join(names())}")
