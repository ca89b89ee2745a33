"""The matrix products in a compiled module's HLO text: each instruction's FLOPs per execution and a
short description (shape and kind). Our own reading: jaxlib's HloModule gives no shapes, and XLA's
cost analysis only the module's total."""

import collections
import math
import re
from functools import cache
from typing import NamedTuple

_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%(?P<name>[^\s=]+)\s*=\s*(?P<shape>.+?)\s+(?P<op>[\w-]+)\((?P<operands>[^)]*)\)(?P<attrs>.*)$"
)
_ARRAY = re.compile(r"\w+\[([\d,]*)\]\S*")  # an array shape, e.g. 'f32[128,784]{1,0}'; else a tuple
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%(?P<name>\S+)\s*\(.*\{\s*$")
_PLUMBING = ("parameter", "constant", "broadcast", "bitcast")  # left out of a fusion's description


class Instruction(NamedTuple):
    """One HLO instruction: its opcode, array shape, operand names and attributes' text."""

    op: str
    dims: tuple[int, ...] | None  # None: tuple-shaped
    operands: list[str]
    attrs: str


def hlo_ops(hlo: str) -> dict[str, tuple[int, str]]:
    """{instruction name: (FLOPs per execution, description)}: 2 per multiply-add of a dot; a fusion
    counts the dots it wraps, a `while` nothing (its body's ops are traced as events of their own)."""
    instructions: dict[str, Instruction] = {}
    members: dict[str, list[str]] = collections.defaultdict(list)  # the instructions of each computation
    computation = ""
    for line in hlo.splitlines():
        if found := _COMPUTATION.match(line):
            computation = found.group("name")
        elif found := _INSTRUCTION.match(line):
            name, shape, op, operands, attrs = found.groups()
            array = _ARRAY.fullmatch(shape)
            dims = tuple(int(d) for d in array.group(1).split(",") if d) if array else None
            instructions[name] = Instruction(op, dims, re.findall(r"%([^\s,]+)", operands), attrs)
            members[computation].append(name)

    def called(ins: Instruction) -> list[str]:
        """The instructions of the computation a fusion wraps."""
        found = re.search(r"calls=%([^\s,]+)", ins.attrs)
        return members.get(found.group(1), []) if found else []

    @cache
    def flops(name: str) -> int:
        """The instruction's FLOPs per execution."""
        ins = instructions[name]
        if ins.op == "fusion":
            return sum(flops(inner) for inner in called(ins))
        if ins.op != "dot" or ins.dims is None or not ins.operands or ins.operands[0] not in instructions:
            return 0
        lhs = instructions[ins.operands[0]].dims or ()
        contracting = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", ins.attrs)
        axes = [int(d) for d in contracting.group(1).split(",") if d] if contracting else []
        return 2 * math.prod(ins.dims) * math.prod(lhs[d] for d in axes if d < len(lhs))

    described = {}
    for name, ins in instructions.items():
        what = ins.op
        if ins.op == "fusion":
            kind = re.search(r"kind=(\w+)", ins.attrs)
            core = dict.fromkeys(instructions[n].op for n in called(ins) if instructions[n].op not in _PLUMBING)
            what = f"fusion[{kind.group(1) if kind else '?'}:{','.join(core)}]"
        shape = "(tuple)" if ins.dims is None else f"[{','.join(map(str, ins.dims))}]"
        described[name] = (flops(name), f"{shape} {what}")
    return described
