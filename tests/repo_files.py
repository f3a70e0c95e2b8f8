"""The repository's scripts (scripts/, benchmarks/, book/sphinx_ext/) are run by path, not
installed: the tests load them as modules with `load_module`."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_module(path: str):
    """The module in the file ROOT/path (e.g. "scripts/run_times.py"), named after the file."""
    file = ROOT / path
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
