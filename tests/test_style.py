"""One style for the notebooks, the package and the tests: ruff's checks and its formatting."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATHS = [
    "notebooks",
    "vitlib",
    "tests",
    "benchmarks",
    "scripts",
    "conftest.py",
    "book/sphinx_ext",
]


def ruff(*args):
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_ruff_check():
    result = ruff("check", *PATHS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format():
    # vitlib is formatted through its notebooks; nbdev's joins are its own, so it is left out.
    result = ruff("format", "--check", *[p for p in PATHS if p != "vitlib"])
    assert result.returncode == 0, "run `ruff format` on:\n" + result.stdout
