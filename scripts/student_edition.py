"""Write the student edition of the book's notebooks: solutions removed, and the outputs that
would give an answer away with them; the chapter's own runs keep their figures and tables.

    python scripts/student_edition.py [--out student] [NOTEBOOK ...]

The edition is committed in `student/` (`make student`), so that each chapter page can open
its exercises in Colab; a test keeps it in sync with `notebooks/`.

The lines between `### BEGIN SOLUTION` and `### END SOLUTION` become, at the same indentation,

    # YOUR CODE HERE
    raise NotImplementedError()

(nbgrader's convention), so an unanswered exercise's check says "nothing yet". A written
answer's cell (a "Model answer" admonition) becomes "YOUR ANSWER HERE", and a code cell
tagged `model-answer` (a measurement the model answer quotes) is left out.

Outputs. A student on Colab's CPU should see the chapter's figures, tables, printed shapes and
timings without waiting for a training run, but no answer. `reveals_answer` decides per code
cell, from the cell and those above it; a cell's stored outputs are dropped when

- it holds a solution region (`### BEGIN SOLUTION`), or nbgrader marks it as an answer;
- it is a grade cell: it calls `checks.check_...` or `checks.compare_prediction` (CHECK), or
  nbgrader marks it as graded. A check prints its verdict on the book's own solution, and a
  predict-then-run exercise prints its reveal in the same cell as `compare_prediction`;
- it comes after the answer cell of a predict-then-run exercise (`(predict` in the prompt),
  before the next prompt or heading: "the cell after yours" is the reveal;
- it uses a name that a solution cell above it defines: its output is computed from the answer.

Everything else keeps its outputs: the chapter's runs, and among the exercises the cells that
show a given bug's symptom (part of the question; they use no answer). In the notebooks the
exercises close their chapter and nothing after an answer reads it but its check, so no
section needs its outputs cut from its first exercise on: the last rule would catch a cell
that did.

Two kinds of output show nothing useful in Colab, and `static_outputs` leaves them out: a
widget's view (Colab draws ipywidgets only from a running kernel, and the view's plain-text
fallback is the widget's repr) and HTML that the website's scripts draw (`page_widget`, the
live demo: outside the site only a note, over a large payload). The saved widget state goes
too, and the execution counts: the student's own run numbers the cells. Everything else is
kept as it is.
"""

import argparse
import ast
import re
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]

# What an exercise looks like in a notebook: the one home of these markers, which
# scripts/coursework.py and the site's book/sphinx_ext/clean_cells.py read from here.
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
MODEL_ANSWER_TITLE = "Model answer"
MODEL_ANSWER = "```{admonition} " + MODEL_ANSWER_TITLE  # a written answer's first line
MODEL_ANSWER_TAG = "model-answer"  # a code cell that belongs to a model answer
CHECK = re.compile(
    r"^\s*checks\.(check_\w+|compare_prediction)\(", re.M
)  # a grade cell
PROMPT = re.compile(  # **Exercise 3.1 (kind, 2 points).** or a heading: ### Exercise 1.1: ...
    r"(?:\*\*|^#+ )Exercise (\d+[a-z]?)\.(\d+)(?: \(([^)]*)\))?", re.M
)
HEADING = re.compile(r"^#+ ", re.M)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SITE_SCRIPT = '<script src="../_static/'  # HTML that only the website's scripts draw


def strip_solutions(source: str) -> str:
    """Replace every solution region of a cell's source; markers must come in pairs."""
    out, inside = [], False
    for line in source.splitlines():
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise ValueError(f"a second {BEGIN!r} before {END!r}")
            inside = True
            indent = re.match(r"\s*", line).group(0)
            out += [f"{indent}# YOUR CODE HERE", f"{indent}raise NotImplementedError()"]
        elif marker == END:
            if not inside:
                raise ValueError(f"{END!r} without {BEGIN!r}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{BEGIN!r} without {END!r}")
    return "\n".join(out)


