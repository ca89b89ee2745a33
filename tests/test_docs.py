"""The README stays short, starts with its two commands and points into docs/; README and docs/ together
stay within a word budget; every relative link lands on a file (and heading) that exists; the parameter
table lists every key of params.yaml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from conftest import ROOT
from mnist_jax_pipeline.config.params import Params

README = ROOT / "README.md"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
README_WORDS = 700  # the README: what a user needs first
ALL_WORDS = 9_000  # README.md and docs/*.md together
QUICK_START = ("uv run snakemake --cores all", "uv run --group dev pytest")
# what belongs in docs/performance.md, with its date, not in the README: a CPU's make, family or model, a test count
MACHINE_DETAIL = re.compile(
    r"\b(family \d+|model \d+|Zen ?\d|EPYC|Xeon|Ryzen|Core i\d|Graviton|AVX|AMX)\b"
    r"|\b\d[\d,]* (tests?|passed|failed|skipped|errors?)\b",
    re.I,
)


def prose(path: Path) -> str:
    """A Markdown file without its fenced code blocks (a link there is code, not a link)."""
    return re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in prose(path).splitlines() if line.startswith("#")}


def words(path: Path) -> int:
    """Words as `wc -w` counts them: runs of non-space characters, code blocks included."""
    return len(path.read_text(encoding="utf-8").split())


def test_the_readme_is_short_and_maps_every_docs_page():
    assert words(README) <= README_WORDS, f"README.md: {words(README)} words, more than {README_WORDS}"
    linked = {(README.parent / target).resolve() for target in LINK.findall(prose(README))}
    assert PAGES and set(PAGES) <= linked, "a docs page the README's map does not link"


def test_the_readme_gives_its_two_commands_first():
    head = [line.split("#")[0].strip() for line in README.read_text(encoding="utf-8").splitlines()[:30]]
    for command in QUICK_START:
        assert command in head, f"README.md: {command!r} not within its first 30 lines"


def test_the_readme_names_no_cpu_model_and_no_test_count():
    found = [m.group(0) for m in MACHINE_DETAIL.finditer(README.read_text(encoding="utf-8"))]
    assert found == [], f"README.md: {found}: measured figures and their machines live in docs/performance.md"


def test_readme_and_docs_stay_within_their_word_budget():
    counts = {path.relative_to(ROOT).as_posix(): words(path) for path in [README, *PAGES]}
    assert sum(counts.values()) <= ALL_WORDS, f"{sum(counts.values())} words, more than {ALL_WORDS}: {counts}"


@pytest.mark.parametrize("path", [README, CONTRIBUTING, *PAGES], ids=lambda p: p.relative_to(ROOT).as_posix())
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


def test_the_path_to_a_training_step_is_as_long_as_the_architecture_page_says():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    files, lines = re.search(r"That path is (\d+) files and ([\d,]+) lines", page).groups()
    command = re.search(r"```bash\n(wc -l .*?)\n```", page, re.S).group(1).replace("\\\n", " ")
    counted: list[Path] = []
    for word in command.split()[2:]:
        if match := re.fullmatch(r"(.*)\{(.*)\}(.*)", word):  # a {a,b} brace list
            word = " ".join(match[1] + part + match[3] for part in match[2].split(","))
        counted += [p for name in word.split() for p in sorted(ROOT.glob(name))]
    assert len(counted) == int(files), counted
    assert sum(len(p.read_text(encoding="utf-8").splitlines()) for p in counted) == int(lines.replace(",", ""))
