"""The site's build steps in book/sphinx_ext: directive lines leave the page, code stays."""

import re
from pathlib import Path

import pytest
from docutils import nodes
from repo_files import load_module

ROOT = Path(__file__).resolve().parents[1]
clean_cells = load_module("book/sphinx_ext/clean_cells.py")


def test_directive_lines_are_dropped_and_code_is_kept():
    code = "# NBVAL_CHECK_OUTPUT\nprint(1)  # NBVAL_ in a comment stays\n#  a comment"
    assert clean_cells.strip_directives(code) == (
        "print(1)  # NBVAL_ in a comment stays\n#  a comment"
    )
    assert clean_cells.strip_directives("#| export\n\nimport torch") == "import torch"
    assert clean_cells.strip_directives("#| default_exp patches") == ""
    assert clean_cells.strip_directives("x = 1\n    #| hide") == "x = 1"


def test_solutions_lose_their_markers_or_their_bodies_for_students():
    code = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\nf(1)"
    assert clean_cells.strip_directives(code) == "def f(x):\n    return x + 1\nf(1)"
    assert clean_cells.strip_directives(code, student=True) == (
        "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\nf(1)"
    )


def test_the_exercises_link_names_the_student_notebook(tmp_path):
    class Config:
        html_theme_options = {
            "repository_url": "https://github.com/org/book",
            "repository_branch": "main",
            "launch_buttons": {"colab_url": "https://colab.research.google.com"},
        }

    class App:
        srcdir = str(tmp_path)
        config = Config()

    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "03_attention.ipynb").write_text("{}")
    assert clean_cells.colab_link(App(), "notebooks/03_attention") == (
        "https://colab.research.google.com/github/org/book/blob/main/student/03_attention.ipynb"
    )
    assert clean_cells.colab_link(App(), "notebooks/appendix_a_utils") is None


def test_consecutive_prints_show_as_one_block():
    def stream(text, name="stream"):
        return nodes.literal_block(text, text, classes=["output", name])

    figure = nodes.image(uri="figure.png")
    output = nodes.container(nb_element="cell_code_output")
    output += [stream("a table\n"), stream("row 1\n"), stream("\n"), stream("row 2, ")]
    output += [stream("same line\n"), figure, stream("after the figure\n")]
    output += [stream("a warning\n", "stderr"), stream("more\n", "stderr")]
    clean_cells.merge_streams(output)
    assert [child.astext() for child in output.children] == [
        "a table\nrow 1\n\nrow 2, same line\n",  # exactly as printed, blank line kept
        "",  # the figure stays between
        "after the figure\n",
        "a warning\nmore\n",
    ]
    assert output.children[0].rawsource == output.children[0].astext()


def test_no_page_shows_one_cells_prints_as_separate_boxes():
    site = ROOT / "_build" / "html" / "notebooks"
    if not site.is_dir():
        pytest.fail(
            "the site is not built: run `make book` (make test builds it first)"
        )
    split = re.compile(r'</pre></div>\s*</div>\s*<div class="output (stream|stderr)')
    pages = sorted(site.glob("*.html"))
    assert pages
    assert [page.name for page in pages if split.search(page.read_text())] == []
