"""The profile stage on tiny data: the execution trace and its op table, three snapshots, summary.json,
explanations, the train step less init, pprof rendering; XLA's memory analysis of the compiled steps."""

from __future__ import annotations

import copy
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest
import yaml

from conftest import unavailable
from mnist_jax_pipeline.artefacts import atomic, storage
from mnist_jax_pipeline.artefacts.model_file import ModelMetadata, save_model
from mnist_jax_pipeline.artefacts.profile_summary import OpTable, read_summary
from mnist_jax_pipeline.config.params import Params, parameter_count, validate
from mnist_jax_pipeline.foundation import console, paths, variants
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.mlp import loops
from mnist_jax_pipeline.mlp.loops.base import loop_inputs
from mnist_jax_pipeline.mlp.model import init_params
from mnist_jax_pipeline.orchestration import snakefile, stage_table
from mnist_jax_pipeline.orchestration.jobs import Job
from mnist_jax_pipeline.stages.profile import op_table, pprof, trace_files
from mnist_jax_pipeline.stages.profile.stage import profile
from mnist_jax_pipeline.stages.train import initial_state

ROOT = Path(__file__).resolve().parents[1]
SIZES = [784, 32, 10]
BATCH = 64


def tiny_params(layer_sizes: list[int] = SIZES) -> Params:
    raw = copy.deepcopy(yaml.safe_load((ROOT / "params.yaml").read_text()))
    raw["model"]["layer_sizes"] = layer_sizes
    raw["train"]["batch_size"] = BATCH
    raw["profile"]["top_allocations"] = 5
    return validate(raw)


TRAIN = 256


def write_tiny(
    base: Path, train: int = TRAIN, test: int = 64, model_variants: tuple[str, ...] = ("jit",)
) -> tuple[Path, Path]:
    """Processed arrays with the stage's file names, and models saved as train@<variant> does."""
    rng = np.random.default_rng(0)
    processed = base / "processed"
    processed.mkdir(parents=True)
    for split, count in (("train", train), ("test", test)):
        images = rng.uniform(0, 255, size=(count, 784)).astype(np.float32)
        storage.save_array(processed / f"{split}_images.npy", images)
        labels = rng.integers(0, 10, count).astype(np.int32)
        storage.save_array(processed / f"{split}_labels.npy", labels)
    params = [(np.asarray(w), np.asarray(b)) for w, b in init_params(SIZES, jax.random.PRNGKey(1), 0.01)]
    for variant in model_variants:
        save_model(
            paths.MODEL.at(variant, base),
            params,
            ModelMetadata(variant=variant, layer_sizes=SIZES, params_sha256="0" * 64, jax_version="test"),
        )
    return processed, paths.MODEL.at(model_variants[0], base)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("profile")
    processed, model = write_tiny(base, model_variants=("jit", "jit_scan", "nojit"))
    summary = profile(tiny_params(), "jit", processed, base)
    out = paths.PROFILE.at("jit", base)
    return {
        "base": base,
        "processed": processed,
        "model": model,
        "out": out,
        "summary": summary.model_dump(mode="json"),
        "typed": summary,
    }


@pytest.mark.slow
def test_writes_one_snapshot_per_point_and_the_summary(run: dict[str, Any]) -> None:
    out = run["out"]
    for point in paths.SNAPSHOTS:
        assert (out / f"{point}.prof").read_bytes()[:2] == b"\x1f\x8b"  # gzip
    on_disk = json.loads((out / "summary.json").read_text())
    typed = read_summary("jit", run["base"])
    assert typed is not None and typed.model_dump(mode="json") == run["summary"]
    assert sorted(on_disk["points"]) == sorted(paths.SNAPSHOTS)
    assert not [p for p in out.parent.iterdir() if p.name.startswith(atomic.TMP_PREFIX)]
    assert on_disk["variant"] == "jit"


def test_summary_schema_and_expected_sizes(run: dict[str, Any]) -> None:
    s = run["summary"]
    assert s["backend"] == jax.default_backend() and s["device"]
    assert s["batch_size"] == BATCH and s["layer_sizes"] == SIZES
    weights = 32 * 784 + 32 + 10 * 32 + 10
    assert s["expected_bytes"]["params"] == weights * 4
    assert s["expected_bytes"]["batch_images"] == BATCH * 784 * 4
    assert s["expected_bytes"]["layer0.weight"] == 32 * 784 * 4
    for point in paths.SNAPSHOTS:
        entry = s["points"][point]
        assert entry["file"] == f"{point}.prof"
        assert entry["total_bytes"] > 0 and entry["total_allocations"] > 0
        assert 0 < len(entry["top"]) <= 5
        assert entry["explanation"]
        row = entry["top"][0]
        assert set(row) >= {"bytes", "count", "labels", "stack", "origin"}
        assert all(" " in frame and ":" in frame for frame in row["stack"])
    assert s["points"]["init"]["total_bytes"] >= s["expected_bytes"]["params"]


