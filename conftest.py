"""Test settings shared by the unit tests and the notebooks that nbval runs.

Set before any kernel starts, so the notebooks' kernels inherit them: smoke mode shrinks each
chapter to well under a minute, and strict checks turn a wrong exercise solution into a failure.

Two things a machine may lack: Fashion-MNIST (`make data` fetches it: Debian's copy, else
torchvision's download) and Debian's chromium with chromedriver (the site in a browser). The
tests that need one skip without it, saying why; under CI=true they fail instead, so that a
green CI run has run them all.
"""

import json
import os
import shutil
from pathlib import Path

import pytest

os.environ["VITLIB_SMOKE"] = "1"
os.environ["VITLIB_STRICT_CHECKS"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")

ROOT = Path(__file__).resolve().parent
CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
NO_DATA = (
    "Fashion-MNIST is not in data/: run `make data` (Debian's copy, from apt-get install "
    "dataset-fashion-mnist, or torchvision's download when online)"
)
NO_BROWSER = (
    "Debian's chromium and chromedriver are not installed "
    "(apt-get install chromium chromium-driver)"
)


def fashion_mnist_present() -> bool:
    """True when the tests' data folder holds Fashion-MNIST, or Debian's copy can fill it."""
    from vitlib.data import _FASHION_FILES, DEBIAN_FASHION

    raw = ROOT / "data" / "FashionMNIST" / "raw"
    here = all((raw / name).is_file() for name in _FASHION_FILES)
    return here or DEBIAN_FASHION.is_dir()


def browser_present() -> bool:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    return bool(chromium and shutil.which("chromedriver"))


def notebook_needs_fashion_mnist(path: Path) -> bool:
    cells = json.loads(path.read_text())["cells"]
    source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return "fashion_mnist(" in source or "FashionMNIST(" in source


def pytest_collection_modifyitems(config, items):
    needs = {}
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix == ".ipynb":
            if path not in needs:
                needs[path] = notebook_needs_fashion_mnist(path)
            if needs[path]:
                item.add_marker(pytest.mark.fashion_mnist)
            item.add_marker(pytest.mark.notebooks)


def pytest_runtest_setup(item):
    missing = []
    if item.get_closest_marker("fashion_mnist") and not fashion_mnist_present():
        missing.append(NO_DATA)
    if item.get_closest_marker("browser") and not browser_present():
        missing.append(NO_BROWSER)
    if missing:
        if CI:
            pytest.fail("CI=true, but " + "; and ".join(missing), pytrace=False)
        pytest.skip("; ".join(missing))
