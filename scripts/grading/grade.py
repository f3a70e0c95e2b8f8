"""Grade submissions: every verdict computed here, in the grader's process, with the book's own
checks; the student's code only ever runs in a sandboxed worker (see sandbox.py).

For each notebook, a reference run of the book's own notebook (solutions in) records what the
"predict, then run" cells compute. For each submission, a worker runs the book's cells with the
student's answer cells in their places; at each grade cell the grader calls the chapter's check
here, with handles (`Remote`) that call the student's functions in the worker on inputs drawn
from a seed only the grader knows. A crash, a hang or a limit costs the cell it happened in: a
new worker replays the cells before it, without that one, and grading goes on.
"""

import ast
import contextlib
import csv
import html
import io
import os
import re
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(
    0, str(ROOT)
)  # this book's vitlib: its checks judge, whatever is installed
sys.path.insert(0, str(Path(__file__).parent))
import source as source_rules  # noqa: E402
from sandbox import Limits, Session, WorkerGone  # noqa: E402

RESTARTS = 4  # new workers per submission after a crash, a hang or a limit
FEEDBACK_LIMIT = 200_000  # characters of one feedback page
SUBMISSION_LIMIT = 64 * 2**20  # bytes of one submitted notebook
COLUMNS = [
    "student",
    "notebook",
    "exercise",
    "score",
    "max_score",
    "status",
    "feedback",
]


@dataclass
class Cell:
    index: int
    kind: str  # code (the book's), answer, grade, written
    source: str
    grade_id: str = ""
    points: int = 0

    @property
    def exercise(self) -> str:
        return self.grade_id.split("-")[0]


def plan(path: Path) -> list:
    """The book's notebook as cells to run, in page order."""
    book = nbformat.read(path, as_version=4)
    cells = []
    for index, cell in enumerate(book.cells):
        meta = cell.metadata.get("nbgrader", {})
        gid, points = meta.get("grade_id", ""), meta.get("points", 0)
        if cell.cell_type == "markdown":
            if meta.get("solution"):
                cells.append(Cell(index, "written", cell.source, gid, points))
            continue
        if cell.cell_type != "code":
            continue
        # a Colab install line becomes `pass`: no network here, and the library is installed
        text = re.sub(r"^(\s*)(%pip|!pip)\b.*$", r"\1pass", cell.source, flags=re.M)
        if meta.get("solution"):
            cells.append(Cell(index, "answer", text, gid))
        elif meta.get("grade"):
            cells.append(Cell(index, "grade", text, gid, points))
        else:
            cells.append(Cell(index, "code", text))
    return cells


