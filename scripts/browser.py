"""The built site served over loopback and opened in Debian's headless Chromium: one home for
the set-up that tests/test_site.py and benchmarks/browser_latency.py share.

Chromium runs with the flags this machine's closed network needs (no background
connections, no component updates) and a fresh profile; chromedriver drives it (selenium
downloads nothing).
"""

import functools
import http.server
import shutil
import threading
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def serve(site: Path, port: int = 0) -> http.server.ThreadingHTTPServer:
    """A quiet HTTP server for `site` on 127.0.0.1 (`port`, 0: a free one), running in a
    thread; its URL is f"http://127.0.0.1:{server.server_address[1]}". Call .shutdown() when
    done. `make serve` (scripts/serve.py) serves the site with it."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", port), functools.partial(Quiet, directory=str(site))
    )
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def chromium(profile, window="1280,2000"):
    """A selenium driver for headless Chromium with a fresh profile folder, keeping the
    browser console's messages for get_log("browser")."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--window-size={window}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    return driver


def outside_fetches(driver, server: str) -> list:
    """Every resource the page loaded from anywhere but `server` (data: URLs aside)."""
    urls = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    return [u for u in urls if not u.startswith(server) and not u.startswith("data:")]


def console_errors(driver) -> list:
    """The browser console's errors. pydata-sphinx-theme reports a first visit's empty stored
    theme as an error, then uses "auto": that one is left out."""
    return [
        e["message"]
        for e in driver.get_log("browser")
        if e["level"] == "SEVERE" and "Got invalid theme mode" not in e["message"]
    ]
