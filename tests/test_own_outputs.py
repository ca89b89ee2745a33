"""A path named on the command line is written only when it is new or holds what the command made: no
command writes over git's files, params.yaml, a tracked file or a stranger's file, and each re-runs over
its own output."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from mnist_jax_pipeline.artefacts import evaluation, training
from mnist_jax_pipeline.cli import main
from mnist_jax_pipeline.comparison import compare
from mnist_jax_pipeline.config.params import load
from mnist_jax_pipeline.orchestration.crate import records
from mnist_jax_pipeline.orchestration.crate.command import METADATA

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def baseline_runs() -> tuple[list[compare.Run], list[str]]:
    """The committed baseline's variants as compare's runs (read from the repository)."""
    params = compare.flatten(load(ROOT / "params.yaml").to_dict())
    variants = sorted(p.name.removesuffix(".run.json") for p in (ROOT / "metrics" / "train").glob("*.run.json"))
    runs = [
        compare.Run(
            name=v,
            params={**params, "variant": v},
            train=training.read_metrics(v, ROOT).headline(),
            evaluation=evaluation.read_metrics(v, ROOT).headline(),
            history=training.read_history(v, ROOT),
            busy=None,
        )
        for v in variants
    ]
    return runs, compare.differing(runs)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git checkout with params.yaml and README.md tracked; compare's DVC rows are the baseline's, the
    crate's jobs none (what the commands read is not what this tests)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("params.yaml", "README.md"):
        shutil.copy(ROOT / name, ws / name)
    for name in ("src", "workflow", "Snakefile", "dvc.yaml", "pyproject.toml", "uv.lock"):
        (ws / name).symlink_to(ROOT / name)  # the crate describes the workflow's files
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    subprocess.run([*GIT, "add", "params.yaml", "README.md"], cwd=ws, check=True)
    subprocess.run([*GIT, "commit", "-qm", "init"], cwd=ws, check=True)
    runs, keys = baseline_runs()
    monkeypatch.setattr(compare, "from_dvc", lambda: (runs, keys, []))
    monkeypatch.setattr(records, "recorded_jobs", lambda hashes: ([], []))
    monkeypatch.chdir(ws)
    return ws


def argv(command: str, target: str) -> list[str]:
    """The command writing to `target` (crate: the folder holding ro-crate-metadata.json)."""
    return {
        "compare": ["compare", "--dvc", "--out", target],
        "crate": ["crate", "--out", target],
        "download": ["download", "--out", target],
        "preprocess": ["preprocess", "--out", target],
    }[command]


def stranger(project: Path) -> Path:
    """A file (and a folder holding one) that no command of the pipeline made."""
    outside = project.parent / "theirs"
    outside.mkdir(exist_ok=True)
    (outside / METADATA).write_text('{"@graph": []}\n')
    (outside / "page.html").write_text("<html>their page</html>\n")
    if not (outside / "pipe").exists():
        os.mkfifo(outside / "pipe")  # read for a signature, it must not be waited on
    return outside


@pytest.mark.parametrize("command", ["compare", "crate", "download", "preprocess"])
@pytest.mark.parametrize(
    "target", [".git/config", ".git", "params.yaml", "README.md", "theirs/page.html", "theirs", "theirs/pipe"]
)
def test_no_command_writes_over_a_file_it_did_not_make(
    project: Path, capsys: pytest.CaptureFixture[str], command: str, target: str
) -> None:
    stranger(project)
    path = project.parent / target if target.startswith("theirs") else project / target
    before = {p: p.read_bytes() for p in [path, *(path.rglob("*") if path.is_dir() else [])] if p.is_file()}
    assert main(argv(command, str(path))) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and str(path) in err[0], err
    assert {p: p.read_bytes() for p in before} == before
    if command in ("crate", "download", "preprocess") and path.is_file():
        return  # refused as not a folder, or as not its own
    assert "choose another path" in err[0] or "not a folder" in err[0], err


@pytest.mark.parametrize("command", ["compare", "crate", "download", "preprocess"])
def test_an_out_under_a_file_asks_for_another_out_and_keeps_the_file(
    project: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    readme = project / "README.md"
    before = readme.read_bytes()
    assert main(argv(command, "README.md/x.html" if command == "compare" else "README.md/x")) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: README.md: not a folder, and README.md/x"), err
    assert err[0].endswith("is written in it; choose another --out"), err
    assert readme.read_bytes() == before


def test_crate_at_its_default_place_asks_to_move_a_file_it_did_not_make(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = project / METADATA
    theirs.write_text('{"@graph": []}\n')
    assert main(["crate"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {METADATA}: a file `mnist-pipeline crate` did not make"), err
    assert err[0].endswith("move it away") and theirs.read_text() == '{"@graph": []}\n'


@pytest.mark.parametrize("command", ["compare", "crate", "download", "preprocess"])
def test_no_command_replaces_a_link_it_did_not_make(
    project: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    link, nowhere = project.parent / "their-link", project.parent / "nowhere"
    link.symlink_to(nowhere)  # a link that leads nowhere yet is still theirs
    assert main(argv(command, str(link))) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and str(link) in err[0], err
    assert link.is_symlink() and Path(os.readlink(link)) == nowhere


@pytest.mark.parametrize("target", ["newdir/", "pages"])
def test_compare_given_a_folder_asks_for_the_pages_file(
    project: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    (project / "pages").mkdir()
    assert main(["compare", "--dvc", "--out", target]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == f"error: --out {target}: a folder; give the page's file, such as " + str(
        Path(target) / "page.html"
    ), err
    assert not (project / "newdir").exists() and not any((project / "pages").iterdir())


def test_compare_and_crate_rewrite_their_own_output(project: Path, tmp_path: Path) -> None:
    page, crate = tmp_path / "out" / "page.html", tmp_path / "crate"
    for _ in range(2):  # the second run finds the first one's files and writes over them
        assert main(argv("compare", str(page))) == 0
        assert main(argv("crate", str(crate))) == 0
    assert compare.SIGNATURE in page.read_text() and (crate / METADATA).is_file()


def test_a_refusal_names_why(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    theirs = stranger(project)
    (project / "docs").mkdir(exist_ok=True)
    tracked = project / "docs" / "page.html"  # a tracked file that quotes the command's signature
    tracked.write_text(f"<p>{compare.SIGNATURE}</p>")
    subprocess.run(["git", "add", str(tracked)], cwd=project, check=True, capture_output=True)
    expected = {
        ".git/config": "inside .git/, git's own files",
        ".dvc/config.local": "inside .dvc/, DVC's own files",
        "provenance/report.json": "inside provenance/, the provenance records",
        "README.md": "tracked by git",
        "docs/page.html": "tracked by git",
        "metrics/evaluate/x.html": "inside metrics/evaluate/, a folder of the stages' per-variant outputs",
        "reports/profile/jit/trace/x.html": "inside reports/profile/, a folder of the stages' per-variant outputs",
        "sweeps/s/p/models/x.html": "inside models/, a folder of the stages' per-variant outputs",
        "sweeps/s/p/provenance/x.json": "inside provenance/, the provenance records",
        str(theirs / "page.html"): "a file `mnist-pipeline compare` did not make",
    }
    for target, reason in expected.items():
        assert main(argv("compare", target)) == 1
        assert capsys.readouterr().err.strip() == (
            f"error: --out {target}: {reason}; `mnist-pipeline compare` writes only a new path or one it made"
            " itself: choose another path"
        )


@pytest.mark.parametrize(("command", "target"), [("download", "data/raw/new"), ("preprocess", "data/processed/x")])
def test_an_out_inside_the_commands_own_output_folder_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str], command: str, target: str
) -> None:
    """DVC replaces a stage's output folder whole: a folder written inside it would be lost."""
    assert main(argv(command, target)) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --out {target}: an output of the '{command}' stage;"), err
    assert not (project / target).exists()


def test_compare_refuses_a_file_it_did_not_make_at_its_default_path(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = project / "reports" / "experiments.html"
    page.parent.mkdir()
    page.write_text("my own notes\n")
    assert main(["compare", "--dvc"]) == 1
    assert "a file `mnist-pipeline compare` did not make" in capsys.readouterr().err
    assert page.read_text() == "my own notes\n"
    page.unlink()
    for _ in range(2):  # its own page it writes, and then writes over
        assert main(["compare", "--dvc"]) == 0
    assert compare.SIGNATURE in page.read_text()
