"""Coursework from the book's own notebooks, with nbgrader.

    python scripts/coursework.py annotate [NOTEBOOK ...]     nbgrader metadata into the notebooks
    python scripts/coursework.py assignments [--out DIR]     nbgrader's release notebooks
    python scripts/coursework.py grade SUBMISSIONS [--seed N] [--timeout S] [--out DIR]
    python scripts/coursework.py guide [--out book/coursework_table.md]

**annotate** reads each exercise's prompt, `**Exercise 3.1 (kind, 2 points).**`, and marks the
cells under it for nbgrader: a code cell with `### BEGIN SOLUTION` is the student's answer; a
cell that calls `checks.check_...` or `checks.compare_prediction` is a locked grade cell worth
the exercise's points; a markdown cell that opens with a "Model answer" admonition is a written
answer, graded by hand. A prompt without points is worth one point.

**grade** grades every `SUBMISSIONS/<student>/<notebook>.ipynb` with `nbgrader autograde`, one
student at a time in a fresh kernel, with a time limit per notebook and per cell, and goes on
after any failure. The checks run strict (a wrong answer raises, so its grade cell scores zero)
on inputs drawn from a seed the students have not seen. It writes `grades.csv` (student,
notebook, exercise, score, max_score, status), one feedback HTML per submission, and
nbgrader's log of each submission under logs/.
"""

import argparse
import csv
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

sys.path.insert(
    0, str(Path(__file__).parent)
)  # scripts/, when loaded by path (the tests)
from student_edition import CHECK, MODEL_ANSWER, PROMPT, chapters  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
POINTS = re.compile(r"(\d+) points?")
SCHEMA = 3


def exercises(notebook) -> list:
    """[(exercise, points, kind, [cell ids of its grade cells], manual)] of a notebook whose
    cells carry nbgrader metadata, in page order."""
    found = {}
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            name = meta["grade_id"].split("-")[0]
            entry = found.setdefault(name, [name, 0, [], False])
            entry[1] += meta["points"]
            entry[2].append(meta["grade_id"])
            entry[3] = entry[3] or cell.cell_type == "markdown"
    return [tuple(entry) for entry in found.values()]


def annotate(notebook) -> nbformat.NotebookNode:
    """The notebook with nbgrader metadata on its exercise cells and none elsewhere."""
    current, points, seen = None, 1, {}
    for cell in notebook.cells:
        cell.metadata.pop("nbgrader", None)
        source = cell.source
        if cell.cell_type == "markdown":
            prompts = PROMPT.findall(source)
            if prompts:
                chapter, number, details = prompts[-1]
                current = f"ex{chapter}_{number}"
                found = POINTS.search(details)
                points = int(found[1]) if found else 1
            if source.lstrip().startswith(MODEL_ANSWER):
                _mark(cell, _grade_id(current, seen), solution=True, points=points)
            continue
        if current is None:
            continue
        if "### BEGIN SOLUTION" in source:
            _mark(
                cell,
                f"{current}-answer{_suffix(current, seen, 'answer')}",
                solution=True,
            )
            # the site folds it under "Show the solution" (nb_code_prompt_show in _config.yml)
            tags = cell.metadata.setdefault("tags", [])
            if "hide-input" not in tags:
                tags.append("hide-input")
        elif CHECK.search(source):
            _mark(cell, _grade_id(current, seen), points=points, locked=True)
    return notebook


def _suffix(exercise, seen, kind) -> str:
    seen[exercise, kind] = seen.get((exercise, kind), 0) + 1
    return "" if seen[exercise, kind] == 1 else f"{seen[exercise, kind]}"


def _grade_id(exercise, seen) -> str:
    if exercise is None:
        raise ValueError("a graded cell before any **Exercise N.M** prompt")
    suffix = _suffix(exercise, seen, "grade")
    return exercise if not suffix else f"{exercise}-part{suffix}"