def check_call(cell: Cell):
    """(the check's name, its arguments as written) of a grade cell: the last call of
    `checks.check_...(...)` or `checks.compare_prediction(...)`."""
    found = None
    for node in ast.walk(ast.parse(cell.source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "checks"
        ):
            found = node
    if found is None:
        raise ValueError(f"grade cell {cell.grade_id} calls no check")
    return found.func.attr, found.args


# --- a student's function, as the grader sees it ---


class Remote:
    """A student function that lives in the worker. Calling it sends the inputs there and
    brings the output back as plain data; `forbidding` and `through` are what vitlib.checks
    uses to make library functions raise, and to run its helpers, where the function runs."""

    def __init__(self, session: Session, name: str):
        self.session, self.name = session, name
        self.forbid: tuple = ()
        self.ever_forbidden: set = set()

    def __call__(self, *args):
        return self._answer(self.session.call(self.name, args, self.forbid))

    def through(self, helper: str, *args):
        return self._answer(self.session.call(self.name, args, self.forbid, helper))

    @staticmethod
    def _answer(value):
        if isinstance(value, BaseException):
            raise value
        return value

    @contextlib.contextmanager
    def forbidding(self, names):
        before, self.forbid = self.forbid, tuple(self.forbid) + tuple(names)
        self.ever_forbidden |= set(names)
        try:
            yield
        finally:
            self.forbid = before

    def __repr__(self):
        return f"the function {self.name}"


# --- one submission ---


@dataclass
class Result:
    score: float = 0
    status: str = "not run"
    text: str = ""
    mistake: str = ""


@dataclass
class Graded:
    results: dict = field(default_factory=dict)  # grade_id -> Result
    notes: list = field(default_factory=list)  # where the notebook stopped, and why
    written: dict = field(
        default_factory=dict
    )  # grade_id -> the student's written answer


def answers_of(submission, cells: list) -> tuple:
    """(grade_id -> the student's source, for each answer cell of the book; notes for the
    feedback). Cells are found by their nbgrader id; a notebook that lost its metadata (some
    editors drop it) by the name its answer defines. An exercise answered in two cells (a
    copied cell) is graded on the later one, the one a run from top to bottom leaves in
    force. Package installs are taken out (source_rules.without_habits)."""
    by_id, copies, notes = {}, {}, []
    for cell in submission.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid and cell.get("cell_type") == "code":
            by_id[gid] = cell.get("source", "")
            copies[gid] = copies.get(gid, 0) + 1
    for cell in cells:
        if cell.kind == "answer" and copies.get(cell.grade_id, 0) > 1:
            number = cell.exercise.removeprefix("ex").replace("_", ".")
            notes.append(
                f"Exercise {number} is answered in {copies[cell.grade_id]} cells: the last "
                "of them is graded, as a run of the notebook from top to bottom leaves it"
            )
    answers = {}
    for cell in cells:
        if cell.kind not in ("answer", "written"):
            continue
        if cell.grade_id in by_id:
            answers[cell.grade_id] = by_id[cell.grade_id]
            continue
        names = source_rules.defined(cell.source)
        for other in submission.cells:
            if other.get("cell_type") == "code" and names & source_rules.defined(
                other.get("source", "")
            ):
                answers[cell.grade_id] = other["source"]  # the last such cell wins
    for gid, source in answers.items():
        answers[gid], skipped = source_rules.without_habits(source)
        notes += skipped
    return answers, notes


def grade_submission(
    cells, answers, reference, limits, log, unsafe, hidden, seconds
) -> Graded:
    """Run one submission in a worker; check each grade cell here as the worker reaches it."""
    import vitlib.checks as checks

    graded = Graded()
    tampered = []  # lines of answers run so far that change the book's modules or the shell
    runnable = [c for c in cells if c.kind in ("code", "answer", "grade")]
    for c in cells:
        if c.kind == "written":
            graded.written[c.grade_id] = answers.get(c.grade_id, "")
    deadline = time.monotonic() + seconds
    session, skipped, restarts, position = None, set(), 0, 0
    stopped = {}  # exercise -> why its answer cell was stopped

    def text_of(c):
        return answers.get(c.grade_id, "") if c.kind == "answer" else c.source

    def what(c):
        if c.kind == "answer":
            return f"the answer cell of Exercise {c.exercise.removeprefix('ex').replace('_', '.')}"
        return f"the book's cell {c.index + 1}" + (
            " (a grade cell)" if c.kind == "grade" else ""
        )

    def replayed(position):
        """A new worker that has run again the cells before `position`, all but the skipped.
        Each ran within its limit once; run again, it gets twice that limit, and a replay that
        fails all the same is tried once more in another worker: a busy machine must not cost
        the cell at `position` its points. None, with a note, when both tries fail."""
        why = ""
        for _ in range(2):
            worker = Session(
                limits, log, unsafe=unsafe, hidden=hidden, deadline=deadline
            )
            try:
                for before in runnable[:position]:
                    if before.index in skipped:
                        continue
                    answer = worker.run(
                        text_of(before),
                        grade=before.kind == "grade",
                        seconds=2 * limits.cell_seconds,
                    )
                    if answer.get("timed_out"):
                        raise WorkerGone(
                            f"{what(before)} ran past {2 * limits.cell_seconds} s when run again"
                        )
                return worker
            except WorkerGone as gone:
                worker.close()
                if gone.final:
                    raise
                why = gone.reason
        graded.notes.append(
            f"stopped before {what(runnable[position])}: twice, a new worker could not run "
            f"again the cells before it ({why})"
        )
        return None

    try:
        while position < len(runnable):
            if time.monotonic() > deadline:
                graded.notes.append(
                    f"stopped at {what(runnable[position])}: the notebook's time limit of {seconds} s"
                )
                break
            cell = runnable[position]
            try:
                if session is None:
                    session = replayed(position)
                    if session is None:
                        break
                kills = session.memory_kills()
                answer = session.run(text_of(cell), grade=cell.kind == "grade")
                if session.memory_kills() > kills:
                    reason = f"the memory limit of {limits.memory / 2**30:g} GiB: the kernel stopped a process of the submission"
                    graded.notes.append(f"{what(cell)} reached {reason}")
                    if cell.kind == "answer":
                        stopped[cell.exercise] = reason
                if answer.get("timed_out") or cell.exercise in stopped:
                    skipped.add(cell.index)  # a new worker does not run it again
                if answer.get("timed_out"):
                    graded.notes.append(
                        f"{what(cell)} was interrupted at the time limit of {limits.cell_seconds} s"
                    )
                if cell.kind == "answer":
                    where = what(cell)
                    tampered += [
                        f"{where}, {line}"
                        for line in source_rules.tampering(text_of(cell))
                        if f"{where}, {line}" not in tampered
                    ]
                if cell.kind == "grade":
                    try:
                        result = check(
                            cell,
                            session,
                            reference,
                            checks,
                            answers,
                            cells,
                            tampered,
                        )
                    except (
                        Exception
                    ) as error:  # an answer no check foresaw: zero, not a stop
                        why = f"{type(error).__name__}: {str(error)[:300]}"
                        result = Result(
                            0,
                            "check error",
                            f"✘ the check could not judge the answer ({why})",
                        )
                    if cell.exercise in stopped and result.status == "graded":
                        result.status = f"answer stopped: {stopped[cell.exercise]}"
                    graded.results[cell.grade_id] = result
            except WorkerGone as gone:
                skipped.add(cell.index)
                if cell.kind == "answer":
                    stopped[cell.exercise] = gone.reason
                graded.notes.append(f"stopped at {what(cell)}: {gone.reason}")
                if cell.kind == "grade":
                    graded.results[cell.grade_id] = Result(
                        0, f"stopped: {gone.reason}", ""
                    )
                if session is not None:
                    session.close()
                session = None
                restarts += 1
                if gone.final:
                    break
                if restarts > RESTARTS:
                    graded.notes.append(
                        f"no more workers after {RESTARTS} restarts: the rest is not run"
                    )
                    break
            position += 1
    finally:
        if session is not None:
            session.close()
    for c in cells:
        if c.kind == "grade" and c.grade_id not in graded.results:
            reason = graded.notes[-1] if graded.notes else "not run"
            graded.results[c.grade_id] = Result(0, f"not run: {reason}")
    return graded


def check(cell, session, reference, checks, answers, cells, tampering) -> Result:
    """The verdict of one grade cell, computed here."""
    name, args = check_call(cell)
    if tampering:
        lines = "; ".join(tampering)
        return Result(
            0,
            "tampering",
            f"✘ an answer changes the book's modules or the shell ({lines}): no exercise from there on is graded automatically",
        )
    remotes = []

    def remote(node):
        if isinstance(node, ast.Name):
            r = Remote(session, node.id)
            remotes.append(r)
            return r
        return ast.literal_eval(node)

    out = io.StringIO()
    checks.named_mistakes.clear()
    checks.case_counts.clear()
    with contextlib.redirect_stdout(out):
        if name == "compare_prediction":
            recorded = reference.get(cell.index) or []
            if not recorded:
                return Result(0, "not graded: the reference run recorded no prediction")
            ok = all(
                checks.compare_prediction(
                    r["title"], remote(args[1]), r["actual"], r["hint"]
                )
                for r in recorded
            )
        else:
            ok = bool(getattr(checks, name)(*[remote(a) for a in args]))
    text = out.getvalue()
    forbid = set().union(*(r.ever_forbidden for r in remotes)) if remotes else set()
    # the answer cells that ran before this grade cell: later ones cannot define what it uses
    earlier = [
        answers.get(c.grade_id, "")
        for c in cells
        if c.kind == "answer" and c.index < cell.index
    ]
    own = [
        answers.get(c.grade_id, "")
        for c in cells
        if c.kind == "answer" and c.exercise == cell.exercise
    ]
    # where the graded functions are defined, whichever answer cell that is
    graded_names = {a.id for a in args if isinstance(a, ast.Name)}
    own += [
        s for s in earlier if s not in own and source_rules.defined(s) & graded_names
    ]
    others = [s for s in earlier if s not in own]
    reached = source_rules.reached(own, others)
    copied = source_rules.copies(reached)
    if copied:
        text += (
            "\n✘ the answer takes from vitlib.checks, which holds the grader's own answers "
            "(an answer calls check_* functions at most):\n"
            + "\n".join(f"   {c}" for c in copied)
        )
        return Result(0, "reference copied", text)
    found = source_rules.violations(reached, forbid)
    # the Mistake objects the verdicts named, not text a student's message could imitate
    mistake = "; ".join(f"{m.name} (see {m.where})" for m in checks.named_mistakes)
    if found:
        text += (
            "\n✘ the library is off for this exercise, and the answer's source uses it:\n"
            + "\n".join(f"   {f}" for f in found)
        )
        return Result(0, "library used", text, mistake)
    return Result(_score(cell.points, ok, checks.case_counts), "graded", text, mistake)


def _score(points: int, ok: bool, counts: list) -> float:
    """All the points for a right answer; for a wrong one, the share of its hidden cases that
    came out right (partial credit), to a hundredth of a point."""
    if ok:
        return points
    cases = sum(n for _, n in counts)
    return round(points * sum(r for r, _ in counts) / cases, 2) if cases else 0


# --- the whole run ---


def reference_run(cells, limits, log, unsafe, hidden) -> dict:
    """cell index -> what each prediction in it compares with, from the book's own notebook."""
    from wire import decode

    session, recorded = None, {}
    try:
        session = Session(limits, log, unsafe=unsafe, hidden=hidden)
        for cell in cells:
            if cell.kind in ("code", "answer", "grade"):
                answer = session.run(cell.source, grade=cell.kind == "grade")
                if not answer.get("ok"):
                    error = answer.get("error", {})
                    problem = f"{error.get('raised')}: {error.get('message', '')[:300]}"
                    print(
                        f"reference run, cell {cell.index + 1}: {problem}",
                        file=sys.stderr,
                    )
                if cell.kind == "grade" and answer.get("predictions"):
                    recorded[cell.index] = [
                        dict(p, actual=decode(p["actual"]))
                        for p in answer["predictions"]
                    ]
    except WorkerGone as gone:
        tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
        raise SystemExit(
            f"the book's own notebook stopped in the reference run: {gone.reason}; "
            f"the worker's last words ({log}):\n{tail}"
        ) from None
    finally:
        if session is not None:
            session.close()
    return recorded


CHAPTER_NAME = re.compile(
    r"^(copy of\s+)?(?P<stem>.+?)(\s*-\s*copy)?(\s*\(\d+\))?$", re.I
)


def chapter_of(path: Path, chapters: dict):
    """The chapter a file is, forgiving a browser's or a drive's renaming: `03_attention (1)`,
    `Copy of 03_attention`, `03_attention - Copy`."""
    if path.suffix != ".ipynb":
        return None
    match = CHAPTER_NAME.match(path.stem.strip())
    stem = match["stem"].strip() if match else path.stem
    return chapters.get(stem)


def run(
    submissions: Path,
    out: Path,
    seed: int,
    limits: Limits,
    notebook_seconds: int,
    unsafe: bool,
):
    """Grade SUBMISSIONS/<student>/<notebook>.ipynb into out/ (grades.csv, feedback/, logs/)."""
    os.environ["VITLIB_CHECK_SEED"] = str(seed)  # here only: the workers never see it
    os.environ["VITLIB_STRICT_CHECKS"] = (
        "0"  # a verdict is a value here, not an exception
    )
    chapters = {p.stem: p for p in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))}
    entries = sorted(submissions.iterdir())
    students = [p for p in entries if p.is_dir() and not p.is_symlink()]
    staging = out.parent / f".{out.name}.new-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "feedback").mkdir(parents=True)
    (staging / "logs" / "book").mkdir(parents=True)
    hidden = [submissions, out, staging]
    grades = open(staging / "grades.csv", "w", newline="")
    writer = _SafeWriter(grades)
    writer.writerow(COLUMNS)
    grades.flush()

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    plans, references, finished = {}, {}, False
    try:
        for entry in [p for p in entries if p not in students]:  # each gets a row
            writer.writerow(
                [entry.name, "", "", "", "", f"not graded: {_not_a_folder(entry)}", ""]
            )
        for student in students:
            chosen = {}
            entries = list(student.iterdir())
            entries += [  # nbgrader's layout: <student>/<assignment>/<notebook>.ipynb
                p for folder in entries
                if folder.is_dir() and not folder.is_symlink() and not folder.name.startswith(".")
                for p in folder.iterdir()
            ]  # fmt: skip
            for link in [p for p in entries if p.is_symlink()]:
                writer.writerow(
                    [student.name, link.name, "", "", "",
                     "not graded: a symbolic link (it could point at someone else's file)", ""]
                )  # fmt: skip
            for odd in [p for p in entries if not p.is_symlink() and not p.is_file()
                        and (not p.is_dir() or p.suffix == ".ipynb")]:  # fmt: skip
                kind = "a folder" if odd.is_dir() else "not a regular file"
                writer.writerow(
                    [student.name, odd.name, "", "", "",
                     f"not graded: {kind}, not a notebook file", ""]
                )  # fmt: skip
            files = [p for p in entries if p.is_file() and not p.is_symlink()]
            for path in sorted(files, key=lambda p: (p.stat().st_mtime, p.name)):
                chapter = chapter_of(path, chapters)
                if chapter is None:
                    writer.writerow(
                        [
                            student.name,
                            path.name,
                            "",
                            "",
                            "",
                            "not graded: not a chapter of the book (a notebook named like 03_attention.ipynb)",
                            "",
                        ]
                    )
                    continue
                if chapter.stem in chosen:
                    writer.writerow(
                        [
                            student.name,
                            chosen[chapter.stem].name,
                            "",
                            "",
                            "",
                            f"not graded: {path.name} is a later copy of the same chapter, graded instead",
                            "",
                        ]
                    )
                chosen[chapter.stem] = path
            for stem, path in sorted(chosen.items()):
                chapter = chapters[stem]
                if stem not in plans:
                    plans[stem] = plan(chapter)
                    log = staging / "logs" / "book" / f"{stem}.txt"  # no student's
                    references[stem] = reference_run(
                        plans[stem], limits, log, unsafe, hidden
                    )
                try:
                    rows, page = grade_file(
                        student.name,
                        path,
                        chapter,
                        plans[stem],
                        references[stem],
                        limits,
                        staging,
                        notebook_seconds,
                        unsafe,
                        hidden,
                    )
                except Exception as error:  # a grader bug must not cost the others
                    why = f"{type(error).__name__}: {str(error)[:200]}"
                    status = f"not graded: the grader failed on this file ({why})"
                    rows = [[student.name, path.name, "", 0, "", status, ""]]
                    page = _page(path.name, [], [status])
                writer.writerows(rows)
                grades.flush()
                folder = staging / "feedback" / student.name
                folder.mkdir(exist_ok=True)
                (folder / f"{chapter.stem}.html").write_text(page[:FEEDBACK_LIMIT])
                print(
                    f"{student.name}/{path.name}: {sum(float(r[3] or 0) for r in rows):g} of {sum(int(r[4] or 0) for r in rows if r[5] != 'needs manual grading')} automatic points"
                )
        (staging / "seed.txt").write_text(f"{seed}\n")
        finished = True
    finally:
        grades.close()
        signal.signal(signal.SIGTERM, previous)
        if finished:
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            if out.exists():
                out.rename(old)
            staging.rename(out)
            shutil.rmtree(old, ignore_errors=True)
            print(out / "grades.csv")
        else:
            kept = out.parent / f"{out.name}-interrupted"
            shutil.rmtree(kept, ignore_errors=True)
            staging.rename(kept)
            print(
                f"grading stopped: what was graded is in {kept}; {out} still holds the previous run's grades",
                file=sys.stderr,
            )


