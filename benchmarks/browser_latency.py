"""Page 8c's live demo in headless Chromium: how soon the first prediction shows, and how long
one update takes (paint one patch -> new prediction and rollout overlay).

    python benchmarks/browser_latency.py [--updates 50] [--site _build/html]

Serves the built site (make book) over loopback, opens page 8c in Debian's chromium through
chromedriver (as tests/test_site.py does), and reads two things the page's script records:
the time from opening the page to its first prediction (the page, onnxruntime-web's
WebAssembly and the model file loaded, one inference, rollout drawn), measured by the
browser's performance.now(); then, `--updates` times, one patch hidden or shown again and the
time until the prediction and overlay are redrawn. Prints the first-prediction time and the
median, quartiles and maximum of the updates, and each as a ratio to its goal. The goals: first prediction within 2 s, each
update within 50 ms. Nothing here is asserted; the numbers are for the log.
"""

import argparse
import importlib.util
import statistics
import tempfile
from pathlib import Path

from vitlib.utils import hardware, log_header

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "browser", ROOT / "scripts" / "browser.py"
)
site_browser = importlib.util.module_from_spec(
    _spec
)  # the site tests' server and Chromium
_spec.loader.exec_module(site_browser)

# paint the patches in turn, each once out and once back in: the same work a reader does
UPDATES = """
const [count, done] = arguments;
const demo = window.liveVit, hidden = demo.state.hidden, times = [];
const patches = JSON.parse(demo.root.querySelector("script[type='application/json']").textContent);
const [h, w] = patches.image_size, [ph, pw] = patches.patch_size;
const n = (h / ph) * (w / pw);
for (let i = 0; i < count; i++) {
  const k = i % n;
  if (hidden.has(k)) hidden.delete(k); else hidden.add(k);
  const start = performance.now();
  await demo.update();
  times.push(performance.now() - start);
}
done(times);
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=50)
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    args = parser.parse_args()
    if not (args.site / "notebooks" / "08c_live_demo.html").exists():
        parser.error(f"no page 8c under {args.site}: run `make book` first")
    print(log_header())
    print(
        hardware("cpu"), "| headless Chromium, onnxruntime-web (WebAssembly, 1 thread)"
    )
    from selenium.webdriver.support.ui import WebDriverWait

    httpd = site_browser.serve(args.site)
    with tempfile.TemporaryDirectory() as profile:
        browser = site_browser.chromium(profile)
        try:
            browser.set_script_timeout(120)
            url = f"http://127.0.0.1:{httpd.server_address[1]}/notebooks/08c_live_demo.html"
            browser.get(url)
            first = WebDriverWait(browser, 60).until(
                lambda d: d.execute_script(
                    "const r = document.querySelector('[data-live-vit]');"
                    "if (r.dataset.error) throw new Error(r.dataset.error);"
                    "return r.dataset.firstPredictionMs"
                )
            )
            times = browser.execute_async_script(UPDATES, args.updates)
        finally:
            browser.quit()
            httpd.shutdown()
    q1, median, q3 = statistics.quantiles(times, n=4, method="inclusive")
    print(
        f"first prediction after opening the page: {float(first):.0f} ms (goal 2000 ms)"
    )
    print(
        f"one update, {len(times)} updates: median {median:.1f} ms, middle half "
        f"{q1:.1f} to {q3:.1f} ms, slowest {max(times):.1f} ms (goal 50 ms)"
    )
    print(
        f"ratio to the goals: first prediction {float(first) / 2000:.3f}, update {median / 50:.3f}"
    )


if __name__ == "__main__":
    main()
