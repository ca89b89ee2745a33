"""The benchmarks' reference and verdicts: the roofline times the products the compiled epoch really runs,
a median ratio below 0.95 is refused (a noisy round is measured again,
then flagged), the tutorial's loop trains as the jit variant does, and the time-to-accuracy
preset passes only when every seed reaches the target."""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter

import jax
import numpy as np
import pytest

from conftest import ROOT
from mnist_jax_pipeline.foundation import variants
from mnist_jax_pipeline.mlp import loops

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_time_to_accuracy as tta  # noqa: E402
import bench_train  # noqa: E402
import roofline  # noqa: E402
from tutorial_loop import TutorialLoop  # noqa: E402

from mnist_jax_pipeline.stages.train import initial_state, loop_inputs  # noqa: E402

DOT = re.compile(r"= f32\[(\d+),(\d+)\]\{[^}]*\} dot\(.*?lhs_contracting_dims=\{(\d)\}, rhs_contracting_dims=\{(\d)\}")


def compiled_dots(batch: int, examples: int) -> Counter:
    """(output shape, lhs and rhs contracting dims) of every dot in the compiled jit_scan epoch."""
    params = bench_train.bench_params(batch, 1)
    rng = np.random.default_rng(0)
    images = rng.random((examples, 784), dtype=np.float32)
    inputs = loop_inputs(params, images, rng.integers(0, 10, examples).astype(np.int32))
    loop = loops.build(variants.get("jit_scan"), inputs)
    loop.compile(initial_state(params, inputs))
    return Counter((int(a), int(b), int(c), int(d)) for a, b, c, d in DOT.findall(loop.hlo_text()))


def dots(hlo: str, computation: str) -> Counter:
    """(output shape, lhs and rhs contracting dims) of every dot `computation` runs, in the fusions it calls too,
    not in the loops it runs (their body's computation is named apart)."""
    blocks = {m[1]: m[0] for m in re.finditer(r"^(?:ENTRY )?%([\w.-]+) \(.*?^}", hlo, re.MULTILINE | re.DOTALL)}
    block = blocks[computation]
    found = Counter((int(a), int(b), int(c), int(d)) for a, b, c, d in DOT.findall(block))
    for called in re.findall(r"calls=%([\w.-]+)", block):
        found += dots(hlo, called)
    return found


def step_products(rows: int) -> Counter:
    return Counter((*g.out, *g.contract) for g in roofline.step_gemms([784, 512, 512, 10], rows))


def test_the_reference_times_every_product_the_compiled_epoch_runs():
    # 3 full batches of 128 in a scan and a partial last one of 40: both steps' products, with XLA's layouts
    assert compiled_dots(128, 3 * 128 + 40) == step_products(128) + step_products(40)
    assert roofline.batch_counts(3 * 128 + 40, 128) == {128: 3, 40: 1}
    assert roofline.batch_counts(256, 128) == {128: 2}


def test_the_reference_runs_a_full_steps_products_in_its_loop_and_the_partial_steps_after_it():
    """None hoisted out of the loop, merged or dropped: the loop's body runs one step's products, the call
    itself the partial step's (the naive way, XLA computes loop-invariant products once, before the loop)."""
    hlo = roofline.EpochProducts([784, 512, 512, 10], 3 * 128 + 40, 128).hlo_text()
    entry, body = re.search(r"^ENTRY %([\w.-]+)", hlo, re.MULTILINE), re.search(r"while\(.*?body=%([\w.-]+)", hlo)
    assert entry is not None and body is not None
    assert dots(hlo, body.group(1)) == step_products(128)
    assert dots(hlo, entry.group(1)) == step_products(40)


@pytest.mark.slow
def test_the_limit_grows_with_the_epochs_steps():
    sizes = [784, 512, 512, 10]
    per_example = sum(g.flops for g in roofline.step_gemms(sizes, 1))
    assert per_example == 2 * (784 * 512 + 512 * 512 + 512 * 10) * 2 + 2 * (512 * 512 + 512 * 10)
    assert roofline.epoch_gflop(sizes, 60_000) == pytest.approx(192.55, abs=0.01)
    short, long = (roofline.EpochProducts(sizes, steps * 128, 128).measure(3)["limit_seconds"] for steps in (20, 80))
    assert 2 < long / short < 8  # four times the steps: about four times the time


