"""The CLI's contract: one-line errors naming the file or key, non-zero exit, no traceback unless --verbose."""

import os
import shlex
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import ROOT
from mnist_jax_pipeline.artefacts import storage
from mnist_jax_pipeline.cli import main
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.orchestration.commands import COMMANDS


def write_params(tmp_path, text_change):
    text = (ROOT / "params.yaml").read_text()
    path = tmp_path / "params.yaml"
    path.write_text(text_change(text))
    return path


def test_a_command_ends_every_thread_it_started(tmp_path, monkeypatch):
    """Commands run in one process (a program that calls main, or these tests) leave no thread behind: each
    command's watch for its orchestrator ends with it, or hundreds of them polling would slow the process down."""
    write_params(tmp_path, lambda text: text)
    monkeypatch.chdir(tmp_path)
    before = set(threading.enumerate())
    for _ in range(3):
        assert main(["check"]) == 0
    for thread in set(threading.enumerate()) - before:
        thread.join(timeout=5)
    assert [t.name for t in set(threading.enumerate()) - before if t.is_alive()] == []


def test_a_stopped_command_sends_no_signal_after_it_ended(tmp_path, monkeypatch):
    """A stop is sent again a second later only while the command runs: a program that called main and got its
    status back gets no signal after."""
    from mnist_jax_pipeline.config import params

    write_params(tmp_path, lambda text: text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(params, "main", lambda args: os.kill(os.getpid(), signal.SIGTERM) or time.sleep(5))
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        assert main(["check"]) == 128 + signal.SIGTERM
        time.sleep(1.5)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert received == []


def test_bad_parameter_is_one_line_and_no_traceback(tmp_path, capsys):
    path = write_params(tmp_path, lambda t: t.replace("batch_size: 128", "batch_size: -5"))
    assert main(["--params", str(path), "check"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: ") and "train.batch_size" in err[0] and "minimum of 1" in err[0]


def test_verbose_adds_the_traceback(tmp_path, capsys):
    path = write_params(tmp_path, lambda t: t.replace("epochs: 10", "epochs: 0"))
    assert main(["--params", str(path), "--verbose", "check"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("error: ")


@pytest.mark.parametrize(
    "argv", [["--params", "{p}", "-v", "check"], ["check", "--params", "{p}", "-v"], ["-v", "check", "--params", "{p}"]]
)
def test_common_options_go_before_or_after_the_command(tmp_path, capsys, argv):
    path = write_params(tmp_path, lambda t: t.replace("epochs: 10", "epochs: 0"))
    assert main([a.format(p=path) for a in argv]) == 1
    err = capsys.readouterr().err
    assert str(path) in err and "Traceback" in err  # the file given, and --verbose honoured, wherever they stand


def test_python_object_tags_in_params_are_refused(tmp_path, capsys):
    path = write_params(tmp_path, lambda t: t + "\nboom: !!python/object/apply:os.system ['touch pwned']\n")
    assert main(["--params", str(path), "check"]) == 1
    assert "not valid YAML" in capsys.readouterr().err
    assert not (tmp_path / "pwned").exists()


def test_pickled_arrays_are_never_loaded(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(PipelineError, match="x.npy: corrupt or truncated array"):
        storage.load_array(path, "preprocess")


def test_console_script_exit_status():
    done = subprocess.run(
        [sys.executable, "-m", "mnist_jax_pipeline.cli", "--params", "/nonexistent.yaml", "check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert (
        done.stderr.strip() == "error: /nonexistent.yaml: missing; run from the project root, or give --params a file"
    )


def test_version_is_the_installed_packages(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"mnist-pipeline {version('mnist-jax-pipeline')}"


def test_sweep_point_is_left_out_of_the_help_and_still_runs(tmp_path, capsys, monkeypatch):
    with pytest.raises(SystemExit):
        main(["--help"])
    listing = capsys.readouterr().out
    assert "sweep-queue" in listing and "sweep-point" not in listing and "SUPPRESS" not in listing
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "s.yaml").write_text("variant: jit\ngrid:\n  train.epochs: [1, 2]\n")
    monkeypatch.chdir(tmp_path)
    assert main(["--params", str(ROOT / "params.yaml"), "sweep-point", "--sweep", "s", "--point", "epochs=2"]) == 0
    assert "epochs: 2" in (tmp_path / "sweeps" / "s" / "epochs=2" / "params.yaml").read_text()


def test_a_backend_plugin_that_cannot_start_is_one_warning_line():
    """JAX logs a plugin it cannot start (a CUDA build without a GPU) with a traceback, then runs on
    the CPU: the pipeline's logging makes that one warning line naming the cause."""
    import io
    import logging

    from mnist_jax_pipeline.foundation.backend import quiet_plugin_errors

    quiet_plugin_errors()
    quiet_plugin_errors()  # once is enough, twice changes nothing
    logger = logging.getLogger("jax._src.xla_bridge")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    try:
        try:
            raise RuntimeError("operation cuInit(0) failed: Unknown CUDA error 303\nmore detail")
        except RuntimeError:
            logger.exception("Jax plugin configuration error: Exception when calling %s", "xla_cuda12.initialize()")
    finally:
        logger.removeHandler(handler)
    err = stream.getvalue()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        "WARNING Jax plugin configuration error: Exception when calling xla_cuda12.initialize():"
        " operation cuInit(0) failed: Unknown CUDA error 303; JAX runs on"
    )


def test_a_jax_stage_starts_its_backend_only_once_the_numerics_are_set():
    """Importing a JAX stage's module starts no backend: `backend.start()` starts it, after setting the numerics."""
    code = (
        "import importlib, sys\n"
        "from jax._src import xla_bridge\n"
        "for name in sys.argv[1:]:\n"
        "    importlib.import_module(f'mnist_jax_pipeline.{name}')\n"
        "    assert not xla_bridge.backends_are_initialized(), name\n"
        "from mnist_jax_pipeline.foundation import backend\n"
        "backend.start()\n"
        "import jax, os\n"
        "print(xla_bridge.backends_are_initialized(), jax.config.jax_default_matmul_precision, os.environ['XLA_FLAGS'])"
    )
    modules = [COMMANDS[name].module for name in ("train", "evaluate", "profile")]
    env = {key: value for key, value in os.environ.items() if key not in ("XLA_FLAGS", "JAX_DEFAULT_MATMUL_PRECISION")}
    done = subprocess.run([sys.executable, "-c", code, *modules], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "highest", "--xla_gpu_exclude_nondeterministic_ops=true"]


@pytest.fixture(scope="module")
def optimized_bytecode(tmp_path_factory) -> dict[str, str]:
    """An environment whose -OO byte code (.opt-2.pyc, which no install compiles) is kept in one folder
    for this file's runs: JAX's modules are compiled once, not once per script."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path_factory.mktemp("pycache-OO"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


@pytest.mark.parametrize(
    "script",
    [
        ["-m", "mnist_jax_pipeline.cli"],
        ["benchmarks/bench_train.py"],
        ["benchmarks/trace_epoch.py"],
        ["benchmarks/bench_time_to_accuracy.py"],
        ["benchmarks/ablation_time_to_accuracy.py"],
        ["tools/dvc_plots_template.py"],
    ],
)
def test_help_works_without_docstrings(script, optimized_bytecode):
    """python -OO drops docstrings: the help's description must not be read from one."""
    done = subprocess.run(
        [sys.executable, "-OO", *script, "--help"], capture_output=True, text=True, cwd=ROOT, env=optimized_bytecode
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ") and "Traceback" not in done.stderr


STOP_WHILE_IMPORTING = """
import importlib, os, signal, sys
from importlib.metadata import entry_points


class StopWhileImporting:
    def find_spec(self, name, path=None, target=None):
        if name == "mnist_jax_pipeline.orchestration.run":  # Ctrl-C while the command's modules import
            os.kill(os.getpid(), signal.SIGINT)
        return None


script = entry_points(group="console_scripts")["mnist-pipeline"]
sys.meta_path.insert(0, StopWhileImporting())
sys.argv = ["mnist-pipeline", "check"]
getattr(importlib.import_module(script.module), script.attr)()
"""


def test_a_signal_ignored_as_the_command_starts_stays_ignored(tmp_path):
    """`nohup mnist-pipeline check`: SIGHUPs, sent all the while, neither stop the command nor lose its record."""
    write_params(tmp_path, lambda text: text)
    process = subprocess.Popen(
        [sys.executable, "-c", "from mnist_jax_pipeline import entry; entry()", "check"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    )
    hangups = 0
    while process.poll() is None:
        process.send_signal(signal.SIGHUP)
        hangups += 1
        time.sleep(0.002)  # many signals, even when the command takes a tenth of a second
    assert process.returncode == 0 and hangups > 10, (process.returncode, hangups, process.stderr.read())
    assert (tmp_path / "provenance" / "check.json").is_file()


@pytest.mark.parametrize("argv", [["explain", "a\nb"], ["preset", "a\r\nb"], ["compare", "--sweep", "a\nb"]])
def test_an_error_naming_a_line_break_is_still_one_line(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    write_params(tmp_path, lambda text: text)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\r" not in err and err.startswith("error: ") and "\\nb" in err, err


LOUD = """
import sys
import time
from mnist_jax_pipeline import cli
from mnist_jax_pipeline.orchestration import commands

class Loud(commands.Command):
    def function(self):
        return lambda args: print("x" * 999 + "\\n", end="", flush=False) or [print("y" * 999) for _ in range(2000)]

commands.COMMANDS["show"] = Loud("config.params", "prints 2 MB")
sys.argv = ["mnist-pipeline", sys.argv[1]]
cli.entry()
"""


def test_a_closed_standard_output_is_no_error(tmp_path):
    write_params(tmp_path, lambda text: text)
    done = subprocess.run(
        ["sh", "-c", f'exec {shlex.quote(sys.executable)} -c "$0" check >&-', LOUD], cwd=tmp_path, capture_output=True
    )
    assert done.returncode == 0 and done.stderr == b"", done.stderr


def test_a_full_standard_output_is_one_line_naming_it(tmp_path):
    write_params(tmp_path, lambda text: text)
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-c", LOUD, "show"], cwd=tmp_path, stdout=full, stderr=subprocess.PIPE)
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1 and len(lines) == 1, lines
    assert lines[0].startswith("error: a file or standard output: No space left on device"), lines


@pytest.mark.parametrize("command", ["check", "show"])
def test_a_reader_of_the_output_that_goes_away_ends_the_command_quietly(tmp_path, command):
    """`mnist-pipeline ... | head`: the reader is gone before (show: while) the command prints; no error line."""
    write_params(tmp_path, lambda text: text)
    process = subprocess.Popen(
        [sys.executable, "-c", LOUD, command], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    errors = process.stderr.read()
    assert process.wait(timeout=120) == 128 + signal.SIGPIPE and errors == "", errors


STOP_WHILE_THE_STAGE_IMPORTS = """
import os, signal, sys
from pathlib import Path
from mnist_jax_pipeline.cli import entry


class StopWhileTheStageImports:
    def find_spec(self, name, path=None, target=None):
        if name == "mnist_jax_pipeline.stages.train":  # Ctrl-C as the stage's module (and JAX's) begins to import
            os.kill(os.getpid(), signal.SIGINT)
        if name == "mnist_jax_pipeline.mlp.progress":  # the stage module's last import: it ran to its end
            Path("imported").touch()
        return None


sys.meta_path.insert(0, StopWhileTheStageImports())
sys.argv = ["mnist-pipeline", "train", "--variant", "nojit"]
entry()
"""


@pytest.mark.parametrize(
    ("script", "job"), [(STOP_WHILE_IMPORTING, "check"), (STOP_WHILE_THE_STAGE_IMPORTS, "train@nojit")]
)
def test_a_stop_while_the_modules_import_is_its_one_stop_line(tmp_path, script, job):
    """The console script keeps a stop that comes before the command's handlers are in place (Snakemake's Ctrl-C
    reaches a job that is still importing). A stop while the stage's module imports waits for the import: raised
    inside a library's extension as it initializes, it would fail the import or crash it."""
    write_params(tmp_path, lambda text: text)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"error: {job} stopped by SIGINT"), done.stderr
    assert not (tmp_path / "provenance").exists(), "a stopped command records nothing"
    assert job == "check" or (tmp_path / "imported").exists(), "the stage's modules were not imported whole"
