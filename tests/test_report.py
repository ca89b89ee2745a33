"""The report stage on the outputs of the real stages (tiny data): sections, self-containment,
summary, figures, and one-line errors for damaged inputs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markupsafe import escape

from conftest import TINY_VARIANTS, tiny_params_dict, write_params
from mnist_jax_pipeline.artefacts import evaluation, storage, training
from mnist_jax_pipeline.artefacts.profile_summary import read_summary
from mnist_jax_pipeline.artefacts.training import VariantEpoch
from mnist_jax_pipeline.config.params import load
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.foundation.variants import get
from mnist_jax_pipeline.stages.report import provenance
from mnist_jax_pipeline.stages.report.conditions import parameter_values
from mnist_jax_pipeline.stages.report.formatting import percent, ratio, seconds, signed_percent, size
from mnist_jax_pipeline.stages.report.memory import clean_svg
from mnist_jax_pipeline.stages.report.render import render

SECTIONS = ("dataset", "training", "timing", "trace", "evaluation", "memory", "provenance")
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?!data:|#)[a-z]+:|url\(\s*["']?\s*(?!data:|#)""", re.I)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _calm(tree: Path) -> None:
    """The tiny tree's runs as if timed on a quiet machine (the test machine's own load is not under test)."""
    for path in tree.glob("metrics/train/*.run.json"):
        quiet = {"timing_lock": "held", "other_cpu_share": 0.0, "busy": False, "loadavg_1m_at_start": 1.3}
        path.write_text(json.dumps({**json.loads(path.read_text()), **quiet, "loadavg_1m_at_end": 1.7}))


def _render(tree: Path, variants: list[str] | None = None) -> tuple[str, str]:
    if variants is not None:
        write_params(tree / "params.yaml", tiny_params_dict(variants=variants))
    render(load("params.yaml"), "params.yaml")
    return Path(paths.REPORT_HTML.path).read_text(), Path(paths.REPORT_MD.path).read_text()


@pytest.fixture(scope="module")
def rendered_once(tiny_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The default report of a copy of the tiny tree, rendered once for the tests that only read it."""
    tree = tmp_path_factory.mktemp("rendered") / "project"
    shutil.copytree(tiny_tree, tree)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tree)
        _calm(tree)
        html, summary = _render(tree)
    return tree, html, summary


@pytest.fixture
def rendered(rendered_once: tuple[Path, str, str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """The default report's HTML and summary, the current directory its tree (read it only)."""
    tree, html, summary = rendered_once
    monkeypatch.chdir(tree)
    return html, summary


def _figures(variants: list[str]) -> list[str]:
    return paths.REPORT_FIGURES.file_names(tuple(variants))


@pytest.mark.slow
def test_html_has_every_section_and_is_self_contained(report_tree: Path) -> None:
    html, _ = _render(report_tree)
    for section in SECTIONS:
        assert f'<section id="{section}">' in html
    assert "<script" not in html.lower()
    assert not EXTERNAL.search(html), EXTERNAL.search(html)
    assert "<link" not in html.lower() and "@import" not in html
    images = re.findall(r"<img [^>]*src=\"([^\"]*)\"", html)
    graphs = len(TINY_VARIANTS) * 3  # a call graph (or, without pprof, an icicle) per snapshot
    assert len(images) == len(_figures(TINY_VARIANTS)) + graphs
    assert all(src.startswith(("data:image/png;base64,", "data:image/svg+xml;base64,")) for src in images)
    jit = training.read_metrics("jit")
    for name, text in (
        ("checksum", "1" * 64),
        ("params digest", load("params.yaml").digest()),
        ("compile", seconds(jit.compile_seconds)),
        ("tfds", "test"),
    ):
        assert text in html, name
    for variant in TINY_VARIANTS:
        assert escape(get(variant).description) in html  # the registry's wording


def test_speedups_are_the_ratio_of_median_epochs(rendered: tuple[str, str]) -> None:
    html, summary = rendered
    base = training.read_metrics("nojit").epoch_seconds_median
    for variant in ("jit", "jit_scan"):
        expected = ratio(base / training.read_metrics(variant).epoch_seconds_median)
        assert f"{variant} is {expected} faster per epoch than nojit" in html
        assert f"`{variant}` runs an epoch **{expected}** faster than `nojit`" in summary


def test_summary_states_accuracy_device_and_provenance(rendered: tuple[str, str]) -> None:
    _, summary = rendered
    for variant in TINY_VARIANTS:
        accuracy = json.loads(Path(paths.EVAL_METRICS.at(variant)).read_text())["test_accuracy"]
        assert f"| `{variant}` | {100 * accuracy:.2f} %" in summary
    assert "cpu backend" in summary
    assert f"params sha256 `{load('params.yaml').digest()[:12]}`" in summary
    assert "commit `unknown`" in summary  # the tree is no git repository


@pytest.mark.slow
def test_figures_are_pngs_and_byte_stable(report_tree: Path) -> None:
    _render(report_tree)
    folder = Path(paths.REPORT_FIGURES.path)
    names = _figures(TINY_VARIANTS)
    first = {name: (folder / name).read_bytes() for name in names}
    assert all(data.startswith(PNG_MAGIC) and b"Software" not in data for data in first.values())
    _render(report_tree)
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)
    assert {name: (folder / name).read_bytes() for name in names} == first


