"""The report in a real headless Chromium at 1280x800: it answers in two screens (the headline in the
first), every long table starts folded, every image loads, the page asks the network for nothing, and
the folded trace and memory sections open (op tables, XLA's analysis, the step less init).

Needs Debian's /usr/bin/chromium and the Playwright package (`.ci/install-browser.sh`); never
downloads a browser. Saves to $TEST_ARTIFACTS_DIR (default test-artifacts/): the first screen, the
whole page, the trace and evaluation folds with jit's op table open, and the page's height (report-height.txt).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pytest

from browser import ARGS, CHROMIUM, artifacts_dir
from conftest import TINY_VARIANTS, unavailable
from mnist_jax_pipeline.config.params import load
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.stages.report.render import render

SCREEN = {"width": 1280, "height": 800}
MOST_SCREENS = 3  # the tiny tree runs three variants: more cards and timeline rows than the default two
SHORT_TABLE = 5  # rows, header included: a table of one row per variant may stay unfolded
FOLDED = {  # shown only once their <details> is opened
    "op table of jit": ".folds summary:has-text('Op table of jit: 3 traced steps') ~ table td.op",
    "op table of jit_scan": ".folds summary:has-text('Op table of jit_scan: 1 traced epoch') ~ table td.op",
    "XLA's analysis": "#memory summary:has-text('What the compiled step needs') ~ table",
    "what the step added": "#memory p:has-text('What the step added') + table",
    "executables in one line": "#memory td:has-text('compiled executables, in one line')",
}
LAYOUT = """short => ({
  height: document.documentElement.scrollHeight,
  headline: document.querySelector('#headline').getBoundingClientRect().bottom,
  cards: document.querySelectorAll('#headline .card').length,
  open: [...document.querySelectorAll('details')].filter(d => d.open).length,
  details: document.querySelectorAll('details').length,
  long: [...document.querySelectorAll('table')].filter(t => t.rows.length > short).map(t => ({
    rows: t.rows.length, folded: !!t.closest('details:not([open])'), shown: t.checkVisibility()})),
  links: [...document.querySelectorAll('main a[href]')].map(a => a.getAttribute('href')),
})"""


@pytest.mark.slow
def test_report_answers_in_two_screens_offline(report_tree: Path) -> None:
    if not CHROMIUM.exists():
        unavailable("chromium not installed: run .ci/install-browser.sh")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright not installed: run .ci/install-browser.sh")

    render(load("params.yaml"), "params.yaml")
    report = report_tree / paths.REPORT_HTML.path
    page_url = report.resolve().as_uri()
    requests: list[str] = []
    failures: list[str] = []
    out = artifacts_dir()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            page = browser.new_context(viewport=SCREEN, offline=True).new_page()
            page.on("request", lambda request: requests.append(request.url))
            page.on("requestfailed", lambda request: failures.append(request.url))
            page.goto(page_url, wait_until="load")
            images = page.eval_on_selector_all(
                "img",
                "els => els.map(e => ({alt: e.alt, complete: e.complete, width: e.naturalWidth,"
                " scheme: e.currentSrc.split(':')[0]}))",
            )
            title = page.title()
            layout = page.evaluate(LAYOUT, SHORT_TABLE)
            hidden = {name: page.is_visible(selector) for name, selector in FOLDED.items()}
            page.screenshot(path=str(out / "report-first-screen.png"))
            page.screenshot(path=str(out / "report.png"), full_page=True)
            page.locator(".folds summary", has_text="Op table of jit: ").click()
            page.locator(".folds:has(details.optable)").screenshot(path=str(out / "report-op-table-expanded.png"))
            page.evaluate(
                "document.querySelectorAll('.folds > details, #memory > details').forEach(d => d.open = true)"
            )
            shown = {name: page.is_visible(selector) for name, selector in FOLDED.items()}
        finally:
            browser.close()
    (out / "report-height.txt").write_text(
        f"{layout['height']} px at {SCREEN['width']}x{SCREEN['height']}"
        f" ({layout['height'] / SCREEN['height']:.1f} screens)\n"
    )

    assert "JAX MLP pipeline report" in title
    # the first screen holds the headline: accuracy per variant, speedups, compile times, training's peak memory
    assert layout["headline"] <= SCREEN["height"], layout
    assert layout["cards"] == len(TINY_VARIANTS) + 2 * (len(TINY_VARIANTS) - 1) + 1
    assert layout["height"] <= MOST_SCREENS * SCREEN["height"], layout["height"]
    # every long table starts folded and hidden; every <details> starts closed, whatever the variant
    assert layout["open"] == 0 and layout["details"] >= 3 * len(TINY_VARIANTS)
    assert layout["long"] and all(t["folded"] and not t["shown"] for t in layout["long"]), layout["long"]
    assert not any(hidden.values()), f"shown before opening: {[n for n, v in hidden.items() if v]}"
    assert all(shown.values()), f"not shown once opened: {[n for n, v in shown.items() if not v]}"
    # the trace files are relative links to files beside the report
    assert layout["links"] and all(not link.startswith(("/", "file:")) for link in layout["links"])
    crate = "../ro-crate-metadata.json"  # the run's RO-Crate: `mnist-pipeline crate` writes it, after the report
    assert crate in layout["links"]
    files = [link for link in layout["links"] if link != crate]
    assert all((report.parent / unquote(link)).exists() for link in files), layout["links"]
    assert len(images) >= 10
    not_loaded = [img["alt"] for img in images if not (img["complete"] and img["width"] > 0)]
    assert not not_loaded, f"images that did not load: {not_loaded}"
    assert {img["scheme"] for img in images} == {"data"}
    assert page_url in requests  # the listener saw the page itself
    outside = [url for url in requests if url != page_url and not url.startswith("data:")]
    assert not outside, f"the page asked for {outside}"
    assert not failures, f"failed requests: {failures}"
