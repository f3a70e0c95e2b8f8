"""Every recipe's note is a measurement (DESIGN: numbers): it names the log of
benchmarks/time_to_accuracy.py that measured the recipe as it is now, and says what that log
shows (seeds, device, test and validation range, seconds of training, the target reached or
not), or it says "not measured" (a GPU recipe: "not measured on a GPU")."""

import re
from dataclasses import replace
from pathlib import Path

import pytest

import vitlib.cnn  # noqa: F401  each chapter registers its recipes
import vitlib.modern  # noqa: F401
from vitlib.loop import RECIPES

ROOT = Path(__file__).resolve().parents[1]

# "<what it is>; measured in <log>: seeds 0-2 on <device>, test a-b%, validation c-d%
# (or: no validation split), e-f s of training[ (compiling included)], then the target:
# "T% never reached" or "T% reached by k of n seeds, after g[-h] s"
NOTE = re.compile(
    r"; measured in (?P<log>benchmarks/results/\S+\.txt): seeds (?P<seeds>\d+-\d+) on "
    r"(?P<device>[^,]+), test (?P<test>[\d.]+-[\d.]+)%, "
    r"(?:validation (?P<val>[\d.]+-[\d.]+)%|(?P<noval>no validation split)[^,]*), "
    r"(?P<seconds>[\d.]+-[\d.]+) s of training(?P<compiling> \(compiling included\))?, "
    r"(?P<target>\d+)% (?:never reached|reached by (?P<k>\d+) of (?P<n>\d+) seeds, "
    r"after (?P<after>[\d.]+(?:-[\d.]+)?) s)$"
)
ROW = re.compile(r"^\s*(\d+)\s+(inf|[\d.]+)\s+([\d.]+)\s+([\d.]+)(?:\s+([\d.]+))?$")


def _span(values, digits: int, scale=1) -> str:
    """min-max as a note writes it."""
    return f"{min(values) * scale:.{digits}f}-{max(values) * scale:.{digits}f}"


def read_log(text: str, name: str) -> dict:
    """What a time_to_accuracy log shows of recipe `name`: its seeds, target, device and
    per-seed rows (seconds to target, final test, training seconds, final val or None)."""
    lines = text.splitlines()
    seeds = re.search(r"seeds \[([\d, ]+)\], target ([\d.]+)%", lines[1])
    assert seeds, f"not a time_to_accuracy log: {lines[1]}"
    tables = [i for i, line in enumerate(lines) if line.startswith("seed s to target")]
    mine = [i for i in tables if lines[i - 1] == f"recipe {name}"]
    if not mine and len(tables) == 1 and name in lines[1]:  # a log of one recipe
        mine = tables
    assert len(mine) == 1, f"the log holds no table of {name}"
    rows = []
    for line in lines[mine[0] + 1 :]:
        match = ROW.match(line)
        if not match:
            break
        seed, reached, test, seconds, val = match.groups()
        rows.append((int(seed), float(reached), float(test), float(seconds), val))
    summary = [x for x in lines if x.startswith("min_final_test_accuracy=")]
    summary = [x for x in summary if "recipe=" not in x or x.endswith(f"recipe={name}")]
    device = re.search(r" device=\w+:(?:CPU|GPU) (.+?)(?: recipe=|$)", summary[0])
    threads = re.search(r"(\d+) threads", lines[0])
    return dict(
        seeds=[int(s) for s in seeds.group(1).split(", ")],
        target=float(seeds.group(2)),
        device=device.group(1).replace("(R)", "").replace(" Processor", ""),
        threads=threads.group(1) if "device=cpu" in summary[0] else None,
        rows=rows,
    )


def check_note(name: str, recipe) -> None:
    """AssertionError unless `recipe`'s note says what its log shows."""
    if recipe.note.endswith(("; not measured", "; not measured on a GPU")):
        assert not re.search(r"\d+(\.\d+)?%", recipe.note), (
            f"{name}: a recipe never run promises no accuracy"
        )
        return
    note = NOTE.search(recipe.note)
    assert note, f"{name}'s note must end as tests/test_recipe_notes.py's NOTE says"
    text = (ROOT / note["log"]).read_text()
    log = read_log(text, name)
    for seed in log["seeds"]:  # measured on the recipe as it is now
        assert repr(replace(recipe.train, seed=seed)) in text, f"{name}: another config"
    assert str(recipe.model)[:-1] in text, f"{name}: another model than the log's"
    seeds = log["seeds"]
    assert seeds == list(range(seeds[0], seeds[-1] + 1))
    assert note["seeds"] == f"{seeds[0]}-{seeds[-1]}"
    assert log["device"] in note["device"], (log["device"], note["device"])
    if log["threads"]:
        assert f"{log['threads']}-thread" in note["device"]
    rows = log["rows"]
    assert [r[0] for r in rows] == seeds
    assert note["test"] == _span([r[2] for r in rows], 2, 100)
    vals = [r[4] for r in rows]
    assert (note["val"] is None) == (vals[0] is None)
    if vals[0] is not None:
        assert note["val"] == _span([float(v) for v in vals], 2, 100)
    assert note["seconds"] == _span([r[3] for r in rows], 1)
    compiling = recipe.train.compile and "GPU" in text.splitlines()[0]
    assert bool(note["compiling"]) == bool(compiling), "say that compiling is included"
    assert float(note["target"]) == log["target"]
    reached = [r[1] for r in rows if r[1] != float("inf")]
    if not reached:
        assert note["k"] is None, f"{name}: no seed reached {log['target']}%"
        return
    assert (int(note["k"]), int(note["n"])) == (len(reached), len(rows))
    after = _span(reached, 1)
    assert note["after"] == (after.split("-")[0] if len(reached) == 1 else after)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_a_recipe_note_says_what_its_log_shows(name):
    check_note(name, RECIPES[name])


def test_a_note_that_its_log_does_not_hold_fails():
    recipe = RECIPES["fashion-cpu"]
    note = NOTE.search(recipe.note)
    assert note, "fashion-cpu's note has the measured form"
    low = note["test"].split("-")[0]
    wrong = [
        recipe.note.replace(f"test {low}", "test 90.00"),  # a range the log lacks
        recipe.note.replace(note["device"], "one H100"),  # another device
        recipe.note.replace(note["log"], "benchmarks/results/time_to_accuracy_cpu.txt"),
        recipe.note.replace("seeds 0-2", "seeds 0-4"),
        recipe.note.replace("never reached", "reached by 1 of 3 seeds, after 300.0 s"),
        recipe.note.replace("; measured in", ", measured in"),
        "a plain ViT; not measured, but 93% within 2 minutes",
    ]
    for note_text in wrong:
        with pytest.raises(AssertionError):
            check_note("fashion-cpu", replace(recipe, note=note_text))
    other = replace(recipe, train=replace(recipe.train, epochs=30), note=recipe.note)
    with pytest.raises(AssertionError, match="another config"):
        check_note("fashion-cpu", other)