def _mark(cell, grade_id, solution=False, points=None, locked=False):
    meta = {
        "grade": points is not None,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": SCHEMA,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    cell.metadata["nbgrader"] = meta


def write_if_changed(path: Path, notebook) -> bool:
    text = nbformat.writes(notebook)
    text = text if text.endswith("\n") else text + "\n"
    if path.read_text() == text:
        return False
    path.write_text(text)
    return True


WORDS_PER_MINUTE = 150  # reading with code to look at: slower than prose


def _kinds(notebook) -> list:
    """The kind of each exercise, from its prompt: `(find the bug, 2 points)` -> find the bug."""
    kinds = []
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for _, _, details in PROMPT.findall(cell.source):
                parts = [p.strip() for p in details.split(",") if not POINTS.search(p)]
                kinds.append(", ".join(parts) if details and parts else "check")
    return kinds


def guide_table(notebooks: list) -> str:
    """The instructors' table: per page, its exercises by kind and points, the reading time
    (estimated from its words) and the run time of its stored run (notebook metadata)."""
    lines = [
        "| page | exercises | points (auto + by hand) | reading (estimate) | stored run |",
        "|---|---|---|---|---|",
    ]
    for path in notebooks:
        book = nbformat.read(path, as_version=4)
        kinds = _kinds(book)
        counts = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds))
        graded = exercises(book)
        auto = sum(p for _, p, _, manual in graded if not manual)
        manual = sum(p for _, p, _, manual in graded if manual)
        words = sum(
            len(c.source.split()) for c in book.cells if c.cell_type == "markdown"
        )
        run = book.metadata.get("vitlib", {}).get("run")
        if run:
            seconds = run["seconds"]
            took = f"{seconds} s" if seconds < 120 else f"{seconds / 60:.0f} min"
            run_text = f"{took} on {run['on']}"
        else:
            run_text = "not recorded"
        title = book.cells[0].source.splitlines()[0].lstrip("# ")
        lines.append(
            f"| {title} | {len(kinds)}: {counts} | {auto} + {manual} | "
            f"{max(1, round(words / WORDS_PER_MINUTE))} min | {run_text} |"
        )
    return "\n".join(lines) + "\n"


# --- nbgrader: a course folder in a temporary place, one assignment per notebook ---


def _environment(**changes) -> dict:
    """os.environ with this Python's bin folder first on PATH: nbgrader runs `alembic`."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return dict(os.environ, PATH=path, **changes)


def _nbgrader(root: Path, *args, env=None, timeout=None):
    command = [
        sys.executable,
        "-m",
        "nbgrader",
        *args,
        f"--CourseDirectory.root={root}",
    ]
    return subprocess.run(
        command,
        env=env or _environment(),
        timeout=timeout,
        capture_output=True,
        text=True,
    )


def _course(root: Path, notebooks: list, cell_timeout: int):
    """A course folder with one assignment per notebook, released."""
    (root / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        "c.CourseDirectory.course_id = 'vit-book'\n"
        f"c.Execute.timeout = {cell_timeout}\n"  # a cell that hangs is interrupted
        "c.Execute.interrupt_on_timeout = True\n"
        "c.Execute.execute_retries = 0\n"
    )
    for path in notebooks:
        source = root / "source" / path.stem
        source.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, source / path.name)
        result = _nbgrader(
            root, "generate_assignment", path.stem, "--force", "--create"
        )
        if result.returncode:
            raise SystemExit(
                f"nbgrader generate_assignment {path.stem} failed:\n{result.stderr}"
            )


def assignments(out: Path, notebooks: list):
    with tempfile.TemporaryDirectory() as tmp:
        _course(Path(tmp), notebooks, cell_timeout=600)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(Path(tmp) / "release", out)
    for path in sorted(out.rglob("*.ipynb")):
        print(path)


def _run_limited(command, env, timeout, log: Path) -> str:
    """Run `command` in its own process group; kill the group (kernel included) after
    `timeout` seconds. Its output goes to `log`; the status: "graded", or why not."""
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        output, _ = process.communicate()
        log.write_text(output or "")
        return f"not graded: stopped at the notebook's time limit of {timeout} s"
    log.write_text(output)
    if process.returncode:
        if "DeadKernelError" in output or "Kernel died" in output:
            return "not graded: the kernel died while the notebook ran"
        return "not graded: nbgrader failed (see its log)"
    return "graded"


def grade(
    submissions: Path, out: Path, seed: int, notebook_timeout: int, cell_timeout: int
):
    """Grade SUBMISSIONS/<student>/<notebook>.ipynb; write out/grades.csv and out/feedback/."""
    students = sorted(p for p in submissions.iterdir() if p.is_dir())
    names = sorted({p.name for s in students for p in s.glob("*.ipynb")})
    unknown = [n for n in names if not (ROOT / "notebooks" / n).exists()]
    if unknown:
        raise SystemExit(f"not a chapter of the book: {', '.join(unknown)}")
    sources = {n: ROOT / "notebooks" / n for n in names}
    env = _environment(
        VITLIB_STRICT_CHECKS="1",  # a wrong answer raises: its grade cell scores zero
        VITLIB_CHECK_SEED=str(seed),  # inputs the students have not seen
        VITLIB_SMOKE="1",  # small data and few epochs: the training pages run in minutes
    )
    shutil.rmtree(out, ignore_errors=True)
    (out / "feedback").mkdir(parents=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _course(root, list(sources.values()), cell_timeout)
        for student in students:
            for path in sorted(student.glob("*.ipynb")):
                assignment = path.stem
                folder = root / "submitted" / student.name / assignment
                folder.mkdir(parents=True)
                shutil.copy(path, folder / path.name)
                command = [
                    sys.executable,
                    "-m",
                    "nbgrader",
                    "autograde",
                    assignment,
                    f"--student={student.name}",
                    "--force",
                    f"--CourseDirectory.root={root}",
                ]
                logs = out / "logs" / student.name
                logs.mkdir(parents=True, exist_ok=True)
                log = logs / f"{assignment}.txt"
                status = _run_limited(command, env, notebook_timeout, log)
                if status == "graded":
                    _nbgrader(
                        root,
                        "generate_feedback",
                        assignment,
                        f"--student={student.name}",
                        "--force",
                    )
                rows += _rows(root, student.name, path, sources[path.name], status)
                _copy_feedback(root, out, student.name, path, status)
                print(f"{student.name}/{path.name}: {status}")
    with open(out / "grades.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["student", "notebook", "exercise", "score", "max_score", "status"]
        )
        writer.writerows(rows)
    print(out / "grades.csv")


def _rows(root, student, path, source, status) -> list:
    """One row per exercise: the sum of its grade cells' scores."""
    from nbgrader.api import (
        Gradebook,
        MissingEntry,
    )  # grading only: nbgrader is not vitlib's

    book = nbformat.read(source, as_version=4)
    scores = {}
    if status == "graded":
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
            try:
                notebook = gradebook.find_submission_notebook(
                    path.stem, path.stem, student
                )
                for g in notebook.grades:
                    scores[g.name] = (g.score, g.needs_manual_grade)
            except MissingEntry:
                status = "nbgrader kept no grades"
    rows = []
    for name, points, grade_ids, manual in exercises(book):
        got = [scores.get(i) for i in grade_ids]
        if manual:
            row_status = "needs manual grading" if status == "graded" else status
            score = ""
        elif all(g is not None for g in got):
            row_status, score = "graded", sum(g[0] for g in got)
        else:
            row_status, score = (status if status != "graded" else "not run"), 0
        exercise = name.removeprefix("ex").replace("_", ".")
        rows.append([student, path.name, exercise, score, points, row_status])
    return rows


