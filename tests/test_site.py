"""The built site (make book) opened in headless Chromium, as a reader sees it.

For every chapter page: its title, its code, a figure that loaded, the Colab link, the
rendered widget where the chapter has one, typeset formulas where it has math; nothing is
fetched from outside the site.
Skips where Debian's chromium or chromedriver is absent, and fails then under CI=true
(conftest.py); CI installs both.
"""

import json
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from repo_files import load_module

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
student_edition = load_module("scripts/student_edition.py")
CHAPTERS = student_edition.chapters()
site_browser = load_module("scripts/browser.py")
SCREENSHOTS = os.environ.get(
    "VITLIB_SCREENSHOTS"
)  # a folder: save one screenshot per page

# without chromium these skip, and under CI=true they fail (conftest.py)
pytestmark = pytest.mark.browser


def repository_url() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def repository_branch() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["branch"]


@pytest.fixture(scope="module")
def server():
    """The site as the README says to open it: `make serve` (here on a free port)."""
    if not (SITE / "index.html").exists():
        pytest.fail(
            "the site is not built: run `make book` (make test builds it first)"
        )
    serving = subprocess.Popen(
        ["make", "--no-print-directory", "serve", "PORT=0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = serving.stdout.readline()  # "The book is at http://127.0.0.1:PORT/ (...)"
    url = re.search(r"http://127\.0\.0\.1:\d+", line)
    assert url, f"make serve said {line!r}"
    yield url.group(0)
    serving.terminate()
    serving.wait(timeout=30)


def test_the_site_opened_from_disk_reads_and_names_make_serve(browser):
    """The README's other way, `_build/html/index.html` from disk: the pickers run, and the
    live demo, which browsers will not start from a file, says which command serves it."""
    browser.get((SITE / "notebooks" / "01_patches.html").as_uri())
    kind = "patch-grid"
    wait_for(
        browser,
        f"const r = document.querySelector('[data-vit-widget=\"{kind}\"]');"
        "return r && (+(r.dataset.draws || 0) > 0 || r.dataset.error)",
        "chapter 1's picker to draw from disk",
    )
    assert not widget_state(browser, kind)["error"]
    for page in ("08c_live_demo", "08d_faithfulness"):
        browser.get((SITE / "notebooks" / f"{page}.html").as_uri())
        wait_for(
            browser,
            "const r = document.querySelector('[data-live-vit]');"
            "return r && r.dataset.error",
            f"page {page}'s demo to answer",
        )
        status = browser.execute_script(
            "return document.querySelector('[data-live-vit] .live-status').textContent"
        )
        assert (
            "make serve" in status and f"127.0.0.1:8000/notebooks/{page}.html" in status
        )
        fallback = "[data-live-vit] .live-fallback"  # the words for Jupyter and Colab
        assert not browser.execute_script(
            f"return document.querySelector('{fallback}')"
        )


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = site_browser.chromium(tmp_path_factory.mktemp("chromium-profile"))
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
    """An ipywidgets output the site shows (outputs tagged remove-output are not shown: the
    kernel-free picker below them takes their place)."""
    return any(
        "remove-output" not in cell["metadata"].get("tags", [])
        and "application/vnd.jupyter.widget-view+json"
        in json.dumps(cell.get("outputs", []))
        for cell in json.loads(path.read_text())["cells"]
    )


def diagrams_of(path: Path) -> list:
    """The drawn diagrams a page shows (scripts/diagrams.py): their names, in order."""
    text = path.read_text()
    if path.suffix == ".ipynb":
        text = "".join(
            "".join(c["source"])
            for c in json.loads(text)["cells"]
            if c["cell_type"] == "markdown"
        )
    return re.findall(r"\]\((?:attachment:|diagrams/)([\w-]+)\.svg\)", text)


# the diagrams on a page: images outside the cells' outputs, with their long alt text
DIAGRAM_IMAGES = """
    const imgs = [...document.querySelectorAll('main img, article img')].filter(
        i => !i.closest('.cell_output') && (i.alt || '').length > 80);
    return imgs.length && imgs.every(i => i.complete)
        ? imgs.map(i => [i.naturalWidth, i.src]) : null;
"""


def check_diagrams(browser, path: Path) -> None:
    names = diagrams_of(path)
    if not names:
        return
    shown = wait_for(browser, DIAGRAM_IMAGES, "the diagrams to load")
    assert len(shown) == len(names), (
        f"{len(shown)} diagrams on the page, {names} expected"
    )
    for width, src in shown:
        assert width > 300 and src.endswith(".svg"), f"a diagram did not load: {src}"


def test_the_intro_shows_the_road_map(server, browser):
    browser.get(f"{server}/book/intro.html")
    check_diagrams(browser, ROOT / "book" / "intro.md")


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

    if has_figure(notebook):  # 6c and 6d, the machinery pages, have none
        loaded = wait_for(
            browser,
            """
            const imgs = [...document.querySelectorAll('.cell_output img')];
            return imgs.length && imgs.every(i => i.complete) ? imgs.filter(i => i.naturalWidth > 0).length : 0;
        """,
            "the figures to load",
        )
        assert loaded >= 1, "no figure image loaded"

    colab = f"https://colab.research.google.com/github/{urlparse(repository_url()).path.strip('/')}/blob/{repository_branch()}/notebooks/{notebook.name}"
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

    check_diagrams(browser, notebook)  # drawn diagrams, carried inside the notebook

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

    outside = site_browser.outside_fetches(browser, server)
    assert not outside, f"the page fetched from outside the site: {outside}"
    errors = site_browser.console_errors(browser)
    assert not errors, f"the browser console reported errors: {errors}"


# --- page 8c: the trained ViT runs in the browser -------------------------------------------


def live_state(browser) -> dict:
    return browser.execute_script(
        "const r = document.querySelector('[data-live-vit]');"
        "return {updates: +(r.dataset.updates || 0), image: r.dataset.image,"
        " hidden: r.dataset.hidden, probabilities: r.dataset.probabilities,"
        " rollout: r.dataset.rollout, error: r.dataset.error || null,"
        " prediction: r.querySelector('.live-prediction')?.textContent || '',"
        " overlay: r.querySelector('.live-overlay')?.toDataURL() || ''}"
    )


def wait_for_update(browser, after: int) -> dict:
    wait_for(
        browser,
        f"const r = document.querySelector('[data-live-vit]');"
        f"return r.dataset.error || +(r.dataset.updates || 0) > {after}",
        "the live demo to update",
    )
    state = live_state(browser)
    assert not state["error"], f"the live demo failed: {state['error']}"
    return state


def python_numbers(spec, image: int, hidden, fusion="mean", discard=0.0):
    """What the demo should show, computed with onnxruntime and vitlib.rollout."""
    import base64

    import numpy as np
    import onnxruntime
    import torch

    from vitlib.live import occlude
    from vitlib.rollout import attention_rollout

    h, w = spec["image_size"]
    item = spec["images"][image]
    pixels = np.frombuffer(base64.b64decode(item["pixels"]), dtype=np.uint8)
    images = occlude(
        torch.from_numpy(pixels.copy()).view(1, 1, h, w), hidden, spec["patch_size"]
    )
    x = (images.float() / 255 - spec["mean"][0]) / spec["std"][0]
    session = onnxruntime.InferenceSession(str(SITE / "_static" / spec["model"]))
    logits, attention = session.run(None, {"images": x.numpy()})
    probabilities = torch.from_numpy(logits).softmax(-1)[0].double().numpy()
    joint = attention_rollout(torch.from_numpy(attention).double(), fusion, discard)
    return probabilities, joint[0, 0, 1:].numpy()


def test_live_demo_runs_the_model_in_the_browser(server, browser):
    import numpy as np
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(f"{server}/notebooks/08c_live_demo.html")
    wait_for(
        browser,
        "const r = document.querySelector('[data-live-vit]');"
        "return r && (r.dataset.ready || r.dataset.error)",
        "the live demo to load its model",
        timeout=60,
    )
    spec = json.loads(
        browser.execute_script(
            "return document.querySelector(\"[data-live-vit] script[type='application/json']\").textContent"
        )
    )
    first = live_state(browser)
    assert not first["error"], f"the live demo failed: {first['error']}"
    assert first["prediction"].strip(), "no top-1 text in .live-prediction"
    expected_p, expected_rollout = python_numbers(spec, 0, [])
    np.testing.assert_allclose(
        json.loads(first["probabilities"]), expected_p, atol=1e-3
    )
    np.testing.assert_allclose(
        json.loads(first["rollout"]), expected_rollout, atol=1e-4
    )

    # paint the patch at row 1, column 1 of the 4x4 grid: prediction and overlay change
    canvas = browser.find_element(By.CSS_SELECTOR, "[data-live-vit] .live-image")
    box = canvas.rect
    rows, cols = (s // p for s, p in zip(spec["image_size"], spec["patch_size"]))
    dx, dy = box["width"] * (1.5 / cols - 0.5), box["height"] * (1.5 / rows - 0.5)
    ActionChains(browser).move_to_element_with_offset(canvas, dx, dy).click().perform()
    painted = wait_for_update(browser, first["updates"])
    assert json.loads(painted["hidden"]) == [cols + 1]
    assert painted["prediction"] != first["prediction"], (
        "painting left the prediction as it was"
    )
    assert painted["overlay"] != first["overlay"], (
        "painting left the rollout overlay as it was"
    )
    expected_p, expected_rollout = python_numbers(spec, 0, [cols + 1])
    np.testing.assert_allclose(
        json.loads(painted["probabilities"]), expected_p, atol=1e-3
    )
    np.testing.assert_allclose(
        json.loads(painted["rollout"]), expected_rollout, atol=1e-4
    )

    # rollout's options, as vitlib.rollout: the max of the heads, half the links dropped
    Select(browser.find_element(By.CSS_SELECTOR, ".live-fusion")).select_by_value("max")
    state = wait_for_update(browser, painted["updates"])
    browser.execute_script(
        "const s = document.querySelector('.live-discard'); s.value = 0.5;"
        "s.dispatchEvent(new Event('input'))"
    )
    state = wait_for_update(browser, state["updates"])
    _, expected_rollout = python_numbers(spec, 0, [cols + 1], "max", 0.5)
    np.testing.assert_allclose(
        json.loads(state["rollout"]), expected_rollout, atol=1e-4
    )

    # another image from the strip: a mistake, every patch shown again
    wrong = next(
        i for i, im in enumerate(spec["images"]) if im["label"] != im["prediction"]
    )
    browser.find_elements(By.CSS_SELECTOR, ".live-thumbnails canvas")[wrong].click()
    state = wait_for_update(browser, state["updates"])
    assert state["image"] == str(wrong) and json.loads(state["hidden"]) == []
    expected_p, _ = python_numbers(spec, wrong, [], "max", 0.5)
    np.testing.assert_allclose(
        json.loads(state["probabilities"]), expected_p, atol=1e-3
    )
    assert int(np.argmax(expected_p)) == spec["images"][wrong]["prediction"]

    fetched = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert any(u.endswith("fashion_vit.onnx") for u in fetched)
    outside = site_browser.outside_fetches(browser, server)
    assert not outside, f"the page fetched from outside the site: {outside}"
    errors = site_browser.console_errors(browser)
    assert not errors, f"the browser console reported errors: {errors}"


# --- page 8d: the demo's maps and the deletion curve, played ---------------------------------


def test_demo_follows_the_chosen_map_and_plays_its_deletion_curve(server, browser):
    import base64

    import numpy as np
    import onnxruntime
    import torch

    from vitlib.faithfulness import deletion_curve

    browser.get(f"{server}/notebooks/08d_faithfulness.html")
    wait_for(
        browser,
        "const r = document.querySelector('[data-live-vit]');"
        "return r && (r.dataset.ready || r.dataset.error)",
        "page 8d's demo to load its model",
        timeout=60,
    )
    spec = json.loads(
        browser.execute_script(
            "return document.querySelector(\"[data-live-vit] script[type='application/json']\").textContent"
        )
    )
    assert {"gradient x attention", "gradient x input", "occlusion"} <= set(
        spec["maps"]
    )
    state = live_state(browser)
    assert not state["error"], f"the demo failed: {state['error']}"
    h, w = spec["image_size"]
    pixels = np.frombuffer(
        base64.b64decode(spec["images"][0]["pixels"]), dtype=np.uint8
    )
    x = (
        torch.from_numpy(pixels.copy()).view(1, 1, h, w).float() / 255 - spec["mean"][0]
    ) / spec["std"][0]
    session = onnxruntime.InferenceSession(str(SITE / "_static" / spec["model"]))
    _, attention = session.run(None, {"images": x.numpy()})

    def choose(method):
        before = live_state(browser)["updates"]
        browser.execute_script(
            "const s = document.querySelector('.live-method'); s.value = arguments[0];"
            "s.dispatchEvent(new Event('change'))",
            method,
        )
        wait_for_update(browser, before)
        return browser.execute_script(
            "const r = document.querySelector('[data-live-vit]');"
            "return [r.dataset.method, JSON.parse(r.dataset.map)]"
        )

    # the last layer's attention, computed in the browser: the class token's row, heads averaged
    method, heat = choose("attention")
    expected = attention[-1, 0, :, 0, 1:].mean(0)
    assert method == "attention"
    np.testing.assert_allclose(heat, expected, atol=1e-5)
    # a precomputed map: the page's numbers for this image, as they are
    method, heat = choose("occlusion")
    assert method == "occlusion"
    np.testing.assert_allclose(heat, spec["maps"]["occlusion"][0], atol=1e-6)

    # the playback: the patches go in the map's order; the curve is vitlib's deletion curve
    browser.find_element("css selector", ".live-delete").click()
    wait_for(
        browser,
        "const r = document.querySelector('[data-live-vit]');"
        "return r.dataset.error || r.dataset.deletion",
        "the deletion curve to play",
        timeout=60,
    )
    error = browser.execute_script(
        "return document.querySelector('[data-live-vit]').dataset.error || null"
    )
    assert not error, f"the demo failed while playing: {error}"
    played = json.loads(
        browser.execute_script(
            "return document.querySelector('[data-live-vit]').dataset.deletion"
        )
    )
    order = json.loads(
        browser.execute_script(
            "return document.querySelector('[data-live-vit]').dataset.deletionOrder"
        )
    )
    scores = torch.tensor([spec["maps"]["occlusion"][0]])
    assert order == torch.sort(scores[0], descending=True, stable=True).indices.tolist()

    def model(images):
        return torch.from_numpy(session.run(None, {"images": images.numpy()})[0])

    blank = (spec["blank"] / 255 - spec["mean"][0]) / spec["std"][0]
    expected = deletion_curve(
        model, x, scores, tuple(spec["patch_size"]), baseline=blank
    )[0]
    assert len(played) == len(order) + 1 == 17
    np.testing.assert_allclose(played, expected.numpy(), atol=1e-3)
    errors = site_browser.console_errors(browser)
    assert not errors, f"the browser console reported errors: {errors}"


# --- the chapters' pickers without a kernel (book/static/vit-widgets.js) --------------------


def widget_state(browser, kind: str) -> dict:
    return browser.execute_script(
        f"const r = document.querySelector('[data-vit-widget=\"{kind}\"]');"
        "return r && {draws: +(r.dataset.draws || 0), error: r.dataset.error || null,"
        " heat: r.dataset.heat || null, text: r.textContent,"
        " pictures: [...r.querySelectorAll('canvas')].map(c => c.toDataURL())}"
    )


def move(browser, kind: str, control: str, value) -> None:
    """Set a picker's control (the n-th range input or select, as 'range:0') and fire it."""
    tag, index = control.split(":")
    element = "input[type=range]" if tag == "range" else "select"
    browser.execute_script(
        f"const r = document.querySelector('[data-vit-widget=\"{kind}\"]');"
        f"const c = r.querySelectorAll('{element}')[{index}]; c.value = arguments[0];"
        f"c.dispatchEvent(new Event('{'input' if tag == 'range' else 'change'}'))",
        str(value),
    )


def open_widget(browser, server, page: str, kind: str) -> dict:
    browser.get(f"{server}/notebooks/{page}.html")
    wait_for(
        browser,
        f"const r = document.querySelector('[data-vit-widget=\"{kind}\"]');"
        "return r && (+(r.dataset.draws || 0) > 0 || r.dataset.error)",
        f"the {kind} picker of page {page} to draw",
    )
    state = widget_state(browser, kind)
    assert not state["error"], f"the picker failed: {state['error']}"
    # the dead ipywidgets output is not on the page
    assert not browser.execute_script(
        "return document.querySelector('.jupyter-widgets')"
    )
    return state


def moved(browser, kind, control, value, before) -> dict:
    move(browser, kind, control, value)
    wait_for(
        browser,
        f"return +document.querySelector('[data-vit-widget=\"{kind}\"]').dataset.draws"
        f" > {before['draws']}",
        f"the {kind} picker to redraw",
    )
    after = widget_state(browser, kind)
    assert after["pictures"] != before["pictures"], (
        "moving the control left the picture as it was"
    )
    return after


def test_chapter1_patch_size_slider_redraws_the_grid(server, browser):
    state = open_widget(browser, server, "01_patches", "patch-grid")
    assert "patch 16: a 14 x 14 grid, 196 tokens" in state["text"]
    state = moved(browser, "patch-grid", "range:0", 0, state)  # the smallest size, 4
    assert "patch 4: a 56 x 56 grid, 3136 tokens" in state["text"]


@pytest.mark.parametrize("page", ["02_positions", "03_attention"])
def test_chapters_2_and_3_patch_pickers_show_each_patchs_map(server, browser, page):
    state = open_widget(browser, server, page, "patch-maps")
    first = json.loads(state["heat"])
    assert len(first) == 196
    state = moved(browser, "patch-maps", "range:0", 0, state)  # row 0
    assert json.loads(state["heat"]) != first


def test_chapter8_explorer_switches_layer_head_fusion_and_discard(server, browser):
    import base64

    import numpy as np
    import torch

    from vitlib.rollout import select_map

    state = open_widget(browser, server, "08b_attention_maps", "attention-explorer")
    spec = json.loads(
        browser.execute_script(
            'return document.querySelector(\'[data-vit-widget="attention-explorer"] '
            'script[type="application/json"]\').textContent'
        )
    )
    shape = (len(spec["images"]), spec["layers"], spec["heads"], spec["n"], spec["n"])
    maps = np.frombuffer(base64.b64decode(spec["maps"]), dtype=np.float32).reshape(
        shape
    )
    per_layer = [torch.from_numpy(maps[:, i].copy()) for i in range(spec["layers"])]

    def expected(image, layer, head, fusion, discard):
        heat, _ = select_map(per_layer, image, layer, head, fusion, discard)
        return heat.flatten().double().numpy()

    np.testing.assert_allclose(
        json.loads(state["heat"]), expected(0, -1, -1, "mean", 0.0), atol=1e-5
    )
    for control, value, settings in [
        ("select:3", "max", (0, -1, -1, "max", 0.0)),  # fusion
        ("range:0", 0.5, (0, -1, -1, "max", 0.5)),  # discard
        ("select:0", 5, (5, -1, -1, "max", 0.5)),  # image
        ("select:1", 1, (5, 1, -1, "max", 0.5)),  # layer 2
        ("select:2", 3, (5, 1, 3, "max", 0.5)),  # head 4
    ]:
        state = moved(browser, "attention-explorer", control, value, state)
        np.testing.assert_allclose(
            json.loads(state["heat"]), expected(*settings), atol=1e-5
        )
