"""Open a page the pipeline wrote in Debian's headless Chromium (Playwright), offline, and report
what it loaded and what it asked the network for. Needs .ci/install-browser.sh; never downloads a
browser. Screenshots go to $TEST_ARTIFACTS_DIR (default test-artifacts/)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import ROOT, unavailable

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
IMAGES = (
    "els => els.map(e => ({alt: e.alt, complete: e.complete, width: e.naturalWidth,"
    " scheme: e.currentSrc.split(':')[0]}))"
)


@dataclass
class Visit:
    title: str
    images: list[dict[str, Any]]
    outside: list[str]  # requests for anything but the page itself and data: URIs
    failed: list[str]
    found: Any  # what `evaluate` returned
    console: list[str]  # the page's console messages, as 'type: text' (Vega's warnings among them)


def artifacts_dir() -> Path:
    folder = Path(os.environ.get("TEST_ARTIFACTS_DIR") or ROOT / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_offline(
    page_path: Path, screenshot: str, evaluate: str = "() => null", wait_for: str | None = None, argument: Any = None
) -> Visit:
    """Load `page_path` with the network off; take a full-page screenshot; run `evaluate` (given `argument`)
    in the page."""
    if not CHROMIUM.exists():
        unavailable("chromium not installed: run .ci/install-browser.sh")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright not installed: run .ci/install-browser.sh")
    url = page_path.resolve().as_uri()
    requests: list[str] = []
    failed: list[str] = []
    console: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True).new_page()
            page.on("request", lambda request: requests.append(request.url))
            page.on("requestfailed", lambda request: failed.append(request.url))
            page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
            page.goto(url, wait_until="load")
            if wait_for:
                page.wait_for_function(wait_for, timeout=30_000)
            visit = Visit(
                page.title(),
                page.eval_on_selector_all("img", IMAGES),
                [],
                failed,
                page.evaluate(evaluate, argument),
                console,
            )
            page.screenshot(path=str(artifacts_dir() / screenshot), full_page=True)
        finally:
            browser.close()
    assert url in requests, "the listener saw the page itself"
    visit.outside = [u for u in requests if u != url and not u.startswith("data:")]
    return visit
