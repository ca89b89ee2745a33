"""The code base stays clean under the project's linter (ruff, configured in pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_ruff_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    done = subprocess.run([ruff, "check", "src", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
