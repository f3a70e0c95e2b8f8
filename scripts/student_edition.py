"""Write the student edition of the book's notebooks: solutions removed, outputs cleared.

    python scripts/student_edition.py [--out student] [NOTEBOOK ...]

The edition is committed in `student/` (`make student`), so that each chapter page can open
its exercises in Colab; a test keeps it in sync with `notebooks/`.

The lines between `### BEGIN SOLUTION` and `### END SOLUTION` become, at the same indentation,

    # YOUR CODE HERE
    raise NotImplementedError()

(nbgrader's convention), so an unanswered exercise's check says "nothing yet". A written
answer's cell (a "Model answer" admonition) becomes "YOUR ANSWER HERE". Every output,
execution count and saved widget state is removed; everything else is kept as it is.
"""

import argparse
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
CHECK = re.compile(
    r"^\s*checks\.(check_\w+|compare_prediction)\(", re.M
)  # a grade cell


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


def student_notebook(path: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith(
            MODEL_ANSWER
        ):
            cell.source = "YOUR ANSWER HERE"
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source)
            cell.outputs, cell.execution_count = [], None
    notebook.metadata.pop("widgets", None)
    return notebook


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
