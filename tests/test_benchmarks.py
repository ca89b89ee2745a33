"""Every script in benchmarks/ runs on tiny synthetic data and prints what it promises, so an import or
API change breaks the build. Nothing here is timed: the figures are checked for form, never for speed."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, adopt, jax_starts, run_stages, tiny_params_dict, write_params, write_raw
from mnist_jax_pipeline.foundation import variants
from mnist_jax_pipeline.orchestration import stage_table


def bench(
    script: str, *args: str | Path, cwd: Path, timeout: int = 300, allowed: tuple[int, ...] = (0,)
) -> subprocess.CompletedProcess:
    """Run benchmarks/<script> with this interpreter, without the real data, its temporary files under `cwd`."""
    env = {**os.environ, "MNIST_MIRROR": "", "TMPDIR": str(cwd)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode in allowed, f"{script} failed:\n{(done.stdout + done.stderr)[-4000:]}"
    return done


@pytest.mark.parametrize(
    ("script", "option"),
    [
        ("bench_train.py", "--output"),
        ("bench_time_to_accuracy.py", "--output"),
        ("bench_command_buffers.py", "--output"),
        ("bench_pipeline.py", "--output"),
        ("ablation_time_to_accuracy.py", "--json-output"),
        ("ablation_time_to_accuracy.py", "--markdown-output"),
    ],
)
def test_a_benchmark_writes_over_no_file_it_did_not_make(tmp_path: Path, script: str, option: str):
    """Refused before the work, in one line: a user's file, or a folder."""
    theirs = tmp_path / "theirs.json"
    theirs.write_text("{}\n")
    for target in (theirs, tmp_path):
        done = bench(script, option, target, cwd=tmp_path, allowed=(1,))
        expected = f"error: {option} {target}: not a file this benchmark wrote; choose another path"
        assert done.stderr.strip().splitlines() == [expected], done.stderr
    assert theirs.read_text() == "{}\n"


@pytest.mark.parametrize(
    ("script", "option", "value"),
    [
        ("bench_train.py", "--examples", "-5"),
        ("bench_train.py", "--batch-size", "0"),
        ("bench_command_buffers.py", "--timeout", "0"),
        ("bench_command_buffers.py", "--epochs", "0"),
        ("bench_time_to_accuracy.py", "--seeds", "abc"),
        ("bench_time_to_accuracy.py", "--target", "2"),
        ("bench_tables.py", "--repeats", "0"),
        ("ablation_time_to_accuracy.py", "--seeds", ""),
        ("ablation_time_to_accuracy.py", "--only", "999"),
    ],
)
def test_a_bad_option_value_is_refused_before_the_work(tmp_path: Path, script: str, option: str, value: str):
    """argparse's usage and one line naming the option, not a traceback after a run."""
    done = bench(script, option, value, cwd=tmp_path, allowed=(2,))
    assert done.stderr.splitlines()[-1].startswith(f"{script}: error: "), done.stderr
    assert option in done.stderr.splitlines()[-1] and "Traceback" not in done.stderr