def test_train_step_top_allocation_is_a_model_array(run: dict[str, Any]) -> None:
    s = run["summary"]
    top = s["points"]["train_step"]["top"][0]
    assert top["bytes"] >= s["expected_bytes"]["layer0.weight"]
    assert top["labels"]["kind"] == "buffer"
    assert "32x784 float32 weight of layer 0" in s["points"]["init"]["explanation"]
    # the step holds a batch of 64x784 floats (200,704 bytes), the largest array at these sizes
    assert top["bytes"] % (BATCH * 784 * 4) == 0
    assert f"a batch of {BATCH} images" in s["points"]["train_step"]["explanation"]


def test_peak_memory_names_its_source(run: dict[str, Any]) -> None:
    peak = run["summary"]["peak_memory"]
    assert peak["bytes"] > 0
    assert peak["source"] in ("device.memory_stats peak_bytes_in_use", "process peak RSS")
    if jax.default_backend() == "cpu":
        assert peak["source"] == "process peak RSS"


def test_pprof_renders_top_and_svg(run: dict[str, Any]) -> None:
    if shutil.which("pprof") is None:
        unavailable("pprof not on PATH; install it with .ci/install-pprof.sh")
    out, info = run["out"], run["summary"]["pprof"]
    for point in paths.SNAPSHOTS:
        assert "space" in (out / f"{point}.top.txt").read_text()
        if shutil.which("dot"):
            assert (out / f"{point}.svg").read_text().lstrip().startswith("<?xml")
    assert info["available"] is bool(shutil.which("dot"))


def test_missing_pprof_still_succeeds(
    run: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(pprof, "tools", lambda: {"binary": None, "dot": None})
    monkeypatch.setattr(console.details, "propagate", True)  # no job log: the details are logged
    shutil.copytree(run["base"] / "models", tmp_path / "models")
    with caplog.at_level(logging.INFO):
        summary = profile(tiny_params(), "jit", run["processed"], tmp_path)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [
        "pprof or Graphviz dot not on PATH: no .top.txt/.svg call graphs (the report says how to install them)"
    ]  # one short line; the install commands are a detail
    assert any("go build" in r.getMessage() for r in caplog.records if r.name == console.details.name)
    out = paths.PROFILE.at("jit", tmp_path)
    assert summary.pprof.available is False
    assert "go install github.com/google/pprof@latest" in summary.pprof.install_hint
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{p}.prof" for p in paths.SNAPSHOTS] + ["summary.json", paths.TRACE_LOGDIR]
    )
    typed = read_summary("jit", tmp_path)  # a summary without pprof reads back
    assert typed is not None and typed.pprof.binary is None


def test_model_not_matching_params_is_one_line_error(run: dict[str, Any], tmp_path: Path) -> None:
    shutil.copytree(run["base"] / "models", tmp_path / "models")
    with pytest.raises(PipelineError, match=r"jit.safetensors.*model.layer_sizes.*train@jit"):
        profile(tiny_params([784, 64, 10]), "jit", run["processed"], tmp_path)
    assert not paths.PROFILE.at("jit", tmp_path).exists()


def test_missing_model_names_the_stage(run: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match=r"missing.*train@jit"):
        profile(tiny_params(), "jit", run["processed"], tmp_path)


# --- the execution trace and its op table ------------------------------------------------------------------

# The op table's self times add up to the traced step time (each step's first op start to its last op's
# completion, summed) within this tolerance. They fall short of it by the gaps between ops and by the
# tails of asynchronous ops (see op_table.py); they can exceed it only where ops overlap on two threads,
# which these small steps barely do. Measured on the project's 2-core CPU machine (jax 0.10.2), 5 traced
# jit steps at the sizes of this file ([784, 32, 10], batch 64), 30 traces at load average 4 (other jobs
# running): median 0.85, 27 of 30 in 0.75-0.98; at the real sizes (784-512-512-10, batch 128) 0.79-0.87.
# The 3 others (0.32-0.51) were traces in which the scheduler parked the process between two ops for
# milliseconds, so the test takes the best of up to three traces.
SELF_SHARE = (0.70, 1.02)
ATTEMPTS = 3


