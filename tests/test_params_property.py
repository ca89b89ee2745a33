"""Every parameters file `check` accepts runs; every one it refuses gets one line naming the key.

Hypothesis writes params.yaml files whose values mix valid ones with what a person might type:
YAML 1.2 numbers (`1e-3`, `0x10`, `1_000`), `.nan`, `.inf`, whole numbers written `1.0`, huge
integers, quoted numbers, `yes`, lists where scalars belong. Each file is checked with
`mnist-pipeline check`; an accepted one then runs preprocess, train (every listed variant, one
epoch) and evaluate on the tiny synthetic data. The one outcome besides success that a valid file
may have is the documented divergence line (a step size that makes the loss non-finite).

`max_train_examples` is drawn from 1..600 here: its 0 means "the whole training split", 60,000
examples for check but 600 for the tiny data (the real-data tests run 0).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import adopt, write_raw
from mnist_jax_pipeline.cli import main
from mnist_jax_pipeline.foundation import variants

SEEDS = ["0", "7", "4294967295", "4294967296", "-1", "99999999999999999999", "1.0", "0x10", "'3'", "true"]
INTS = [
    "0",
    "-3",
    "1.0",
    "300.0",
    "1e2",
    "0x10",
    "1_0",
    "99999999999999999999",
    "'5'",
    ".nan",
    "~",
    "[1]",
    "true",
    "2147483648",
]
FLOATS = [
    "1e-3",
    "1E-3",
    ".5",
    "0.99",
    "1",
    "0",
    "-0.1",
    ".inf",
    "-.inf",
    ".nan",
    "1e400",
    "'0.1'",
    "true",
    "1e30",
    "0x1",
    "~",
]
BOOLS = ["true", "false", "yes", "no", "on", "1", "True", "FALSE", "'true'"]


def ints(low: int, high: int, odd: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(st.integers(low, high).map(str), st.sampled_from(odd))


def floats(low: float, high: float) -> st.SearchStrategy[str]:
    return st.one_of(st.floats(low, high, allow_nan=False).map(repr), st.sampled_from(FLOATS))


def choice(valid: list[str], odd: list[str]) -> st.SearchStrategy[str]:
    return st.sampled_from(valid + odd)


LAYER_SIZES = st.one_of(
    st.lists(st.integers(1, 32), max_size=2).map(lambda hidden: str([784, *hidden, 10])),
    st.sampled_from(
        [
            "[784, 10]",
            "[100, 10]",
            "[784, 0, 10]",
            "[784, 16.0, 10]",
            "[784, 7]",
            "784",
            "[]",
            "[784, 16384, 16384, 10]",
            "[784, 20000, 10]",
            "['784', 10]",
        ]
    ),
)
VARIANT_LISTS = st.one_of(
    st.lists(st.sampled_from(variants.names()), min_size=1, max_size=3, unique=True).map(
        lambda names: "[" + ", ".join(names) + "]"
    ),
    st.sampled_from(["[]", "[jit, jit]", "[nojit]", "[jit, fast]", "jit", "[JIT]"]),
)
# Every key of params.yaml, as YAML text: the valid tiny-run value first, then what may be typed instead.
KEYS: dict[str, st.SearchStrategy[str]] = {
    "data.dataset": choice(["mnist"], ["cifar10", "MNIST", "''", "1"]),
    "preprocess.deskew": choice(["false", "true"], BOOLS),
    "preprocess.normalize": choice(["none", "unit", "standardize"], ["None", "zscore", "~", "0"]),
    "preprocess.flatten": choice(["true", "false"], BOOLS),
    "preprocess.validation_fraction": floats(0.0, 0.999),
    "preprocess.max_train_examples": ints(1, 600, INTS),
    "preprocess.seed": ints(0, 2**32 - 1, SEEDS),
    "model.layer_sizes": LAYER_SIZES,
    "model.init": choice(["normal", "he"], ["He", "xavier", "~", "1"]),
    "model.init_scale": floats(1e-6, 10.0),
    "model.output_init": choice(["same", "zeros"], ["zero", "Same", "~", "0"]),
    "model.seed": ints(0, 2**32 - 1, SEEDS),
    "train.optimizer": choice(["sgd", "momentum", "adam"], ["SGD", "rmsprop", "~"]),
    "train.step_size": floats(1e-6, 10.0),
    "train.momentum": floats(0.0, 0.999),
    "train.beta2": floats(0.0, 0.999),
    "train.nesterov": choice(["true", "false"], BOOLS),
    "train.schedule": choice(["constant", "cosine", "onecycle"], ["linear", "Cosine", "one_cycle", "1"]),
    "train.warmup_fraction": floats(0.0, 1.0),
    "train.label_smoothing": floats(0.0, 0.999),
    "train.batch_size": ints(1, 700, INTS),
    "train.epochs": choice(["1"], INTS),
    "train.shuffle": choice(["true", "false"], BOOLS),
    "train.shuffle_seed": ints(0, 2**32 - 1, SEEDS),
    "variants": VARIANT_LISTS,
    "profile.top_allocations": ints(1, 50, INTS),
    "profile.trace_steps": ints(1, 20, INTS),
}
TINY = {
    "data.dataset": "mnist",
    "preprocess.deskew": "false",
    "preprocess.normalize": "unit",
    "preprocess.flatten": "true",
    "preprocess.validation_fraction": "0.1",
    "preprocess.max_train_examples": "300",
    "preprocess.seed": "0",
    "model.layer_sizes": "[784, 16, 10]",
    "model.init": "normal",
    "model.init_scale": "0.1",
    "model.output_init": "same",
    "model.seed": "0",
    "train.optimizer": "sgd",
    "train.step_size": "0.1",
    "train.momentum": "0.9",
    "train.beta2": "0.999",
    "train.nesterov": "false",
    "train.schedule": "constant",
    "train.warmup_fraction": "0.3",
    "train.label_smoothing": "0.0",
    "train.batch_size": "64",
    "train.epochs": "1",
    "train.shuffle": "true",
    "train.shuffle_seed": "0",
    "variants": "[nojit, jit, jit_scan]",
    "profile.top_allocations": "5",
    "profile.trace_steps": "2",
}


def test_the_strategies_cover_every_parameter():
    from pydantic import BaseModel

    from mnist_jax_pipeline.config.params import Params

    fields = set()
    for section, info in Params.model_fields.items():
        model = info.annotation
        is_section = isinstance(model, type) and issubclass(model, BaseModel)
        fields |= {f"{section}.{key}" for key in model.model_fields} if is_section else {section}
    assert set(KEYS) == fields, f"add {sorted(fields - set(KEYS))} to KEYS and TINY in {Path(__file__).name}"
    assert set(TINY) == fields, f"add {sorted(fields - set(TINY))} to TINY in {Path(__file__).name}"


# Keys a refusal may name when another key of the same rule was changed (rules spanning fields).
RELATED = {
    "preprocess.max_train_examples": ["preprocess.validation_fraction"],
    "model.layer_sizes": ["train.batch_size"],
    "train.batch_size": ["train.epochs"],
}
DIVERGED = "the loss became"


def render(values: dict[str, str]) -> str:
    """params.yaml text from dotted keys and their YAML text."""
    lines, section = [], None
    for key, text in values.items():
        head, _, name = key.rpartition(".")
        if not head:
            lines.append(f"{key}: {text}")
            section = None
            continue
        if head != section:
            lines.append(f"{head}:")
            section = head
        lines.append(f"  {name}: {text}")
    return "\n".join(lines) + "\n"


def run(folder: Path, *args: str) -> tuple[int, str]:
    """`mnist-pipeline --params params.yaml ARGS` in `folder`: exit status and stderr."""
    err = io.StringIO()
    here = Path.cwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stderr(err):
            status = main(["--params", "params.yaml", *args])
    finally:
        os.chdir(here)
    return status, err.getvalue()


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ") or "Traceback" in line]


changes = st.dictionaries(st.sampled_from(sorted(KEYS)), st.none(), min_size=1, max_size=3).flatmap(
    lambda chosen: st.fixed_dictionaries({key: KEYS[key] for key in chosen})
)


@pytest.fixture(scope="module")
def raw_dir(tmp_path_factory) -> Path:
    return write_raw(tmp_path_factory.mktemp("property") / "raw")


@pytest.mark.slow
@settings(max_examples=400, deadline=None, derandomize=True)
@given(changed=changes)
def test_a_refusal_is_one_line_naming_the_key(changed: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "params.yaml").write_text(render({**TINY, **changed}))
        status, stderr = run(Path(folder), "check")
    if status == 0:
        return
    assert status == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: params.yaml: "), stderr
    named = list(changed) + [k for key in changed for k in RELATED.get(key, [])]
    assert any(key in lines[0] for key in named), (changed, lines[0])


@pytest.mark.slow
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(changed=changes)
def test_an_accepted_file_runs_every_stage(raw_dir: Path, changed: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "params.yaml").write_text(render({**TINY, **changed}))
        status, stderr = run(work, "check")
        if status != 0:
            return  # the other property covers refusals
        shutil.copytree(raw_dir, work / "data" / "raw")
        adopt(work)  # as the download stage would have left it
        status, stderr = run(work, "preprocess")
        assert status == 0, stderr
        from mnist_jax_pipeline.config.params import load

        for variant in load(work / "params.yaml").variants:
            status, stderr = run(work, "train", "--variant", variant)
            if status == 1 and DIVERGED in stderr:
                (line,) = error_lines(stderr)
                assert "lower train.step_size" in line
                continue
            assert status == 0, stderr
            status, stderr = run(work, "evaluate", "--variant", variant)
            assert status == 0, stderr
