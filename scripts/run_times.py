"""Write setup.md's table of how long each page takes, from the notebooks' own records.

    python scripts/run_times.py [--check]

`make execute` stores in each notebook how long its full run took and on what (metadata
`vitlib.run`). This script turns those records into the table between the two markers in
book/setup.md, and the sentence at the top of each long page's notebook quotes the same
minutes (`page_note`). With --check it changes nothing and exits 1 if either is out of date:
tests/test_book.py runs that.
"""

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "book" / "setup.md"
BEGIN, END = "<!-- run-times: begin -->", "<!-- run-times: end -->"
LONG = 180  # seconds: a page longer than this says so at its top
NOTE = "**Running this page.**"
# pages that train chapter 6's model first when runs/fashion holds no checkpoint
TRAINS_FIRST = {"08b_attention_maps", "08c_live_demo", "10_pretraining"}
# what such a page prints when it did train it: its stored time then includes that training
TRAINED = "training the recipe fashion-cpu now"


def runs(root: Path = ROOT) -> dict:
    """{notebook stem: (seconds, hardware)} of the chapters, in file-name order."""
    found = {}
    for path in sorted((root / "notebooks").glob("[0-9]*.ipynb")):
        run = json.loads(path.read_text())["metadata"].get("vitlib", {}).get("run")
        if run:
            found[path.stem] = (run["seconds"], run["on"])
    return found


def trained_first(stem: str, root: Path = ROOT) -> bool:
    """Whether the stored run of a TRAINS_FIRST page trained chapter 6's model itself."""
    cells = json.loads((root / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    return any(
        TRAINED in "".join(o.get("text", ""))
        for cell in cells
        for o in cell.get("outputs", [])
    )


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def kind(hardware: str) -> str:
    return "an Intel Xeon" if "Xeon" in hardware else "an AMD EPYC"


def total(stem: str, found: dict, root: Path = ROOT) -> float:
    """The page's seconds with chapter 6's model trained first: page 6b's run added where
    the page may train it and its stored run did not."""
    seconds = found[stem][0]
    if stem in TRAINS_FIRST and not trained_first(stem, root):
        return seconds + found["06b_fashion_mnist"][0]
    return seconds


def table(root: Path = ROOT) -> str:
    found = runs(root)
    lines = [
        "| page | full run, stored | on two threads of | with chapter 6's model trained "
        "first | Colab's T4 GPU |",
        "|---|---|---|---|---|",
    ]
    for stem, (seconds, hardware) in found.items():
        page = stem.split("_")[0].lstrip("0")
        first = minutes(total(stem, found, root)) if stem in TRAINS_FIRST else ""
        gpu = (
            "at most the CPU time (estimate)"
            if total(stem, found, root) > LONG
            else "not needed"
        )
        lines.append(
            f"| {page} | {minutes(seconds)} | {kind(hardware)[3:]} | {first} | {gpu} |"
        )
    return "\n".join(lines)


ESTIMATE = "at most the CPU time (an estimate: not measured yet)"


def page_note(stem: str, found: dict, root: Path = ROOT) -> str:
    """The sentence at the top of a long page (its title cell ends with it)."""
    seconds, hardware = found[stem]
    first = ""
    if stem in TRAINS_FIRST and trained_first(stem, root):
        first = ", training chapter 6's model first (`runs/fashion` held none)"
    elif stem in TRAINS_FIRST:
        extra = minutes(found["06b_fashion_mnist"][0])
        first = f", and {extra} more to train chapter 6's model if `runs/fashion` holds none"
    return (
        f"{NOTE} Its full run took {minutes(seconds)} on two threads of {kind(hardware)}"
        f"{first}. Two-thread CPUs differ by up to four times (the set-up page's table); "
        "Colab's free CPU runtime is such a machine. In Colab, choose a GPU first (*Runtime > Change "
        f"runtime type > T4 GPU*): on a T4, {ESTIMATE}. Every page's time is in the "
        "table of the set-up page."
    )


def check_or_write(root: Path = ROOT, check: bool = False) -> list:
    """What is out of date (files), after writing it unless `check`."""
    stale = []
    text = (root / "book" / "setup.md").read_text()
    made = re.sub(
        re.escape(BEGIN) + ".*?" + re.escape(END),
        lambda _: f"{BEGIN}\n{table(root)}\n{END}",
        text,
        flags=re.S,
    )
    if made != text:
        stale.append("book/setup.md")
        if not check:
            (root / "book" / "setup.md").write_text(made)
    found = runs(root)
    for stem in found:
        path = root / "notebooks" / f"{stem}.ipynb"
        notebook = json.loads(path.read_text())
        title = notebook["cells"][0]
        source = "".join(title["source"])
        kept = source.split(f"\n\n{NOTE}")[0]
        long = total(stem, found, root) > LONG
        wanted = kept + (f"\n\n{page_note(stem, found, root)}" if long else "")
        if wanted != source:
            stale.append(str(path.relative_to(root)))
            if not check:
                parts = wanted.split("\n")
                title["source"] = [p + "\n" for p in parts[:-1]] + [parts[-1]]
                text = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
                path.write_text(text)
    return stale


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if stale"
    )
    args = parser.parse_args()
    stale = check_or_write(check=args.check)
    for name in stale:
        print(f"{'out of date' if args.check else 'wrote'}: {name}")
    if args.check and stale:
        sys.exit("run `python scripts/run_times.py` (or `make execute`, which runs it)")


if __name__ == "__main__":
    main()
