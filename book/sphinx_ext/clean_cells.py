"""Hide the notebooks' machinery on the site, and give each chapter its exercises in Colab.

A code cell may start with lines for tools, not for readers: nbdev's `#| export` and
`#| default_exp`, and nbval's `# NBVAL_CHECK_OUTPUT`. They stay in the notebooks (Colab, nbdev
and nbval read them) and are dropped from the page. A cell left with no code and no output,
such as `#| default_exp patches`, is dropped whole.

Solutions: the site shows a solution without nbgrader's `### BEGIN/END SOLUTION` marker lines
(the cell is folded under a toggle by its `hide-input` tag). With `VITLIB_EDITION=student`
(`make book EDITION=student`) each solution becomes `raise NotImplementedError()`, as in the
student notebooks, written answers' model answers are dropped, and so are the stored verdicts
under the check cells (they are the book's solutions'): a site for a course.

Printed output: a cell that prints several times stores one stream output per flush, and
each would show as its own box, a table broken into rows with gaps. Consecutive outputs of
one stream join into one block, their text exactly as printed (MyST-NB's own
nb_merge_streams also moves text across figures and drops blank lines).

Each chapter page that has a student notebook (`student/<page>.ipynb`) gets a line under its
title linking that notebook in Colab, from the repository named in `_config.yml`.
"""

import importlib.util
import os
import re
from pathlib import Path

from docutils import nodes

DIRECTIVE = re.compile(r"^\s*(#\|.*|# NBVAL_\w+.*)$")
# the exercise markers and the student edition's rewrite, from their one home
_spec = importlib.util.spec_from_file_location(
    "student_edition",
    Path(__file__).resolve().parents[2] / "scripts" / "student_edition.py",
)
exercises = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(exercises)


def student_edition() -> bool:
    return os.environ.get("VITLIB_EDITION", "book") == "student"


def strip_directives(code: str, student: bool = False) -> str:
    """The code without its directive lines, and without the blank lines they leave on top;
    solution markers dropped, or (student) each solution replaced as in the student notebooks."""
    code = "\n".join(line for line in code.splitlines() if not DIRECTIVE.match(line))
    if student:
        code = exercises.strip_solutions(code)
    else:
        markers = (exercises.BEGIN, exercises.END)
        code = "\n".join(
            line for line in code.splitlines() if line.strip() not in markers
        )
    return code.strip("\n")


def _element(name: str):
    """A test for MyST-NB's containers of one kind: a cell, its source, its outputs."""
    return lambda node: (
        isinstance(node, nodes.container) and node.get("nb_element") == name
    )


_is_code_cell = _element("cell_code")
_is_code_source = _element("cell_code_source")
_is_code_output = _element("cell_code_output")


def _is_stream(node) -> bool:
    """MyST-NB's block for printed text: class "stream" (stdout) or "stderr"."""
    classes = node.get("classes", []) if isinstance(node, nodes.literal_block) else []
    return "stream" in classes or "stderr" in classes


def merge_streams(output: nodes.Element) -> None:
    """Join consecutive stream blocks of one cell's outputs (the same stream: the same
    classes) into the first, text as printed; a figure between two keeps them apart."""
    previous = None
    for node in list(output.children):
        if (
            _is_stream(node)
            and previous is not None
            and (node.get("classes") == previous.get("classes"))
        ):
            text = previous.astext() + node.astext()
            previous.rawsource = text
            previous.children = [nodes.Text(text)]
            output.remove(node)
            continue
        previous = node if _is_stream(node) else None


def _clean(app, doctree):
    student = student_edition()
    for output in doctree.findall(_is_code_output):
        merge_streams(output)
    for source in list(doctree.findall(_is_code_source)):
        for block in list(source.findall(nodes.literal_block)):
            code = strip_directives(block.astext(), student)
            if code == block.astext():
                continue
            # rawsource and text must agree, or Sphinx does not highlight the block
            block.rawsource = code
            block.children = [nodes.Text(code)]
            if not code:
                block.parent.remove(block)
        if not list(source.findall(nodes.literal_block)):
            cell = source.parent
            cell.remove(source)
            if not cell.children:
                cell.parent.remove(cell)

    if student:
        # a check's stored verdict is the book's own solution's: not the student's to see
        for cell in list(doctree.findall(_is_code_cell)):
            if exercises.CHECK.search(cell.astext()):
                for output in list(cell.findall(_is_code_output)):
                    output.parent.remove(output)
        for admonition in list(doctree.findall(nodes.admonition)):
            titles = list(admonition.findall(nodes.title))
            if titles and titles[0].astext() == exercises.MODEL_ANSWER_TITLE:
                admonition.parent.remove(admonition)


def colab_link(app, docname: str):
    """The Colab address of the page's student notebook, or None when it has none."""
    page = Path(docname).name
    if not (Path(app.srcdir) / "student" / f"{page}.ipynb").exists():
        return None
    options = app.config.html_theme_options
    repository = options.get("repository_url", "").removeprefix("https://github.com/")
    branch = options.get("repository_branch", "main")
    colab = options.get("launch_buttons", {}).get(
        "colab_url", "https://colab.research.google.com"
    )
    return f"{colab}/github/{repository}/blob/{branch}/student/{page}.ipynb"


def _link_exercises(app, doctree):
    url = colab_link(app, app.env.docname)
    sections = list(doctree.findall(nodes.section))
    if url is None or not sections:
        return
    link = nodes.reference(
        "", "Exercises in Colab", refuri=url, classes=["exercises-colab"]
    )
    line = nodes.paragraph("", "", link, classes=["exercises-colab"])
    title = sections[0].next_node(nodes.title)
    title.parent.insert(title.parent.index(title) + 1, line)


def setup(app):
    app.connect("doctree-read", _clean)
    app.connect("doctree-read", _link_exercises)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
