"""Code deps: the package modules a command imports, transitively, and the package data it reads.

Hand-written over `ast` rather than the standard library's modulefinder: modulefinder executes
nothing either, but it follows every standard-library and third-party import (jax, numpy, ...:
hundreds of modules, seconds, and it stops on a namespace package without a loader) and finds
modules on sys.path, while the digests need the package's own modules under a chosen root (the
checkout's src/ or the installed package).

A file's imports are parsed once per content: ImportCache keeps them by the SHA-256 of the file's
bytes, in this process and in the user's cache folder, so a check reads and hashes the package's
files (milliseconds) and parses only what changed.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

import platformdirs

from ..foundation.runtime import RUNTIME_LOCK
from .commands import COMMANDS
from .stage_table import Stage

PACKAGE = __package__.partition(".")[0]  # the top-level package
CODE_ROOT = Path("src") / PACKAGE  # the checkout's package, relative to the project root
CACHE_ENV = "MNIST_PIPELINE_CACHE"  # the import cache's file (ImportCache); empty: keep none


def module_file(module: str, root: Path = CODE_ROOT) -> Path | None:
    """The source file of a package module ('mnist_jax_pipeline.stages.report.render'), or None."""
    parts = module.split(".")[1:]
    if not parts:
        return root / "__init__.py"
    base = os.path.join(root, *parts)  # os.path, not pathlib: a check asks this a thousand times
    found = next((f for f in (base + ".py", os.path.join(base, "__init__.py")) if os.path.isfile(f)), None)
    return Path(found) if found else None


def _named_imports(module: str, is_package: bool, source: bytes, where: Path) -> list[str]:
    """Package modules and `from` names that `module`'s import statements name (function-level ones too),
    before any is checked to be a module: what a file's source alone decides."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, str(where))):
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
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return sorted(found)


class ImportCache:
    """What each source file imports, keyed by its module name and the SHA-256 of its bytes: a file is parsed
    once per content, not once per check. Kept in the user's cache folder between processes (a JSON file
    replaced atomically; a cache that cannot be read or written is only slower). A key is content, never a
    file time, so an edit of any kind is a new key."""

    VERSION = 1
    KEPT = 4000  # entries at most: the oldest go first (a few checkouts' worth of every module's versions)

    def __init__(self, file: Path | None) -> None:
        self.file = file
        self.entries: dict[str, list[str]] = {}
        self.added = False
        self.last_key = ""  # the key of the file named_imports read last
        self.setting: str | None = None  # MNIST_PIPELINE_CACHE when it was loaded
        self._read: dict[tuple[str, int, int, int, int, str, bool], str] = {}  # a file read in this process: its key
        if file is not None:
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(file.read_bytes())
                if data.get("version") == self.VERSION:
                    self.entries = data["entries"]

    def named_imports(self, module: str, is_package: bool, path: Path) -> list[str]:
        stat = os.stat(path)  # each file read and hashed once per process, as artefacts.provenance.Hashes does
        seen = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, module, is_package)
        if seen in self._read:
            self.last_key = self._read[seen]
            return self.entries[self.last_key]
        source = path.read_bytes()
        key = self.last_key = f"{hashlib.sha256(source).hexdigest()} {module} {int(is_package)}"
        self._read[seen] = key
        if key not in self.entries:
            self.entries[key] = _named_imports(module, is_package, source, path)
            self.added = True
        else:
            self.entries[key] = self.entries.pop(key)  # used now: the last to go
        return self.entries[key]

    def save(self) -> None:
        """Write the cache if this process parsed anything new (atomically: readers see a whole file)."""
        if self.file is None or not self.added:
            return
        with contextlib.suppress(OSError):
            self.file.parent.mkdir(parents=True, exist_ok=True)
            kept = dict(list(self.entries.items())[-self.KEPT :])
            with tempfile.NamedTemporaryFile("w", dir=self.file.parent, prefix=".tmp-", delete=False) as out:
                json.dump({"version": self.VERSION, "entries": kept}, out)
            os.replace(out.name, self.file)
            self.added = False


def _cache_file() -> Path | None:
    """The import cache's file: $MNIST_PIPELINE_CACHE (empty: none), else the user's cache folder."""
    setting = os.environ.get(CACHE_ENV)
    if setting is not None:
        return Path(setting) if setting else None
    return Path(platformdirs.user_cache_dir("mnist-jax-pipeline")) / "imports.json"


_CACHE: ImportCache | None = None


def import_cache() -> ImportCache:
    """This process's import cache, loaded once (again where MNIST_PIPELINE_CACHE changes, as tests do)."""
    global _CACHE
    setting = os.environ.get(CACHE_ENV)
    if _CACHE is None or _CACHE.setting != setting:
        _CACHE = ImportCache(_cache_file())
        _CACHE.setting = setting
    return _CACHE


_RESOLVED: dict[tuple[str, str, str], set[str]] = {}  # (root, module, source digest) -> its package imports


def _imports(module: str, root: Path) -> set[str]:
    """Package modules named by every import statement of `module` (function-level ones too)."""
    path = module_file(module, root)
    assert path is not None, module
    cache = import_cache()
    named = cache.named_imports(module, path.name == "__init__.py", path)
    key = (str(root), module, cache.last_key)
    if key not in _RESOLVED:
        _RESOLVED[key] = {m for m in named if module_file(m, root) is not None}
    return _RESOLVED[key]


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
    import_cache().save()
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
