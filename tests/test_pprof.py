"""Reading JAX device-memory snapshots with the project's own pprof schema."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from conftest import unavailable
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.stages.profile import pprof


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real snapshot holding one 96x784 float32 array."""
    path = tmp_path_factory.mktemp("pprof") / "one.prof"
    held = jnp.ones((96, 784), jnp.float32)
    jax.block_until_ready(held)
    jax.profiler.save_device_memory_profile(str(path))
    del held
    return path


def test_sample_types_are_allocations_and_bytes(snapshot: Path) -> None:
    profile = pprof.parse_profile(snapshot)
    table = list(profile.string_table)
    types = [(table[t.type], table[t.unit]) for t in profile.sample_type]
    assert types == [("allocations", "count"), ("space", "bytes")]


def test_top_allocation_is_the_held_array(snapshot: Path) -> None:
    summary = pprof.summarize(snapshot, limit=3)
    top = summary.top[0]
    assert top.bytes == 96 * 784 * 4 and top.count == 1
    assert top.labels["kind"] == "buffer"
    assert top.origin is not None and top.origin.startswith("snapshot ") and "test_pprof.py:" in top.origin
    assert summary.total_bytes >= top.bytes
    assert pprof.summarize(snapshot, 1).top == [top]


def test_uncompressed_profile_parses(snapshot: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain.prof"
    plain.write_bytes(gzip.decompress(snapshot.read_bytes()))
    assert pprof.summarize(plain).total_bytes == pprof.summarize(snapshot).total_bytes


@pytest.mark.parametrize("keep", [0.5, 0.1])
def test_truncated_profile_names_file_and_stage(snapshot: Path, tmp_path: Path, keep: float) -> None:
    blob = snapshot.read_bytes()
    broken = tmp_path / "broken.prof"
    broken.write_bytes(blob[: int(len(blob) * keep)])
    with pytest.raises(PipelineError, match=r"broken\.prof.*re-run the 'profile' stage"):
        pprof.summarize(broken)


def test_garbage_names_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.prof"
    bad.write_bytes(b"\xff\xfe not a profile")
    with pytest.raises(PipelineError, match=r"bad\.prof.*'profile'"):
        pprof.summarize(bad)


def test_other_sample_types_are_refused(tmp_path: Path) -> None:
    message = pprof.profile_class()(string_table=["", "cpu", "nanoseconds"])
    message.sample_type.add(type=1, unit=2)
    cpu = tmp_path / "cpu.prof"
    cpu.write_bytes(gzip.compress(message.SerializeToString()))
    with pytest.raises(PipelineError, match=r"cpu\.prof: sample types are cpu/nanoseconds"):
        pprof.summarize(cpu)


def test_render_never_raises_when_pprof_fails(snapshot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pprof, "tools", lambda: {"binary": "/bin/false", "dot": None})
    assert pprof.render(snapshot, tmp_path) == []
    monkeypatch.setattr(pprof, "tools", lambda: {"binary": None, "dot": None})
    assert pprof.render(snapshot, tmp_path) == []


def test_render_with_real_pprof(snapshot: Path, tmp_path: Path) -> None:
    if shutil.which("pprof") is None:
        unavailable("pprof not on PATH; install it with .ci/install-pprof.sh")
    written = pprof.render(snapshot, tmp_path)
    assert "one.top.txt" in written
    assert "Type: space" in (tmp_path / "one.top.txt").read_text()
    if shutil.which("dot"):
        assert (tmp_path / "one.svg").stat().st_size > 0
