"""Docstrings for readers: a module's says in at most 8 lines what it holds, and no docstring names a
source file that does not exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conftest import ROOT

SOURCES = sorted((ROOT / "src").rglob("*.py"))
SOURCE_FILE = re.compile(r"(?<![\w{<*])([\w./-]*\w\.(?:py|smk|j2|toml|sh))\b")


def docstrings(tree: ast.Module) -> list[str]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))]
    return [doc for node in nodes if (doc := ast.get_docstring(node, clean=False))]


def exists(name: str, module: Path) -> bool:
    """Whether `name` is a file beside the module, in the package or the repository, or ends a path there."""
    bases = [module.parent, *module.parents]
    return any((base / name).exists() for base in bases) or any(ROOT.rglob(Path(name).name))


@pytest.mark.parametrize("module", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_module_docstring_is_short_and_names_only_files_that_exist(module: Path) -> None:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    head = ast.get_docstring(tree, clean=False) or ""
    assert len(head.splitlines()) <= 8, f"{module.name}: a module docstring of {len(head.splitlines())} lines"
    for doc in docstrings(tree):
        for name in SOURCE_FILE.findall(doc):
            assert exists(name, module), f"{module.name}: its docstring names {name}, which does not exist"
