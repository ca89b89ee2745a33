"""What `snakemake --cores all` prints, on tiny synthetic data (600 examples, a 784-32-10 MLP, two
epochs, the default variants): a full run is a plan, a line per job as it starts and ends, the
stages' own lines and an end line; a run with nothing to do is two lines; Ctrl-C shows the stage's
own line and no traceback; a file where an output folder belongs, a read-only output folder and a
read-only home folder are one line each, naming the path and the fix."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import without_root_powers, write_raw
from mnist_jax_pipeline.foundation import paths
from workspace import copy_workspace, env, make_workspace, set_params

pytestmark = pytest.mark.slow
PROFILE_LINE = "Using workflow specific profile profiles/default for setting default command line arguments."
JOBS = [
    "check",
    "preprocess",
    "train@nojit",
    "train@jit",
    "evaluate@nojit",
    "evaluate@jit",
    "profile@nojit",
    "profile@jit",
    "report",
]
KINDS = {  # every line a run prints is one of these
    "profile": re.escape(PROFILE_LINE),
    "plan": r"\d+ jobs? to run: .+",
    "start": r"\d\d:\d\d:\d\d start (\S+): .+",
    "done": r"\d\d:\d\d:\d\d done  (\S+) \(\d+ of \d+\)",
    "stage": r"\d\d:\d\d:\d\d (?:INFO|WARNING) (\S+) .+",
    "check": r"params\.yaml: valid \(sha256 \w+\)",
    "end": r"finished in \d+:\d\d:\d\d; Snakemake's own log: \.snakemake/log/\S+\.snakemake\.log",
}


def snakemake(ws: Path, *args: str, prefix: tuple[str, ...] = (), **environ: str) -> tuple[int, list[str]]:
    """Run snakemake in `ws`; its exit status and its console's lines, stdout and stderr in order."""
    done = subprocess.run(
        [*prefix, "snakemake", *args],
        cwd=ws,
        env={**env(ws), **environ},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=900,
    )
    return done.returncode, done.stdout.splitlines()


def kind(line: str) -> tuple[str, str] | None:
    """(kind, the job it names) of a console line, or None."""
    for name, pattern in KINDS.items():
        found = re.fullmatch(pattern, line)
        if found:
            return name, found.group(1) if found.groups() else ""
    return None


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> tuple[Path, list[str]]:
    """A tiny workspace (download's data in place) and the console of its first `snakemake --cores all`."""
    ws = make_workspace(
        tmp_path_factory.mktemp("console"),
        "ws",
        fast=False,
        **{"model.layer_sizes": [784, 32, 10], "train.epochs": 2, "profile.trace_steps": 2},
    )
    write_raw(ws / paths.RAW.path)
    status, lines = snakemake(ws, "--cores", "all")
    assert status == 0, "\n".join(lines)
    return ws, lines


def test_a_full_run_is_a_plan_a_line_per_job_start_and_end_and_the_stages_lines(ran):
    _, lines = ran
    shown = "\n".join(lines)
    kinds = [kind(line) for line in lines]
    assert None not in kinds, f"an unexpected line: {lines[kinds.index(None)]}"
    assert lines[:2] == [PROFILE_LINE, "9 jobs to run: check, preprocess, train (2), evaluate (2), profile (2), report"]
    for what in ("start", "done"):
        assert sorted(job for k, job in kinds if k == what) == sorted(JOBS), shown
    assert {job for k, job in kinds if k == "stage"} <= set(JOBS)
    assert kinds[-1] == ("end", "")
    assert "src/" not in shown and ".py" not in shown and "input:" not in shown and "Traceback" not in shown
    # 2 + 9 jobs started and done + 2 epochs x 2 variants + 2 evaluations + 2 profiles + report + check + end:
    # the op tables went to the jobs' logs
    assert len(lines) <= 2 + 2 * len(JOBS) + 4 + 2 + 2 + 1 + 1 + 1 + 2, shown  # + a pprof warning per profile
    assert "op table of the traced" in (ran[0] / "logs/profile_jit.log").read_text()


def test_a_run_with_nothing_to_do_is_two_lines(ran):
    ws, _ = ran
    status, lines = snakemake(ws, "--cores", "all")
    assert status == 0
    assert lines == [PROFILE_LINE, "Nothing to be done (all requested files are present and up to date)."]


