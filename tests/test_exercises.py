"""Exercises that ask for transfer: an exercise's model answer must not be code that the
pages show, on its own page or an earlier one (the reader would copy it, not think it)."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))  # reading order
SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
EXERCISE = re.compile(r"(?:\*\*|### )Exercise (\d+[a-d]?\.\d+)")

# exercises whose model answers still repeat shown code: each becomes a variation the
# book does not show (issue: the second edition), and leaves this list when it does
KNOWN = set()


def _lines(code: str) -> list:
    """The lines of `code` that carry an idea: comments, blank lines, signatures, imports,
    returns of one name and lines under 16 characters left out, white space folded."""
    kept = []
    for line in code.splitlines():
        line = re.sub(r"\s+", " ", line.split("  #")[0].split(" # ")[0]).strip()
        if line.startswith(("#", "def ", "import ", "from ", "class ")):
            continue
        if len(line) >= 16 and not re.fullmatch(r"return \w+", line):
            kept.append(line)
    return kept


def _pages() -> list:
    """[(page, shown code lines, {exercise: its model answer's lines})] in reading order;
    shown code is what every code cell but the model answers holds: the page's main line
    and, under its "## Exercises" heading, the cells an exercise gives (a find-the-bug
    exercise's buggy code, whose fix alone would re-type it)."""
    pages = []
    for path in CHAPTERS:
        cells = json.loads(path.read_text())["cells"]
        shown, answers, current, in_exercises = set(), {}, None, False
        for cell in cells:
            text = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                in_exercises |= bool(re.search(r"^## Exercises", text, re.M))
                found = EXERCISE.search(text)
                current = found.group(1) if found else current
            elif in_exercises and SOLUTION.search(text):
                for answer in SOLUTION.findall(text):
                    answers.setdefault(current, []).extend(_lines(answer))
            else:
                shown |= set(_lines(text))
        pages.append((path.stem, shown, answers))
    return pages


def repeated(share: float = 0.5, least: int = 2) -> dict:
    """{exercise: its answer's lines found in the code shown up to its page}, for the
    exercises at least `share` of whose answer lines (and at least `least`) are shown."""
    found, shown_so_far = {}, set()
    for _, shown, answers in _pages():
        shown_so_far |= shown
        for exercise, lines in answers.items():
            seen = [line for line in lines if line in shown_so_far]
            if lines and len(seen) >= least and len(seen) >= share * len(lines):
                found[exercise] = seen
    return found


def test_no_model_answer_repeats_the_code_the_pages_show():
    found = repeated()
    new = {e: lines for e, lines in found.items() if e not in KNOWN}
    assert not new, f"model answers the pages show already: {new}"
    assert not KNOWN - set(found), f"now a transfer exercise: {KNOWN - set(found)}"


def test_the_rule_sees_an_answer_copied_from_a_page():
    page = "x = patches.flatten(2).transpose(1, 2)\nreturn self.proj(x).softmax(-1)\n"
    assert _lines(page) == [
        "x = patches.flatten(2).transpose(1, 2)",
        "return self.proj(x).softmax(-1)",
    ]
    assert _lines("    return out  # the answer\n# a comment\ndef f(a):\n") == []


def test_every_page_s_answers_are_read_with_their_exercise():
    # a page whose "## Exercises" heading follows other text in its cell, or whose exercises
    # are "### Exercise 1.1" headings, once went unread: its answers counted as shown code
    for page, _, answers in _pages():
        assert answers and None not in answers, (page, sorted(answers, key=str))
        number = page.split("_")[0].lstrip("0")
        assert all(e.startswith(number + ".") for e in answers), (page, sorted(answers))
