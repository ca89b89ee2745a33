"""The compiled HLO's matrix products: each instruction's FLOPs per execution and a short description
(the rows of a compiled module's op table are its instructions)."""

from __future__ import annotations

import collections
import math
import re
from dataclasses import dataclass

_ARRAY = re.compile(
    r"^\s*(?:ROOT\s+)?%(?P<name>[^\s=]+)\s*=\s*(?P<type>\w+)\[(?P<dims>[\d,]*)\]\S*\s+"
    r"(?P<op>[\w-]+)\((?P<operands>[^)]*)\)(?P<attrs>.*)$"
)
_TUPLE = re.compile(r"^\s*(?:ROOT\s+)?%(?P<name>[^\s=]+)\s*=\s*\(.*?\)\s+(?P<op>[\w-]+)\(")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%(?P<name>\S+)\s*\(.*\{\s*$")
_MODULE = re.compile(r"^HloModule\s+([^\s,]+)")


@dataclass
class Instruction:
    """One HLO instruction: its array shape (none when tuple-shaped), operand names and attributes' text."""

    name: str
    op: str
    dims: tuple[int, ...]
    operands: list[str]
    attrs: str
    tuple_shaped: bool = False


def module_name(hlo: str) -> str:
    """The module's name ('jit_update'): the `hlo_module` of its ops in the trace."""
    found = _MODULE.match(hlo.lstrip())
    if not found:
        raise ValueError("HLO text does not start with 'HloModule <name>'")
    return found.group(1)


def parse_hlo(hlo: str) -> tuple[dict[str, Instruction], dict[str, list[str]]]:
    """Instructions by name (unique in a module) and the instruction names of each computation."""
    instructions: dict[str, Instruction] = {}
    members: dict[str, list[str]] = collections.defaultdict(list)
    computation = ""
    for line in hlo.splitlines():
        found = _COMPUTATION.match(line)
        if found:
            computation = found.group("name")
            continue
        array = _ARRAY.match(line)
        shaped = None if array else _TUPLE.match(line)  # while, call, tuple, ...: no array shape
        if array:
            dims = tuple(int(d) for d in array.group("dims").split(",") if d)
            operands = [o.strip().lstrip("%") for o in array.group("operands").split(",") if o.strip().startswith("%")]
            ins = Instruction(array.group("name"), array.group("op"), dims, operands, array.group("attrs"))
        elif shaped:
            ins = Instruction(shaped.group("name"), shaped.group("op"), (), [], "", tuple_shaped=True)
        else:
            continue
        instructions[ins.name] = ins
        members[computation].append(ins.name)
    return instructions, dict(members)


def _dims(attrs: str, key: str) -> list[int]:
    found = re.search(key + r"=\{([\d,]*)\}", attrs)
    return [int(d) for d in found.group(1).split(",") if d] if found else []


def instruction_flops(ins: Instruction, instructions: dict[str, Instruction]) -> int:
    """FLOPs of one dot or convolution (2 per multiply-add); 0 for anything else."""
    if ins.op == "dot" and ins.operands and ins.operands[0] in instructions:
        lhs = instructions[ins.operands[0]].dims
        contracted = math.prod(lhs[d] for d in _dims(ins.attrs, "lhs_contracting_dims") if d < len(lhs))
        return 2 * math.prod(ins.dims) * contracted
    if ins.op == "convolution" and len(ins.operands) > 1 and ins.operands[1] in instructions:
        kernel = instructions[ins.operands[1]].dims
        labels = re.search(r"dim_labels=\w+_(\w+)->", ins.attrs)
        out_features = kernel[labels.group(1).index("o")] if labels and "o" in labels.group(1) else kernel[-1]
        return 2 * math.prod(ins.dims) * math.prod(kernel) // max(out_features, 1)
    return 0


def _called(ins: Instruction) -> str | None:
    found = re.search(r"calls=%([^\s,]+)", ins.attrs)
    return found.group(1) if found else None


def hlo_ops(hlo: str) -> dict[str, tuple[int, str]]:
    """{instruction name: (FLOPs per execution, short description)}. A fusion counts the dots and
    convolutions it wraps; a `while` nothing (its body's ops are traced as events of their own)."""
    instructions, members = parse_hlo(hlo)
    memo: dict[str, int] = {}

    def computation_flops(name: str) -> int:
        if name not in memo:
            memo[name] = 0  # guards against a cycle
            memo[name] = sum(own(instructions[n]) for n in members.get(name, []) if n in instructions)
        return memo[name]

    def own(ins: Instruction) -> int:
        if ins.op == "fusion":
            called = _called(ins)
            return computation_flops(called) if called else 0
        return instruction_flops(ins, instructions)

    out = {}
    for name, ins in instructions.items():
        what = ins.op
        if ins.op == "fusion":
            inner = [instructions[n].op for n in members.get(_called(ins) or "", []) if n in instructions]
            core = [op for op in inner if op not in ("parameter", "constant", "broadcast", "bitcast")]
            kind = re.search(r"kind=(\w+)", ins.attrs)
            what = f"fusion[{kind.group(1) if kind else '?'}:{','.join(dict.fromkeys(core))}]"
        shape = "(tuple)" if ins.tuple_shaped else f"[{','.join(map(str, ins.dims))}]"
        out[name] = (own(ins), f"{shape} {what}")
    return out
