"""Coursework: nbgrader metadata in the notebooks, hidden cases, the library off limits, and
`scripts/coursework.py grade` on one chapter's submissions, end to end."""

import csv
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import torch

from vitlib import checks
from vitlib.rollout import patch_distances

ROOT = Path(__file__).resolve().parents[1]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


coursework = _load("coursework")
student_edition = _load("student_edition")
CHAPTERS = coursework.chapters()


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_notebooks_carry_their_nbgrader_metadata(path):
    """`make student` annotates; a notebook edited since fails here."""
    book = nbformat.read(path, as_version=4)
    again = coursework.annotate(nbformat.read(path, as_version=4))
    assert book == again, "run `make student` (scripts/coursework.py annotate)"
    graded = coursework.exercises(book)
    assert graded, "a chapter without graded exercises"
    ids = [
        c.metadata["nbgrader"]["grade_id"]
        for c in book.cells
        if "nbgrader" in c.metadata
    ]
    assert len(ids) == len(set(ids))


def test_the_instructors_table_is_in_sync():
    table = (ROOT / "book" / "coursework_table.md").read_text()
    assert table.endswith(coursework.guide_table(CHAPTERS)), "run `make student`"


def test_annotate_reads_points_and_kinds():
    cells = [
        nbformat.v4.new_markdown_cell(
            "**Exercise 9.2 (find the bug, 3 points).** Fix it."
        ),
        nbformat.v4.new_code_cell(
            "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"
        ),
        nbformat.v4.new_code_cell("checks.check_f(f);"),
        nbformat.v4.new_markdown_cell("**Exercise 9.3 (explain).** Why?"),
        nbformat.v4.new_markdown_cell(
            "```{admonition} Model answer\n:class: dropdown\nBecause.\n```"
        ),
    ]
    book = coursework.annotate(nbformat.v4.new_notebook(cells=cells))
    meta = [c.metadata.get("nbgrader") for c in book.cells]
    assert meta[0] is None
    assert meta[1]["solution"] and not meta[1]["grade"]
    assert meta[2]["grade"] and meta[2]["locked"] and meta[2]["points"] == 3
    assert meta[4]["grade"] and meta[4]["solution"] and meta[4]["points"] == 1
    assert coursework.exercises(book) == [
        ("ex9_2", 3, ["ex9_2"], False),
        ("ex9_3", 1, ["ex9_3"], True),
    ]


def test_a_table_of_public_answers_fails_under_another_seed(monkeypatch, capsys):
    table = {192: 148224, 384: 591360, 768: 2362368, 1024: 4198400}
    monkeypatch.setenv("VITLIB_STRICT_CHECKS", "0")
    assert checks.check_attention_parameters(lambda dim: table[dim])
    monkeypatch.setenv("VITLIB_CHECK_SEED", "7")
    assert not checks.check_attention_parameters(lambda dim: table[dim])
    assert checks.check_attention_parameters(lambda dim: 4 * dim * dim + 4 * dim)
    assert "KeyError" in capsys.readouterr().out


def test_seeded_inputs_change_with_the_seed(monkeypatch):
    first = torch.randn(3, generator=checks.case_generator())
    monkeypatch.setenv("VITLIB_CHECK_SEED", "11")
    assert not torch.equal(first, torch.randn(3, generator=checks.case_generator()))
    monkeypatch.setenv("VITLIB_CHECK_SEED", "eleven")
    with pytest.raises(ValueError, match="VITLIB_CHECK_SEED"):
        checks.case_seed()


