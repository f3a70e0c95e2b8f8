"""Numbers in the prose that no output shows (`python scripts/prose_numbers.py`).

Every number with a unit in a page's prose (%, s, ms, seconds, minutes, GFLOP, MB, GB, px,
points, parameters), every count of heads written in words ("five heads", a result read off a table), and
every number printed to three decimal places without one (a ratio, a loss), must
come from somewhere a reader can check: an output of that page, a log under
benchmarks/results/, or the run-times table of book/setup.md (which scripts/run_times.py
writes from the executions). A prose number matches a source number at its printed
precision: "89.9%" matches 89.92 and 0.8992, not 89.8; "4.1 points" also matches the
difference of two percentages that its sentence quotes and a source shows. A percentage
that a paragraph under a figure quotes from the figure's titles must be printed by the cell
that drew the figure. A ratio printed to three places is the page's own measurement unless
its sentence names a log (a `.txt` under benchmarks/results/): only the page's outputs may
match it, since a log can hold the same digits by chance. A count of parameters is exact
("205,386") or read at its significant places ("about 200,000"); one after "fewer than" is a
bound, not a result. A sentence that names another page ("page 5a") may quote its outputs.
The rubrics and model answers of book/instructors.md are held to their chapter's outputs and
the logs the same way. Numbers in code, in math and in sentences that cite a paper or a
specification are exempt,
and so are the few in EXEMPT, each with its reason. tests/test_prose_numbers.py fails on
any other.
"""

import functools
import itertools
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UNITS = r"%|\s?(?:s|ms|seconds?|minutes?|min|GFLOPs?|MB|GB|px|pixels?|points?|parameters?)\b"
KINDS = {
    "second": "s",
    "seconds": "s",
    "minute": "min",
    "minutes": "min",
    "GFLOPs": "GFLOP",
    "pixel": "px",
    "pixels": "px",
    "parameter": "parameters",
}
UNIT_AFTER = re.compile(r"\s?(%|[A-Za-z]+)")
QUOTED = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(" + UNITS + ")")
NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
# a number without a unit, printed to three places (a ratio, a loss), 0.1 or more: settings
# such as a learning rate of 0.001 are smaller
RATIO = re.compile(
    r"(?<![\w.,])(\d+)\.(\d{3})(?![\d.]\d|\d|\s?(?:%|" + UNITS[3:] + r"))"
)
# a range whose unit comes once, after its second end: "between 12.9 and 15.3 pixels"
RANGE = re.compile(
    r"(?<![\w.,])(\d+)(?:\.(\d+))?\s?(?:and|to|-|–)\s?\d+(?:\.\d+)?(" + UNITS + ")"
)
# a sentence that says its ranges are apart, and the ranges it quotes: "75.6% to 77.1%"
APART = re.compile(r"\b(?:apart|do not overlap|does not overlap|none overlap)\b")
DENIED = re.compile(r"\b(?:not|cannot|never)\b[^,;:]*\bapart|n't[^,;:]*\bapart")
SPAN = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?)%?\s?(?:-|–|to)\s?(\d+(?:\.\d+)?)%")
# a count of heads written in words ("five heads") is a result read off a table: the page
# must print it as "5 heads"; digits ("12 heads") give a model's shape, a setting
WORDS = "two three four five six seven eight nine ten eleven twelve".split()
HEADS = re.compile(r"(?<![\w-])(" + "|".join(WORDS) + r") heads\b", re.I)
# a paragraph under a figure that quotes the figure's titles: its percentages must be
# printed by the cell that drew it (see against_titles)
TITLES = re.compile(r"\btitles?\b", re.I)
PERCENT = re.compile(r"(?<![\w.,])(\d+)(?:\.(\d+))?%")
IMAGES = {"image/png", "image/svg+xml", "image/jpeg"}
NAMES_LOG = re.compile(r"\.txt\b|benchmarks/results|\blogs?\b")
MARKS = re.compile(r"Exercise \d+[a-z]?\.\d+ \(")
MARK = re.compile(r"\s*- \d+ points?:")  # a rubric's "- 1 point: ...", whole
BOUND = re.compile(
    r"\b(?:fewer|less|more) than\s+$|\b(?:under|below|above|at most|at least)\s+$"
)
# a sentence that names another page ("page 5a") may quote that page's outputs
PAGES = re.compile(r"\bpages? (\d{1,2}[a-d]?)\b")
CITES = re.compile(r"et al\.|\(\d{4}\)|, \d{4}\)|paper|https?://|specification")

