"""The report's HTML page in a real browser: Chromium from the system's packages, driven by
Playwright for Python (`make test-browser`). Skipped, saying why, where either is missing, unless
DROVER_BROWSER_REQUIRED is set (as `make test-browser` sets it)."""
from __future__ import annotations

import os
import sqlite3

import pytest

from helpers import REPORT_HOSTILE, drover, seed_report_ledger

CHROMIUM = os.environ.get("DROVER_CHROMIUM", "/usr/bin/chromium")


def _unavailable(why: str) -> None:
    if os.environ.get("DROVER_BROWSER_REQUIRED"):
        pytest.fail(f"make test-browser: {why}", pytrace=False)
    pytest.skip(f"{why} (make test-browser installs it)")


@pytest.fixture
def chromium():
    """A headless Chromium (the system's) under Playwright, closed with the test."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright for Python is not installed (the `browser` extra)")
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"no Chromium at {CHROMIUM}")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                             args=["--no-sandbox"] if os.geteuid() == 0 else [])
        try:
            yield browser
        finally:
            browser.close()


def test_the_page_shows_every_item_dep_and_run_and_asks_the_network_for_nothing(repo, tmp_path, chromium):
    want = seed_report_ledger(repo)
    out = tmp_path / "report.html"
    drover(repo, "report", "--html", str(out), check=True)
    conn = sqlite3.connect(repo / ".drover" / "ledger.db")
    runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    conn.close()
    files = sorted(path.stem for path in (repo / "items").glob("*.md"))

    page = chromium.new_page()
    requests: list[str] = []
    dialogs: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(out.as_uri())
    page.wait_for_load_state("load")

    nodes = page.locator("svg.graph g.node")
    assert nodes.count() == len(files) == 200
    assert sorted(nodes.evaluate_all("nodes => nodes.map(node => node.dataset.id)")) == files
    edges = page.locator("svg.graph path.edge")
    assert edges.count() == len(want["edges"])
    assert sorted(edges.evaluate_all("edges => edges.map(e => [e.dataset.from, e.dataset.to])")) == \
        sorted([list(edge) for edge in want["edges"]])
    bars = page.locator("svg.timeline rect.bar")
    assert bars.count() == runs == want["runs"]
    # drawn as SVG, not left as unknown tags: each node's box and each bar has a size
    assert page.evaluate("[...document.querySelectorAll('svg.graph g.node')].every(g => g.getBBox().width > 0)")
    assert page.evaluate("[...document.querySelectorAll('svg.timeline rect.bar')].every(r => r.getBBox().width > 0)")

    # hostile titles and reasons are text: no script, no image, no dialog; the words are on the page
    assert page.evaluate("document.scripts.length") == 0 and page.evaluate("document.images.length") == 0
    text = page.inner_text("body")
    assert all(hostile in text for hostile in REPORT_HOSTILE)
    assert dialogs == []
    assert requests == [out.as_uri()]