def test_every_variants_epochs_go_to_the_overlay_plot_file(rendered: tuple[str, str]) -> None:
    rows = storage.read_rows(paths.VARIANTS_HISTORY.path, VariantEpoch, "report")
    assert [(r.variant, r.epoch) for r in rows] == [(v, e) for v in TINY_VARIANTS for e in (1, 2)]
    assert rows[0].train_loss == training.read_history("nojit")[0].train_loss


def test_trace_and_xla_sections(rendered: tuple[str, str]) -> None:
    html, summary = rendered
    trace = html[html.index('<section id="trace">') : html.index('<section id="memory">')]  # and the folds below it
    assert 'alt="timeline of one traced step per variant"' in trace
    for variant in TINY_VARIANTS:
        profile = read_summary(variant)
        assert profile is not None
        table = profile.trace.table
        assert f"<summary>Op table of {variant}: {profile.trace.calls} traced {profile.trace.unit}" in trace
        assert f'<td class="op">{table.rows[0].op}</td>' in trace  # the top op of each table
        assert f"**Trace `{variant}`:**" in summary and f"`{table.rows[0].op}`" in summary
        # the trace files are links, relative to the report's folder, to files that are there
        logdir = f"profile/{variant}/trace/"
        perfetto = f"profile/{variant}/trace/plugins/profile/{variant}/perfetto_trace.json.gz"
        assert f'<a href="{logdir}"><code>reports/profile/{variant}/trace</code></a> (XProf, TensorBoard)' in trace
        assert f'<a href="{perfetto}"><code>reports/{perfetto}</code></a> (ui.perfetto.dev)' in trace
        report_dir = Path(paths.REPORT_HTML.path).parent
        assert (report_dir / logdir).is_dir() and (report_dir / perfetto).is_file()
    assert "Op by op: every primitive is its own executable" in trace and "Compiled module <code>jit_update" in trace
    memory = html[html.index('<section id="memory">') : html.index('<section id="provenance">')]
    assert "What the compiled step needs" in memory
    for variant in ("jit", "jit_scan"):  # XLA's argument bytes are exactly the state and the batch (or split)
        xla = training.read_metrics(variant).xla
        assert xla is not None and f"<td>{variant}</td>" in memory
        assert f"{xla.argument_bytes:,}" in memory
    assert memory.count("<strong>exactly</strong> XLA's argument bytes") == 2
    assert "What the step added</strong> (train_step less init" in memory
    # byte changes in binary units with their sign, never raw numbers like '+2678824'
    diffs = "".join(re.findall(r"What the step added.*?</table>", memory, re.S))
    added = re.findall(r'<td class="num" title="[^"]*">([^<]*)</td><td class="num">([^<]*)</td>', diffs)
    assert added and all(re.fullmatch(r"[+−](\d+ B|\d+(\.\d+)? [KMG]iB)", size) for size, _ in added), added
    assert all(re.fullmatch(r"[+−]?\d[\d,]*", count) for _, count in added), added
    assert re.search(r"What the step added</strong> \(.*?\): [+−]?\d+(\.\d+)? ([KMG]i)?B\.", diffs)
    assert not re.search(r">[^<]*\d,\d{3} bytes", memory)  # exact counts only in the cells' tooltips
    assert "compiled executables, in one line" in memory
    assert "The cpu backend provides no device <code>memory_stats()</code>" in memory