def _is_answer(cell) -> bool:
    return cell.cell_type == "code" and (
        BEGIN in cell.source or cell.metadata.get("nbgrader", {}).get("solution")
    )


def _defined(source: str) -> set:
    """The names a cell defines at its top level: functions, classes, assigned names."""
    try:
        body = ast.parse(source).body
    except SyntaxError:  # IPython syntax: the definitions are enough
        return set(re.findall(r"^(?:async\s+)?(?:def|class)\s+(\w+)", source, re.M))
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if type(n) is ast.Name}
    return names


def _in_predict_exercise(cells: list) -> bool:
    """Whether the cell after `cells` follows the answer of a predict-then-run exercise: the
    last prompt or heading above it opens one, and an answer cell comes after that."""
    answered = False
    for cell in reversed(cells):
        if cell.cell_type == "code":
            answered = answered or _is_answer(cell)
            continue
        prompts = list(PROMPT.finditer(cell.source))
        headings = list(HEADING.finditer(cell.source))
        if not prompts and not headings:
            continue
        if not prompts or (headings and headings[-1].start() > prompts[-1].start()):
            return False  # a section heading: no exercise open
        return answered and "predict" in (prompts[-1][3] or "")
    return False


def reveals_answer(cells: list, index: int) -> bool:
    """Whether the stored outputs of code cell `cells[index]` give an exercise's answer away,
    judged from it and the cells above it (the rule of this module's docstring)."""
    cell = cells[index]
    graded = cell.metadata.get("nbgrader", {})
    if _is_answer(cell) or graded.get("grade") or CHECK.search(cell.source):
        return True
    if _in_predict_exercise(cells[:index]):
        return True
    answers = set().union(*(_defined(c.source) for c in cells[:index] if _is_answer(c)))
    used = set(re.findall(r"\b[A-Za-z_]\w*\b", cell.source))
    return bool(answers & used)


def static_outputs(outputs: list) -> list:
    """The outputs that show the same without the book's kernel and website: a widget's view
    and HTML drawn by the site's scripts are left out; execution counts are removed."""
    kept = []
    for output in outputs:
        data = output.get("data", {})
        if WIDGET_VIEW in data or SITE_SCRIPT in "".join(data.get("text/html", "")):
            continue
        if "execution_count" in output:
            output.execution_count = None
        kept.append(output)
    return kept


def student_notebook(path: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(path, as_version=4)
    book = nbformat.read(path, as_version=4).cells  # the rule reads the cells unchanged
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith(
            MODEL_ANSWER
        ):
            cell.source = "YOUR ANSWER HERE"
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source)
            answer = reveals_answer(book, index)
            cell.outputs = [] if answer else static_outputs(cell.outputs)
            cell.execution_count = None
    # a code cell of a model answer (tagged model-answer: the measurement it quotes) goes
    notebook.cells = [c for c in notebook.cells if MODEL_ANSWER_TAG not in _tags(c)]
    notebook.metadata.pop("widgets", None)
    return notebook


def _tags(cell) -> list:
    return cell.get("metadata", {}).get("tags", [])


def chapters(root: Path = ROOT) -> list:
    """The chapter notebooks of `_toc.yml` in reading order, appendices left out. A page that
    is not in the table of contents yet is not a chapter: no student edition, no grading."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    return [root / f"{f}.ipynb" for f in files if re.match(r"notebooks/\d\d", f)]


def main():
    parser = argparse.ArgumentParser(
        description="Write the student edition of the notebooks."
    )
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=Path("student"))
    args = parser.parse_args()
    paths = args.notebooks or chapters()
    args.out.mkdir(parents=True, exist_ok=True)
    for path in paths:
        text = nbformat.writes(student_notebook(path))
        (args.out / path.name).write_text(text if text.endswith("\n") else text + "\n")
        print(f"{args.out / path.name}")


if __name__ == "__main__":
    main()