def _not_a_folder(entry: Path) -> str:
    """Why a top-level entry of the submissions is no student's folder."""
    if entry.is_symlink():
        return "a symbolic link, not a student's folder (it could point at someone else's work)"
    if entry.is_file():
        return "a file beside the students' folders: a submission goes into SUBMISSIONS/<student>/"
    return "not a folder nor a file"


class _SafeWriter:
    """csv.writer whose cells cannot start a spreadsheet formula (a file named '=cmd|...')."""

    def __init__(self, f):
        self.writer = csv.writer(f)

    @staticmethod
    def _cell(value):
        text = str(value)
        return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else value

    def writerow(self, row):
        self.writer.writerow([self._cell(v) for v in row])

    def writerows(self, rows):
        for row in rows:
            self.writerow(row)


def grade_file(
    student, path, chapter, cells, reference, limits, staging, seconds, unsafe, hidden
):
    """(grades.csv rows, the feedback page) for one submitted notebook."""
    logs = staging / "logs" / "students" / student  # apart from the book's own logs
    logs.mkdir(parents=True, exist_ok=True)
    if path.stat().st_size > SUBMISSION_LIMIT:
        status = f"not graded: the file is over {SUBMISSION_LIMIT // 2**20} MB (clear its outputs)"
        return [[student, path.name, "", 0, "", status, ""]], _page(
            path.name, [], [status]
        )
    try:
        submission = nbformat.read(path, as_version=4)
    except Exception as error:  # not JSON, not a notebook
        status = f"not graded: the file is not a notebook nbformat can read ({type(error).__name__})"
        return [[student, path.name, "", 0, "", status, ""]], _page(
            path.name, [], [status]
        )
    answers, notes = answers_of(submission, cells)
    graded = grade_submission(
        cells,
        answers,
        reference,
        limits,
        logs / f"{chapter.stem}.txt",
        unsafe,
        hidden,
        seconds,
    )
    graded.notes[:0] = notes
    rows, blocks = [], []
    exercises = {}
    for c in cells:
        if c.kind in ("grade", "written"):
            exercises.setdefault(c.exercise, []).append(c)
    for exercise, parts in exercises.items():
        number = exercise.removeprefix("ex").replace("_", ".")
        points = sum(c.points for c in parts)
        if parts[0].kind == "written":
            text = graded.written.get(parts[0].grade_id, "")
            rows.append(
                [student, path.name, number, "", points, "needs manual grading", ""]
            )
            blocks.append(
                (f"Exercise {number} ({points} by hand)", "needs manual grading", text)
            )
            continue
        results = [graded.results[c.grade_id] for c in parts]
        score = sum(r.score for r in results)
        status = next((r.status for r in results if r.status != "graded"), "graded")
        mistake = "; ".join(r.mistake for r in results if r.mistake)
        rows.append(
            [
                student,
                path.name,
                number,
                f"{score:g}",
                points,
                status,
                f"mistake: {mistake}" if mistake else "",
            ]
        )
        blocks.append(
            (
                f"Exercise {number}: {score:g} of {points}",
                status,
                "\n".join(r.text for r in results),
            )
        )
    return rows, _page(path.name, blocks, graded.notes)


def _page(name, blocks, notes) -> str:
    parts = [f"<html><head><meta charset='utf-8'><title>{html.escape(name)}</title></head><body>",
             f"<h1>{html.escape(name)}</h1>"]  # fmt: skip
    for note in notes:
        parts.append(f"<p><b>Note:</b> {html.escape(note)}</p>")
    for title, status, text in blocks:
        parts.append(f"<h2>{html.escape(title)}</h2><p>{html.escape(status)}</p>")
        parts.append(f"<pre>{html.escape(text[:8000])}</pre>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