EXEMPT = {  # (page, number as printed): why it needs no output
    ("06a_data", "55 MB"): "arithmetic in the sentence: 70,000 x 784 bytes",
    ("06a_data", "184 MB"): "arithmetic in the sentence: 60,000 x 3,072 bytes",
    (
        "06a_data",
        "193 GB",
    ): "arithmetic in the rubric: 1.28 million x 224 x 224 x 3 bytes",
    (
        "06a_data",
        "140 GB",
    ): "arithmetic in the rubric: 1.28 million files of about 110 KB",
    ("07_recipes_cifar10", "0.5 points"): "a standard error, from 5,000 images at 82%",
    ("05b_vit_weights", "350 MB"): "the size of a download, not a result",
    ("08b_attention_maps", "350 MB"): "the size of a download, not a result",
    ("10_pretraining", "350 MB"): "the size of a download, not a result",
    ("10_pretraining", "170 MB"): "the size of a download, not a result",
    (
        "10_pretraining",
        "7.5 GB",
    ): "arithmetic in the sentence: 50,000 images at 224x224x3",
    ("11_modern_vit", "91%"): "the goal the chapter sets itself, not a result",
    ("08c_live_demo", "344 MB"): "arithmetic in the rubric: 86 M float32 parameters",
    ("08c_live_demo", "23 MB"): "ViT-Ti/16's file size, a property of the model",
    ("11_modern_vit", "300 seconds"): "the goal the chapter sets itself, not a result",
    ("11_modern_vit", "224 pixels"): "the image size of the paper's models, a setting",
    (
        "09_cnn_vs_vit",
        "two heads",
    ): "a distilled model's two classifier heads, its design",
}


