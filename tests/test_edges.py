"""Trust at the edges: the inputs that used to crash or mislead, each now one line naming the file or
key and the fix; parameters read exactly as DVC reads them; signals and kills leave nothing behind."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, adopt, jax_starts, run_stages, tiny_params_dict, without_root_powers, write_params, write_raw
from mnist_jax_pipeline.artefacts import atomic
from mnist_jax_pipeline.cli import main
from mnist_jax_pipeline.config import sweeps
from mnist_jax_pipeline.config.params import MAX_FILE_BYTES, read_yaml, validate
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.foundation.errors import PipelineError

BIN = Path(sys.executable).parent


def cli(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`mnist-pipeline ARGS` in a fresh interpreter (stderr is what a user sees)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MNIST_PIPELINE_LOCK": str(cwd / ".lock")}
    return subprocess.run(
        [str(BIN / "mnist-pipeline"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def one_line(done: subprocess.CompletedProcess) -> str:
    """The single `error:` line of a failed command, with no traceback."""
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "Traceback" not in done.stderr and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_params(tmp_path / "params.yaml", tiny_params_dict())
    return tmp_path


# --- parameters --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "key", "text", "expected"),
    [
        ("train", "epochs", "1.0", "train.epochs: 1.0 is not an integer; write it without a decimal point"),
        ("preprocess", "max_train_examples", "300.0", "preprocess.max_train_examples: 300.0 is not an integer"),
        ("preprocess", "validation_fraction", ".nan", "preprocess.validation_fraction: NaN is not a finite number"),
        (
            "model",
            "seed",
            "99999999999999999999",
            "model.seed: 99999999999999999999 is more than the maximum of 4294967295",
        ),
        ("train", "shuffle_seed", "4294967296", "train.shuffle_seed: 4294967296 is more than the maximum"),
        ("train", "step_size", ".inf", "train.step_size: Infinity is not a finite number"),
        ("train", "shuffle", "yes", 'train.shuffle: "yes" is not a boolean; write true or false'),
        ("train", "batch_size", "true", "train.batch_size: true is not an integer"),
    ],
)
def test_values_that_used_to_crash_a_later_stage_are_refused_by_check(project, section, key, text, expected):
    write_params(project / "params.yaml", tiny_params_dict(**{section: {key: "__VALUE__"}}))
    path = project / "params.yaml"
    path.write_text(path.read_text().replace("__VALUE__", text))
    assert one_line(cli(project, "check")).startswith(f"error: params.yaml: {expected}")


def test_an_empty_training_split_is_refused_before_any_stage(project):
    write_params(
        project / "params.yaml", tiny_params_dict(preprocess={"max_train_examples": 10, "validation_fraction": 0.99})
    )
    line = one_line(cli(project, "check"))
    assert line.startswith("error: params.yaml: preprocess.validation_fraction: no training example is left")


def test_an_empty_split_of_smaller_data_stops_preprocess_with_one_line(project):
    """check knows the dataset's size; the data on disk may be smaller (a test set-up, a damaged export)."""
    write_raw(project / "data" / "raw", train=20, test=10)
    write_params(
        project / "params.yaml", tiny_params_dict(preprocess={"max_train_examples": 0, "validation_fraction": 0.99})
    )
    line = one_line(cli(project, "preprocess"))
    assert "leave none after the validation split; lower preprocess.validation_fraction" in line
    assert not (project / paths.PROCESSED.path).exists()


YAML_12 = [
    "1e-3",
    "1E-3",
    "1.0e-3",
    ".5",
    "1_000",
    "0x10",
    "0o17",
    "017",
    "+1",
    "yes",
    "on",
    "~",
    ".nan",
    ".inf",
    "-.inf",
    "1e400",
    "99999999999999999999",
    "'1e-3'",
    "2026-01-01",
    "[1, 2]",
]


@pytest.mark.parametrize("text", YAML_12)
def test_params_are_read_exactly_as_dvc_reads_them(tmp_path, text):
    from dvc.utils.serialize import parse_yaml

    path = tmp_path / "params.yaml"
    path.write_text(f"value: {text}\n")
    ours, theirs = read_yaml(path)["value"], parse_yaml(path.read_text(), str(path))["value"]
    assert type(ours) is type(theirs)
    assert ours == theirs or (ours != ours and theirs != theirs)  # NaN


