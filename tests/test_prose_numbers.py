"""Every number with a unit in the chapters' prose comes from an output of its page, a log
under benchmarks/results/ or the run-times table (scripts/prose_numbers.py says how)."""

import json
from pathlib import Path

import pytest
from repo_files import load_module

ROOT = Path(__file__).resolve().parents[1]
prose_numbers = load_module("scripts/prose_numbers.py")
SHARED = prose_numbers.shared_sources()


@pytest.mark.parametrize("notebook", prose_numbers.chapters(), ids=lambda p: p.stem)
def test_every_prose_number_has_a_source(notebook):
    found = prose_numbers.unmatched(notebook, SHARED)
    assert not found, "numbers no output shows:\n" + "\n".join(
        f"[{cell}] {number!r}: {sentence[:150]}" for cell, number, sentence in found
    )


def test_every_rubric_number_has_a_source():
    page = ROOT / "book" / "instructors.md"
    assert len(prose_numbers.rubrics(page.read_text())) >= 20  # every written exercise
    found = prose_numbers.rubric_unmatched(page, SHARED)
    assert not found, "rubric numbers no output or log shows:\n" + "\n".join(
        f"exercise {e} {number!r}: {sentence[:150]}" for e, number, sentence in found
    )


def test_a_rubric_number_its_page_lacks_is_found(tmp_path):
    (tmp_path / "notebooks").mkdir()
    page = _page(tmp_path, "A page.", "accuracy 0.8992")
    page.rename(tmp_path / "notebooks" / "12_page.ipynb")
    rubric = tmp_path / "instructors.md"
    rubric.write_text(
        "## Rubrics\n\n**Exercise 12.1 (2 points): a page.**\n\n"
        "- 1 point: the accuracy, 89.9%, read from the page.\n"
        "- 1 point: the other run's 91.4%.\n\n## Running a course\n\nAt 93.1%."
    )
    found = prose_numbers.rubric_unmatched(rubric, set(), root=tmp_path)
    assert [(e, number) for e, number, _ in found] == [("12.1", "91.4%")]


def _page(tmp_path, prose: str, output: str) -> Path:
    cells = [
        {"cell_type": "markdown", "id": "m", "metadata": {}, "source": [prose]},
        {
            "cell_type": "code",
            "id": "c",
            "metadata": {},
            "source": [],
            "outputs": [{"output_type": "stream", "name": "stdout", "text": [output]}],
        },
    ]
    path = tmp_path / "99_page.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    return path


@pytest.mark.parametrize(
    "prose, output, wrong",
    [
        ("It ended at 89.9%.", "test accuracy 0.8992", []),  # a fraction, rounded
        ("It ended at 89.92%.", "test accuracy 89.92", []),
        ("It ended at 89.8%.", "test accuracy 0.8992", ["89.8%"]),  # another number
        ("It ended at 89.925%.", "test accuracy 89.92", ["89.925%"]),  # more digits
        ("One epoch took 9.3 s.", "9.32 s an epoch", []),
        ("One epoch took 9.4 s.", "9.32 s an epoch", ["9.4 s"]),
        ("Both scored 90.1% and 85.0%, 5.1 points apart.", "0.901 0.850", []),
        (
            "Both scored 90.1% and 85.0%, 5.3 points apart.",
            "0.901 0.850",
            ["5.3 points"],
        ),
        # a gap names both ends in its own sentence, and a bare 5.1 elsewhere is no gap
        (
            "Both scored 90.1% and 85.0%. That is 5.1 points.",
            "0.901 0.850",
            ["5.1 points"],
        ),
        ("A gap of 5.1 points.", "epoch 5.1 loss", ["5.1 points"]),
        ("The paper reports 99.02% (Dosovitskiy et al., 2021).", "nothing", []),
        ("Code is not prose: `epochs=24` and `0.5 s`.", "nothing", []),
        # a ratio or a loss, printed to three places, needs a source too
        ("Its speed over timm's is 1.022.", "vitlib 1.022", []),
        ("Its speed over timm's is 1.024.", "vitlib 1.022", ["1.024"]),
        ("The loss fell to 0.371, then 0.419.", "loss 0.3712", ["0.419"]),
        # a setting below 0.1, or a number with a unit, is not such a ratio
        ("A learning rate of 0.001 and 0.005.", "nothing", []),
        ("It took 1.105 s.", "nothing", ["1.105 s"]),  # reported once, with its unit
        # a range gives its unit once: both ends need a source
        ("Heads lie between 12.9 and 15.3 pixels.", "12.9 13.0 15.3", []),
        (
            "Heads lie between 12.1 and 15.3 pixels.",
            "12.9 13.0 15.3",
            ["12.1 (pixels)"],
        ),
        ("Runs took 64 to 73 s.", "64.2 s, 72.8 s", []),
        # ranges called apart must be apart
        (
            "A 90.1% to 90.5%, B 89.0% to 89.9%: the ranges are apart.",
            "90.1 90.5 89 89.9",
            [],
        ),
        (
            "A 90.1% to 90.5%, B 89.0% to 90.2%: the ranges are apart.",
            "90.1 90.5 89 90.2",
            ["ranges apart"],
        ),
        ("A 90.1% to 90.5%, B 89.0% to 90.2%: not apart.", "90.1 90.5 89 90.2", []),
        # a paragraph's end ends a sentence: a table's rows are not the next sentence's
        (
            "| A | 90.1% to 90.5% |\n| B | 89.0% to 90.2% |\n\nA 90.1% to 90.5%, C 89.0% to "
            "89.9%: the ranges are apart.",
            "90.1 90.5 89 90.2 89.9",
            [],
        ),
        # a count of heads in words must be printed as one, with its noun
        ("Five heads look farther.", "farther than even: 5 heads", []),
        ("Seven heads look farther.", "farther than even: 5 heads", ["Seven heads"]),
        ("Five heads look farther.", "layer 5, head 2", ["Five heads"]),
        ("ViT-B/16 has 12 heads.", "nothing", []),  # digits: a model's shape
        # a count of parameters, exact, or read at its significant places after "about"
        ("It has 205,386 parameters.", "parameters 205,386", []),
        ("It has 205,387 parameters.", "parameters 205,386", ["205,387 parameters"]),
        ("It has about 200,000 parameters.", "parameters 205,386", []),
        (
            "It has about 300,000 parameters.",
            "parameters 205,386",
            ["300,000 parameters"],
        ),
        ("Design one with fewer than 50,000 parameters.", "nothing", []),  # a bound
        # a sentence that names another page may quote its outputs (page 5a's presets)
        ("The cifar preset has 6,268,810 parameters (page 5a).", "nothing", []),
        (
            "The cifar preset has 6,268,811 parameters (page 5a).",
            "nothing",
            ["6,268,811 parameters"],
        ),
        (
            "The cifar preset has 6,268,810 parameters.",
            "nothing",
            ["6,268,810 parameters"],
        ),
    ],
)
def test_the_rule_on_a_made_up_page(tmp_path, prose, output, wrong):
    found = prose_numbers.unmatched(_page(tmp_path, prose, output), set())
    assert [number for _, number, _ in found] == wrong


