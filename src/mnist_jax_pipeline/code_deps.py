"""Code deps: the package modules a command imports, transitively, and the package data it reads.

Hand-written over `ast` rather than the standard library's modulefinder: modulefinder executes
nothing either, but it follows every standard-library and third-party import (jax, numpy, ...:
hundreds of modules, seconds, and it stops on a namespace package without a loader) and finds
modules on sys.path, while the digests need the package's own modules under a chosen root (the
checkout's src/ or the installed package).
"""

from __future__ import annotations

import ast
from pathlib import Path

from .commands import COMMANDS
from .runtime import RUNTIME_LOCK
from .stages import Stage

PACKAGE = __package__
CODE_ROOT = Path("src") / PACKAGE  # the checkout's package, relative to the project root


def module_file(module: str, root: Path = CODE_ROOT) -> Path | None:
    """The source file of a package module ('mnist_jax_pipeline.report.render'), or None."""
    parts = module.split(".")[1:]
    candidates = [root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")]
    return next((p for p in candidates if parts and p.is_file()), root / "__init__.py" if not parts else None)


def _imports(module: str, root: Path) -> set[str]:
    """Package modules named by every import statement of `module` (function-level ones too)."""
    path = module_file(module, root)
    assert path is not None, module
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != PACKAGE:
                continue
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names
                         if module_file(f"{target}.{alias.name}", root) is not None)
    return {m for m in found if module_file(m, root) is not None}


def with_parents(module: str) -> set[str]:
    """A module and the packages above it (importing it runs their __init__)."""
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def closure(start: str, root: Path = CODE_ROOT) -> set[str]:
    """Every package module that importing `start` can import, transitively."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        for name in with_parents(module) - seen:
            seen.add(name)
            todo.extend(_imports(name, root))
    return seen


def command_code(command: str, data: tuple[str, ...] = (), root: Path = CODE_ROOT) -> list[str]:
    """The checkout's files a CLI command runs or reads: the modules (closure of the CLI and of the
    command's module) and the package data named in `data`."""
    entry = COMMANDS[command].module.partition(":")[0]
    modules = closure(f"{PACKAGE}.cli", root) | closure(f"{PACKAGE}.{entry}", root)
    files = {module_file(m, root) for m in modules}
    lock = root.parent.parent / RUNTIME_LOCK  # the checkout's, beside src/ (none for an installed package)
    if root.parent.name == "src" and lock.is_file():
        files.add(lock)
    for item in data:
        target = root / item
        files.update(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else files.add(target)
    return sorted(str(p) for p in files if p is not None and "__pycache__" not in p.parts)


def code_files(stage: Stage, root: Path = CODE_ROOT) -> list[str]:
    """The checkout's files a stage's command runs or reads."""
    return command_code(stage.command, stage.data, root)