def test_a_common_float_notation_is_a_number_for_both(project):
    text = (project / "params.yaml").read_text().replace("step_size: 0.01", "step_size: 1e-3")
    (project / "params.yaml").write_text(text)
    done = cli(project, "check")
    assert done.returncode == 0, done.stderr


def test_a_latin1_byte_in_a_comment_is_one_line(project):
    path = project / "params.yaml"
    path.write_bytes(path.read_bytes() + "# caf\u00e9\n".encode("latin-1"))
    line = one_line(cli(project, "check"))
    assert line.startswith("error: params.yaml: byte 0xe9 on line") and line.endswith("save the file as UTF-8")


def test_params_naming_a_folder_is_one_line(project):
    (project / "folder").mkdir()
    assert one_line(cli(project, "--params", "folder", "check")) == (
        "error: folder: is a folder, not a file; run from the project root, or give --params a file"
    )


@pytest.mark.slow
def test_snakemake_refuses_bad_params_before_scheduling_any_job(project):
    for name in ("Snakefile", "workflow", "src"):
        (project / name).symlink_to(ROOT / name)
    write_params(project / "params.yaml", tiny_params_dict(train={"epochs": 1.5}))
    done = subprocess.run(
        [str(BIN / "snakemake"), "-n", "--cores", "1"],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        timeout=120,
    )
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "error: params.yaml: train.epochs: 1.5 is not an integer" in output
    assert "Job stats" not in output and "Traceback" not in output


# --- files the pipeline reads and writes ----------------------------------------------------------------


def test_an_unreadable_mirror_file_is_one_line(project):
    from mnist_jax_pipeline.stages.download.datasets import PINNED

    mirror = project / "mirror"
    mirror.mkdir()
    for pinned in PINNED["mnist"]:
        (mirror / pinned.name).write_bytes(b"x")
    (mirror / PINNED["mnist"][0].name).chmod(0)
    done = subprocess.run(
        [*without_root_powers(), str(BIN / "mnist-pipeline"), "download"],
        cwd=project,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT / "src"),
            "MNIST_MIRROR": str(mirror),
            "MNIST_PIPELINE_LOCK": str(project / ".lock"),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = one_line(done)
    assert line == (
        f"error: {mirror / PINNED['mnist'][0].name}: cannot read (Permission denied); make it"
        " readable, or point MNIST_MIRROR at a readable copy"
    )


def test_a_mirror_setting_that_points_nowhere_is_one_line(project):
    done = subprocess.run(
        [str(BIN / "mnist-pipeline"), "download"],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "MNIST_MIRROR": str(project / "nope")},
    )
    assert one_line(done).startswith(f"error: MNIST_MIRROR={project / 'nope'}: not a folder")


