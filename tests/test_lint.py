"""The code base stays clean under the project's linter (ruff) and type checker (mypy), both configured in
pyproject.toml."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT


def test_ruff_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    done = subprocess.run(
        [ruff, "check", "src", "tests", "benchmarks", "tools"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_code_is_formatted():
    """`ruff format` for the Python, `snakefmt` for the Snakemake files: a contributor who runs either changes
    nothing that is not theirs."""
    tools = Path(sys.executable).parent
    ruff = shutil.which("ruff") or str(tools / "ruff")
    done = subprocess.run(
        [ruff, "format", "--check", "src", "tests", "benchmarks", "tools", "docker"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"run ruff format src tests benchmarks tools docker:\n{done.stdout}{done.stderr}"
    snakefmt = shutil.which("snakefmt") or str(tools / "snakefmt")
    done = subprocess.run(
        [snakefmt, "--check", "Snakefile", "workflow/rules"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, f"run snakefmt Snakefile workflow/rules:\n{done.stdout}{done.stderr}"


@pytest.mark.slow
def test_mypy_is_clean():
    mypy = shutil.which("mypy") or str(Path(sys.executable).parent / "mypy")
    for paths in (["src"], ["tools", "benchmarks"]):  # apart: the scripts import the installed package
        done = subprocess.run([mypy, *paths], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_snakemake_lint_is_clean():
    snakemake = Path(sys.executable).parent / "snakemake"
    done = subprocess.run([str(snakemake), "--lint"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Congratulations, your workflow is in a good condition!" in done.stdout + done.stderr
