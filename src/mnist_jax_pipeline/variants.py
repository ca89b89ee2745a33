"""The training variants, declared once: name, one-line description and training loop.

Everything else derives from this registry: the `variants` choices of params.yaml, the CLI's
`--variant` choices, the DVC plots, and the report's wording. The loop is named by its class
in `mnist_jax_pipeline.loops`, so this module stays light (no JAX import): the parameter check
and the CLI read it without loading the training code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import PipelineError

LoopName = Literal["StepLoop", "ScanLoop"]


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    loop: LoopName  # the class in mnist_jax_pipeline.loops that trains it
    jit: bool  # whether the training step is compiled (XLA's analysis exists for it)


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