def test_a_read_only_checkout_is_one_line(project):
    write_raw(project / "data" / "raw")
    run_stages(project, ["preprocess"])
    project.chmod(0o555)
    try:
        done = subprocess.run(
            [*without_root_powers(), str(BIN / "mnist-pipeline"), "train", "--variant", "jit"],
            cwd=project,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        project.chmod(0o755)
    assert one_line(done) == (
        "error: .: cannot write (Permission denied), and models/jit.safetensors is written there;"
        " make it writable (chmod u+w .) or run in a writable copy of the project"
    )
    assert "epoch 1" not in done.stderr  # refused before training, not after it


def test_a_lock_file_that_cannot_be_opened_is_one_line(project):
    write_raw(project / "data" / "raw")
    run_stages(project, ["preprocess"])
    done = subprocess.run(
        [str(BIN / "mnist-pipeline"), "train", "--variant", "jit"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "MNIST_PIPELINE_LOCK": "/proc/no.lock"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = one_line(done)
    assert line.startswith("error: /proc/no.lock: cannot open the timing lock of 'train@jit' (")
    assert line.endswith("set MNIST_PIPELINE_LOCK to a writable file")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (json.dumps({"dataset": "mnist", "splits": []}), "manifest.json: 'tfds_version': field required"),
        ("[1, 2]", "manifest.json: input should be an object"),
        ("{", "manifest.json: corrupt JSON"),
    ],
)
def test_a_manifest_of_the_wrong_shape_names_the_download_stage(project, content, expected):
    write_raw(project / "data" / "raw")
    (project / paths.RAW.path / "manifest.json").write_text(content)
    adopt(project)  # as a download stage of another format would have left it
    line = one_line(cli(project, "preprocess"))
    assert expected in line and line.endswith("re-run the 'download' stage")


# --- everyday mistakes --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["/dev/zero", "big.yaml"])
def test_a_params_file_over_the_cap_is_refused_before_it_is_read(project, name):
    if name == "big.yaml":
        with open(project / name, "wb") as handle:
            handle.truncate(MAX_FILE_BYTES + 1)  # sparse: no 1 MiB written
    line = one_line(cli(project, "--params", name, "check", timeout=60))  # /dev/zero: refused, not read without end
    assert line == (f"error: {name}: more than 1 MiB, more than such a file holds; check the path")


@pytest.mark.parametrize("option", ["--params", "preset"])
def test_a_named_pipe_with_no_writer_is_read_as_empty_not_waited_on(project, option):
    os.mkfifo(project / "pipe.yaml")
    (project / "presets").mkdir()
    os.mkfifo(project / "presets" / "pipe.yaml")
    before = (project / "params.yaml").read_bytes()
    args = ("--params", "pipe.yaml", "check") if option == "--params" else ("preset", "pipe")
    line = one_line(cli(project, *args, timeout=60))
    assert "pipe.yaml: " in line and ("expected a mapping" in line or "not a mapping" in line), line
    assert (project / "params.yaml").read_bytes() == before


def test_a_pipe_with_a_writer_is_read_to_its_end(project):
    """--params <(...): a process substitution, whose writer may start late, is read as the file it carries."""
    command = f"{BIN / 'mnist-pipeline'} --params <(sleep 1; cat params.yaml) check"
    done = subprocess.run(["bash", "-c", command], cwd=project, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and ": valid (sha256 " in done.stdout, done.stderr


def replace_with(path: Path, special: str) -> None:
    path.unlink()
    if special == "pipe":
        os.mkfifo(path)
    else:
        path.symlink_to(special)


@pytest.mark.parametrize("special", ["pipe", "/dev/zero"])
def test_a_pipe_or_a_device_in_place_of_an_output_or_a_record_is_answered_at_once(project, special):
    """explain, crate and a stage's checks neither wait on a pipe with no writer nor read a device without end."""
    write_raw(project / "data" / "raw")
    adopt(project)
    manifest = f"{paths.RAW.path}/manifest.json"
    replace_with(project / manifest, special)
    said = cli(project, "explain", manifest, timeout=60).stdout
    assert "  file      differs from its record: sha256 special:" in said, said
    assert one_line(cli(project, "preprocess", timeout=60)).startswith(f"error: {manifest}: changed since")
    replace_with(project / "provenance/download.json", special)
    said = cli(project, "explain", manifest, timeout=60).stdout
    assert "(provenance/download.json: not a record of this job)" in said, said
    assert one_line(cli(project, "crate", timeout=60)).startswith(
        "error: provenance/download.json: not a provenance record (unreadable or damaged);"
    )


def test_a_sweep_file_over_the_cap_is_refused(project):
    (project / "big.yaml").write_text("grid:\n  train.epochs: [1]\n" + "#" * MAX_FILE_BYTES)
    with pytest.raises(PipelineError, match=r"big.yaml: more than 1 MiB"):
        sweeps.load(project / "big.yaml", project / "params.yaml")


def test_a_long_value_or_key_in_an_error_is_cut():
    with pytest.raises(PipelineError) as err:
        validate(tiny_params_dict(train={"optimizer": "x" * 5000}))
    assert str(err.value) == (
        'params.yaml: train.optimizer: "' + "x" * 79 + "… (5,002 characters) is not allowed;"
        ' use one of "sgd", "momentum", "adam"'
    )
    with pytest.raises(PipelineError) as err:
        validate(tiny_params_dict(train={"k" * 500: 1}))
    assert str(err.value).startswith("params.yaml: unknown key 'train." + "k" * 74 + "… (506 characters)'; allowed")


def c_locale() -> dict[str, str]:
    """An ASCII locale with Python's UTF-8 mode off and no PYTHONIOENCODING: open() and print() default to ASCII."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LANG", "LC_CTYPE")}
    return {**env, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONPATH": str(ROOT / "src")}


def test_text_is_written_and_read_as_utf8_whatever_the_locale(project):
    text = "98.5% \u2026 2\u00b3\u00b2 r\u00e9glages"
    code = (
        "import locale; from mnist_jax_pipeline.orchestration import generate;"
        " from mnist_jax_pipeline.artefacts import atomic;"
        " assert locale.getpreferredencoding(False) == 'ANSI_X3.4-1968', locale.getpreferredencoding(False);"
        f" atomic.write_text({str(project / 'out.md')!r}, {ascii(text)});"
        " generate.dvc_yaml()"
    )  # the code it lists is not ASCII
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=c_locale(), capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    assert (project / "out.md").read_bytes() == text.encode("utf-8")
    shutil.copytree(ROOT / "presets", project / "presets")
    params = project / "params.yaml"
    params.write_bytes(f"# {text}\n".encode() + params.read_bytes())
    done = subprocess.run(
        [str(BIN / "mnist-pipeline"), "preset", "time-to-accuracy"], cwd=project, env=c_locale(), capture_output=True
    )
    assert done.returncode == 0 and b"preprocess.deskew: false -> true" in done.stdout, done.stderr.decode()
    assert params.read_bytes().startswith(f"# {text}\n".encode())


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["gpu", "cuda"])
def test_a_jax_platform_this_machine_lacks_is_one_line(project, platform):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "MNIST_PIPELINE_LOCK": str(project / ".lock"),
        "JAX_PLATFORMS": platform,
    }
    if jax_starts(platform):
        pytest.skip(f"this machine has a working JAX_PLATFORMS={platform} backend")
    write_raw(project / "data" / "raw")
    run_stages(project, ["preprocess"])
    done = subprocess.run(
        [str(BIN / "mnist-pipeline"), "train", "--variant", "jit"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = one_line(done)  # JAX's own error was a 55-line traceback
    assert line.startswith(f"error: JAX_PLATFORMS={platform}: JAX cannot start that backend here (")
    assert "set JAX_PLATFORMS=cpu, or unset it" in line


def test_sweep_queue_outside_a_git_repository_says_so(project, monkeypatch, capsys):
    (project / "s.yaml").write_text("grid:\n  train.epochs: [1]\n")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(project.parent))
    monkeypatch.chdir(project)
    assert main(["sweep-queue", "--file", "s.yaml"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {project}: not in a git repository, and DVC experiments")
    assert "dvc.lock" not in err[0]


def test_an_empty_grid_list_beside_other_keys_is_refused(project):
    (project / "s.yaml").write_text(
        "grid:\n  train.step_size: [0.1]\n  train.epochs: []\npoints:\n  - {train.epochs: 2}\n"
    )  # the grid used to be dropped, the point kept
    with pytest.raises(PipelineError) as err:
        sweeps.load(project / "s.yaml", project / "params.yaml")
    assert (
        str(err.value)
        == f"{project / 's.yaml'}: grid: 'train.epochs' has no values, so no point; give it one or remove it"
    )


def test_a_sweep_of_more_points_than_are_planned_in_seconds_is_refused(project):
    """100,000 points took Snakemake minutes and gigabytes to plan, silently: more than 1,000 are one line."""
    keys = ("train.epochs", "train.batch_size", "train.shuffle_seed", "model.seed", "train.step_size")
    grid = "".join(f"  {key}: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n" for key in keys)  # checked before any point
    (project / "s.yaml").write_text(f"grid:\n{grid}")
    with pytest.raises(PipelineError) as err:
        sweeps.load(project / "s.yaml", project / "params.yaml")
    assert str(err.value) == f"{project / 's.yaml'}: 100,000 points, more than the 1,000 a sweep may have; split it"


# --- signals and kills ----------------------------------------------------------------------------------


def _start_profile(project: Path) -> subprocess.Popen:
    """The profile stage on tiny data, started; returns once its temporary folder exists."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MNIST_PIPELINE_LOCK": str(project / ".lock")}
    proc = subprocess.Popen(
        [str(BIN / "mnist-pipeline"), "profile", "--variant", "jit"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list((project / "reports" / "profile").glob(f"{atomic.TMP_PREFIX}jit.*")):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the profile stage never started writing"
        time.sleep(0.02)
    return proc


@pytest.fixture
def trained(project: Path) -> Path:
    write_raw(project / "data" / "raw")
    run_stages(project, ["preprocess"], ["train", "--variant", "jit"])
    return project


def _debris(project: Path) -> list[str]:
    return sorted(str(p.relative_to(project)) for p in project.rglob(f"{atomic.TMP_PREFIX}*"))


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_removes_the_temporary_output_and_exits_128_plus_n(trained, sig):
    proc = _start_profile(trained)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, stderr
    assert f"error: profile@jit stopped by {signal.Signals(sig).name}" in stderr and "Traceback" not in stderr
    assert _debris(trained) == [] and not paths.PROFILE.at("jit", trained).exists()


@pytest.mark.slow
def test_what_a_sigkill_leaves_is_swept_by_the_next_run(trained):
    proc = _start_profile(trained)
    proc.kill()
    proc.wait(timeout=60)
    assert _debris(trained), "SIGKILL leaves the temporary folder (nothing can run on SIGKILL)"
    done = cli(trained, "profile", "--variant", "jit")
    assert done.returncode == 0, done.stderr
    assert _debris(trained) == [] and (paths.PROFILE.at("jit", trained) / "summary.json").is_file()


KILL_BETWEEN_RENAMES = """
import os, signal, sys
from pathlib import Path
from mnist_jax_pipeline.artefacts import atomic
target = Path(sys.argv[1])
calls = []
real_replace = os.replace
def replace(src, dst):
    calls.append((src, dst))
    if len(calls) == 2:  # the earlier output is set aside; the new one is not yet in place
        os.kill(os.getpid(), signal.SIGKILL)
    return real_replace(src, dst)
atomic.os.replace = replace
with atomic.atomic_dir(target) as tmp:
    (tmp / "version").write_text("new")
"""


def test_a_kill_between_the_renames_never_loses_the_earlier_output(tmp_path):
    target = tmp_path / "out"
    with atomic.atomic_dir(target) as tmp:
        (tmp / "version").write_text("earlier")
    done = subprocess.run(
        [sys.executable, "-c", KILL_BETWEEN_RENAMES, str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert not target.exists()
    (old,) = tmp_path.glob(f"{atomic.TMP_PREFIX}out.*.old")
    assert (old / "version").read_text() == "earlier"
    atomic.sweep(target)  # what the next run of the stage does first
    assert (target / "version").read_text() == "earlier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


DROPPED_STOP = """
import os, signal, sys, time
from mnist_jax_pipeline import cli
from mnist_jax_pipeline.artefacts import atomic
from mnist_jax_pipeline.foundation.stops import Stopped
from mnist_jax_pipeline.orchestration import commands

def write_and_drop_a_stop(args):
    atomic.write_text("out.txt", "written")
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)
    except Stopped as err:
        if os.environ["LIBRARY"] == "replaces":  # as an extension's failed init does
            raise ImportError("Encountered an error while initializing the extension.") from err
        # drops: as a library's callback does

class Dropping(commands.Command):
    def function(self):
        return write_and_drop_a_stop

commands.COMMANDS["show"] = Dropping("config.params", "writes out.txt and drops a stop")
sys.argv = ["mnist-pipeline", "show"]
cli.entry()
"""


@pytest.mark.parametrize("library", ["drops", "replaces"])
def test_a_stop_a_library_drops_or_replaces_still_stops_the_command_before_its_outputs_are_in_place(tmp_path, library):
    done = subprocess.run(
        [sys.executable, "-c", DROPPED_STOP],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "LIBRARY": library},
    )
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "stopped by SIGTERM" in done.stderr and not (tmp_path / "out.txt").exists(), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.real_data
@pytest.mark.slow
def test_sigterm_during_download_leaves_nothing(tmp_path, mirror):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "MNIST_MIRROR": str(mirror),
        "MNIST_PIPELINE_LOCK": str(tmp_path / ".lock"),
    }
    write_params(tmp_path / "params.yaml", tiny_params_dict())
    proc = subprocess.Popen(
        [str(BIN / "mnist-pipeline"), "download"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    # inside TFDS's preparation: it has begun writing its TFRecords into the stage's temporary folder
    while not list((tmp_path / "data").glob(f"{atomic.TMP_PREFIX}raw.*/tfds-work/**/*.tfrecord*")):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "TFDS never began writing its TFRecords"
        time.sleep(0.02)
    proc.terminate()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert _debris(tmp_path) == [] and not (tmp_path / paths.RAW.path).exists()


def test_a_stages_outputs_are_put_in_place_together_or_not_at_all(tmp_path):
    first, second = tmp_path / "metrics.json", tmp_path / "plots" / "rows.csv"
    atomic.write_text(first, "old")
    with pytest.raises(RuntimeError, match="a later output"), atomic.together():
        atomic.write_text(first, "new")
        assert first.read_text() == "old"  # written, not yet in place
        raise RuntimeError("a later output could not be written")
    assert first.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # no temporary file left
    with atomic.together():
        atomic.write_text(first, "new")
        with atomic.atomic_dir(tmp_path / "folder") as folder:
            (folder / "x").write_text("x")
        atomic.write_text(second, "rows")
    assert (first.read_text(), second.read_text(), (tmp_path / "folder" / "x").read_text()) == ("new", "rows", "x")


def test_a_failure_while_putting_outputs_in_place_puts_every_earlier_one_back(tmp_path, monkeypatch):
    model, folder, metrics, plot = (tmp_path / n for n in ("model.bin", "folder", "metrics.json", "plot.csv"))
    atomic.write_text(model, "old model")
    with atomic.atomic_dir(folder) as made:
        (made / "x").write_text("old x")

    def outputs(plot_text: str) -> None:
        with atomic.together():
            atomic.write_text(model, "new model")
            with atomic.atomic_dir(folder) as made:
                (made / "x").write_text("new x")
            atomic.write_text(metrics, "new metrics")
            atomic.write_text(plot, plot_text)

    def unchanged() -> bool:
        kept = (model.read_text(), (folder / "x").read_text(), metrics.exists()) == ("old model", "old x", False)
        return kept and not [p for p in tmp_path.iterdir() if p.name.startswith(atomic.TMP_PREFIX)]

    plot.mkdir()  # a folder where a file goes: the user's, kept
    (plot / "mine.txt").write_text("mine")
    with pytest.raises(PipelineError, match=r"plot.csv: a folder where a file is written; move it away"):
        outputs("new plot")
    assert unchanged() and (plot / "mine.txt").read_text() == "mine"
    shutil.rmtree(plot)
    replace = os.replace

    def full_disk(source: object, target: object) -> None:
        if Path(str(target)) == plot:
            raise OSError(28, "No space left on device")
        replace(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(PipelineError, match=r"plot.csv: cannot write \(No space left on device\)"):
        outputs("new plot")
    assert unchanged() and not plot.exists()


SETTINGS = [
    "MNIST_PIPELINE_LOG",
    "MNIST_PIPELINE_LOCK",
    "MNIST_PIPELINE_CACHE",
    "MNIST_PIPELINE_ORCHESTRATOR",
    "MNIST_PIPELINE_CUTOFF",
]


@pytest.mark.parametrize("variable", SETTINGS)
def test_a_setting_that_names_a_project_file_never_changes_it(project, variable):
    """A setting pointed at params.yaml (or a file the pipeline keeps) is refused in one line or used without
    writing into it; no setting is read as a cache of the pipeline's own. The Snakemake identity a stage
    watches is refused, not taken for a Snakemake that has gone."""
    before = (project / "params.yaml").read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), variable: str(project / "params.yaml")}
    done = subprocess.run(
        [str(BIN / "mnist-pipeline"), "check"], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )
    if variable == "MNIST_PIPELINE_LOG":
        assert one_line(done).startswith("error: MNIST_PIPELINE_LOG=") and "not a .log file" in done.stderr
    elif variable == "MNIST_PIPELINE_ORCHESTRATOR":
        assert one_line(done).startswith(f"error: {variable}=") and "not a process's pid" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
    assert (project / "params.yaml").read_bytes() == before


@pytest.mark.parametrize("log", ["gone/x.log", "a" * 300 + ".log", "pipe.log"])
def test_a_log_file_in_a_folder_that_is_not_there_is_refused_before_the_work(project, log):
    """Snakemake makes a job's log folder; by hand, a log setting in no folder (or one no file can have: too long a
    name, a pipe) would fail only at the first line logged, after the work."""
    os.mkfifo(project / "pipe.log")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MNIST_PIPELINE_LOG": str(project / log)}
    done = subprocess.run(
        [str(BIN / "mnist-pipeline"), "check"], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )
    assert one_line(done).startswith("error: MNIST_PIPELINE_LOG=") and "not a .log file in a folder" in done.stderr
    assert not (project / "gone").exists() and not (project / "provenance" / "check.json").exists()


def test_a_stop_as_a_temporary_folder_is_made_still_has_it_removed(tmp_path, monkeypatch):
    """A stop that comes between making the temporary and listing it among the command's is raised after."""
    import tempfile

    from mnist_jax_pipeline.foundation import stops

    made = tempfile.mkdtemp

    def mkdtemp_then_stop(*args, **kwargs):
        folder = made(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return folder

    monkeypatch.setattr(stops, "RECEIVED", [])
    monkeypatch.setattr(atomic.tempfile, "mkdtemp", mkdtemp_then_stop)
    previous = signal.signal(signal.SIGTERM, stops.raise_stopped)
    try:
        with pytest.raises(stops.Stopped), atomic.atomic_dir(tmp_path / "out"):
            pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    atomic.discard_temps(settle=0)
    assert list(tmp_path.iterdir()) == []


def test_a_stop_while_jax_profiler_traces_is_raised_once_the_trace_is_closed(tmp_path, monkeypatch):
    """A stop that unwinds jax.profiler's trace can hang its stop_trace: it waits for the trace to close."""
    from mnist_jax_pipeline.foundation import stops
    from mnist_jax_pipeline.stages.profile import trace_files

    closed_by: list[object] = []

    @contextlib.contextmanager
    def trace(*args, **kwargs):
        try:
            yield
        except BaseException as err:
            closed_by.append(err)
            raise
        closed_by.append(None)

    monkeypatch.setattr(trace_files.jax.profiler, "trace", trace)
    monkeypatch.setattr(stops, "RECEIVED", [])
    previous = signal.signal(signal.SIGTERM, stops.raise_stopped)
    try:
        with pytest.raises(stops.Stopped):
            trace_files.record(lambda index: os.kill(os.getpid(), signal.SIGTERM), range(2), tmp_path, "jit", True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert closed_by == [None]


def test_code_that_differs_from_the_installed_package_is_refused_with_the_fix(tmp_path, monkeypatch):
    """A checkout whose code is not what runs (a copy beside another checkout's venv): its record would lie."""
    from mnist_jax_pipeline.orchestration import stage_table
    from mnist_jax_pipeline.orchestration.jobs import Recorder

    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    monkeypatch.chdir(tmp_path)
    recorder = Recorder(validate(read_yaml(ROOT / "params.yaml"), "params.yaml"))
    recorder.check_installed(stage_table.get("train"))  # the same files: nothing to refuse
    with (tmp_path / paths.CODE / "stages/train.py").open("a") as code:
        code.write("# edited\n")
    with pytest.raises(PipelineError, match=r"stages/train.py: differs from the installed package .* uv sync"):
        Recorder(recorder.params).check_installed(stage_table.get("train"))
