"""Test settings shared by the unit tests and the notebooks that nbval runs.

Set before any kernel starts, so the notebooks' kernels inherit them: smoke mode shrinks each
chapter to well under a minute and reads the Fashion-MNIST sample that ships with vitlib (no
download, no Debian package), and strict checks turn a wrong exercise solution into a failure.

What a machine may lack is declared here and nowhere else: a test marked with one of the names
in NEEDS skips without that thing, saying why; under CI=true it fails instead, so that a green
CI run has run them all. Nothing else may skip for want of data: the tests read the sample.
"""

import functools
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

os.environ["VITLIB_SMOKE"] = "1"
os.environ["VITLIB_STRICT_CHECKS"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")

ROOT = Path(__file__).resolve().parent
CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def browser_present() -> bool:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    return bool(chromium and shutil.which("chromedriver"))


# what a Colab page's first cell makes pip fetch (vitlib's build backend and small needs, timm
# and what timm needs beyond Colab's own packages), named without their dependencies
COLAB_INSTALLS = ["setuptools>=77", "einops", "safetensors", "tqdm", "timm>=1.0.9"]
COLAB_INSTALLS += ["huggingface_hub", "pyyaml"]


@functools.cache
def registry_reachable() -> bool:
    """True when pip can fetch what a Colab page installs (asked once per test run)."""
    with tempfile.TemporaryDirectory() as tmp:
        ask = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet"]
        ask += ["--no-cache-dir", "--retries", "0", "--timeout", "15", "--dest", tmp]
        try:
            run = subprocess.run(
                [*ask, *COLAB_INSTALLS], capture_output=True, timeout=300
            )
        except subprocess.TimeoutExpired:
            return False
        return run.returncode == 0


@functools.cache
def sandbox_present() -> bool:
    """True when bubblewrap can make the grader's namespaces on this machine."""
    sys.path.insert(0, str(ROOT / "scripts" / "grading"))
    from sandbox import sandbox_problem

    return sandbox_problem() is None


# marker: (is it here?, why the test cannot run without it)
NEEDS = {
    "sandbox": (
        sandbox_present,
        "bubblewrap is not installed or cannot make namespaces here "
        "(apt-get install bubblewrap), so submissions cannot be graded in a sandbox",
    ),
    "browser": (
        browser_present,
        "Debian's chromium and chromedriver are not installed "
        "(apt-get install chromium chromium-driver)",
    ),
    "network": (
        registry_reachable,
        "pip cannot reach its package index, so a Colab runtime's installs cannot be "
        "repeated here",
    ),
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).suffix == ".ipynb":
            item.add_marker(pytest.mark.notebooks)


def pytest_runtest_setup(item):
    missing = [
        why
        for name, (present, why) in NEEDS.items()
        if item.get_closest_marker(name) and not present()
    ]
    if missing:
        if CI:
            pytest.fail("CI=true, but " + "; and ".join(missing), pytrace=False)
        pytest.skip("; ".join(missing))


def need_module(name: str):
    """import `name` for a test module that cannot run without it (pytest.importorskip's job):
    without it the module's tests skip, saying what to install; under CI=true they fail."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        why = f"{name} cannot be imported ({error}): pip install -e '.[dev]'"
        if CI:
            pytest.fail("CI=true, but " + why, pytrace=False)
        pytest.skip(why, allow_module_level=True)