def fake_measurement(scan_seconds: list[float], limit: float, again: list[int] | None = None) -> dict:
    rounds = len(scan_seconds)
    return {
        "compile_seconds": {"jit_scan": 0.1, "tutorial": None},
        "first_epoch_seconds": {"jit_scan": 1.0, "tutorial": 2.0},
        "epochs": {"jit_scan": scan_seconds, "tutorial": [2.0] * rounds},
        "with_bar": [False] * rounds,
        "large_gemm_gflops": [200.0] * rounds,
        "loads": [0.1] * rounds,
        "references": [{"limit_seconds": limit}] * rounds,
        "measured_again": again or [0] * rounds,
    }


def report_for(scan_seconds: list[float], limit: float, again: list[int] | None = None) -> dict:
    args = argparse.Namespace(batch_size=128, rounds=len(scan_seconds), repeats=1, progress="off")
    params = bench_train.bench_params(128, 2)
    return bench_train.build_report(args, params, "synthetic", 60_000, fake_measurement(scan_seconds, limit, again))


def test_a_median_ratio_below_095_is_reported_as_a_bug_in_the_reference_not_as_a_ratio():
    good = report_for([1.2, 1.1, 1.3], limit=1.0)
    assert good["roofline_ratio"] == 1.2 and "roofline_error" not in good
    assert good["noisy"] is False and good["noisy_rounds"] == [] and "noisy_note" not in good
    assert good["ratios"]["roofline"] == {"median": 1.2, "min": 1.1, "max": 1.3, "values": [1.2, 1.1, 1.3]}
    assert good["speedup_vs_tutorial"] == pytest.approx(2.0 / 1.2, abs=1e-3)
    bad = report_for([0.9, 0.8, 1.3], limit=1.0, again=[2, 2, 0])  # the median beat the "limit"
    assert bad["roofline_ratio"] is None and "median ratio 0.900 < 0.95" in bad["roofline_error"]
    assert "not a limit" in bad["roofline_error"] and "up to 3 times" in bad["roofline_error"]


def test_a_noisy_round_is_reported_beside_the_others_not_as_a_bug():
    """One round still below 0.95 after its retries (another job slowed its reference): flagged, not fatal."""
    report = report_for([1.2, 0.762, 1.3], limit=1.0, again=[0, 2, 0])
    assert report["roofline_ratio"] == 1.2 and "roofline_error" not in report
    assert report["noisy"] is True and report["noisy_rounds"] == [2] and report["measured_again"] == [0, 2, 0]
    assert report["noisy_note"].startswith("noisy: round(s) [2] beat the reference's limit (ratio 0.762 < 0.95)")
    assert report["ratios"]["roofline"]["values"] == [1.2, 0.762, 1.3]  # kept beside the others


class ScriptedProducts:
    """The reference, its limit the same every round."""

    def __init__(self, *args: object) -> None:
        pass

    def measure(self, repeats: int) -> dict:
        return {"limit_seconds": 1.0}


def scripted_runner(seconds: list[float]) -> type:
    """A loop whose timed epochs take `seconds`, in order (epoch 1 is the warm-up)."""

    class Runner:
        def __init__(self, *args: object) -> None:
            self.timed = iter(seconds)

        def compile(self) -> None:
            return None

        def epoch(self, epoch: int, bar: bool) -> float:
            return 1.0 if epoch == 1 else next(self.timed)

        def close(self) -> None:
            pass

    return Runner