def _traced(run: dict[str, Any], variant: str, attempt: int) -> OpTable:
    """The op table of `variant`: the module's own profile for jit at the first attempt, else a new trace."""
    from mnist_jax_pipeline.artefacts.dataset import load_split
    from mnist_jax_pipeline.artefacts.model_file import load_model
    from mnist_jax_pipeline.stages.profile.stage import trace

    if variant == "jit" and attempt == 0:
        return run["typed"].trace.table
    model, _ = load_model(paths.MODEL.at(variant, run["base"]), "train")
    images, labels = load_split(run["processed"], "train")
    out = run["base"] / f"retrace-{variant}-{attempt}"
    out.mkdir()
    return trace(tiny_params(), variant, model, images, labels, out).table


def test_op_table_self_times_add_up_to_the_traced_step_time(run: dict[str, Any]) -> None:
    ratios = []
    for attempt in range(ATTEMPTS):
        table = _traced(run, "jit", attempt)
        assert table.steps == 5 and table.runs == 5 and table.module == "jit_update"
        # the rows are the whole table: their self times and shares add up to its totals
        assert sum(r.self_us for r in table.rows) == pytest.approx(table.self_us, rel=1e-6, abs=0.01)
        assert sum(r.share for r in table.rows) == pytest.approx(table.self_share, rel=1e-4)
        assert all(r.count == 5 for r in table.rows)  # every HLO op runs once per step
        assert table.busy_us <= table.step_us * 1.0001  # nothing runs outside the steps' spans
        ratios.append(table.self_us / table.step_us)
        if SELF_SHARE[0] <= ratios[-1] <= SELF_SHARE[1]:
            break
    assert SELF_SHARE[0] <= max(ratios) <= SELF_SHARE[1], f"self-time sum / traced step time: {ratios}"


def test_the_matrix_products_carry_their_flops(run: dict[str, Any]) -> None:
    table = run["typed"].trace.table
    products = {r.op: r for r in table.rows if r.flops}
    # forward: x@W0 (64x784 by 784x32) and h@W1 (64x32 by 32x10); backward: both weight gradients and the
    # gradient of h; 2 FLOPs per multiply-add
    expected = sorted([2 * 64 * 784 * 32, 2 * 64 * 32 * 10, 2 * 32 * 64 * 784, 2 * 10 * 64 * 32, 2 * 64 * 10 * 32])
    assert sorted(r.flops or 0 for r in products.values()) == expected
    assert table.matmul is not None and table.matmul.flops == 5 * sum(expected)
    for row in products.values():
        assert row.gflops_per_s == pytest.approx((row.flops or 0) * row.count / row.wall_us / 1e3, rel=1e-3)
    assert table.timeline.events and {e.op for e in table.timeline.events} <= {r.op for r in table.rows}


def test_trace_files_have_fixed_names_and_open(run: dict[str, Any]) -> None:
    out, trace = run["out"], run["typed"].trace
    session = out / paths.TRACE_SESSION.format(variant="jit")
    assert sorted(p.name for p in session.iterdir()) == sorted(paths.TRACE_FILES.values())
    assert [p.name for p in (out / "trace" / "plugins" / "profile").iterdir()] == ["jit"]  # one session, no date
    assert {role: out / path for role, path in trace.files.items()} == {
        role: session / name for role, name in paths.TRACE_FILES.items()
    }
    job = Job(stage_table.get("profile"), "jit", run["base"])
    declared = [Path(name) for name in snakefile.declared(job, ("jit",))[:-1]]  # Snakemake declares, less the record
    assert [p.relative_to(out).as_posix() for p in declared] == [f"{point}.prof" for point in paths.SNAPSHOTS] + [
        "summary.json"
    ] + [f"trace/plugins/profile/jit/{name}" for name in paths.TRACE_FILES.values()]
    assert all(p.is_file() for p in declared)
    events = trace_files.load_events(session / paths.TRACE_FILES["chrome"])  # both JSON files hold the events
    assert [e["args"]["step_num"] for e in events if e.get("name") == trace_files.STEP_ANNOTATION] == [
        str(i) for i in range(5)
    ]
    assert trace.calls == 5 and trace.unit == "step" and trace.train_steps == 5 and trace.python_tracer


