"""Presets: named parameter sets, `presets/NAME.yaml`, applied by `mnist-pipeline preset NAME`.

A preset is merged over the current params.yaml: every key it names takes the preset's value and
every other key keeps the file's. Merging rather than replacing keeps params.yaml's comments and
layout (only the changed values differ in `git diff`), lets a preset name just the keys it is
about, and gives exactly the preset's values when it is complete, as presets/time-to-accuracy.yaml
is. The result is checked like any params.yaml before it replaces the file, atomically; one line
per changed key says what changed.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

from ..artefacts import atomic
from ..foundation.errors import PipelineError, clip
from .params import parse_yaml, read_yaml, validate, yaml_text

FOLDER = Path("presets")
Key = tuple[str, ...]
ABSENT = object()  # a key one side of a change does not have


def names(folder: Path = FOLDER) -> list[str]:
    """The presets of the project: the stems of presets/*.yaml."""
    return sorted(path.stem for path in folder.glob("*.yaml"))


def find(name: str, folder: Path = FOLDER) -> Path:
    """presets/NAME.yaml, or one line listing the presets there are."""
    available = names(folder)
    if name not in available:
        listing = ", ".join(available) if available else f"none ({folder}/ holds no *.yaml; run from the project root)"
        raise PipelineError(f"{folder / clip(name)}.yaml: no such preset; available: {listing}")
    return folder / f"{name}.yaml"


def merge(base: Any, preset: Any) -> Any:
    """`preset` over `base`: mappings are merged key by key, any other value (a list too) is replaced."""
    if not (isinstance(base, dict) and isinstance(preset, dict)):
        return preset
    return {**base, **{key: merge(base.get(key, ABSENT), value) for key, value in preset.items()}}


def changes(before: Any, after: Any, key: Key = ()) -> dict[Key, tuple[Any, Any]]:
    """{key path: (old, new)} for every value that differs; 1, 1.0 and true differ, as they do to the stages."""
    if isinstance(after, dict) and (isinstance(before, dict) or before is ABSENT):
        old = before if isinstance(before, dict) else {}
        found: dict[Key, tuple[Any, Any]] = {}
        for name, value in after.items():
            found |= changes(old.get(name, ABSENT), value, (*key, str(name)))
        return found
    same = before is not ABSENT and json.dumps(before, default=repr) == json.dumps(after, default=repr)
    return {} if same else {key: (before, after)}


def show(value: Any) -> str:
    """A value as params.yaml writes it, cut when long."""
    if value is ABSENT:
        return "(absent)"
    if isinstance(value, list):
        return clip("[" + ", ".join(show(v) for v in value) + "]")
    if isinstance(value, dict):
        return clip("{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}")
    return clip(json.dumps(value) if value is None or isinstance(value, bool) or value == "" else str(value))


def render(text: str, edits: dict[Key, Any]) -> str:
    """`text` with the values at `edits` set, its comments, key order and list styles kept."""
    from ruamel.yaml import YAML

    yaml = YAML()  # round trip
    document = yaml.load(text)
    for (*parents, last), value in edits.items():
        node = document
        for part in parents:
            node = node.setdefault(part, {})
        if isinstance(node.get(last), list) and isinstance(value, list):
            node[last][:] = value  # keeps the list's flow style
        else:
            node[last] = value
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline preset NAME`: merge presets/NAME.yaml over params.yaml and print what changed."""
    path = find(args.name)
    text = yaml_text(args.params)
    before = parse_yaml(text, args.params)
    preset = read_yaml(path)
    for what, value in ((args.params, before), (path, preset)):
        if not isinstance(value, dict):
            raise PipelineError(f"{what}: not a mapping of sections to parameters; fix it or restore it from git")
    edits = {key: new for key, (_, new) in changes(before, merge(before, preset)).items()}
    if not edits:
        print(f"{args.params}: already has every value of preset '{args.name}'; nothing changed", file=sys.stderr)
        return
    result = render(text, edits)
    written = parse_yaml(result, args.params)
    validate(written, f"{args.params} with preset '{args.name}'")
    atomic.write_text(args.params, result)
    for key, (old, new) in changes(before, written).items():
        print(f"{'.'.join(key)}: {show(old)} -> {show(new)}")
