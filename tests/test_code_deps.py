"""The code-deps walk parses a file once per content: the import cache, in a process and between processes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from mnist_jax_pipeline.orchestration import code_deps, stage_table

PACKAGE_SRC = Path(__file__).resolve().parents[1] / "src" / "mnist_jax_pipeline"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    file = tmp_path / "cache" / "imports.json"
    monkeypatch.setenv(code_deps.CACHE_ENV, str(file))
    return file


@pytest.fixture
def package(tmp_path) -> Path:
    """A copy of the package to edit: src/mnist_jax_pipeline under tmp_path."""
    root = tmp_path / "src" / "mnist_jax_pipeline"
    shutil.copytree(PACKAGE_SRC, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_the_cache_gives_the_same_files_as_a_fresh_walk_and_is_kept_between_processes(cache, package):
    uncached = {s.name: code_deps.code_files(s, package) for s in stage_table.STAGES}
    assert cache.is_file()
    entries = json.loads(cache.read_text())["entries"]
    modules = {f for files in uncached.values() for f in files if f.endswith(".py")}
    assert len(entries) == len(modules)  # each module parsed once, whatever the number of stages reaching it
    code_deps._CACHE = None  # as a new process: read from the file
    assert {s.name: code_deps.code_files(s, package) for s in stage_table.STAGES} == uncached


def test_an_edited_module_is_parsed_again_even_with_the_same_size_and_time(cache, package, monkeypatch):
    evaluate = package / "stages" / "evaluate.py"
    before = code_deps.code_files(stage_table.get("evaluate"), package)
    assert str(package / "config" / "sweeps.py") not in before
    source = evaluate.read_text()
    stat = evaluate.stat()
    # the same number of bytes, the same file times, one more import: the cache is keyed by content
    edited = source.replace("from __future__ import annotations", "from ..config import sweeps as _s", 1)
    edited = edited + " " * (len(source.encode()) - len(edited.encode()))
    assert len(edited.encode()) == stat.st_size
    evaluate.write_text(edited)
    os.utime(evaluate, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    code_deps._CACHE = None
    assert str(package / "config" / "sweeps.py") in code_deps.code_files(stage_table.get("evaluate"), package)


def test_a_cache_that_cannot_be_read_or_written_only_costs_time(cache, package):
    cache.parent.mkdir(parents=True)
    cache.write_text("{not json")
    code_deps._CACHE = None
    files = code_deps.code_files(stage_table.get("train"), package)
    assert str(package / "stages" / "train.py") in files
    assert json.loads(cache.read_text())["version"] == code_deps.ImportCache.VERSION  # replaced whole


def test_an_empty_setting_keeps_no_cache(tmp_path, monkeypatch, package):
    monkeypatch.setenv(code_deps.CACHE_ENV, "")
    code_deps._CACHE = None
    assert str(package / "stages" / "train.py") in code_deps.code_files(stage_table.get("train"), package)
    assert code_deps.import_cache().file is None


def test_the_cache_keeps_the_entries_used_last(cache, package, monkeypatch):
    monkeypatch.setattr(code_deps.ImportCache, "KEPT", 5)
    code_deps._CACHE = None
    files = code_deps.code_files(stage_table.get("train"), package)
    entries = json.loads(cache.read_text())["entries"]
    assert len(entries) == 5  # the oldest went; what a later check reads is parsed again, no more
    code_deps._CACHE = None
    assert code_deps.code_files(stage_table.get("train"), package) == files
