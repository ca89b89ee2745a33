"""`mnist-pipeline preset NAME`: a preset merged over params.yaml, checked, written atomically, each
changed key printed; an unknown name or a bad result is one line and leaves params.yaml as it was."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, without_root_powers
from mnist_jax_pipeline.cli import main
from mnist_jax_pipeline.config.params import load


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the repository's params.yaml and presets/, the current directory."""
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    shutil.copytree(ROOT / "presets", tmp_path / "presets")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_complete_preset_gives_its_values_and_keeps_the_comments(project, capsys):
    assert main(["preset", "time-to-accuracy"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "train.epochs: 10 -> 2" in out and "variants: [nojit, jit] -> [jit_scan]" in out
    assert "preprocess.deskew: false -> true" in out
    assert "train.nesterov: false -> true" in out and not any(line.startswith("data.") for line in out)
    assert load("params.yaml") == load("presets/time-to-accuracy.yaml")
    text = (project / "params.yaml").read_text()
    assert "# One source of truth for every stage parameter." in text
    assert "  epochs: 2\n" in text and "variants: [jit_scan]          # train/evaluate/profile" in text
    assert sorted(p.name for p in project.iterdir()) == ["params.yaml", "presets"]  # no temporary left


def test_a_preset_piped_into_a_reader_that_goes_away_is_applied_all_the_same(project):
    """`mnist-pipeline preset NAME | head -1`: the changes it printed are in params.yaml, whenever the reader goes."""
    process = subprocess.Popen(
        [sys.executable, "-c", "from mnist_jax_pipeline import entry; entry()", "preset", "time-to-accuracy"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    errors = process.stderr.read()
    assert process.wait(timeout=120) == 141 and errors == "", errors
    assert load("params.yaml") == load("presets/time-to-accuracy.yaml")


def test_a_partial_preset_changes_only_its_keys(project, capsys):
    (project / "presets" / "smoke.yaml").write_text("preprocess:\n  max_train_examples: 1000\ntrain:\n  epochs: 1\n")
    before = (project / "params.yaml").read_text()
    assert main(["preset", "smoke"]) == 0
    assert capsys.readouterr().out.splitlines() == ["preprocess.max_train_examples: 0 -> 1000", "train.epochs: 10 -> 1"]
    after = (project / "params.yaml").read_text()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert [b.split("#")[0].strip() for _, b in changed] == ["max_train_examples: 1000", "epochs: 1"]


@pytest.mark.parametrize("layout", ["crlf", "four spaces", "long line"])
def test_a_preset_keeps_the_files_line_endings_indentation_and_long_lines(project, capsys, layout):
    (project / "presets" / "smoke.yaml").write_text("train:\n  epochs: 1\n")
    text = (project / "params.yaml").read_text()
    if layout == "crlf":
        text = text.replace("\n", "\r\n")
    elif layout == "four spaces":
        text = "\n".join(f"  {line}" if line.startswith("  ") else line for line in text.splitlines()) + "\n"
    else:  # a section in flow style, on one line of over 100 characters
        block = text[text.index("preprocess:") : text.index("model:")]
        pairs = ", ".join(line.split("#")[0].strip() for line in block.splitlines()[1:] if line.strip())
        text = text.replace(block, f"preprocess: {{{pairs}}}\n\n")
    (project / "params.yaml").write_bytes(text.encode())
    assert main(["preset", "smoke"]) == 0, capsys.readouterr().err
    after = (project / "params.yaml").read_bytes().decode()
    changed = [(a, b) for a, b in zip(text.splitlines(), after.splitlines(), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1].split("#")[0].strip() == "epochs: 1", changed
    assert after.count("\r\n") == (after.count("\n") if layout == "crlf" else 0)


def test_a_preset_edits_the_file_a_link_names_and_keeps_its_mode(project, capsys):
    (project / "params.yaml").rename(project / "real.yaml")
    (project / "params.yaml").symlink_to("real.yaml")
    (project / "real.yaml").chmod(0o640)
    assert main(["preset", "quick"]) == 0, capsys.readouterr().err
    assert (project / "params.yaml").is_symlink() and load("real.yaml").train.epochs == 1
    assert (project / "real.yaml").stat().st_mode & 0o777 == 0o640


def test_a_preset_that_is_a_dangling_link_or_a_folder_is_one_line(project, capsys):
    (project / "presets" / "gone.yaml").symlink_to("nowhere.yaml")
    (project / "presets" / "box.yaml").mkdir()
    before = (project / "params.yaml").read_bytes()
    for name, what in (("gone", "missing"), ("box", "is a folder, not a file")):
        assert main(["preset", name]) == 1
        assert capsys.readouterr().err.strip() == (
            f"error: presets/{name}.yaml: {what}; make it a file, or choose another preset"
        )
    assert (project / "params.yaml").read_bytes() == before


def test_a_read_only_params_file_is_refused_in_one_line_and_kept(project):
    (project / "params.yaml").chmod(0o444)
    before = (project / "params.yaml").read_bytes()
    command = [*without_root_powers(), sys.executable, "-m", "mnist_jax_pipeline.cli", "preset", "quick"]
    done = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.strip() == (
        "error: params.yaml: read-only; make it writable (chmod u+w params.yaml) to apply a preset"
    ), done.stderr
    assert (project / "params.yaml").read_bytes() == before


def test_the_quick_preset_keeps_every_stage_and_variant_and_shrinks_the_training(project, capsys):
    """presets/quick.yaml (CI's run in the container): 2,000 examples and one epoch, nothing else changed."""
    before = load("params.yaml")
    assert main(["preset", "quick"]) == 0
    assert capsys.readouterr().out.splitlines() == ["preprocess.max_train_examples: 0 -> 2000", "train.epochs: 10 -> 1"]
    after = load("params.yaml")
    assert after.variants == before.variants and after.model == before.model


def test_applying_it_again_changes_nothing(project, capsys):
    assert main(["preset", "time-to-accuracy"]) == 0
    stamp = (project / "params.yaml").stat().st_mtime_ns
    capsys.readouterr()
    assert main(["preset", "time-to-accuracy"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "nothing changed" in captured.err
    assert (project / "params.yaml").stat().st_mtime_ns == stamp


def test_an_unknown_preset_is_one_line_listing_the_names(project, capsys):
    (project / "presets" / "smoke.yaml").write_text("train:\n  epochs: 1\n")
    assert main(["preset", "fast"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: presets/fast.yaml: no such preset; available: quick, smoke, time-to-accuracy"]


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ("train:\n  epochs: 0\n", "params.yaml with preset 'bad': train.epochs: 0 is less than the minimum of 1"),
        ("train:\n  lr: 0.1\n", "params.yaml with preset 'bad': unknown key 'train.lr'"),
        ("- train\n", "presets/bad.yaml: not a mapping of sections to parameters"),
    ],
)
def test_a_preset_that_makes_bad_params_is_refused_and_writes_nothing(project, capsys, preset, expected):
    (project / "presets" / "bad.yaml").write_text(preset)
    before = (project / "params.yaml").read_bytes()
    assert main(["preset", "bad"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {expected}")
    assert (project / "params.yaml").read_bytes() == before
