"""Other Pythons for the tests: find an interpreter, build a virtual environment for it with uv.

Used by tests/test_pythons.py (Python 3.12 with the lock's versions) and tests/test_device_run.py
(Python 3.12 with the GPU image's versions). uv's cache makes a rebuild take seconds.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, unavailable

sys.path.insert(0, str(ROOT / "tools"))
from device_bundle import lock_closure, normal  # noqa: E402  (tools/ is no package)

RUNTIME_TXT = ROOT / "requirements" / "runtime.txt"


def _is_version(python: str, version: str) -> bool:
    """Whether `python` runs and is that minor version (a pyenv shim of a version not selected fails)."""
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError:
        return False
    return done.returncode == 0 and done.stdout.strip() == version


def find_python(version: str = "3.12") -> str:
    """An interpreter of that version: uv's (no download), `pythonX.Y` on PATH, or pyenv's; else the test
    cannot run here (a failure under CI=true)."""
    candidates: list[str] = []
    found = subprocess.run([uv(), "python", "find", "--no-python-downloads", version], capture_output=True, text=True)
    if found.returncode == 0 and found.stdout.strip():
        candidates.append(found.stdout.strip())
    if shutil.which(f"python{version}"):
        candidates.append(f"python{version}")
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(glob.glob(f"{pyenv}/{version}*/bin/python{version}"), reverse=True)
    for python in candidates:
        if _is_version(python, version):
            return python
    unavailable(f"needs Python {version} (uv python find, python{version} on PATH or pyenv's)")


def uv() -> str:
    """The uv pinned in requirements/uv.txt (tools/ensure-uv.sh finds or installs it)."""
    done = subprocess.run(["bash", str(ROOT / "tools" / "ensure-uv.sh")], capture_output=True, text=True)
    if done.returncode != 0:
        unavailable(f"needs uv: tools/ensure-uv.sh failed ({done.stderr.strip()[-200:]})")
    return done.stdout.strip()


def make_venv(folder: Path, python: str, *install: str, seed: bool = False, byte_code: bool = False) -> Path:
    """A virtual environment of `python` at `folder` with `uv pip install <install...>`; its interpreter.
    `byte_code`: compiled at install, as pip installs do (these machines set PYTHONDONTWRITEBYTECODE, so a
    venv without it compiles every module again in every process that imports it)."""
    tool = uv()  # --no-config, outside the checkout: the project's [tool.uv] constraints do not apply
    subprocess.run(
        [tool, "venv", "--no-config", "--quiet", "--python", python, *(["--seed"] if seed else []), str(folder)],
        check=True,
        cwd=folder.parent,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
    )
    interpreter = folder / "bin" / "python"
    if install:
        done = subprocess.run(
            [
                *(tool, "pip", "install", "--no-config", "--quiet", "--python", str(interpreter)),
                *(["--compile-bytecode"] if byte_code else []),
                *install,
            ],
            capture_output=True,
            text=True,
            cwd=folder.parent,
        )
        assert done.returncode == 0, f"uv pip install {' '.join(install)}:\n{done.stderr[-3000:]}"
    return interpreter


def locked_requirements(roots: list[str]) -> str:
    """The entries of requirements/runtime.txt (pins, markers, hashes) for `roots` and what they need."""
    wanted = lock_closure(roots)
    kept: dict[str, str] = {}
    for entry in re.split(r"\n(?=\S)", RUNTIME_TXT.read_text(encoding="utf-8")):
        match = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==", entry)
        if match and normal(match.group(1)) in wanted:
            kept[normal(match.group(1))] = "\n".join(
                line for line in entry.splitlines() if not line.lstrip().startswith("#")
            )
    missing = sorted({normal(name) for name in roots} - set(kept))
    assert not missing, f"{RUNTIME_TXT}: no pin for {missing}"
    return "\n".join(kept.values()) + "\n"
