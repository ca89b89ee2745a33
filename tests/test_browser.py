"""The report in a real headless Chromium: every image loads, the page asks the network for nothing, and
the trace and memory sections (op tables, step timeline, XLA's analysis, the step less init) are shown.

Needs Debian's /usr/bin/chromium and the Playwright package (`.ci/install-browser.sh`); never
downloads a browser. Saves a full-page screenshot to $TEST_ARTIFACTS_DIR (default test-artifacts/).
"""

from __future__ import annotations

import os
from pathlib import Path

from conftest import unavailable
from mnist_jax_pipeline import paths
from mnist_jax_pipeline.config import load
from mnist_jax_pipeline.report.render import render

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[1]
SKIP_REASON = "chromium not installed: run .ci/install-browser.sh"
NEW_SECTIONS = {  # visible in the screenshot (the first variant's snapshots are unfolded)
    "trace section": "#trace h2",
    "step timeline": "#trace img[alt='timeline of one traced step per variant']",
    "op table of jit": "#trace h3:has-text('jit: 3 traced steps') + p + table td.op",
    "op table of jit_scan": "#trace h3:has-text('jit_scan: 1 traced epoch') + p + table td.op",
    "XLA's analysis": "#memory h3:has-text('What the compiled step needs') + p + table",
    "what the step added": "#memory p:has-text('What the step added') + table",
    "executables in one line": "#memory td:has-text('compiled executables, in one line')",
}


def artifacts_dir() -> Path:
    folder = Path(os.environ.get("TEST_ARTIFACTS_DIR") or ROOT / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_report_opens_offline_with_every_image(report_tree: Path) -> None:
    if not CHROMIUM.exists():
        unavailable(SKIP_REASON)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable(SKIP_REASON)

    render(load("params.yaml"), "params.yaml")
    page_url = (report_tree / paths.REPORT_HTML.path).resolve().as_uri()
    requests: list[str] = []
    failures: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=ARGS, headless=True
        )
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
            page = context.new_page()
            page.on("request", lambda request: requests.append(request.url))
            page.on("requestfailed", lambda request: failures.append(request.url))
            page.goto(page_url, wait_until="load")
            images = page.eval_on_selector_all(
                "img",
                "els => els.map(e => ({alt: e.alt, complete: e.complete, width: e.naturalWidth,"
                " scheme: e.currentSrc.split(':')[0]}))",
            )
            title = page.title()
            shown = {name: page.is_visible(selector) for name, selector in NEW_SECTIONS.items()}
            page.screenshot(path=str(artifacts_dir() / "report.png"), full_page=True)
            page.locator("#trace").screenshot(path=str(artifacts_dir() / "report-trace.png"))
        finally:
            browser.close()

    assert "JAX MLP pipeline report" in title
    assert all(shown.values()), f"not shown: {[name for name, visible in shown.items() if not visible]}"
    assert len(images) >= 10
    not_loaded = [img["alt"] for img in images if not (img["complete"] and img["width"] > 0)]
    assert not not_loaded, f"images that did not load: {not_loaded}"
    assert {img["scheme"] for img in images} == {"data"}
    assert page_url in requests  # the listener saw the page itself
    outside = [url for url in requests if url != page_url and not url.startswith("data:")]
    assert not outside, f"the page asked for {outside}"
    assert not failures, f"failed requests: {failures}"
