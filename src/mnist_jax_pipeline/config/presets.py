"""Presets: named parameter sets, `presets/NAME.yaml`, merged over params.yaml by `mnist-pipeline preset NAME`.

Every key a preset names takes its value, every other key keeps the file's, and so do its comments and layout; the
result is checked like any params.yaml before it replaces the file, and each changed key is printed.
"""

import argparse
import functools
import io
import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from ..artefacts import atomic
from ..foundation.errors import PipelineError, clip
from .params import parse_yaml, read_yaml, validate, yaml_text

FOLDER = Path("presets")
Key = tuple[str, ...]
ABSENT = object()  # a key one side of a change does not have


def find(name: str, folder: Path = FOLDER) -> Path:
    """presets/NAME.yaml, or one line listing the presets there are."""
    available = sorted(path.stem for path in folder.glob("*.yaml"))
    if name not in available:
        listing = ", ".join(available) or f"none ({folder}/ holds no *.yaml; run from the project root)"
        raise PipelineError(f"{folder / clip(name)}.yaml: no such preset; available: {listing}")
    return folder / f"{name}.yaml"


def changes(before: Any, after: Any, key: Key = ()) -> dict[Key, tuple[Any, Any]]:
    """{key path: (old, new)} for every value of `after` that `before` lacks or holds otherwise (mappings are
    compared key by key, any other value whole); 1, 1.0 and true differ, as they do to the stages."""
    if isinstance(after, dict) and (isinstance(before, dict) or before is ABSENT):
        old = before if isinstance(before, dict) else {}
        found: dict[Key, tuple[Any, Any]] = {}
        for name, value in after.items():
            found |= changes(old.get(name, ABSENT), value, (*key, str(name)))
        return found
    same = before is not ABSENT and json.dumps(before, default=repr) == json.dumps(after, default=repr)
    return {} if same else {key: (before, after)}


def show(value: Any) -> str:
    """A value in YAML's flow style, as params.yaml writes lists, cut when long."""
    if value is ABSENT:
        return "(absent)"
    return clip(yaml.safe_dump(value, default_flow_style=True, width=math.inf).removesuffix("...\n").strip())


def render(text: str, edits: dict[Key, Any]) -> str:
    """`text` with the values at `edits` set, its comments, key order and list styles kept."""
    from ruamel.yaml import YAML
    from ruamel.yaml.util import load_yaml_guess_indent

    document, indent, offset = load_yaml_guess_indent(text.replace("\r\n", "\n"))  # round trip, comments kept
    yaml = YAML()  # written in the file's indentation, a long line left whole
    yaml.indent(mapping=indent, sequence=indent, offset=offset)
    yaml.width = 4096
    for (*parents, last), value in edits.items():
        node = functools.reduce(lambda parent, part: parent.setdefault(part, {}), parents, document)
        if isinstance(node.get(last), list) and isinstance(value, list):
            node[last][:] = value  # keeps the list's flow style
        else:
            node[last] = value
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue().replace("\n", "\r\n") if "\r\n" in text else out.getvalue()


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline preset NAME`: merge presets/NAME.yaml over params.yaml and print what changed."""
    path = find(args.name)
    text = yaml_text(args.params)
    before, preset = parse_yaml(text, args.params), read_yaml(path, missing="make it a file, or choose another preset")
    for what, value in ((args.params, before), (path, preset)):
        if not isinstance(value, dict):
            raise PipelineError(f"{what}: not a mapping of sections to parameters; fix it or restore it from git")
    if not (found := changes(before, preset)):  # the preset merged over the file: what it changes
        print(f"{args.params}: already has every value of preset '{args.name}'; nothing changed", file=sys.stderr)
        return
    result = render(text, {key: new for key, (_, new) in found.items()})
    validate(parse_yaml(result, args.params), f"{args.params} with preset '{args.name}'")
    target = Path(args.params).resolve()  # through a link: the file it names is the one edited
    if not os.access(target, os.W_OK):
        raise PipelineError(f"{args.params}: read-only; make it writable (chmod u+w {args.params}) to apply a preset")
    with atomic.atomic_file(target) as tmp:
        tmp.write_text(result, encoding="utf-8")
        shutil.copymode(target, tmp)
    for key, (old, new) in found.items():
        print(f"{'.'.join(key)}: {show(old)} -> {show(new)}")