def finite(value: Any, positive: bool = True) -> bool:
    """A real number (not a bool), finite, and above 0 where `positive`."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return ok and (value > 0 or not positive)


def accuracy(value: Any) -> bool:
    return finite(value, positive=False) and 0 <= value <= 1


@pytest.mark.slow
def test_bench_train(tmp_path: Path):
    out = tmp_path / "train.json"
    # 3 steps an epoch: on a loaded machine a round's epoch may beat its reference; such a round is measured
    # again, then flagged as noisy; only a median that beats it is refused (status 3); the verdicts
    # themselves are tested in test_roofline.py
    done = bench(
        "bench_train.py",
        "--synthetic",
        "--examples",
        "300",
        "--rounds",
        "3",
        "--repeats",
        "2",
        "--progress",
        "both",
        "--json",
        "--output",
        out,
        cwd=tmp_path,
        allowed=(0, 3),
    )
    report = json.loads(done.stdout)
    refused = done.returncode == 3
    assert refused == ("roofline_error" in report) == (report["roofline_ratio"] is None)
    assert refused == (report["ratios"]["roofline"]["median"] < 0.95)
    low = [i + 1 for i, r in enumerate(report["ratios"]["roofline"]["values"]) if r < 0.95]
    assert report["noisy_rounds"] == low and report["noisy"] == bool(low) and len(report["measured_again"]) == 3
    assert ("noisy: round(s)" in done.stderr) == (bool(low) and not refused)
    assert not refused or "error: the jit_scan epoch ran faster than the reference" in done.stderr
    assert json.loads(out.read_text()) == report
    names = set(variants.names())
    assert report["data"] == "synthetic" and report["examples"] == 300 and report["rounds"] == 3
    for key in ("epoch_seconds", "first_epoch_seconds"):
        assert set(report[key]) == names | {"tutorial"} and all(finite(v) for v in report[key].values()), key
    for key in ("epoch_seconds_with_bar", "bar_over_no_bar"):  # the tutorial's loop draws no bar
        assert set(report[key]) == names and all(finite(v) for v in report[key].values()), (key, report[key])
    assert all(len(s) == 3 and all(finite(x) for x in s) for s in report["all_epoch_seconds"].values())
    assert report["compile_seconds"]["tutorial"] is None and report["compile_seconds"]["nojit"] is None
    assert report["steps"] == {"128": 2, "44": 1}
    assert finite(report["limit_gflops"]["median"])
    assert set(report["ratios"]) == {
        "roofline",
        "large_gemm",
        "speedup_jit_scan_vs_tutorial",
        "speedup_jit_vs_tutorial",
        "speedup_jit_scan_vs_jit",
    }
    for name, ratio in report["ratios"].items():
        assert len(ratio["values"]) == 3 and ratio["min"] <= ratio["median"] <= ratio["max"], (name, ratio)
    assert refused or report["roofline_ratio"] == report["ratios"]["roofline"]["median"] >= 0.95
    for key in ("epoch_gflop", "speedup_vs_tutorial", "speedup_vs_step_loop"):
        assert finite(report[key]), (key, report[key])
    assert finite(report["large_gemm"]["gflops"]["median"]) and finite(report["limit_seconds"]["median"])
    assert report["host"]["cpu"] and report["host"]["cores"] >= 1 and set(report["host"]["isa"]) >= {"avx512f", "amx"}
    assert len(report["load_average_1min"]) == 3 and len(report["load_average_start"]) == 3
    assert {"device", "backend", "versions", "host_cpu_count", "host_cpu"} <= set(report)


@pytest.mark.slow
@pytest.mark.parametrize("script", ["bench_train.py", "bench_time_to_accuracy.py"])
def test_a_benchmark_starts_jax_as_a_stage_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str):
    """The stages' start: a backend JAX cannot start is the stages' one line, not JAX's traceback."""
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    if jax_starts("cuda"):
        pytest.skip("this machine has a working JAX_PLATFORMS=cuda backend")
    done = bench(script, "--synthetic", cwd=tmp_path, allowed=(1,))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr
    assert lines[0].startswith("error: JAX_PLATFORMS=cuda: JAX cannot start that backend here ("), lines


