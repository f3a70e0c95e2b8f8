"""The built site (make book) opened in headless Chromium, as a reader sees it.

For every chapter page: its title, its code, a figure that loaded, the Colab link, the
rendered widget where the chapter has one, typeset formulas where it has math; nothing is
fetched from outside the site.
Skips where Debian's chromium or chromedriver is absent, and fails then under CI=true
(conftest.py); CI installs both.
"""

import functools
import http.server
import importlib.util
import json
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
_spec = importlib.util.spec_from_file_location(
    "student_edition", ROOT / "scripts" / "student_edition.py"
)
student_edition = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(student_edition)
CHAPTERS = student_edition.chapters()  # the chapter pages of _toc.yml, in reading order
SCREENSHOTS = os.environ.get(
    "VITLIB_SCREENSHOTS"
)  # a folder: save one screenshot per page

# without chromium these skip, and under CI=true they fail (conftest.py)
pytestmark = pytest.mark.browser


def repository_url() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


@pytest.fixture(scope="module")
def server():
    if not (SITE / "index.html").exists():
        pytest.fail(
            "the site is not built: run `make book` (make test builds it first)"
        )

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(SITE))
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,2000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def notebook_title(path: Path) -> str:
    for cell in json.loads(path.read_text())["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and source.startswith("# "):
            return source.splitlines()[0][2:].strip()
    raise AssertionError(f"{path.name} has no '# title' cell")


def has_figure(path: Path) -> bool:
    return '"image/png"' in path.read_text()


def has_widget(path: Path) -> bool:
    return "application/vnd.jupyter.widget-view+json" in path.read_text()


def has_math(path: Path) -> bool:
    return any(
        cell["cell_type"] == "markdown" and "$" in "".join(cell["source"])
        for cell in json.loads(path.read_text())["cells"]
    )


def wait_for(driver, script: str, what: str, timeout: float = 30):
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout).until(lambda d: d.execute_script(script))
    except Exception as error:
        raise AssertionError(f"timed out waiting for {what}") from error


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_page(server, browser, notebook):
    page = f"{server}/notebooks/{notebook.stem}.html"
    browser.get(page)

    title = browser.execute_script(
        "return document.querySelector('article h1, main h1').textContent"
    )
    assert notebook_title(notebook) in title, f"page title {title!r}"

    code = browser.execute_script(
        "return [...document.querySelectorAll('.cell_input pre')].map(e => e.textContent)"
    )
    assert len(code) >= 5 and any("import torch" in c for c in code), (
        "the chapter's code is not on the page"
    )
    # nbdev's and nbval's directive lines stay in the notebooks, not on the page
    machinery = [c for c in code if re.search(r"^\s*(#\||# NBVAL_)", c, re.M)]
    assert not machinery, f"a code cell shows a directive line: {machinery[0][:80]!r}"

    if has_figure(notebook):  # 6c, the machinery page, has none
        loaded = wait_for(
            browser,
            """
            const imgs = [...document.querySelectorAll('.cell_output img')];
            return imgs.length && imgs.every(i => i.complete) ? imgs.filter(i => i.naturalWidth > 0).length : 0;
        """,
            "the figures to load",
        )
        assert loaded >= 1, "no figure image loaded"

    colab = f"https://colab.research.google.com/github/{urlparse(repository_url()).path.strip('/')}/blob/main/notebooks/{notebook.name}"
    hrefs = browser.execute_script(
        "return [...document.querySelectorAll('a')].map(a => a.href)"
    )
    assert colab in hrefs, f"no Colab link {colab}"
    # the second link: the chapter's student notebook, exercises without solutions
    exercises = colab.replace("/notebooks/", "/student/")
    assert exercises in hrefs, f"no 'Exercises in Colab' link {exercises}"
    assert (ROOT / "student" / notebook.name).exists()
    # solutions are folded under a toggle, and nbgrader's markers are not on the page
    assert not [c for c in code if "### BEGIN SOLUTION" in c or "### END SOLUTION" in c]

    if has_widget(notebook):
        # ipywidgets' HTML manager turns the saved state into live controls and outputs.
        wait_for(
            browser,
            "return document.querySelector('.jupyter-widgets [class*=\"widget-\"]')",
            "the widgets to render from their saved state",
        )
        if '"OutputModel"' in notebook.read_text():
            wait_for(
                browser,
                "const i = document.querySelector('.widget-output img');"
                "return i && i.complete && i.naturalWidth > 0",
                "the figure saved in the widget's output to render",
            )

    if has_math(notebook):
        # MathJax, served from _static, typesets the page's formulas as SVG.
        wait_for(
            browser,
            "return document.querySelector('mjx-container svg')",
            "MathJax to typeset the formulas",
        )

    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        browser.execute_script(
            "document.querySelector('.jupyter-widgets')?.scrollIntoView()"
        )
        browser.save_screenshot(str(Path(SCREENSHOTS) / f"{notebook.stem}.png"))

    outside = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    outside = [
        url
        for url in outside
        if not url.startswith(server) and not url.startswith("data:")
    ]
    assert not outside, f"the page fetched from outside the site: {outside}"

    # pydata-sphinx-theme reports a first visit's empty stored theme as an error, then uses "auto".
    errors = [
        e["message"]
        for e in browser.get_log("browser")
        if e["level"] == "SEVERE" and "Got invalid theme mode" not in e["message"]
    ]
    assert not errors, f"the browser console reported errors: {errors}"