def test_digit_grids_show_each_digit_by_its_own_range_with_its_title() -> None:
    import numpy as np

    from mnist_jax_pipeline.stages.report.figures import DIGIT_GAP, TITLE_BAND, digit_grid

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(7, 28, 28)).astype(np.uint8)
    images[3] = 200  # a flat image: shown blank, not a division by zero
    images[5] = images[5] // 4 + 10  # a faint image is stretched to the full range as well
    titles = [f"t{i}" for i in range(7)]
    fig = digit_grid(images, titles, columns=3)
    assert len(fig.axes) == 1 and [t.get_text() for t in fig.axes[0].texts] == titles
    mosaic = fig.axes[0].images[0].get_array()  # every digit in one image
    cell_w, cell_h = 28 + DIGIT_GAP, 28 + DIGIT_GAP + TITLE_BAND
    assert mosaic.shape == (3 * cell_h, 3 * cell_w)
    for i, image in enumerate(images):
        row, column = divmod(i, 3)
        top, left = row * cell_h + cell_h - 28 - DIGIT_GAP // 2, column * cell_w + DIGIT_GAP // 2
        cell = mosaic[top : top + 28, left : left + 28]
        if i == 3:
            assert not cell.any()
        else:
            assert cell.min() == 0.0 and cell.max() == 1.0
            assert np.array_equal(
                np.argsort(cell, axis=None, kind="stable"), np.argsort(image, axis=None, kind="stable")
            )
    assert not mosaic[:, -1].any() and not mosaic[: cell_h - 28 - DIGIT_GAP // 2].any()  # gaps and title band
    assert fig.get_size_inches()[1] > digit_grid(images, columns=3).get_size_inches()[1]  # room for the titles
    empty = digit_grid(images[:0], empty="nothing to show")
    assert not empty.axes and [t.get_text() for t in empty.texts] == ["nothing to show"]


def test_clean_svg_keeps_drawing_and_internal_links() -> None:
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        'viewBox="0 0 10 5"><defs><marker id="m"/></defs><path d="M0 0" marker-end="url(#m)" '
        'style="fill:url(http://x/y)" onclick="x()"/><use xlink:href="#m"/></svg>'
    )
    cleaned = clean_svg(svg)
    assert 'marker-end="url(#m)"' in cleaned and 'xlink:href="#m"' in cleaned
    assert "http://x" not in cleaned and "onclick" not in cleaned
    assert 'width="10pt"' in cleaned


GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_git_state_names_modified_files_but_not_dvc_lock(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert provenance.git_state() == {"commit": "unknown", "modified": None}
    subprocess.run([*GIT, "init", "-q"], check=True)
    (tmp_path / "metrics" / "evaluate").mkdir(parents=True)
    for name in ("a.txt", "b c.txt", "dvc.lock", "metrics/evaluate/.gitignore"):
        (tmp_path / name).write_text("a")
    subprocess.run([*GIT, "add", "."], check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "a"], check=True)
    state = provenance.git_state()
    assert re.fullmatch(r"[0-9a-f]{40}", state["commit"]) and state["modified"] == []
    (tmp_path / "dvc.lock").write_text("rewritten by a run")
    (tmp_path / "metrics/evaluate/.gitignore").write_text("/jit_scan_details.json\n")  # DVC, for a new variant
    (tmp_path / "untracked.txt").write_text("new")
    assert provenance.git_state()["modified"] == []
    (tmp_path / "a.txt").write_text("b")
    (tmp_path / "b c.txt").write_text("b")
    assert provenance.git_state()["modified"] == ["a.txt", "b c.txt"]