def _training(ws: Path) -> bool:
    log = ws / "logs/train_jit.log"
    return log.is_file() and "epoch 1/" in log.read_text()


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_during_train_shows_the_stages_own_line_and_no_traceback(ran, tmp_path, presses):
    ws = copy_workspace(ran[0], tmp_path, "ws")
    set_params(ws, **{"train.epochs": 20000, "variants": ["jit"]})
    (ws / "logs/train_jit.log").unlink()  # the first run's
    proc = subprocess.Popen(
        ["snakemake", "--cores", "all"],
        cwd=ws,
        env=env(ws),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not _training(ws):
            assert proc.poll() is None and time.monotonic() < deadline, "training never started"
            time.sleep(0.2)
        for _ in range(presses):  # as Ctrl-C does: the whole process group
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.5)
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0
    assert "Traceback" not in output and "event loop" not in output, output[-3000:]
    own = "error: train@jit stopped by SIGINT; its temporary files were removed, nothing half-written"
    assert own in output.splitlines() and own in (ws / "logs/train_jit.log").read_text()
    assert re.search(r"^\d\d:\d\d:\d\d stopped train@jit by SIGINT; its log: logs/train_jit\.log$", output, re.M)
    assert output.splitlines()[-1].startswith("stopped after ")


def _models_a_file(ws: Path) -> dict:
    for model in (ws / "models").iterdir():
        model.unlink()
    (ws / "models").rmdir()
    (ws / "models").write_text("not a folder\n")
    return {
        "line": "error: models: not a folder, and models/nojit.safetensors is written in it; move it away or"
        " delete it, then run again"
    }


def _read_only_reports(ws: Path) -> dict:
    (ws / "reports/report.html").unlink()
    (ws / "reports").chmod(0o555)
    return {
        "line": "error: reports: cannot write (Permission denied), and reports/report.html is written there;"
        " make it writable (chmod u+w reports) or run in a writable copy of the project",
        "prefix": tuple(without_root_powers()),
    }


def _read_only_parent_of_a_folder_output(ws: Path) -> dict:
    """The profile stage puts its folder in place whole: it writes beside the folder, in reports/profile."""
    (ws / "reports/profile/nojit/summary.json").unlink()
    (ws / "reports/profile").chmod(0o555)
    return {
        "line": "error: reports/profile: cannot write (Permission denied), and reports/profile/nojit is written"
        " there; make it writable (chmod u+w reports/profile) or run in a writable copy of the project",
        "prefix": tuple(without_root_powers()),
    }


def _read_only_home(ws: Path) -> dict:
    home = ws.parent / "home"
    home.mkdir(mode=0o555)
    return {
        "line": f"error: {home}/.cache: permission denied; Snakemake keeps its source cache there (in the home"
        " folder, or XDG_CACHE_HOME): make it writable, or point XDG_CACHE_HOME at a writable folder"
        " (XDG_CACHE_HOME=/tmp/cache snakemake ...)",
        "prefix": tuple(without_root_powers()),
        "environ": {"HOME": str(home), "XDG_CACHE_HOME": ""},
    }


@pytest.mark.parametrize(
    "case",
    [_models_a_file, _read_only_reports, _read_only_parent_of_a_folder_output, _read_only_home],
    ids=["models-a-file", "read-only-reports", "read-only-profile-folder", "read-only-home"],
)
def test_a_place_snakemake_cannot_write_is_one_line_naming_it_and_the_fix(ran, tmp_path, case):
    ws = copy_workspace(ran[0], tmp_path, "ws")
    setup = case(ws)
    environ = setup.get("environ", {})
    try:
        status, lines = snakemake(ws, "--cores", "all", prefix=setup.get("prefix", ()), **environ)
    finally:
        (ws / "reports").chmod(0o755)
        (ws / "reports/profile").chmod(0o755)
    shown = "\n".join(lines)
    assert status != 0 and "Traceback" not in shown, shown
    assert [line for line in lines if line.startswith("error: ")] == [setup["line"]], shown
    assert len(lines) <= 3, shown  # the profile line, the plan line (before the check of the jobs about to run)
