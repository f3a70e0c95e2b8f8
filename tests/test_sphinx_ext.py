"""The site's build steps in book/sphinx_ext: directive lines leave the page, code stays."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "clean_cells", ROOT / "book" / "sphinx_ext" / "clean_cells.py"
)
clean_cells = importlib.util.module_from_spec(spec)
spec.loader.exec_module(clean_cells)


def test_directive_lines_are_dropped_and_code_is_kept():
    code = "# NBVAL_CHECK_OUTPUT\nprint(1)  # NBVAL_ in a comment stays\n#  a comment"
    assert clean_cells.strip_directives(code) == (
        "print(1)  # NBVAL_ in a comment stays\n#  a comment"
    )
    assert clean_cells.strip_directives("#| export\n\nimport torch") == "import torch"
    assert clean_cells.strip_directives("#| default_exp patches") == ""
    assert clean_cells.strip_directives("x = 1\n    #| hide") == "x = 1"
