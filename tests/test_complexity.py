"""No function in src/ is more complex than radon's rank C: a cyclomatic complexity of at most 20.

McCabe's number is counted with `ast` the way radon counts it (radon 6), so that this test and
`radon cc -n D src/` agree without radon as a dependency: 1, plus one per if, elif, ternary,
for, while, loop `else`, except handler, `try` `else`, match case other than a capture-all,
comprehension `for` and its `if`s, assert, and each extra operand of `and`/`or`. A nested
function or class is a block of its own; a lambda counts in the function that holds it.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
LIMIT = 20  # radon's rank D starts at 21
Function = ast.FunctionDef | ast.AsyncFunctionDef


def _decisions(node: ast.AST) -> int:
    """The decision points `node` itself adds (not its children's)."""
    if isinstance(node, ast.If | ast.IfExp | ast.Assert):
        return 1
    if isinstance(node, ast.For | ast.AsyncFor | ast.While):
        return 1 + bool(node.orelse)
    if isinstance(node, ast.Try):
        return len(node.handlers) + bool(node.orelse)
    if isinstance(node, ast.BoolOp):
        return len(node.values) - 1
    if isinstance(node, ast.comprehension):
        return 1 + len(node.ifs)
    if isinstance(node, ast.Match):
        catch_all = any(isinstance(c.pattern, ast.MatchAs) and c.pattern.pattern is None for c in node.cases)
        return max(0, len(node.cases) - catch_all)
    return 0


def _count(node: ast.AST) -> int:
    """Decision points in `node` and below, nested functions and classes left out."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return 0
    return _decisions(node) + sum(_count(child) for child in ast.iter_child_nodes(node))


def complexity(function: Function) -> int:
    """The function's cyclomatic complexity: 1 + the decision points of its body."""
    return 1 + sum(_count(statement) for statement in function.body)


def complexities(source: str) -> dict[str, int]:
    """{'line name': complexity} of every function and method in `source`, nested ones too."""
    return {
        f"{node.lineno} {node.name}": complexity(node)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_no_function_is_more_complex_than_rank_c() -> None:
    too_complex = []
    for path in sorted(SRC.rglob("*.py")):
        for where, value in complexities(path.read_text(encoding="utf-8")).items():
            if value > LIMIT:
                line, name = where.split(" ", 1)
                too_complex.append(f"{path.relative_to(SRC.parent)}:{line} {name}: {value}")
    assert too_complex == [], f"cyclomatic complexity above {LIMIT} (radon's rank D or worse); split these"


SAMPLE = """
def sample(items, flag):
    assert items
    total = 0 if flag and items else 1
    for item in items:
        if item and flag or not item:
            total += 1
        elif item > 3:
            continue
    else:
        total -= 1
    while total > 10:
        total //= 2
    try:
        total = int(total)
    except ValueError:
        pass
    except TypeError:
        raise
    else:
        total += 0
    match total:
        case 0:
            pass
        case 1 | 2:
            pass
        case _:
            pass
    values = [x for x in items if x if not flag]
    pick = (lambda v: v if v else 0)(total)

    def inner(a):
        return a or flag or items

    with open("x") as handle:
        handle.read()
    return {k: v for k, v in values}, pick, inner
"""


def test_the_count_agrees_with_radon() -> None:
    # radon 6.0.1: `radon cc -s` on SAMPLE gives sample 21 (D) and inner 3 (A)
    assert complexities(SAMPLE) == {"2 sample": 21, "32 inner": 3}
