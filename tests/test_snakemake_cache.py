"""Snakemake's between-workflow output cache for `download` and `preprocess` (`cache: "omit-software"`).

Both rules are marked `cache: "omit-software"` when the run asks for the cache (`--cache`). A first
checkout runs both rules with `--cache` and moves their outputs into
`$SNAKEMAKE_OUTPUT_CACHE`; a second, fresh checkout of the same code and params takes both from the
cache without running them, byte for byte; a third with another preprocess seed takes only
`download` from the cache and runs `preprocess` itself.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import ROOT, mirror_dir
from workspace import make_workspace, sh, snakemake_planned

pytestmark = [pytest.mark.slow, pytest.mark.real_data]
CACHED = ("data/raw", "data/processed")
PREPARED = "INFO download mnist prepared in"  # the download stage's last log line when it really runs


def files_under(ws: Path, folder: str) -> dict[str, bytes]:
    """Every file under ws/folder (following the cache's symlinks) by path relative to ws."""
    found = {}
    for root, _, names in os.walk(ws / folder, followlinks=True):
        for name in names:
            if name != ".snakemake_timestamp":
                path = Path(root) / name
                found[str(path.relative_to(ws))] = path.read_bytes()
    return found


def provenance_hashes(cache: Path) -> set[str]:
    """One entry per cached job: its outputs are stored as <sha256 of the job's provenance><suffix>."""
    return {p.name[:64] for p in cache.iterdir() if len(p.name) >= 64 and not p.name.startswith("tmp")}


def cached_run(ws: Path) -> str:
    return sh(ws, "snakemake", "--cache", "--cores", "all", "preprocess")


@pytest.fixture(scope="module")
def checkouts(tmp_path_factory):
    mirror_dir()
    rules = (ROOT / "workflow/rules/data.smk").read_text()
    assert rules.count("cache: CACHE") == 2, "download and preprocess must be marked cache: CACHE"
    assert "CACHE = PIPELINE.cache" in (ROOT / "workflow/rules/common.smk").read_text()
    snakefile_py = ROOT / "src/mnist_jax_pipeline/orchestration/snakefile.py"
    assert '"omit-software" if workflow.workflow_settings.cache is not None' in snakefile_py.read_text()
    parent = tmp_path_factory.mktemp("cache")
    cache = parent / "snakemake-cache"
    cache.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SNAKEMAKE_OUTPUT_CACHE", str(cache))
        first, second = make_workspace(parent, "first"), make_workspace(parent, "second")
        third = make_workspace(parent, "third", **{"preprocess.seed": 1})
        outputs = {ws.name: cached_run(ws) for ws in (first, second, third)}
    return {"first": first, "second": second, "third": third, "cache": cache, "out": outputs}


def test_first_checkout_runs_and_fills_the_cache(checkouts):
    first, out = checkouts["first"], checkouts["out"]["first"]
    for folder in CACHED:
        assert f"Moving output file {folder}" in out, f"{folder} was not stored in the cache"
    assert PREPARED in (first / "logs/download.log").read_text()


def test_second_checkout_takes_both_from_the_cache(checkouts):
    first, second, out = checkouts["first"], checkouts["second"], checkouts["out"]["second"]
    assert "Moving output file" not in out, "the second checkout stored outputs, so it ran a rule"
    for folder in CACHED:
        assert f"Symlinking output file {folder}/" in out, f"{folder} was not taken from the cache"
    assert PREPARED not in (second / "logs/download.log").read_text()
    for folder in CACHED:
        mine, theirs = files_under(second, folder), files_under(first, folder)
        assert mine.keys() == theirs.keys() and mine, f"{folder}: different files"
        for rel, content in mine.items():
            assert content == theirs[rel], f"{rel} differs from the first checkout's"
    assert not {"download", "preprocess"} & snakemake_planned(second)


def test_changed_preprocess_param_takes_only_download_from_the_cache(checkouts):
    third, out = checkouts["third"], checkouts["out"]["third"]
    assert "Symlinking output file data/raw/" in out
    assert PREPARED not in (third / "logs/download.log").read_text()
    assert "Moving output file data/processed" in out  # preprocess ran with seed 1
    assert len(provenance_hashes(checkouts["cache"])) == 3, "expected raw + processed, and processed with seed 1"