@pytest.mark.parametrize(
    ("variant", "unit", "grouped_by"), [("jit_scan", "epoch", "hlo_op"), ("nojit", "step", "hlo_module")]
)
def test_every_variant_is_traced_in_its_own_unit(
    run: dict[str, Any], tmp_path: Path, variant: str, unit: str, grouped_by: str
) -> None:
    shutil.copytree(run["base"] / "models", tmp_path / "models")
    summary = profile(tiny_params(), variant, run["processed"], tmp_path)
    trace, table = summary.trace, summary.trace.table
    assert summary.variant == variant and trace.unit == unit and table.grouped_by == grouped_by
    if variant == "jit_scan":  # 5 steps of 4 per epoch: 2 epochs, each one run of the scanned epoch
        assert (trace.calls, trace.train_steps, table.runs) == (2, 8, 2)
        assert table.module and table.module.startswith("jit_") and any(r.hlo.endswith(" while") for r in table.rows)
        assert "iteration" in table.timeline.title
    else:  # op by op: each row an executable, many runs per step
        assert table.module is None and trace.python_tracer is False
        assert any(r.op == "jit_dot_general" for r in table.rows) and table.runs > 20 * trace.calls
        assert any(e.matmul for e in table.timeline.events)
    assert 0 < table.self_us <= table.step_us * SELF_SHARE[1] and table.step_us <= table.annotated_us


def test_train_step_less_init_is_what_the_step_added(run: dict[str, Any]) -> None:
    points = run["typed"].points
    diff = points["train_step"].diff
    assert diff is not None and diff.base == "init"
    assert diff.total_bytes == points["train_step"].total_bytes - points["init"].total_bytes
    # the step holds the batch and the new parameters beyond what init held
    params = 4 * parameter_count(tuple(SIZES))
    assert diff.total_bytes == BATCH * 784 * 4 + BATCH * 10 * 4 + params
    assert any(r.bytes == BATCH * 784 * 4 and r.count == 1 for r in diff.rows)
    for snapshot in points.values():  # executables (0 bytes on CPU) are one line, not rows
        assert snapshot.executables is not None and snapshot.executables.count > 0
        assert all(
            r.labels.get("kind") != "executable" for r in snapshot.top + (snapshot.diff.rows if snapshot.diff else [])
        )


@pytest.mark.parametrize("damage", [b"", b"\x1f\x8b\x08\x00garbage", b'{"traceEvents": 3}', b'[{"ph": "X"}]'])
def test_a_damaged_trace_names_the_file_and_the_stage(tmp_path: Path, damage: bytes) -> None:
    path = tmp_path / "perfetto_trace.json.gz"
    path.write_bytes(damage)
    with pytest.raises(PipelineError, match=r"perfetto_trace\.json\.gz: .*; re-run the 'profile@jit' stage") as err:
        trace_files.load_events(path, "profile@jit")
    assert "\n" not in str(err.value)


def test_a_truncated_trace_from_the_stage_names_it(run: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "perfetto_trace.json.gz"
    blob = (run["out"] / run["typed"].trace.files["perfetto"]).read_bytes()
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(PipelineError, match=r"corrupt or truncated gzip.*re-run the 'profile@jit' stage"):
        trace_files.load_events(path, "profile@jit")


def test_op_table_of_a_synthetic_trace() -> None:
    """Self times less nested ops, an asynchronous op's completion at its `end:` marker, FLOPs from the HLO."""
    hlo = (
        "HloModule jit_step, entry_computation_layout={}\n\nENTRY %main.1 (x: f32[2,4], y: f32[4,3]) -> f32[2,3] {\n"
        "  %x = f32[2,4]{1,0} parameter(0)\n  %y = f32[4,3]{1,0} parameter(1)\n"
        "  ROOT %dot.1 = f32[2,3]{1,0} dot(%x, %y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n"
    )

    def op(name: str, ts: float, dur: float, tid: int) -> dict[str, Any]:
        return {
            "ph": "X",
            "name": name,
            "ts": ts,
            "dur": dur,
            "pid": 1,
            "tid": tid,
            "args": {"hlo_op": name, "hlo_module": "jit_step", "run_id": "7"},
        }

    events = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "tf_XLAPjRtCpuClient/1"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "tf_XLAEigen/2"}},
        {"ph": "X", "name": trace_files.STEP_ANNOTATION, "ts": 0, "dur": 100, "pid": 1, "tid": 9, "args": {}},
        op("fusion.2", 10, 30, 1),  # holds copy.3 nested: self 20
        op("copy.3", 15, 10, 1),
        op("dot.1", 45, 5, 2),  # returns at 50, finishes at its marker (70)
        {"ph": "X", "name": "end: dot.1", "ts": 70, "dur": 0.1, "pid": 1, "tid": 2, "args": {}},
        op("other_module_op", 60, 5, 1) | {"args": {"hlo_op": "x", "hlo_module": "jit_other", "run_id": "8"}},
    ]
    table = op_table.parse(events, hlo)
    rows = {r.op: r for r in table.rows}
    assert [r.op for r in table.rows] == ["fusion.2", "copy.3", "dot.1"]
    assert (rows["fusion.2"].self_us, rows["copy.3"].self_us, rows["dot.1"].self_us) == (20, 10, 5)
    assert table.step_us == 60 and table.self_us == 35 and table.annotated_us == 100  # 10 -> 70
    assert rows["dot.1"].wall_us == 25 and rows["dot.1"].flops == 2 * 2 * 3 * 4
    assert rows["dot.1"].gflops_per_s == pytest.approx(48 / 25e3)
    assert rows["fusion.2"].share == pytest.approx(20 / 60, rel=1e-5)
    assert table.busy_us == 55  # [10, 40] and [45, 70]
    assert table.threads == {"Eigen pool 1": 1, "XLA client 1": 2}
    assert table.timeline.duration_us == 60 and [e.op for e in table.timeline.events] == ["fusion.2", "copy.3", "dot.1"]


