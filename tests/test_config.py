import copy
import json
import re

import pytest

from conftest import ROOT, base_params
from mnist_jax_pipeline.config.params import Params, load, validate
from mnist_jax_pipeline.foundation.errors import PipelineError


def with_change(path: str, value):
    raw = copy.deepcopy(base_params())
    node = raw
    *parents, last = path.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    return raw


def test_repository_params_are_valid():
    params = load(ROOT / "params.yaml")
    assert params.model.layer_sizes == (784, 512, 512, 10)
    assert params.train.step_size == 0.01 and params.train.batch_size == 128 and params.train.epochs == 10
    assert len(params.digest()) == 64


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("train.batch_size", -1, "train.batch_size"),
        ("train.batch_size", 0, "train.batch_size"),
        ("train.epochs", 0, "train.epochs"),
        ("train.epochs", "ten", "train.epochs"),
        ("train.step_size", "fast", "train.step_size"),
        ("data.dataset", "cifar10", 'use one of "mnist", "fashion_mnist"'),
        ("model.layer_sizes", [100, 512, 10], "starts at 100; start it at 784"),
        ("model.layer_sizes", [784, 512, 7], "ends at 7; end it at 10"),
        ("preprocess.validation_fraction", 1.5, "preprocess.validation_fraction"),
        ("variants", ["nojit", "fast"], "variants.1"),
        ("model.init", "xavier", 'model.init: "xavier" is not allowed; use one of "normal", "he"'),
        ("model.output_init", "zero", 'use one of "same", "zeros"'),
        ("train.beta2", 1.0, "train.beta2: 1.0 must be less than 1"),
        ("train.nesterov", "yes", 'train.nesterov: "yes" is not a boolean'),
        ("train.schedule", "linear", 'use one of "constant", "cosine", "onecycle"'),
        ("train.warmup_fraction", 1.5, "train.warmup_fraction: 1.5 is more than the maximum of 1"),
        ("train.label_smoothing", -0.1, "train.label_smoothing: -0.1 is less than the minimum of 0"),
        ("train.label_smoothing", 1, "train.label_smoothing"),
        ("variants", ["jax"], 'variants.0: "jax" is not allowed'),  # the item, not the list it left empty
        ("model.layer_sizes", [784, 10.5], "model.layer_sizes.1: 10.5 is not an integer; write a whole number"),
        ("train.batch_size", "128", 'train.batch_size: "128" is not an integer; write it without quotes'),
        ("train.batch_size", float("inf"), "train.batch_size: Infinity is not an integer"),
        ("train.epochs", "ten", 'train.epochs: "ten" is not an integer; write a whole number'),
        ("train.epochs", None, "train.epochs: null is not an integer; write a whole number"),
        ("train.step_size", "fast", 'train.step_size: "fast" is not a number; write one such as 0.01'),
        ("model.init_scale", 1e300, "model.init_scale: 1e+300 is more than the maximum of 10"),
        ("profile.trace_steps", 1000, "profile.trace_steps: 1000 is more than the maximum of 200"),
    ],
)
def test_bad_values_give_one_line_naming_the_key(key, value, expected):
    with pytest.raises(PipelineError) as err:
        validate(with_change(key, value))
    message = str(err.value)
    assert expected in message
    assert "\n" not in message and "; " in message, "one line, which ends with what to do"


def test_the_time_to_accuracy_preset_is_a_valid_params_file():
    """Every key is required, so a valid preset is a complete params.yaml."""
    preset = load(ROOT / "presets" / "time-to-accuracy.yaml")
    assert preset.model.layer_sizes == (784, 512, 512, 10) and preset.variants == ("jit_scan",)
    assert (preset.train.epochs, preset.train.batch_size, preset.preprocess.validation_fraction) == (2, 256, 0.0)
    assert preset.preprocess.deskew and preset.preprocess.normalize == "standardize"


def test_unknown_key_is_named_with_the_allowed_ones():
    raw = with_change("train.learning_rate", 0.1)
    with pytest.raises(PipelineError, match=r"unknown key 'train.learning_rate'; allowed keys here: batch_size"):
        validate(raw)