@pytest.mark.parametrize(
    ("scan", "expected", "again"),
    [
        ([1.2, 0.7, 1.1, 1.3], [1.2, 1.1, 1.3], [0, 1, 0]),  # round 2 noisy once, then fine
        ([1.2, 0.7, 0.8, 0.9, 1.3], [1.2, 0.9, 1.3], [0, 2, 0]),  # round 2 noisy however often: kept after 2 retries
    ],
)
def test_a_noisy_round_is_measured_again_a_bounded_number_of_times(monkeypatch, scan, expected, again):
    monkeypatch.setattr(bench_train.roofline, "EpochProducts", ScriptedProducts)
    monkeypatch.setattr(bench_train.roofline, "large_gemm_gflops", lambda size, repeats: 100.0)
    monkeypatch.setattr(bench_train, "VariantRunner", scripted_runner(scan))
    lines: list[str] = []
    params = bench_train.bench_params(128, 10)
    measured = bench_train.run_rounds(
        ["jit_scan"], np.zeros((256, 784)), np.zeros(256), params, 3, 1, "off", lines.append
    )
    assert measured["epochs"]["jit_scan"] == expected and measured["measured_again"] == again
    assert sum("noisy, measuring it again" in line for line in lines) == sum(again)


def test_a_round_measured_again_times_only_the_reference_and_jit_scan(monkeypatch):
    """The other loops' epochs of a noisy round stand (nojit's takes seconds on a GPU): one per round."""
    ran: list[str] = []
    scans = iter([1.2, 0.7, 0.8, 1.1, 1.3])  # round 2 noisy twice, then fine

    class Runner:
        def __init__(self, name: str, *args: object) -> None:
            self.name = name

        def compile(self) -> None:
            return None

        def epoch(self, epoch: int, bar: bool) -> float:
            if epoch == 1:
                return 1.0
            ran.append(self.name)
            return next(scans) if self.name == "jit_scan" else 2.0

        def close(self) -> None:
            pass

    monkeypatch.setattr(bench_train.roofline, "EpochProducts", ScriptedProducts)
    monkeypatch.setattr(bench_train.roofline, "large_gemm_gflops", lambda size, repeats: 100.0)
    monkeypatch.setattr(bench_train, "VariantRunner", Runner)
    params = bench_train.bench_params(128, 10)
    measured = bench_train.run_rounds(
        ["nojit", "jit_scan"], np.zeros((256, 784)), np.zeros(256), params, 3, 1, "off", lambda line: None
    )
    assert ran.count("nojit") == 3 and ran.count("jit_scan") == 5
    assert measured["epochs"] == {"nojit": [2.0, 2.0, 2.0], "jit_scan": [1.2, 1.1, 1.3]}
    assert measured["measured_again"] == [0, 2, 0]


def test_the_tutorials_loop_trains_as_the_jit_variant_does():
    """The tutorial's own update (plain SGD on its loss) and the pipeline's jit variant agree after an epoch."""
    params = bench_train.bench_params(128, 1)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(300, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 300).astype(np.uint8)
    tutorial = TutorialLoop(images, labels, list(params.model.layer_sizes), 128, 0.01, seed=0)
    tutorial.run_epoch()
    runner = bench_train.VariantRunner("jit", images, labels, params, 1)
    runner.compile()
    runner.epoch(1, bar=False)
    runner.close()
    for (w, b), (wj, bj) in zip(tutorial.params, jax.device_get(runner.state.params), strict=True):
        np.testing.assert_allclose(w, wj, rtol=0, atol=1e-6)
        np.testing.assert_allclose(b, bj, rtol=0, atol=1e-6)


def test_time_to_accuracy_passes_only_when_every_seed_reaches_the_target():
    runs = [
        {"seed": s, "accuracy": a, "train_seconds": t}
        for s, a, t in ((0, 0.9870, 2.0), (1, 0.9849, 2.4), (2, 0.9880, 2.2))
    ]
    out = tta.summary(runs, "test", 0.985)
    assert out["mean_test_accuracy"] == pytest.approx(0.98663, abs=1e-5)  # the mean is above the target ...
    assert out["passed"] is False and out["seeds_below_target"] == [1]  # ... one seed is not
    assert (out["min_test_accuracy"], out["max_test_accuracy"]) == (0.9849, 0.988)
    assert out["median_train_seconds"] == 2.2 and out["train_seconds_range"] == [2.0, 2.4]
    assert tta.summary(runs[::2], "test", 0.985)["passed"] is True
    assert "passed" not in tta.summary(runs, "val", 0.985)  # tuning never claims the target