def _copy_feedback(root, out, student, path, status):
    folder = out / "feedback" / student
    folder.mkdir(parents=True, exist_ok=True)
    html = root / "feedback" / student / path.stem / f"{path.stem}.html"
    target = folder / f"{path.stem}.html"
    if html.exists():
        shutil.copy(html, target)
    else:
        target.write_text(
            f"<html><body><h1>{path.name}</h1><p>{status.capitalize()}. Every exercise of "
            "this notebook scores zero; the grading log says more.</p></body></html>\n"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("annotate", help="nbgrader metadata into the notebooks")
    p.add_argument("notebooks", nargs="*", type=Path)
    p = sub.add_parser("assignments", help="nbgrader's release notebooks")
    p.add_argument("--out", type=Path, default=ROOT / "_build" / "assignments")
    p.add_argument("notebooks", nargs="*", type=Path)
    p = sub.add_parser("grade", help="grade SUBMISSIONS/<student>/<notebook>.ipynb")
    p.add_argument("submissions", type=Path)
    p.add_argument("--out", type=Path, default=ROOT / "_build" / "grades")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="the checks' seed (default: a random one, printed and saved)",
    )
    p.add_argument("--timeout", type=int, default=900, help="seconds per notebook")
    p.add_argument("--cell-timeout", type=int, default=300, help="seconds per cell")
    p = sub.add_parser("guide", help="the instructors' table of pages")
    p.add_argument("--out", type=Path, default=ROOT / "book" / "coursework_table.md")
    args = parser.parse_args()
    if args.command == "guide":
        args.out.write_text(
            "<!-- written by `python scripts/coursework.py guide` (make student); do not edit -->\n\n"
            + guide_table(chapters())
        )
        print(args.out)
    elif args.command == "annotate":
        for path in args.notebooks or chapters():
            notebook = annotate(nbformat.read(path, as_version=4))
            if write_if_changed(path, notebook):
                print(f"annotated {path}")
    elif args.command == "assignments":
        assignments(args.out, args.notebooks or chapters())
    else:
        seed = args.seed if args.seed is not None else 1 + secrets.randbelow(2**31 - 1)
        if seed == 0:
            raise SystemExit("--seed 0 is the students' own seed: grade with another")
        print(f"the checks' seed: {seed}")
        grade(args.submissions, args.out, seed, args.timeout, args.cell_timeout)
        (args.out / "seed.txt").write_text(f"{seed}\n")


if __name__ == "__main__":
    main()
