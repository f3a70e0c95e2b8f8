"""Coursework from the book's own notebooks, with nbgrader.

    python scripts/coursework.py annotate [NOTEBOOK ...]     nbgrader metadata into the notebooks
    python scripts/coursework.py assignments [--out DIR]     nbgrader's release notebooks
    python scripts/coursework.py grade SUBMISSIONS [--seed N] [--out DIR] [--unsafe] [limits]
    python scripts/coursework.py gradebook [--grades DIR] [--hand FILE]
    python scripts/coursework.py guide [--out book/coursework_table.md]

**annotate** reads each exercise's prompt, `**Exercise 3.1 (kind, 2 points).**`, and marks the
cells under it for nbgrader: a code cell with `### BEGIN SOLUTION` is the student's answer; a
cell that calls `checks.check_...` or `checks.compare_prediction` is a locked grade cell worth
the exercise's points; a markdown cell that opens with a "Model answer" admonition is a written
answer, graded by hand. A prompt without points is worth one point.

**grade** grades every `SUBMISSIONS/<student>/<notebook>.ipynb` (see scripts/grading/): each
submission runs in a sandbox (bubblewrap: no network, a read-only view of the book, limits on
memory, processes, CPU, files and output), and every verdict is computed outside it, by the
book's own checks on inputs drawn from a seed the students have not seen. It writes
`grades.csv` (student, notebook, exercise, score, max_score, status, feedback), one feedback
page per submission and the workers' logs, into a new folder that replaces OUT at the end.
Without bubblewrap it refuses to run, unless given --unsafe. Then it runs **gradebook**.

**gradebook** merges the instructor's scores of the written answers (`--hand`, by default
`hand_grades.csv` beside the submissions folder; new answers are added as rows to fill in)
into `grades.csv`, and writes `gradebook.csv`, one row per student (see
scripts/grading/gradebook.py).
"""

import argparse
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
from run_times import machine, minutes, records  # noqa: E402
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


WORDS_PER_MINUTE = 150  # prose, read to learn from
CODE_LINES_PER_MINUTE = 10  # code read line by line until each line is understood
COLAB_CELL = "# Runs only in Google Colab"  # the install cell: not read


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
    (estimated from its words and its lines of code) and the run time of its stored run
    (notebook metadata)."""
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
        words = sum(  # a diagram's alt text is for screen readers: not counted
            len(re.sub(r"!\[[^\]]*\]", "", c.source).split())
            for c in book.cells
            if c.cell_type == "markdown"
        )
        code = sum(  # the lines of code a reader reads (not blank, not a directive,
            1  # not folded: machinery a page hides behind a toggle is read on demand)
            for c in book.cells
            if c.cell_type == "code"
            and not c.source.startswith(COLAB_CELL)
            and "hide-input" not in c.metadata.get("tags", [])
            for line in c.source.splitlines()
            if line.strip() and not line.startswith("#|")
        )
        reading = words / WORDS_PER_MINUTE + code / CODE_LINES_PER_MINUTE
        meta = book.metadata.get("vitlib", {})
        run_text = "not recorded"
        if meta.get("run"):  # the latest run first, then the other kind's, marked older
            runs = records(meta)
            latest = machine(meta["run"]["on"])
            run_text = "; ".join(
                f"{minutes(r['seconds'])} on {kind}" + ("" if kind == latest else " †")
                for kind, r in sorted(runs.items(), key=lambda item: item[0] != latest)
            )
        title = book.cells[0].source.splitlines()[0].lstrip("# ")
        lines.append(
            f"| {title} | {len(kinds)}: {counts} | {auto} + {manual} | "
            f"{max(1, round(reading))} min | {run_text} |"
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


def grade(args, seed: int):
    """`grade`: refuse to run without a sandbox unless --unsafe, then grade (grading/grade.py)."""
    sys.path.insert(0, str(Path(__file__).parent / "grading"))
    from grade import run
    from sandbox import Limits, sandbox_problem

    problem = sandbox_problem()
    if problem and not args.unsafe:
        raise SystemExit(
            f"grade: no sandbox, so not grading: {problem}.\n"
            "A submission is code: without a sandbox it runs as you, can read the other "
            "submissions and the grades, write anywhere you can, use the network and exhaust "
            "this machine. Install bubblewrap, or pass --unsafe (make grade UNSAFE=1) for "
            "submissions you trust."
        )
    if args.unsafe:
        print(
            "grade: --unsafe: the submissions run without a sandbox, as you, with your files "
            "and network; verdicts are still computed outside them",
            file=sys.stderr,
        )
    limits = Limits(
        memory=int(args.memory_gib * 2**30),
        processes=args.processes,
        output=int(args.output_mb * 2**20),
        cell_seconds=args.cell_timeout,
    )
    print(f"the checks' seed: {seed}")
    run(args.submissions, args.out, seed, limits, args.timeout, args.unsafe)
    args.grades = args.out
    gradebook(args)


def gradebook(args):
    """`gradebook`: the hand grades merged into grades.csv, and gradebook.csv written."""
    sys.path.insert(0, str(Path(__file__).parent / "grading"))
    from gradebook import merge

    hand = args.hand or default_hand(args)
    found = merge(args.grades, hand)
    for problem in found["problems"]:
        print(problem, file=sys.stderr)
    print(
        f"{args.grades / 'gradebook.csv'}: {found['students']} student(s); hand grades in "
        f"{hand}: {found['typed']} typed, {found['waiting']} written answer(s) to grade"
    )


def default_hand(args) -> Path:
    """hand_grades.csv beside the submissions folder (outside _build, which each run
    replaces); for `gradebook` alone, the one `grade` would have used."""
    submissions = getattr(args, "submissions", None) or Path("submissions")
    return Path(submissions).resolve().parent / "hand_grades.csv"


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
    p.add_argument(
        "--cell-timeout", type=int, default=120, help="seconds per cell or call"
    )
    p.add_argument("--memory-gib", type=float, default=4, help="memory per submission")
    p.add_argument(
        "--processes", type=int, default=256, help="processes per submission"
    )
    p.add_argument(
        "--output-mb", type=float, default=10, help="output kept per notebook"
    )
    p.add_argument(
        "--unsafe",
        action="store_true",
        help="grade without a sandbox (only for submissions you trust)",
    )
    p.add_argument(
        "--hand",
        type=Path,
        default=None,
        help="your scores of the written answers (default: hand_grades.csv beside "
        "SUBMISSIONS); rows for new answers are added, scores blank",
    )
    p = sub.add_parser(
        "gradebook", help="merge the hand grades into grades.csv and gradebook.csv"
    )
    p.add_argument("--grades", type=Path, default=ROOT / "_build" / "grades")
    p.add_argument("--hand", type=Path, default=None)
    p.add_argument("--submissions", type=Path, default=None, help=argparse.SUPPRESS)
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
    elif args.command == "gradebook":
        gradebook(args)
    else:
        seed = args.seed if args.seed is not None else 1 + secrets.randbelow(2**31 - 1)
        if seed == 0:
            raise SystemExit("--seed 0 is the students' own seed: grade with another")
        grade(args, seed)


if __name__ == "__main__":
    main()
