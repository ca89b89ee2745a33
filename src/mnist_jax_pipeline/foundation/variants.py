"""The training variants, declared once: name, description, and the class in mlp/loops that trains it.

The parameter check, the CLI's choices and the report's wording all read this registry, which needs no
JAX; tests/test_loops.py checks every loop named here has its class.
"""

from typing import Literal, NamedTuple

from .errors import PipelineError

LoopName = Literal["StepLoop", "ScanLoop"]
CALL_UNIT = {"StepLoop": "step", "ScanLoop": "epoch"}  # what one compiled call of each loop runs


class Variant(NamedTuple):
    name: str
    description: str
    loop: LoopName
    jit: bool  # whether the training step is compiled

    @property
    def call_unit(self) -> str:
        return CALL_UNIT[self.loop]


VARIANTS = (
    Variant("nojit", "the tutorial's loop op by op, nothing compiled", "StepLoop", jit=False),
    Variant("jit", "the tutorial's loop with each training step compiled once by jax.jit", "StepLoop", jit=True),
    Variant("jit_scan", "one compiled, donated lax.scan per epoch over device-resident data", "ScanLoop", jit=True),
)
BASELINE = "nojit"  # the variant every speedup is measured against


def names() -> tuple[str, ...]:
    return tuple(v.name for v in VARIANTS)


def get(name: str) -> Variant:
    """The variant called `name`; an unknown name is one line listing the known ones."""
    if (found := next((v for v in VARIANTS if v.name == name), None)) is None:
        raise PipelineError(f"unknown variant '{name}'; use one of {', '.join(names())}")
    return found
