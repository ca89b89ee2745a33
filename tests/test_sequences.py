"""Random sequences of what users do, under both tools, with the invariants checked after every step.

A Hypothesis state machine starts each sequence from a copy of one finished workspace (real MNIST,
1,000 examples, one epoch, one variant) and applies up to MNIST_PIPELINE_SEQUENCE_STEPS steps
(default 5): `snakemake`, `dvc repro`, a single-stage `dvc repro X`, `dvc exp run -S`, `dvc exp
apply`, a parameter edit, adding or dropping a variant, `git checkout` of params.yaml or dvc.lock,
`git stash` (popped or not), touching or editing a source file, deleting, truncating, swapping or
touching an output, and a run stopped mid-stage (Ctrl-C). Right after a `snakemake` run that
succeeded, `dvc status` and `snakemake -n` must list the same stages: dvc.lock never lags then.
MNIST_PIPELINE_SEQUENCES (default 8) sets how many sequences run; the examples are derandomized,
so CI runs the same ones each time (MNIST_PIPELINE_SEQUENCE_SEED picks others). A failure prints
the sequence as the shell commands that reproduce it in a copy of the workspace.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conftest import mirror_dir
from workspace import (
    WOULD_RUN,
    copy_workspace,
    downstream,
    dvc_stale,
    env,
    set_params,
    sh,
    small_snakemake_run,
    snakemake_jobs,
)

pytestmark = [pytest.mark.slow, pytest.mark.real_data]
SEQUENCES = int(os.environ.get("MNIST_PIPELINE_SEQUENCES", "8"))
STEPS = int(os.environ.get("MNIST_PIPELINE_SEQUENCE_STEPS", "5"))
SEED = os.environ.get("MNIST_PIPELINE_SEQUENCE_SEED")
OUTPUTS = (
    "models/jit.safetensors",
    "data/processed/train_images.npy",
    "metrics/train/jit.json",
    "metrics/evaluate/jit.json",
    "plots/variants.csv",
    "provenance/train_jit.json",
    "reports/report.html",
)
SOURCES = (
    "src/mnist_jax_pipeline/stages/evaluate.py",
    "src/mnist_jax_pipeline/stages/report/render.py",
    "src/mnist_jax_pipeline/mlp/model.py",
)
STAGES = ("preprocess", "train@jit", "evaluate@jit", "profile@jit", "report")
VARIANT_LISTS = (("jit",), ("jit", "jit_scan"), ("nojit", "jit"))
EDITS = {"train.epochs": (1, 2), "train.step_size": (0.01, 0.02), "model.seed": (0, 1), "preprocess.seed": (0, 1)}


def dvc_cache_file(ws: Path, md5: str) -> Path:
    return ws / ".dvc/cache/files/md5" / md5[:2] / md5[2:]


class Sequences(RuleBasedStateMachine):
    """One user's session in one checkout."""

    base: Path
    parent: Path
    counter = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.ws = copy_workspace(self.base, self.parent, f"seq{next(self.counter)}")
        self.commands = [f"cp -a {self.base} ws && cd ws"]
        self.experiments: list[str] = []
        self.result: subprocess.CompletedProcess | None = None  # the last full run (snakemake or dvc repro)
        self.deleted_before: set[str] = set()
        self.tool_ran = False
        self.snakemake_finished = False  # the last step was a `snakemake` run that succeeded

    # --- doing ---------------------------------------------------------------------------------

    def shell(self, *args: str, log: str | None = None) -> subprocess.CompletedProcess:
        self.commands.append(log or " ".join(args))
        return subprocess.run(args, cwd=self.ws, env=env(self.ws), capture_output=True, text=True, timeout=900)

    def tool(self, *args: str) -> subprocess.CompletedProcess:
        self.deleted_before = self.deleted()
        self.tool_ran = True
        done = self.shell(*args)
        self.snakemake_finished = args[0] == "snakemake" and done.returncode == 0
        output = done.stdout + done.stderr
        assert "Traceback (most recent call last)" not in output, self.failure(f"a traceback:\n{output[-3000:]}")
        if done.returncode != 0:
            assert re.search(r"^(error: |ERROR: |WorkflowError)", output, re.M), self.failure(
                f"`{' '.join(args)}` failed without an error line:\n{output[-3000:]}"
            )
        return done

    def deleted(self) -> set[str]:
        return set(sh(self.ws, "git", "ls-files", "--deleted").split())

    def failure(self, what: str) -> str:
        return f"{what}\nThe sequence, as commands:\n  " + "\n  ".join(self.commands)

    @initialize()
    def start(self) -> None:
        self.tool_ran = False

    @rule()
    def snakemake(self) -> None:
        self.result = self.tool("snakemake", "--cores", "all")
        self.check_results()

    @rule()
    def dvc_repro(self) -> None:
        self.result = self.tool("dvc", "repro")
        self.check_results()

    @rule(stage=st.sampled_from(STAGES))
    def dvc_repro_one(self, stage: str) -> None:
        self.tool("dvc", "repro", stage)

    @rule(value=st.sampled_from((0.02, 0.03)))
    def dvc_exp_run(self, value: float) -> None:
        done = self.tool("dvc", "exp", "run", "-S", f"train.step_size={value}")
        found = re.search(r"Ran experiment\(s\): (\S+)", done.stdout + done.stderr)
        if found:
            self.experiments.append(found.group(1))

    @precondition(lambda self: self.experiments)
    @rule(data=st.data())
    def dvc_exp_apply(self, data: st.DataObject) -> None:
        self.tool("dvc", "exp", "apply", data.draw(st.sampled_from(self.experiments)))

    @rule(key=st.sampled_from(sorted(EDITS)), index=st.integers(0, 1))
    def edit_param(self, key: str, index: int) -> None:
        section, name = key.split(".")
        params = yaml.safe_load((self.ws / "params.yaml").read_text())
        params[section][name] = EDITS[key][index]
        (self.ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        self.commands.append(f"# set {key}: {EDITS[key][index]} in params.yaml")

    @rule(path=st.sampled_from(("params.yaml", "dvc.lock")))
    def git_checkout(self, path: str) -> None:
        self.shell("git", "checkout", "--", path)

    @rule(pop=st.booleans())
    def git_stash(self, pop: bool) -> None:
        """git's own moves of dvc.lock (and of the other tracked files a run rewrites): stash, maybe pop."""
        self.shell("git", "stash", "-q")
        if pop:
            self.shell("git", "stash", "pop", "-q")

    @rule(listed=st.sampled_from(VARIANT_LISTS))
    def set_variants(self, listed: tuple[str, ...]) -> None:
        """Add or drop a variant (jit stays: the checks read its outputs)."""
        params = yaml.safe_load((self.ws / "params.yaml").read_text())
        params["variants"] = list(listed)
        (self.ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        self.commands.append(f"# set variants: {list(listed)} in params.yaml")

    @rule(path=st.sampled_from(SOURCES), edit=st.booleans())
    def source(self, path: str, edit: bool) -> None:
        if edit:
            with open(self.ws / path, "a", encoding="utf-8") as handle:
                handle.write("# edited\n")
            self.commands.append(f"echo '# edited' >> {path}")
        else:
            self.shell("touch", path)

    @rule(path=st.sampled_from(OUTPUTS), how=st.sampled_from(("delete", "truncate", "swap", "touch")))
    def output(self, path: str, how: str) -> None:
        target = self.ws / path
        if not target.exists():
            return
        before = target.stat()
        if how == "delete":
            self.shell("rm", path)
        elif how == "touch":
            self.shell("touch", path)
        elif how == "truncate":
            self.shell("truncate", "-s", str(before.st_size // 2), path)
        else:  # another file of the same kind, with the old time: the first run's copy, one byte changed.
            # Put in place as a new file: DVC takes a file whose inode, size and time it has seen as unchanged,
            # so the same bytes written into the old file would fool `dvc status` (not Snakemake).
            blob = bytearray((self.base / path).read_bytes())
            blob[len(blob) // 2] ^= 1
            other = target.with_name(f".other-{target.name}")
            other.write_bytes(bytes(blob))
            os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
            other.replace(target)
            self.commands.append(f"# replace {path} by another (one byte of the first run's copy flipped), old time")

    @rule(tool=st.sampled_from(("snakemake", "dvc")), after=st.floats(4, 14))
    def stopped_mid_stage(self, tool: str, after: float) -> None:
        """A change that re-runs training, then Ctrl-C once a stage runs."""
        path = self.ws / "src/mnist_jax_pipeline/stages/evaluate.py"
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("# edited\n")
        self.deleted_before = self.deleted()
        self.tool_ran = True
        command = ["snakemake", "--cores", "all"] if tool == "snakemake" else ["dvc", "repro"]
        self.commands.append(
            f"echo '# edited' >> {path.relative_to(self.ws)}; {' '.join(command)} & sleep {after:.1f}; kill -INT -$!"
        )
        proc = subprocess.Popen(
            command,
            cwd=self.ws,
            env=env(self.ws),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        started, since = time.monotonic(), time.time()
        # Not while the tool itself starts (seconds on a busy machine): a Ctrl-C then is Python's own
        # KeyboardInterrupt, before any code of this project runs. Snakemake has read the Snakefile once
        # it marked the stale jobs (evaluate's code changed).
        first = proc.stdout.readline() if proc.stdout else ""
        markers = self.ws / ".snakemake/provenance"
        while (
            tool == "snakemake"
            and proc.poll() is None
            and time.monotonic() - started < 120
            and not any(p.is_file() and p.stat().st_mtime >= since for p in markers.rglob("*"))
        ):
            time.sleep(0.1)
        time.sleep(max(0.0, after - (time.monotonic() - started)))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        rest, _ = proc.communicate(timeout=300)
        output = first + rest
        assert "Traceback (most recent call last)" not in output, self.failure(f"a traceback:\n{output[-3000:]}")

    def teardown(self) -> None:
        print("sequence:\n  " + "\n  ".join(self.commands))  # shown with -s, or when the test fails

    # --- checking --------------------------------------------------------------------------------

    def check_results(self) -> None:
        """After a full run that succeeded: the metrics and the model are those of the current parameters."""
        if self.result is None or self.result.returncode != 0:
            return
        from mnist_jax_pipeline.artefacts.model_file import load_model
        from mnist_jax_pipeline.config.params import load

        params = load(self.ws / "params.yaml")
        metrics = json.loads((self.ws / "metrics/train/jit.full.json").read_text())
        assert metrics["epochs"] == params.train.epochs, self.failure("the metrics are of another run")
        _, metadata = load_model(self.ws / "models/jit.safetensors", "train@jit")
        assert metadata.params_sha256 == params.digest("model", "train"), self.failure(
            "the model was trained with other parameters than params.yaml's"
        )

    @invariant()
    def tools_agree_and_nothing_is_lost(self) -> None:
        if not self.tool_ran and len(self.commands) == 1:
            return  # the starting point, checked once by the base fixture
        stale, planned = self.views()
        from mnist_jax_pipeline.config.params import load
        from mnist_jax_pipeline.orchestration import freshness
        from mnist_jax_pipeline.orchestration.jobs import all_jobs

        here = Path.cwd()
        os.chdir(self.ws)
        try:
            params = load("params.yaml")
            checker = freshness.Checker(params)
            current = {job.name for job in all_jobs(params.variants) if not checker.problems(job)}
        finally:
            os.chdir(here)
        # dvc.lock may lag behind outputs that are current by content (after `git checkout dvc.lock`, or a
        # stopped run); `dvc status` lists those, `snakemake` records them, even a run with nothing to run.
        # Else the views are the same.
        expected = downstream(self.ws, stale - current)
        if self.snakemake_finished:  # right after a snakemake run that succeeded: nothing lags
            self.snakemake_finished = False
            assert stale == planned, self.failure(
                f"after snakemake, dvc status lists {sorted(stale)}; snakemake -n plans {sorted(planned)}"
            )
        assert planned == expected, self.failure(
            f"snakemake -n plans {sorted(planned)}; dvc status lists {sorted(stale)} ({sorted(current)} current)"
        )
        self.lock_names_only_what_made_the_outputs()
        if self.tool_ran:
            new = self.deleted() - self.deleted_before
            assert not new, self.failure(f"git-tracked files deleted by a run: {sorted(new)}")
            self.tool_ran = False

    def views(self) -> tuple[set[str], set[str]]:
        """(`dvc status` stages, `snakemake -n` jobs), the two asked at once."""
        status = subprocess.Popen(
            ["dvc", "status", "--json"],
            cwd=self.ws,
            env=env(self.ws),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        dry = subprocess.Popen(
            ["snakemake", "--cores", "all", "-n"],
            cwd=self.ws,
            env=env(self.ws),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        out, err = status.communicate(timeout=300)
        plan, _ = dry.communicate(timeout=300)
        assert status.returncode == 0, self.failure(f"dvc status failed:\n{err}")
        if dry.returncode != 0:  # params.yaml refused: it must be refused in one line
            assert re.search(r"^error: ", plan, re.M) and "Traceback" not in plan, self.failure(plan[-3000:])
            return set(json.loads(out.strip().splitlines()[-1] or "{}")), set()
        return set(json.loads(out.strip().splitlines()[-1] or "{}")), set(WOULD_RUN.findall(plan))

    def lock_names_only_what_made_the_outputs(self) -> None:
        """Every stage in dvc.lock: the provenance record it lists was made with the parameters it lists."""
        lock = yaml.safe_load((self.ws / "dvc.lock").read_text()) or {}
        for name, entry in (lock.get("stages") or {}).items():
            record = next((out for out in entry.get("outs", []) if out["path"].startswith("provenance/")), None)
            if record is None:
                continue
            cached = dvc_cache_file(self.ws, record["md5"])
            path = self.ws / record["path"]
            if cached.is_file():
                text = cached.read_bytes()
            elif path.is_file() and hashlib.md5(path.read_bytes()).hexdigest() == record["md5"]:
                text = path.read_bytes()
            else:
                continue  # neither in the cache nor on disk: dvc status says so
            stamp = json.loads(text)
            listed = (entry.get("params") or {}).get("params.yaml", {})
            for section, values in listed.items():
                assert stamp["params"].get(section) == values, self.failure(
                    f"dvc.lock records {name} under {section} = {values}, its outputs were made with"
                    f" {stamp['params'].get(section)}"
                )


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[Path, Path]:
    """(the session's small workspace after `snakemake --cores all`, committed, shared with test_content.py;
    a folder of this module's own for the copies the tests change)"""
    mirror_dir()
    return small_snakemake_run(tmp_path_factory), tmp_path_factory.mktemp("sequences")


def test_random_sequences_keep_both_tools_in_agreement(base):
    Sequences.base, Sequences.parent = base
    phases = (Phase.explicit, Phase.reuse, Phase.generate)
    chosen = settings(
        max_examples=SEQUENCES,
        stateful_step_count=STEPS,
        deadline=None,
        phases=phases,
        derandomize=SEED is None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    test = Sequences.TestCase
    test.settings = chosen
    if SEED is not None:
        from hypothesis import seed

        test = seed(int(SEED))(test)
    test().runTest()


def pushed_and_pulled(ws: Path, parent: Path, name: str) -> Path:
    """Commit everything, `dvc push` to a local remote, and a fresh clone of the commit with `dvc pull`."""
    remote = parent / f"{name}-remote"
    sh(ws, "dvc", "remote", "add", "--force", "--default", "local", str(remote))
    sh(ws, "git", "add", "-A")
    sh(ws, "git", "commit", "-qm", "a run with a variant dropped")
    sh(ws, "dvc", "push")
    clone = parent / f"{name}-clone"
    sh(parent, "git", "clone", "-q", str(ws), str(clone))
    sh(clone, "dvc", "pull")
    return clone


@pytest.mark.parametrize("change", ["drop a variant", "apply the time-to-accuracy preset"])
def test_a_dropped_variants_files_count_for_neither_tool_in_the_checkout_or_a_fresh_clone(base, change):
    """Files a dropped variant left would count for DVC (the report's inputs are whole folders) and not for
    Snakemake; the report stage moves them aside, so both tools agree, in the checkout and in a clone. One
    brought back later makes the report stale for both tools."""
    start, parent = base
    name = "drop" if change.startswith("drop") else "preset"
    ws = copy_workspace(start, parent, name)
    if name == "drop":
        set_params(ws, variants=["jit", "jit_scan"])
        sh(ws, "snakemake", "--cores", "all")
        sh(ws, "git", "add", "-A")
        sh(ws, "git", "commit", "-qm", "two variants")
        set_params(ws, variants=["jit"])
        dropped = "jit_scan"
    else:
        sh(ws, "mnist-pipeline", "preset", "time-to-accuracy")
        dropped = "jit"
    sh(ws, "snakemake", "--cores", "all")
    assert not (ws / f"reports/profile/{dropped}").exists()
    assert (ws / f".dropped-variants/{dropped}/reports/profile/{dropped}").is_dir()  # moved aside, not lost
    assert snakemake_jobs(ws) == set() and dvc_stale(ws) == set()
    for name in (f"provenance/train_{dropped}.json", f"models/{dropped}.safetensors"):  # in no folder DVC reads whole
        kept = ws / name
        kept.write_bytes((ws / ".dropped-variants" / dropped / name).read_bytes())
        assert snakemake_jobs(ws) == set() and dvc_stale(ws) == set(), name
        kept.unlink()
    back = ws / f"metrics/train/{dropped}.json"  # brought back, as `dvc exp apply` or a checkout does
    back.write_bytes((ws / ".dropped-variants" / dropped / back.relative_to(ws)).read_bytes())
    assert snakemake_jobs(ws) == {"report"} and dvc_stale(ws) == {"report"}
    sh(ws, "snakemake", "--cores", "all")
    assert not back.exists() and snakemake_jobs(ws) == set() and dvc_stale(ws) == set()
    stray = ws / "plots/train/notes.txt"  # no stage's file, in a folder DVC reads whole: the report refuses it
    stray.write_text("mine\n")
    assert snakemake_jobs(ws) == {"report"} and dvc_stale(ws) == {"report"}
    done = subprocess.run(["snakemake", "--cores", "all"], cwd=ws, capture_output=True, text=True)
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("error: ")]
    assert done.returncode != 0 and len(errors) == 1 and "plots/train/notes.txt: no stage's output" in errors[0]
    assert errors[0].endswith("move it away") and stray.read_text() == "mine\n"
    stray.unlink()
    assert snakemake_jobs(ws) == set() and dvc_stale(ws) == set()
    clone = pushed_and_pulled(ws, parent, name)
    assert snakemake_jobs(clone) == set(), "snakemake -n has work to do in the fresh clone"
    assert dvc_stale(clone) == set(), "dvc status lists stages in the fresh clone"