def test_unknown_top_level_key():
    raw = with_change("extra", {})
    with pytest.raises(PipelineError, match="unknown key 'extra'"):
        validate(raw)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "expected a mapping of section names to parameters (data, preprocess"),
        ("variants: !!set {jit, nojit}\n", "variants: a set (!!set) has no order; write a list"),
        ("variants: " + "[" * 2000 + "]" * 2000 + "\n", "nested too deeply, or an alias inside itself"),
        ("variants: &a [*a]\n", "nested too deeply, or an alias inside itself"),
        ("1: 2\n", "params.yaml: 1: a key that is not text; write a name"),
        ("".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}' if i else 'x'] * 9)}]\n" for i in range(10)), "10,000 values"),
    ],
)
def test_documents_that_are_no_params_file_are_one_line(tmp_path, text, expected):
    bad = tmp_path / "params.yaml"
    bad.write_text(text)
    with pytest.raises(PipelineError) as err:
        load(bad)
    assert expected in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("train: [unclosed\n", "expected ',' or ']', but got '<stream end>'"),
        ("train: 1\ntrain: 2\n", 'found duplicate key "train"'),  # not ruamel's values, which may be wrong
        ("train:\n\tepochs: 1\n", "found character '\\t' that cannot start any token"),
        ("train: !custom 1\n", "could not determine a constructor for the tag '!custom'"),
    ],
)
def test_a_yaml_syntax_error_names_the_file_its_line_and_the_parsers_reason(tmp_path, text, problem):
    bad = tmp_path / "params.yaml"
    bad.write_text(text)
    with pytest.raises(PipelineError) as err:
        load(bad)
    assert re.fullmatch(
        rf".*params.yaml: not valid YAML at line \d+ \({re.escape(problem)}\); fix the syntax", str(err.value)
    )


def test_the_committed_schema_is_generated_from_the_types():
    on_disk = json.loads((ROOT / "workflow/schemas/params.schema.json").read_text())
    assert Params.model_json_schema() == on_disk
    assert on_disk["$defs"]["TrainConfig"]["properties"]["batch_size"]["minimum"] == 1


def test_digest_changes_with_any_parameter():
    a = validate(base_params())
    b = validate(with_change("preprocess.seed", 1))
    assert a.digest() != b.digest()


def test_any_variant_may_run_alone():
    """Each variant has its own profile stage, so no variant is required."""
    for name in ("nojit", "jit", "jit_scan"):
        assert validate(with_change("variants", [name])).variants == (name,)


REFUSAL = (
    "error: --config/--configfile overrides are not used by the stages, which read params.yaml; edit"
    " params.yaml, run dvc exp run -S KEY=VALUE, or apply a preset: mnist-pipeline preset NAME"
)
SNAKEMAKES_OWN = "ValueError: Invalid config definition: Config entry must start with a valid identifier."


PROFILE_NOTE = "Using workflow specific profile profiles/default"  # Snakemake's note on the default profile


@pytest.mark.slow
@pytest.mark.parametrize("override", ["variants=[jit]", "train={epochs: 3}", "train.epochs=3"])
def test_snakemake_config_overrides_are_refused_naming_the_way(override):
    """One line naming params.yaml, dvc exp run -S and presets. A dotted key never reaches the workflow:
    Snakemake's own parser refuses it first (snakemake/snakemake#3907), so the docs name that message."""
    import subprocess
    import sys
    from pathlib import Path

    snakemake = Path(sys.executable).parent / "snakemake"
    done = subprocess.run(
        [str(snakemake), "-n", "--cores", "1", "--config", override],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    output = done.stdout + done.stderr
    if SNAKEMAKES_OWN in output:
        assert "." in override.split("=")[0], output
        for page in ("errors.md", "parameters.md"):
            assert SNAKEMAKES_OWN.removeprefix("ValueError: ") in (ROOT / "docs" / page).read_text().replace("\n", " ")
    else:
        lines = [line for line in output.splitlines() if line.strip() and not line.startswith(PROFILE_NOTE)]
        assert lines == [REFUSAL]
