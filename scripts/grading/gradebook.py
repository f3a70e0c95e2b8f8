"""Hand grades and the gradebook: the instructor's half of grading, merged with the automatic one.

    python scripts/coursework.py gradebook [--grades _build/grades] [--hand hand_grades.csv]

`make grade` grades what a program can; the written answers ("explain", "open") need a person.
Their scores live in one CSV of the instructor's, `hand_grades.csv` (by default beside the
submissions folder, outside `_build`, which every run replaces):

    student,notebook,exercise,max_score,score,comment
    ada,03_attention.ipynb,3.6,2,,          <- added by make grade: type the score

Every run adds a row, score blank, for each written answer it has not listed yet, and never
changes a row that is there. Then, in the grades folder:

- `grades.csv`: each written answer's row takes its hand score ("graded by hand", the comment
  as feedback), or stays "needs manual grading" while the score is blank;
- `gradebook.csv`: one row per student, as a learning platform imports it: the student, the
  points of each chapter, the total and the points possible (automatic and hand-graded).

Why a CSV and not nbgrader's formgrader: it needs no JupyterHub (a course in Colab has none),
opens in any spreadsheet, survives every new run of `make grade`, and sits in one place for
the whole class. A score that is not a number from 0 to the exercise's points is reported and
left out, never guessed.
"""

import csv
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from grade import CHAPTER_NAME, _SafeWriter  # noqa: E402

HAND_COLUMNS = ["student", "notebook", "exercise", "max_score", "score", "comment"]
BY_HAND = ("needs manual grading", "graded by hand")


def read_rows(path: Path) -> list:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _write(path: Path, columns: list, rows: list) -> None:
    """The CSV of `rows` (dicts), whole or not at all (a .partial file renamed into place);
    no cell can start a spreadsheet formula (grade.py's _SafeWriter)."""
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", newline="") as f:
        writer = _SafeWriter(f)
        writer.writerow(columns)
        writer.writerows([[row.get(c, "") for c in columns] for row in rows])
    os.replace(partial, path)


def hand_scores(hand: Path, grades: list) -> tuple:
    """({(student, notebook, exercise): (score, comment)} of the typed scores; problems, one
    line each). The hand file gains a blank row for each written answer it lacks."""
    rows = read_rows(hand) if hand.is_file() else []
    key = lambda r: (r["student"], r["notebook"], r["exercise"])  # noqa: E731
    listed = {key(r) for r in rows}
    written = [g for g in grades if g["status"] in BY_HAND]
    new = [
        {**{c: g[c] for c in HAND_COLUMNS[:4]}, "score": "", "comment": ""}
        for g in written
        if key(g) not in listed
    ]
    if new or not hand.is_file():
        _write(hand, HAND_COLUMNS, rows + new)
    most = {key(g): float(g["max_score"]) for g in written}
    scores, problems = {}, []
    for r in rows:
        text = (r.get("score") or "").strip()
        if not text:
            continue
        if key(r) not in most:
            problems.append(
                f"{hand}: {'/'.join(key(r))} is no written answer graded here"
            )
            continue
        try:
            score = float(text)
        except ValueError:
            score = -1.0
        if not 0 <= score <= most[key(r)]:
            problems.append(
                f"{hand}: {'/'.join(key(r))} has score {text!r}: a number from 0 to "
                f"{most[key(r)]:g}, the exercise's points"
            )
            continue
        scores[key(r)] = (score, (r.get("comment") or "").strip())
    return scores, problems


def merge(folder: Path, hand: Path) -> dict:
    """Hand scores into folder/grades.csv, and folder/gradebook.csv from it. Returns counts:
    {"typed", "waiting", "students", "problems": [...]}."""
    path = folder / "grades.csv"
    grades = read_rows(path)
    columns = list(grades[0]) if grades else []
    scores, problems = hand_scores(hand, grades)
    waiting = 0
    for g in grades:
        if g["status"] not in BY_HAND:
            continue
        found = scores.get((g["student"], g["notebook"], g["exercise"]))
        if found is None:
            g.update(score="", status="needs manual grading", feedback="")
            waiting += 1
        else:
            g.update(score=f"{found[0]:g}", status="graded by hand", feedback=found[1])
    if grades:
        _write(path, columns, grades)
    students = gradebook(grades, folder / "gradebook.csv")
    return dict(
        typed=len(scores), waiting=waiting, students=students, problems=problems
    )


def gradebook(grades: list, path: Path) -> int:
    """One row per student: student, the points of each chapter (blank where none was handed
    in), the total, and the points possible for the chapters graded. Returns the students."""
    exercises = [g for g in grades if g["exercise"]]
    chapters = sorted({_chapter(g["notebook"]) for g in exercises})
    possible = {}
    for g in exercises:  # each exercise once, whoever answered it
        possible[_chapter(g["notebook"]), g["exercise"]] = float(g["max_score"] or 0)
    students = sorted({g["student"] for g in grades})
    rows = []
    for student in students:
        points = {}  # chapter -> points; a chapter not handed in stays blank
        for g in exercises:
            if g["student"] == student:
                chapter = _chapter(g["notebook"])
                points[chapter] = points.get(chapter, 0) + float(g["score"] or 0)
        row = {"student": student, **{c: f"{p:g}" for c, p in points.items()}}
        row |= {"total": f"{sum(points.values()):g}"}
        rows.append(row | {"possible": f"{sum(possible.values()):g}"})
    _write(path, ["student", *chapters, "total", "possible"], rows)
    return len(students)


def _chapter(notebook: str) -> str:
    """The chapter a graded file is (a renamed download counts as its chapter)."""
    match = CHAPTER_NAME.match(Path(notebook).stem.strip())
    return match["stem"].strip() if match else Path(notebook).stem