@pytest.mark.slow
def test_bench_command_buffers(tmp_path: Path):
    write_raw(tmp_path / "data" / "raw", 600, 100)
    write_params(tmp_path / "params.yaml", tiny_params_dict())
    adopt(tmp_path)
    run_stages(tmp_path, ["preprocess"])
    done = bench("bench_command_buffers.py", "--settings", "default,while", "--epochs", "2", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert list(report["settings"]) == ["default", "while"] and report["same_weights"] is True
    for setting in report["settings"].values():  # XLA's CPU backend accepts the GPU flags and ignores them
        assert setting["accepted"] and len(setting["epoch_seconds"]) == 2 and finite(setting["epoch_seconds_median"])
    refused = bench("bench_command_buffers.py", "--settings", "off", cwd=tmp_path, allowed=(2,))
    assert refused.stderr.splitlines()[-1].endswith("--settings: unknown off; choose from default,while,while+unroll")


@pytest.mark.slow
def test_trace_epoch(tmp_path: Path):
    folder = tmp_path / "trace"
    done = bench("trace_epoch.py", "--examples", "512", "--top", "5", "--keep", folder, cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("one traced jit_scan epoch (4 steps of batch 128)"), done.stdout
    step = re.search(r"traced step time ([0-9.]+) ms", done.stdout)
    assert step and finite(float(step.group(1))), done.stdout
    assert re.search(r"^\s+self ms\s+share\s+count", done.stdout, re.M), done.stdout
    assert re.search(r"^matrix products \(\d+ ops\): .* at ([0-9.]+) GFLOP/s", done.stdout, re.M), done.stdout
    perfetto = re.search(r"Perfetto: (\S+)\)$", lines[-1])
    assert perfetto and Path(perfetto.group(1)).is_file() and folder in Path(perfetto.group(1)).parents, lines[-1]


@pytest.mark.slow
def test_bench_time_to_accuracy_on_a_download_stage_folder(tmp_path: Path):
    raw = write_raw(tmp_path / "raw", train=600, test=200)
    out = tmp_path / "tta.json"
    done = bench(
        "bench_time_to_accuracy.py",
        "--raw",
        raw,
        "--seeds",
        "0,1",
        "--set",
        "train.epochs=1",
        "--json",
        "--output",
        out,
        cwd=tmp_path,
    )
    report = json.loads(done.stdout)
    assert json.loads(out.read_text()) == report
    assert report["evaluated_on"] == "test" and str(raw) in report["data"]
    assert report["train_examples"] == 600 and report["eval_examples"] == 200
    assert report["seeds"] == 2 and report["epochs"] == 1 and report["overrides"] == ["train.epochs=1"]
    assert all(accuracy(report[f"{k}_test_accuracy"]) for k in ("min", "mean", "max"))
    assert report["min_test_accuracy"] <= report["mean_test_accuracy"] <= report["max_test_accuracy"]
    assert report["passed"] == (report["min_test_accuracy"] >= 0.985) == (report["seeds_below_target"] == [])
    assert finite(report["median_train_seconds"])
    assert all(finite(s) for s in report["train_seconds_range"])
    assert [r["seed"] for r in report["per_seed"]] == [0, 1]
    for run in report["per_seed"]:
        assert accuracy(run["accuracy"]) and finite(run["loss"]) and finite(run["train_seconds"])
        assert len(run["epoch_seconds"]) == 1 and finite(run["compile_seconds"])


@pytest.mark.slow
def test_ablation_time_to_accuracy(tmp_path: Path):
    json_out, markdown_out = tmp_path / "ablation.json", tmp_path / "ablation.md"
    done = bench(
        "ablation_time_to_accuracy.py",
        "--synthetic",
        "--examples",
        "600",
        "--seeds",
        "0",
        "--only",
        "0,7",
        "--json-output",
        json_out,
        "--markdown-output",
        markdown_out,
        cwd=tmp_path,
    )
    report = json.loads(json_out.read_text())
    assert report["evaluated_on"] == "val" and report["data"] == "synthetic" and report["seed_list"] == [0]
    assert report["command"].endswith("--seeds 0 --synthetic --examples 600 --only 0,7")
    assert report["train_examples"] + report["eval_examples"] == 600
    assert [row["group"] for row in report["rows"]] == ["reference", "chain"]
    for row in report["rows"]:
        assert accuracy(row["mean_validation_accuracy"]) and accuracy(row["min_validation_accuracy"])
        assert finite(row["median_train_seconds"]) and row["steps"] > 0 and len(row["per_seed"]) == 1
        assert "passed" not in row  # validation rows never claim the target
    assert json.loads(done.stdout) == {
        r["name"]: [r["min_validation_accuracy"], r["mean_validation_accuracy"], r["median_train_seconds"]]
        for r in report["rows"]
    }
    table = [line for line in markdown_out.read_text().splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(report["rows"]), table  # the header and one line per row


@pytest.mark.slow  # fresh processes that import pandas, the report's and compare's modules
def test_bench_tables(tmp_path: Path):
    report = json.loads(bench("bench_tables.py", "--repeats", "1", "--json", cwd=tmp_path).stdout)
    assert report["cores"] and len(report["startup_s"]) == 10 and all(map(finite, report["startup_s"].values()))
    assert len(report["jobs"]) == 10
    for job in report["jobs"].values():  # both ways timed, and the same text from each
        assert finite(job["by_hand_s"]) and finite(job["pandas_s"]) and job["same_output"] is True


@pytest.mark.slow  # every stage alone, the pipeline twice under each tool and the no-op runs: a few minutes
def test_bench_pipeline_from_a_tiny_data_raw(tmp_path: Path):
    raw = write_raw(tmp_path / "raw", train=300, test=100)
    (raw / "idx").mkdir(exist_ok=True)  # the download stage's folder of the original .gz files, left empty here
    params = write_params(tmp_path / "params.yaml", tiny_params_dict(variants=["jit"], train={"epochs": 1}))
    out = tmp_path / "pipeline.json"
    done = bench(
        "bench_pipeline.py",
        "--raw",
        raw,
        "--params",
        params,
        "--repeats",
        "1",
        "--json",
        "--output",
        out,
        "--each-stage",
        cwd=tmp_path,
        timeout=900,
    )
    report = json.loads(done.stdout)
    assert json.loads(out.read_text()) == report
    expected = {f"{s.name}@jit" if s.per_variant else s.name for s in stage_table.STAGES} - {"download"}
    assert set(report["stages_alone"]) == expected and "download not run" in report["data"]
    for name, stage in report["stages_alone"].items():
        assert finite(stage["seconds"]) and finite(stage["peak_rss_bytes"]), (name, stage)
    for tool in ("snakemake", "dvc"):
        scratch, change = report["runs"][tool]["from_scratch"], report["runs"][tool]["after_train_step_size_change"]
        assert set(scratch["per_job"]) == expected, (tool, scratch["per_job"])
        assert {job["tool"] for job in scratch["per_job"].values()} == {tool}
        # the step size re-runs train and what reads its outputs; preprocess and check stay
        assert "train@jit" in change["per_job"] and "preprocess" not in change["per_job"], (tool, change)
        for found in (scratch, change):
            assert 0 < found["stages_work_s"] < found["wall_s"], (tool, found)
            rest = found["wall_s"] - found["stages_work_s"]
            assert found["orchestration_startup_and_checks_s"] == pytest.approx(rest, abs=0.02)
            assert 0 <= found["max_checks_s"] <= found["checks_s"]
    assert set(report["noop"]) == {"snakemake_pipeline", "snakemake_one_rule", "dvc_pipeline", "dvc_one_stage"}
    assert all(finite(v["wall_s"]) and finite(v["cpu_s"]) and v["cpu_s"] > 0 for v in report["noop"].values())
    # the pipeline's extra CPU over the bare workflow: on tiny data within the noise, so of either sign
    assert finite(report["noop_extra_cpu_s_snakemake"], positive=False)
    assert finite(report["noop_extra_cpu_s_dvc"], positive=False)