def test_forbidden_functions_raise_only_inside_and_everywhere(monkeypatch, capsys):
    import torch.nn.functional as F

    from vitlib.attention import attend

    monkeypatch.setenv("VITLIB_STRICT_CHECKS", "0")
    q = torch.randn(1, 4, 8)
    before = (F.softmax, torch.softmax, torch.Tensor.softmax, attend)

    def calls_attend(q, k, v):
        return attend(q, k, v)[0]

    with checks.forbidden(
        calls_attend, "vitlib.attention.attend", "torch.Tensor.softmax"
    ):
        with pytest.raises(checks.WriteItYourself):
            calls_attend(q, q, q)
        with pytest.raises(checks.WriteItYourself):
            q.softmax(-1)
    assert (F.softmax, torch.softmax, torch.Tensor.softmax, attend) == before
    assert torch.allclose(q.softmax(-1).sum(-1), torch.ones(1, 4))

    def with_sdpa(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    assert not checks.check_masked_attention(with_sdpa)
    assert "write this one yourself" in capsys.readouterr().out

    # a check that wraps the student's function still reaches the student's own names
    def distance_with_the_library(weights, patch_size):
        side = int(weights.shape[0] ** 0.5)
        distances = patch_distances((side, side), patch_size)
        return (weights.double() * distances).sum(-1).mean()

    assert not checks.check_head_distance(distance_with_the_library)
    assert "without vitlib.rollout.patch_distances" in capsys.readouterr().out


def test_predictions_compare_shapes_and_numbers(monkeypatch, capsys):
    monkeypatch.setenv("VITLIB_STRICT_CHECKS", "0")
    assert checks.compare_prediction("p", lambda: [2, 3], torch.Size([2, 3]))
    assert not checks.compare_prediction("p", lambda: (577, 1), (577, 2))


def _alive(pid: int) -> bool:
    """True while process `pid` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_the_notebook_time_limit_kills_the_whole_group(tmp_path):
    """A notebook past its limit is stopped with everything it started (its kernel too)."""
    # a shell that starts a child (as nbgrader starts a kernel), says its pid, and waits
    command = ["sh", "-c", "sleep 60 & echo $!; wait"]
    log = tmp_path / "log.txt"
    start = time.monotonic()
    status = coursework._run_limited(command, None, 2, log)
    assert time.monotonic() - start < 30, "the grader waited for the notebook's child"
    assert status == "not graded: stopped at the notebook's time limit of 2 s"
    child = int(log.read_text().split()[0])
    for _ in range(
        50
    ):  # the kill is immediate; the kernel may take a moment to reap it
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child), "the child of the notebook's process outlived the limit"


# --- grading one chapter end to end ---

CHAPTER = ROOT / "notebooks" / "03_attention.ipynb"
WRONG = {  # answer cell: a wrong answer
    "ex3_3-answer": "def split_heads(x, heads):\n    b, n, width = x.shape\n"
    "    return x.reshape(b, heads, n, width // heads)",
    "ex3_1-answer": "def masked_attention(q, k, v, mask):\n"
    "    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
    "ex3_5-answer": "def attention_parameters(dim):\n"
    "    return {192: 148224, 384: 591360, 768: 2362368, 1024: 4198400}[dim]",
    "ex3_2-answer": "import time\ntime.sleep(10_000)",
    "ex3_4-answer": "import os\nos._exit(1)",
}


def submission(answers: dict, changes: dict = None) -> nbformat.NotebookNode:
    """The student edition with the answer cells in `answers`, then `changes`, filled in."""
    notebook = student_edition.student_notebook(CHAPTER)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in (changes or {}):
            cell.source = changes[grade_id]
        elif grade_id in answers:
            cell.source = answers[grade_id]
    return notebook


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    book = nbformat.read(CHAPTER, as_version=4)
    right = {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in book.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    students = {
        "ada": submission(right),  # every answer right
        "ben": submission({}),  # the student edition, untouched
        "cy": submission(right, {"ex3_3-answer": WRONG["ex3_3-answer"]}),  # one wrong
        "dee": submission(
            right, {"ex3_1-answer": WRONG["ex3_1-answer"]}
        ),  # the library
        "eve": submission(
            right, {"ex3_5-answer": WRONG["ex3_5-answer"]}
        ),  # public answers
        "fay": submission(
            right, {"ex3_2-answer": WRONG["ex3_2-answer"]}
        ),  # a cell hangs
        "gus": submission(
            right, {"ex3_4-answer": WRONG["ex3_4-answer"]}
        ),  # the kernel dies
    }
    folder = tmp_path_factory.mktemp("submissions")
    for name, notebook in students.items():
        (folder / name).mkdir()
        nbformat.write(notebook, folder / name / CHAPTER.name)
    out = tmp_path_factory.mktemp("grades")
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "coursework.py"),
            "grade",
            str(folder),
            "--out",
            str(out),
            "--seed",
            "12345",
            "--cell-timeout",
            "20",
            "--timeout",
            "240",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    return out, {(r["student"], r["exercise"]): r for r in rows}, result.stdout


FULL = {"3.1": 2, "3.2": 2, "3.3": 2, "3.4": 1, "3.5": 1}


def scores(rows, student):
    return {
        e: float(r["score"])
        for (s, e), r in rows.items()
        if s == student and r["score"]
    }


def test_grading_scores_each_exercise(graded):
    out, rows, log = graded
    assert scores(rows, "ada") == FULL
    assert rows["ada", "3.6"]["status"] == "needs manual grading"
    assert rows["ada", "3.6"]["max_score"] == "2"
    assert set(scores(rows, "ben").values()) == {0}
    assert "nothing yet" in (out / "feedback" / "ben" / "03_attention.html").read_text()
    for student, lost in [
        ("cy", "3.3"),
        ("dee", "3.1"),
        ("eve", "3.5"),
        ("fay", "3.2"),
    ]:
        assert scores(rows, student) == {**FULL, lost: 0}, student


def test_a_dead_kernel_scores_zero_with_a_note_and_the_others_are_graded(graded):
    out, rows, log = graded
    gus = [r for (s, _), r in rows.items() if s == "gus"]
    assert len(gus) == 6
    assert all(r["score"] in ("", "0") for r in gus)
    assert all("kernel died" in r["status"] for r in gus), gus[0]["status"]
    assert (out / "logs" / "gus" / "03_attention.txt").exists()
    assert (out / "feedback" / "gus" / "03_attention.html").exists()
    assert scores(rows, "ada") == FULL  # graded before and after
    assert (out / "seed.txt").read_text().strip() == "12345"
