"""The student edition keeps every cell but the solutions, and stays a valid notebook."""

import importlib.util
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "student_edition", ROOT / "scripts" / "student_edition.py"
)
student_edition = importlib.util.module_from_spec(spec)
spec.loader.exec_module(student_edition)
CHAPTERS = student_edition.chapters()


def test_solution_regions_become_not_implemented_at_their_indentation():
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n\nprint(f)"
    assert student_edition.strip_solutions(source) == (
        "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\nprint(f)"
    )


@pytest.mark.parametrize(
    "source",
    [
        "### BEGIN SOLUTION\nx = 1",
        "x = 1\n### END SOLUTION",
        "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION",
    ],
)
def test_unpaired_markers_are_refused(source):
    with pytest.raises(ValueError):
        student_edition.strip_solutions(source)


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_student_edition(path):
    book = nbformat.read(path, as_version=4)
    student = student_edition.student_notebook(path)
    nbformat.validate(student)
    assert len(student.cells) == len(book.cells)
    text = "\n".join(c.source for c in student.cells)
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    regions = sum(c.source.count("### BEGIN SOLUTION") for c in book.cells)
    assert text.count("raise NotImplementedError()") >= regions
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")
    assert "widgets" not in student.metadata
    # the exported code and the checks are untouched
    for ours, theirs in zip(book.cells, student.cells):
        if ours.source.lstrip().startswith(student_edition.MODEL_ANSWER):
            assert theirs.source == "YOUR ANSWER HERE"  # a written answer, emptied
        elif "### BEGIN SOLUTION" not in ours.source:
            assert ours.source == theirs.source


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_committed_student_edition_is_in_sync(path):
    """student/ is what Colab opens: `make student` writes it from notebooks/."""
    committed = ROOT / "student" / path.name
    assert committed.exists(), "run `make student`"
    text = nbformat.writes(student_edition.student_notebook(path))
    assert committed.read_text().rstrip("\n") == text.rstrip("\n"), "run `make student`"


def test_written_answers_are_emptied():
    path = ROOT / "notebooks" / "03_attention.ipynb"
    student = student_edition.student_notebook(path)
    text = "\n".join(c.source for c in student.cells)
    assert "Model answer" not in text and "YOUR ANSWER HERE" in text
