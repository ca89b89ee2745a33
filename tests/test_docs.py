"""The README stays short and points into docs/; every relative link lands on a file (and heading)
that exists; the parameter table lists every key of params.yaml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from conftest import ROOT
from mnist_jax_pipeline.config.params import Params

README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(path: Path) -> str:
    """A Markdown file without its fenced code blocks (a link there is code, not a link)."""
    return re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in prose(path).splitlines() if line.startswith("#")}


def test_the_readme_is_short_and_maps_every_docs_page():
    assert len(README.read_text(encoding="utf-8").splitlines()) < 200
    linked = {(README.parent / target).resolve() for target in LINK.findall(prose(README))}
    assert PAGES and set(PAGES) <= linked, "a docs page the README's map does not link"


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_points_at_an_existing_file(path):
    for target in LINK.findall(prose(path)):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        where = (path.parent / file).resolve() if file else path
        assert where.exists(), f"{path.name}: link to {target}: no such file"
        if anchor and where.suffix == ".md":
            assert anchor in anchors(where), f"{path.name}: link to {target}: no such heading"


def leaf_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    keys = set()
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            keys |= leaf_keys(kind, f"{prefix}{name}.")
        else:
            keys.add(f"{prefix}{name}")
    return keys


def test_the_parameter_table_lists_every_key():
    rows = [line for line in prose(ROOT / "docs" / "parameters.md").splitlines() if line.startswith("| `")]
    listed = {key for row in rows for key in re.findall(r"`([\w.]+)`", row.split("|")[1])}
    assert leaf_keys(Params) - listed == set()