def test_source_date_epoch_pins_the_date(monkeypatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    assert provenance.generated_at() == "1970-01-01T00:00:00Z"


class _Tables(HTMLParser):
    """Each <table>'s row count and whether it lies inside a <details>; whether any <details> is open."""

    def __init__(self) -> None:
        super().__init__()
        self.details = 0
        self.open_details = 0
        self.tables: list[list] = []  # [rows, inside details]
        self.stack: list[list] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "details":
            self.details += 1
            self.open_details += any(name == "open" for name, _ in attrs)
        elif tag == "table":
            self.stack.append([0, self.details > 0])
        elif tag == "tr" and self.stack:
            self.stack[-1][0] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self.details -= 1
        elif tag == "table" and self.stack:
            self.tables.append(self.stack.pop())


SHORT_TABLE = 5  # rows, header included: a table of one row per variant (and a header) may stay unfolded


def test_long_tables_are_folded_and_the_headline_holds_the_answers(rendered: tuple[str, str]) -> None:
    html, summary = rendered
    tables = _Tables()
    tables.feed(html)
    assert tables.open_details == 0  # every folded part starts closed, the same for every variant
    long = [rows for rows, folded in tables.tables if rows > SHORT_TABLE and not folded]
    assert not long, f"tables of {long} rows are not folded in a <details>"
    assert sum(folded for _, folded in tables.tables) >= 2 * len(TINY_VARIANTS)  # op tables, snapshots
    headline = html[html.index('id="headline"') : html.index("</header>")]
    for variant in TINY_VARIANTS:
        assert f"{variant} test accuracy" in headline
    for variant in ("jit", "jit_scan"):
        assert f"{variant} speedup" in headline and f"{variant} compile" in headline
    # peak memory is training's (the largest of the variants), named by where it was measured
    peaks = {v: training.read_metrics(v).peak_rss_bytes for v in TINY_VARIANTS}
    hungriest = max(peaks, key=peaks.__getitem__)
    assert f'<div class="value">{size(peaks[hungriest])}</div>' in headline
    assert f"host RSS of train@{hungriest}" in headline
    assert "profile stage" not in headline


def _axis_labels(fig) -> dict[tuple[int, str], list[tuple[str, object]]]:
    """The tick labels every axis of a figure draws, by (axes index, 'x' or 'y')."""
    from test_formatting import _labels

    return {(i, which): _labels(ax, which) for i, ax in enumerate(fig.axes) for which in ("x", "y")}


def _check_ticks(name: str, fig) -> None:
    for (index, which), labels in _axis_labels(fig).items():
        texts = [text for text, _ in labels]
        assert not any(mark in text for text in texts for mark in ("e+", "e-", "×", "$")), (name, index, which, texts)
        boxes = [box for _, box in labels]
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :]), (name, index, which, texts)


@pytest.mark.slow
def test_report_figures_have_plain_ticks_that_never_collide(report_tree: Path) -> None:
    from matplotlib import style as mpl_style

    from mnist_jax_pipeline.stages.report.figures import STYLE, all_figures
    from mnist_jax_pipeline.stages.report.inputs import read_all

    with mpl_style.context(["default", STYLE]):
        figures = all_figures(read_all(load("params.yaml").variants))
        for name, fig in figures.items():
            _check_ticks(name, fig)
    timing = figures["epoch_times.png"].axes
    assert all(ax.get_yscale() == "log" for ax in timing[:2])
    assert all(
        text.endswith((" ms", " s"))
        for ax in timing[:2]
        for text in [t.get_text() for t in ax.get_yticklabels()]
        if text
    )
    accuracy = figures["training_curves.png"].axes[1]
    assert accuracy.get_ylim()[1] <= 1.0  # no accuracy beyond 100 %
    confusion = figures["confusion_jit.png"].axes[0]
    assert (confusion.get_xlabel(), confusion.get_ylabel()) == ("predicted", "actual")


def test_comparison_figures_stay_within_the_data(report_tree: Path) -> None:
    from matplotlib import style as mpl_style

    from mnist_jax_pipeline.comparison import compare
    from mnist_jax_pipeline.stages.report.figures import STYLE

    runs = [
        compare.Run(
            name=f"{v}-{scale}",
            params={"variant": v},
            train=training.read_metrics(v).headline(),
            evaluation=evaluation.read_metrics(v).headline().model_copy(update={"test_accuracy": accuracy}),
            history=[
                h.model_copy(
                    update={"train_loss": h.train_loss * scale, "test_accuracy": min(1.0, accuracy + 0.01 * h.epoch)}
                )
                for h in training.read_history(v)
            ],
            busy=None,
        )
        for v in TINY_VARIANTS
        for scale, accuracy in ((1, 0.99), (0.1, 0.5))
    ]
    with mpl_style.context(["default", STYLE]):
        scatter, curves = compare.figures(runs).values()
        assert scatter.axes[0].get_ylim()[1] <= 100 and curves.axes[1].get_ylim()[1] <= 100
        assert curves.axes[0].get_yscale() == "log"
        for name, fig in (("scatter", scatter), ("curves", curves)):
            _check_ticks(name, fig)