def _words(cell: dict) -> str:
    """A markdown cell's text without code, fenced blocks and math."""
    text = "".join(cell["source"])
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`]*\.txt`|`benchmarks/results[^`]*`", " a log ", text)  # named
    return re.sub(r"`[^`]*`|\$[^$]*\$", "", text)


def prose(notebook: dict):
    """(cell id, text) of each markdown cell, without code, fenced blocks and math."""
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            yield cell.get("id", "?"), _words(cell)


def output_text(notebook: dict) -> str:
    parts = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")))
            data = output.get("data", {})
            parts += [
                "".join(data[k])
                for k in ("text/plain", "text/html", "text/markdown")
                if k in data
            ]
    return "\n".join(parts)


def numbers(text: str) -> set:
    """The numbers of `text`, as (value, unit): the unit written right after it, or ""."""
    found = set()
    for m in NUMBER.finditer(text):
        after = UNIT_AFTER.match(text, m.end())
        unit = after.group(1) if after else ""
        found.add((float(m.group(0).replace(",", "")), KINDS.get(unit, unit)))
    return found


def shared_sources(root: Path = ROOT) -> set:
    """The numbers of every benchmark log and of the run-times table."""
    logs = [p for p in (root / "benchmarks" / "results").glob("*") if p.is_file()]
    text = "\n".join(p.read_text(errors="replace") for p in logs)
    return numbers(text + (root / "book" / "setup.md").read_text())


def _matches(value: float, decimals: int, unit: str, pool, strict=True) -> bool:
    """A number of `pool` that prints as `value` at `decimals` places; a percentage may also
    be a fraction (0.8992 for 89.92%). `strict`: a whole number must carry the same unit in
    its source (the 50 s of a sentence is not any 50 of a log). A page's own outputs are
    read without it, since their tables give the unit once, in a column's header. Points
    (a gap between two percentages) must say so in their source, or be such a gap; so must
    a count of heads ("5 heads")."""
    unit = KINDS.get(unit, unit)
    for y, its_unit in pool:
        if (
            strict and decimals == 0 or unit in ("points", "heads")
        ) and its_unit != unit:
            if not (unit == "%" and y < 1 and round(100 * y) == value):
                continue
        if round(y, decimals) == value:
            return True
        if unit == "%" and round(100 * y, decimals) == value:
            return True
    return False


def _quoted(notebook: dict, stem: str):
    """(cell id, sentence, number as printed, value, decimals, unit) of each number with a
    unit in the prose, but those of sentences that cite, of exercises' marks and of EXEMPT."""
    for cell_id, text in prose(notebook):
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            if CITES.search(sentence):
                continue
            for m in QUOTED.finditer(sentence):
                printed = m.group(0).replace("\n", " ")
                unit = m.group(3).strip()
                unit = "points" if unit.startswith("point") else unit
                mark = MARK.fullmatch(sentence[: m.end() + 1].rsplit("\n", 1)[-1])
                if (stem, printed) in EXEMPT or (
                    unit == "points" and (MARKS.search(sentence) or mark)
                ):
                    continue
                decimals = len(m.group(2) or "")
                digits = m.group(1).replace(",", "") + "." + (m.group(2) or "0")
                if unit.startswith("parameter"):
                    if BOUND.search(sentence[: m.start()]):
                        continue  # a constraint ("fewer than 50,000"), not a result
                    # "about 200,000" is read at its significant places (205,386)
                    whole = m.group(1).replace(",", "")
                    decimals = (
                        -(len(whole) - len(whole.rstrip("0")))
                        if not m.group(2)
                        else decimals
                    )
                yield (
                    cell_id,
                    sentence,
                    printed,
                    round(float(digits), decimals),
                    decimals,
                    unit,
                )
            for m in RANGE.finditer(sentence):  # the first end, in the second's unit
                unit = m.group(3).strip()
                if unit.startswith("point") or (stem, m.group(0)) in EXEMPT:
                    continue
                decimals = len(m.group(2) or "")
                value = round(float(m.group(1) + "." + (m.group(2) or "0")), decimals)
                printed = (
                    f"{m.group(1)}{'.' + m.group(2) if m.group(2) else ''} ({unit})"
                )
                yield cell_id, sentence, printed, value, decimals, unit
            for m in HEADS.finditer(sentence):
                if (stem, m.group(0).lower()) not in EXEMPT:
                    count = WORDS.index(m.group(1).lower()) + 2
                    yield cell_id, sentence, m.group(0), count, 0, "heads"
            for m in RATIO.finditer(sentence):
                value = float(m.group(0))
                if value >= 0.1 and (stem, m.group(0)) not in EXEMPT:
                    yield cell_id, sentence, m.group(0), value, 3, ""


def overlapping(notebook: dict) -> list:
    """[(cell id, sentence)] of each sentence that calls its ranges apart while two of the
    ranges it quotes overlap."""
    found = []
    for cell_id, text in prose(notebook):
        # a sentence ends at its stop or its paragraph's end (a table row ends no sentence)
        for sentence in re.split(r"(?<=[.!?])\s+|\n\s*\n", text):
            if not APART.search(sentence) or DENIED.search(sentence):
                continue
            spans = [
                tuple(sorted(map(float, m.groups()))) for m in SPAN.finditer(sentence)
            ]
            if any(
                a[0] <= b[1] and b[0] <= a[1]
                for a, b in itertools.combinations(spans, 2)
            ):
                found.append((cell_id, " ".join(sentence.split())))
    return found


def against_titles(notebook: dict) -> list:
    """[(cell id, percentage as printed, paragraph)] of each percentage that a paragraph
    naming a figure's titles quotes, under the figure, and that the cell drawing it does
    not print. Titles are drawn, not printed, so a page-wide match could pair the number
    with another output (a 93% test accuracy for a title's 91%): the figure's cell must
    print what its titles say."""
    found, cells = [], notebook["cells"]
    for figure, cell in zip(cells, cells[1:]):
        if cell["cell_type"] != "markdown" or figure["cell_type"] != "code":
            continue
        outputs = figure.get("outputs", [])
        if not any(set(o.get("data", {})) & IMAGES for o in outputs):
            continue
        printed = numbers(output_text({"cells": [figure]}))
        for paragraph in re.split(r"\n\s*\n|\n(?=- )", _words(cell)):
            if not TITLES.search(paragraph):
                continue
            for m in PERCENT.finditer(paragraph):
                decimals = len(m.group(2) or "")
                value = round(float(m.group(1) + "." + (m.group(2) or "0")), decimals)
                if not _matches(value, decimals, "%", printed, strict=False):
                    text = " ".join(paragraph.split())
                    found.append((cell.get("id", "?"), m.group(0), text))
    return found


def unmatched(notebook_path: Path, shared: set) -> list:
    """[(cell id, number as printed, sentence)] of the prose numbers nothing shows."""
    notebook = json.loads(notebook_path.read_text())
    found = _unmatched(
        notebook, notebook_path.stem, numbers(output_text(notebook)), shared
    )
    found += [(c, f"{n} (titles)", s) for c, n, s in against_titles(notebook)]
    return found + [(c, "ranges apart", s) for c, s in overlapping(notebook)]


RUBRIC = re.compile(r"^\*\*Exercise (\d+)([a-z]?)\.(\d+) \(", re.M)


def rubrics(text: str) -> list:
    """(exercise, its page's stem prefix, text) of each model answer and rubric of the
    instructors' page: from its `**Exercise N.M (` line to the next one or heading."""
    found = []
    starts = list(RUBRIC.finditer(text))
    for start, after in zip(starts, [*starts[1:], None]):
        end = after.start() if after else len(text)
        body = text[start.start() : end].split("\n## ")[0]
        number = f"{start[1]}{start[2]}.{start[3]}"
        found.append((number, f"{int(start[1]):02d}{start[2]}_", body))
    return found


def rubric_unmatched(page: Path, shared: set, root: Path = ROOT) -> list:
    """[(exercise, number as printed, sentence)] of the numbers a rubric of `page` (the
    instructors' page) quotes that neither its chapter's outputs nor a log show."""
    found = []
    for exercise, prefix, body in rubrics(page.read_text()):
        [chapter] = [p for p in chapters(root) if p.stem.startswith(prefix)]
        notebook = json.loads(chapter.read_text())
        own = numbers(output_text(notebook))
        cells = {"cells": [{"cell_type": "markdown", "id": exercise, "source": [body]}]}
        found += _unmatched(cells, chapter.stem, own, shared)
    return found


def _unmatched(notebook: dict, stem: str, own: set, shared: set) -> list:
    """unmatched's work on a notebook's prose, with `own`, the numbers its outputs show."""
    shown, missing = {}, []  # shown: {sentence: its percentages that a source shows}
    for quote in _quoted(notebook, stem):
        _, sentence, _, value, decimals, unit = quote
        # a ratio, printed to three places, from a sentence that names no log is the page's
        # own measurement: only its outputs may match it, not a log that holds the digits
        logs = shared if unit or NAMES_LOG.search(sentence) else set()
        named = set().union(*(page_numbers(p) for p in PAGES.findall(sentence)))
        if _matches(value, decimals, unit, own | named, strict=False) or _matches(
            value, decimals, unit, logs
        ):
            if unit == "%":
                shown.setdefault(sentence, set()).add(value)
        else:
            missing.append(quote)
    found = []
    for cell_id, sentence, printed, value, decimals, unit in missing:
        # a gap in points may be the difference of two percentages of its sentence
        pairs = itertools.combinations(shown.get(sentence, ()), 2)
        gaps = {(round(abs(x - y), 6), "points") for x, y in pairs}
        if not (unit == "points" and _matches(value, decimals, unit, gaps)):
            found.append((cell_id, printed, " ".join(sentence.split())))
    return found


@functools.lru_cache
def page_numbers(page: str, root: Path = ROOT) -> set:
    """The numbers that the outputs of page `page` ("5a": 05a_vit) show; none if no such page."""
    number, letter = re.fullmatch(r"(\d+)([a-d]?)", page).groups()
    found = [
        p for p in chapters(root) if re.match(f"{int(number):02d}{letter}_", p.name)
    ]
    return numbers(output_text(json.loads(found[0].read_text()))) if found else set()


def chapters(root: Path = ROOT) -> list:
    return sorted((root / "notebooks").glob("[01][0-9]*.ipynb"))


if __name__ == "__main__":
    shared, total = shared_sources(), 0
    for path in chapters():
        for cell_id, printed, sentence in unmatched(path, shared):
            total += 1
            print(f"{path.stem} [{cell_id}] {printed!r}: {sentence[:160]}")
    for exercise, printed, sentence in rubric_unmatched(
        ROOT / "book" / "instructors.md", shared
    ):
        total += 1
        print(f"instructors.md, exercise {exercise}: {printed!r}: {sentence[:160]}")
    print(f"{total} prose number(s) that no output, log or run-times table shows")
    sys.exit(1 if total else 0)
