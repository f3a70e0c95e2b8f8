"""The student edition keeps every cell but the solutions, and every output but the answers,
and stays a valid notebook."""

from pathlib import Path

import nbformat
import pytest
from repo_files import load_module

ROOT = Path(__file__).resolve().parents[1]
student_edition = load_module("scripts/student_edition.py")
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


def uncounted(outputs) -> list:
    return [{k: v for k, v in o.items() if k != "execution_count"} for o in outputs]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_student_edition(path):
    book = nbformat.read(path, as_version=4)
    student = student_edition.student_notebook(path)
    nbformat.validate(student)
    tag = student_edition.MODEL_ANSWER_TAG  # a model answer's own code cell is left out
    kept = [
        i for i, c in enumerate(book.cells) if tag not in c.metadata.get("tags", [])
    ]
    assert len(student.cells) == len(kept)
    text = "\n".join(c.source for c in student.cells)
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    regions = sum(c.source.count("### BEGIN SOLUTION") for c in book.cells)
    assert text.count("raise NotImplementedError()") >= regions
    pairs = [
        (index, book.cells[index], theirs) for index, theirs in zip(kept, student.cells)
    ]
    for index, ours, theirs in pairs:
        if ours.cell_type != "code":
            continue
        assert theirs.execution_count is None
        if student_edition.reveals_answer(book.cells, index):
            assert theirs.outputs == []
        else:  # the book's own outputs, less those that need its kernel or website
            book_outputs = uncounted(ours.outputs)
            assert all(o in book_outputs for o in uncounted(theirs.outputs))
            assert not any(
                student_edition.WIDGET_VIEW in o.get("data", {}) for o in theirs.outputs
            )
    assert "widgets" not in student.metadata
    # the exported code and the checks are untouched
    for _, ours, theirs in pairs:
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


def test_a_model_answers_measurement_is_left_out():
    # page 9's model answer to 9.5 quotes the accuracy at a 7-pixel shift, measured in a cell
    # of its own: the exercise asks the student to measure it
    path = ROOT / "notebooks" / "09_cnn_vs_vit.ipynb"
    book = nbformat.read(path, as_version=4).cells
    tagged = [c for c in book if "model-answer" in c.metadata.get("tags", [])]
    assert tagged and all("shift(data.val_images, 7, 7)" in c.source for c in tagged)
    student = student_edition.student_notebook(path)
    assert len(student.cells) == len(book) - len(tagged)
    code = [c.source for c in student.cells if c.cell_type == "code"]
    assert not any("shift(data.val_images, 7, 7)" in source for source in code)


def _texts(cell) -> str:
    return "".join(
        o.get("text", "") + "".join(o.get("data", {}).get("text/plain", ""))
        for o in cell.outputs
    )


def test_a_page_keeps_its_runs_and_loses_its_answers():
    """Page 6b on Colab's CPU: the training run's figures and tables are there to read at
    once; the checks' verdicts and the predict-then-run reveal are not."""
    path = ROOT / "notebooks" / "06b_fashion_mnist.ipynb"
    book = nbformat.read(path, as_version=4)
    student = student_edition.student_notebook(path)

    def pair(text):  # the book's cell and the student's, by a line of its source
        [index] = [i for i, c in enumerate(book.cells) if text in c.source]
        assert book.cells[index].outputs, f"the book stores no output under {text!r}"
        return book.cells[index], student.cells[index]

    # kept: a figure of the chapter's run, its per-class table, a given bug's symptom
    ours, theirs = pair('ax1.plot(epochs, history["train_loss"]')
    assert any("image/png" in o.get("data", {}) for o in theirs.outputs)
    assert uncounted(theirs.outputs) == uncounted(ours.outputs)
    ours, theirs = pair("per_class = confusion.diag() / confusion.sum(1)")
    assert _texts(theirs) == _texts(ours) and "Shirt" in _texts(theirs)
    ours, theirs = pair("def confusion_matrix(predictions, labels, num_classes):")
    assert "row sums:" in _texts(theirs)
    # dropped: a check's verdict, and the reveal of exercise 6b.3 with its verdict
    ours, theirs = pair("checks.check_fixed_confusion(fixed_confusion)")
    assert "Exercise 6b.1" in _texts(ours) and theirs.outputs == []
    ours, theirs = pair("checks.compare_prediction(")
    assert "Exercise 6b.3" in _texts(ours) and theirs.outputs == []
    assert "2.3026" not in nbformat.writes(student)


def test_answers_and_what_depends_on_them_lose_their_outputs():
    """The rule on cells of each kind: an answer's own output, a reveal in the cell after a
    predict-then-run answer, a cell that uses an answer; a symptom and a run keep theirs."""
    new = nbformat.v4

    def code(source, text):
        return new.new_code_cell(source, outputs=[new.new_output("stream", text=text)])

    cells = [
        new.new_markdown_cell("## Training"),
        code("print(model)", "ViT(...)"),
        new.new_markdown_cell(
            "## Exercises\n\n**Exercise 9.1 (find the bug, 2 points).**"
        ),
        code("def buggy(x):\n    return x\n\nprint(buggy(1))", "1 (should be 2)"),
        code(
            "def fixed(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\nprint(fixed(1))",
            "2",
        ),
        code("print('fixed(3) =', fixed(3))", "fixed(3) = 6"),
        new.new_markdown_cell(
            "**Exercise 9.2 (predict, then run, 1 point).** Predict."
        ),
        code("x = 1", "nothing to see"),
        code(
            "def predicted():\n    ### BEGIN SOLUTION\n    return 49\n    ### END SOLUTION",
            "49",
        ),
        code("print(tokens)", "tokens: 49"),
        code("checks.compare_prediction('9.2', predicted, 49)", "correct."),
        new.new_markdown_cell("## Summary"),
        code("print(table)", "a table"),
    ]
    dropped = [
        i
        for i, c in enumerate(cells)
        if c.cell_type == "code" and student_edition.reveals_answer(cells, i)
    ]
    assert dropped == [4, 5, 8, 9, 10]


def test_outputs_that_need_the_kernel_or_the_website_are_left_out():
    new = nbformat.v4
    widget = new.new_output(
        "display_data",
        data={
            student_edition.WIDGET_VIEW: {"model_id": "1"},
            "text/plain": "IntSlider()",
        },
    )
    picker = new.new_output(
        "execute_result",
        data={
            "text/html": '<div>a picker</div><script src="../_static/vit-widgets.js">'
        },
        execution_count=3,
    )
    table = new.new_output(
        "execute_result", data={"text/markdown": "| a |"}, execution_count=4
    )
    kept = student_edition.static_outputs([widget, picker, table])
    assert kept == [table] and table.execution_count is None