def test_the_first_screen_shows_the_parameters_and_the_timing_conditions(rendered: tuple[str, str]) -> None:
    html, summary = rendered
    first_screen = html[html.index("<header>") : html.index('id="headline"')]
    values = "2 epochs · sgd · step size 0.01 · batch size 64 · variants nojit, jit, jit_scan"
    assert values in first_screen and f"**Parameters:** {values}" in summary
    assert "Timed with the timing lock held, other processes used at most 0 % of the CPU" in first_screen
    assert "1-minute load 1.3–1.7 on 2 cores" in first_screen and 'id="busy"' not in html
    assert "0 val (validation_fraction is 0 in params.yaml, so no validation split is held out)" in html
    assert "experiments.html" not in html  # no experiments page beside the report
    assert "Against the committed baseline" not in html  # no git repository


def test_parameter_values_name_a_schedule_other_than_constant(make_params) -> None:
    params = make_params(train__schedule="cosine", train__optimizer="adam", train__step_size=0.001, train__epochs=1)
    assert parameter_values(params) == [
        "1 epoch",
        "adam",
        "step size 0.001, cosine schedule",
        "batch size 128",
        "variants nojit, jit",
    ]


def _record_busy(variant: str, **fields: object) -> None:
    path = paths.TRAIN_RUN.at(variant)
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields, "busy": True}))


@pytest.mark.slow
def test_a_run_on_a_busy_machine_is_flagged_on_the_first_screen(report_tree: Path) -> None:
    _calm(report_tree)
    _record_busy("jit", other_cpu_share=0.35, loadavg_1m_at_start=5.0, loadavg_1m_at_end=4.96, host_cpu_count=2)
    _record_busy("nojit", timing_lock="off")
    (report_tree / paths.EXPERIMENTS_HTML).write_text("<!DOCTYPE html>")
    html, summary = _render(report_tree)
    first_screen = html[html.index("<header>") : html.index('id="headline"')]
    flag = re.search(r'<p class="notice" id="busy">([^<]*)</p>', first_screen)
    assert flag, first_screen
    said = flag.group(1)
    assert said.startswith("Timings measured on a busy machine: ")
    assert "other processes used 35 % of the CPU while train@jit ran (1-minute load 5.0 → 5.0 on 2 cores)" in said
    assert "train@nojit ran without the timing lock (MNIST_PIPELINE_LOCK=off; 1-minute load" in said
    assert "jit_scan" not in said and "Timed with the timing lock held" not in html
    assert f"> **{said}**" in summary
    assert "<td>held (busy: others 35 % CPU)</td>" in html and "<td>off (busy: no timing lock)</td>" in html
    assert "ran alone" not in html and "ran alone" not in summary
    assert '<a href="experiments.html">DVC experiments</a>' in html


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_the_report_compares_with_the_committed_baseline(report_tree: Path) -> None:
    train, evaluate = paths.TRAIN_HEADLINE.at("jit"), paths.EVAL_HEADLINE.at("jit")
    now = {path: path.read_text() for path in (train, evaluate)}
    committed_epoch = 2 * training.read_metrics("jit").epoch_seconds_median
    train.write_text(json.dumps({**json.loads(now[train]), "epoch_s": committed_epoch}))
    evaluate.write_text(json.dumps({**json.loads(now[evaluate]), "test_accuracy": 0.5}))
    subprocess.run([*GIT, "init", "-q"], check=True)
    subprocess.run([*GIT, "add", train.as_posix(), evaluate.as_posix()], check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "baseline"], check=True)
    commit = subprocess.run(["git", "log", "-1", "--format=%h"], capture_output=True, text=True).stdout.strip()
    for path, text in now.items():  # this run's figures
        path.write_text(text)
    html, summary = _render(report_tree)
    fold = html[html.index("<summary>Against the committed baseline") :]
    fold = fold[: fold.index("</details>")]
    accuracy = evaluation.read_metrics("jit").test_accuracy
    epoch = training.read_metrics("jit").epoch_seconds_median
    assert f"<code>{commit}</code></summary>" in fold
    assert (
        f'<tr><td>jit</td><td class="num">{percent(accuracy)}</td><td class="num">50.00 %</td>'
        f'\n    <td class="num">{seconds(epoch)}</td><td class="num">{seconds(committed_epoch)}</td>'
        f'\n    <td class="num">{signed_percent(epoch / committed_epoch - 1)}</td><td><code>{commit}</code></td></tr>'
    ) in fold
    assert "<td>nojit</td>" not in fold and "<td>jit_scan</td>" not in fold  # never committed: not compared
    assert f"`jit` test accuracy {percent(accuracy)} (committed in `{commit}`: 50.00 %), median epoch" in summary