# --- what the compiled step needs: XLA's memory analysis against the model's bytes ---------------------------


@pytest.mark.parametrize("variant", ["jit", "jit_scan"])
def test_xla_memory_analysis_is_the_parameters_and_the_batch(run: dict[str, Any], variant: str) -> None:
    from mnist_jax_pipeline.artefacts.dataset import load_split

    config = tiny_params()
    images, labels = load_split(run["processed"], "train")
    inputs = loop_inputs(config, images, labels)
    state = initial_state(config, inputs)
    loop = loops.build(variants.get(variant), inputs)
    loop.compile(loop.place(state))
    xla = loop.analysis()
    assert xla is not None
    params = 4 * parameter_count(tuple(SIZES))  # float32 weights and biases: the whole state under SGD
    leaves = len(jax.tree.leaves(state))
    assert sum(np.asarray(leaf).nbytes for leaf in jax.tree.leaves(state)) == params
    if variant == "jit":  # the state and one batch in; nothing donated
        assert xla.argument_bytes == params + BATCH * 784 * 4 + BATCH * 10 * 4
        assert xla.alias_bytes == 0
    else:  # the state and the whole training split in (device-resident); the state donated to the output
        assert xla.argument_bytes == params + TRAIN * 784 * 4 + TRAIN * 10 * 4
        assert xla.alias_bytes == params
    # the new state out, plus the output tuple's table of 8-byte buffer pointers (one per leaf on CPU)
    assert params <= xla.output_bytes <= params + 8 * leaves
    assert xla.peak_bytes is None or xla.peak_bytes >= xla.argument_bytes


def test_an_op_the_executor_waits_for_is_done_when_the_wait_ends() -> None:
    """A marker of the same op name long after the executor's wait belongs to another run (op by op)."""
    events = [
        {
            "ph": "X",
            "name": "dot.1",
            "ts": 0,
            "dur": 10,
            "pid": 1,
            "tid": 1,
            "args": {"hlo_op": "dot.1", "hlo_module": "jit_dot", "run_id": "1"},
        },
        {"ph": "X", "name": op_table.WAIT_FOR_COMPLETION, "ts": 10.5, "dur": 40, "pid": 1, "tid": 1, "args": {}},
        {"ph": "X", "name": "end: dot.1", "ts": 900, "dur": 0.1, "pid": 1, "tid": 2, "args": {}},
        {
            "ph": "X",
            "name": "dot.1",
            "ts": 950,
            "dur": 10,
            "pid": 1,
            "tid": 1,
            "args": {"hlo_op": "dot.1", "hlo_module": "jit_dot", "run_id": "2"},
        },
        {"ph": "X", "name": "end: dot.1", "ts": 960.5, "dur": 0.1, "pid": 1, "tid": 1, "args": {}},
    ]
    ops = [e for e in events if "hlo_op" in e["args"]]
    assert op_table.completion_times(events, ops) == [50.5, 960]