def _figure_page(tmp_path, printed: str, prose: str) -> Path:
    """A page whose figure cell prints `printed` under the prose `prose`, and whose last
    cell prints a test accuracy of 93%."""
    figure = {
        "cell_type": "code",
        "id": "f",
        "metadata": {},
        "source": [],
        "outputs": [
            {"output_type": "stream", "name": "stdout", "text": [printed]},
            {
                "output_type": "display_data",
                "data": {"image/png": "", "text/plain": ""},
            },
        ],
    }
    words = {"cell_type": "markdown", "id": "m", "metadata": {}, "source": [prose]}
    table = {
        "cell_type": "code",
        "id": "t",
        "metadata": {},
        "source": [],
        "outputs": [{"output_type": "stream", "name": "stdout", "text": ["test 93%"]}],
    }
    path = tmp_path / "99_page.ipynb"
    path.write_text(json.dumps({"cells": [figure, words, table]}))
    return path


@pytest.mark.parametrize(
    "printed, prose, wrong",
    [
        ("titles: Coat 91% | Shirt 91%", "The titles show 91% on each mistake.", []),
        # 93% is on the page, but not in the figure's titles
        (
            "titles: Coat 91% | Shirt 91%",
            "The surest mistake is made at 93%, as the titles show.",
            ["93% (titles)"],
        ),
        # the titles drawn but not printed: the rule cannot see them
        ("nothing", "Every title says 93%.", ["93% (titles)"]),
        # a paragraph that does not quote the titles is held to the page, as before
        ("nothing", "The test accuracy is 93%.", []),
    ],
)
def test_a_percentage_quoted_from_a_figure_s_titles_is_what_its_cell_prints(
    tmp_path, printed, prose, wrong
):
    found = prose_numbers.unmatched(_figure_page(tmp_path, printed, prose), set())
    assert [number for _, number, _ in found] == wrong


@pytest.mark.parametrize(
    "prose, wrong",
    [
        # a ratio from the page's own run must be the page's, not digits a log happens to hold
        ("The fast path ran 1.018 times as fast.", ["1.018"]),
        ("The fast path ran 1.000 times as fast.", []),
        # a sentence that names its log may quote it
        ("The log agrees: 1.018 (`benchmarks/results/speed.txt`).", []),
        ("Longer runs give 1.018 (`speed_cpu.txt`).", []),
    ],
)
def test_a_ratio_is_the_page_s_own_unless_its_sentence_names_a_log(
    tmp_path, prose, wrong
):
    shared = {(1.018, "")}  # a log's number
    found = prose_numbers.unmatched(_page(tmp_path, prose, "speed 1.000"), shared)
    assert [number for _, number, _ in found] == wrong
