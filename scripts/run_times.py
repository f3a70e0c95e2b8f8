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


# the kinds of two-thread CPU the book has been run on, by a word of their hardware string
KINDS = {"Xeon": "Intel Xeon (AVX-512)", "EPYC": "AMD EPYC (AVX2)"}


def machine(hardware: str) -> str:
    """The kind of machine a run's hardware string names: a KINDS value, else the CPU."""
    for word, name in KINDS.items():
        if word in hardware:
            return name
    return hardware.split(",")[0].removeprefix("CPU ").strip()


def records(meta: dict) -> dict:
    """{machine kind: record} of a notebook's `vitlib` metadata: the latest run on each kind,
    the latest run of all (`run`) always among them; {} for a page never run."""
    found = dict(meta.get("runs", {}))
    if meta.get("run"):
        found[machine(meta["run"]["on"])] = meta["run"]
    return found


def runs(root: Path = ROOT) -> dict:
    """{notebook stem: {machine kind: record}} of the chapters, in file-name order; a record
    is {"seconds", "on"} and, for a run of an earlier version of the page, "commit". The
    latest run (metadata `vitlib.run`) is always among them."""
    found = {}
    for path in sorted((root / "notebooks").glob("[0-9]*.ipynb")):
        meta = json.loads(path.read_text())["metadata"].get("vitlib", {})
        if meta.get("run"):
            found[path.stem] = records(meta)
    return found


def latest(stem: str, root: Path = ROOT) -> tuple:
    """(seconds, hardware) of the page's latest stored run."""
    path = root / "notebooks" / f"{stem}.ipynb"
    run = json.loads(path.read_text())["metadata"]["vitlib"]["run"]
    return run["seconds"], run["on"]


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


def span(low: float, high: float) -> str:
    """ "4-6 s", "89 s-1.8 min", or one time where both round alike."""
    a, b = minutes(low), minutes(high)
    if a == b:
        return a
    if a.split()[1] == b.split()[1]:
        return f"{a.split()[0]}-{b}"
    return f"{a}-{b}"


def article(kind: str) -> str:
    return ("an " if kind[0] in "AEIOU" else "a ") + kind.split(" (")[0]


def total(stem: str, kind: str, found: dict, root: Path = ROOT):
    """The page's seconds on `kind` with chapter 6's model trained first: page 6b's run
    on the same kind added where the page may train it and its stored run did not (None
    where 6b has no run on that kind)."""
    seconds = found[stem][kind]["seconds"]
    is_latest = machine(latest(stem, root)[1]) == kind
    if stem in TRAINS_FIRST and not (is_latest and trained_first(stem, root)):
        first = found.get("06b_fashion_mnist", {}).get(kind)
        return seconds + first["seconds"] if first else None
    return seconds


def _cell(stem: str, kind: str, found: dict, root: Path) -> str:
    record = found[stem].get(kind)
    if record is None:
        return "not run"
    text = minutes(record["seconds"])
    if stem in TRAINS_FIRST and total(stem, kind, found, root) is not None:
        with_training = minutes(total(stem, kind, found, root))
        text += f" ({with_training} when it trains chapter 6's model first)"
    if machine(latest(stem, root)[1]) != kind:
        text += " †"
    return text


def table(root: Path = ROOT) -> str:
    found = runs(root)
    kinds = list(KINDS.values())
    lines = [
        "| page | "
        + " | ".join(f"{k}, 2 threads" for k in kinds)
        + " | Colab CPU (estimate) | Colab's T4 GPU (a guess: not measured) |",
        "|---|" + "---|" * (len(kinds) + 2),
    ]
    for stem, records in found.items():
        page = stem.split("_")[0].lstrip("0")
        cells = [_cell(stem, k, found, root) for k in kinds]
        # a fresh Colab runtime holds no runs/fashion: such a page trains chapter 6's model
        measured = [
            total(stem, k, found, root) or r["seconds"]
            for k, r in records.items()
            if k in kinds
        ]
        colab = span(min(measured), max(measured)) if measured else "not measured"
        if stem in TRAINS_FIRST:
            colab += ", training chapter 6's model first"
        longest = max(total(stem, k, found, root) or 0 for k in records)
        gpu = "at most the CPU time" if longest > LONG else "not needed"
        gpu = gpu if uses_gpu(stem, root) else "no help: the page computes on the CPU"
        gpu = GPU_ONLY.get(stem, gpu)
        lines.append(f"| {page} | {' | '.join(cells)} | {colab} | {gpu} |")
    return "\n".join(lines)


ESTIMATE = "at most the CPU time (an estimate: not measured yet)"
# pages with a cell that runs only on a GPU, which a CPU run skips: the CPU time leaves it out
GPU_NOTE = {
    "08b_attention_maps": "A GPU helps only when chapter 6's model must be trained first: "
    "this page's own cells take seconds on a CPU.",
    "11_modern_vit": "A GPU saves little here: most of the time is section 11.10's runs of a "
    "fixed minute each, which a GPU would not shorten, only train further, and their numbers "
    "would then differ from the page's.",
    "07_recipes_cifar10": "In Colab, the CPU runtime runs the page in about the time above. Its "
    "last training cell, `cifar10-gpu` for 200 epochs, runs only on a GPU runtime and only if "
    "you set `TRAIN_CIFAR10_GPU = True` in it; its time on a T4 is not measured (section "
    "CIFAR-10 on a GPU).",
}
GPU_ONLY = {
    "06d_training_for_real": "the CPU time, plus training `fashion-gpu` (page 6d estimates it)",
    "07_recipes_cifar10": "the CPU time, plus training `cifar10-gpu` if asked (not measured)",
}


def uses_gpu(stem: str, root: Path = ROOT) -> bool:
    """Whether a code cell of the page can put its work on a CUDA GPU: only then does a GPU
    runtime in Colab help (pages 1 to 5b, 8a and 8c compute on the CPU)."""
    notebook = json.loads((root / "notebooks" / f"{stem}.ipynb").read_text())
    code = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    return any("cuda" in source for source in code)


def page_note(stem: str, found: dict, root: Path = ROOT) -> str:
    """The sentence at the top of a long page (its title cell ends with it)."""
    seconds, hardware = latest(stem, root)
    kind = machine(hardware)
    first = ""
    if stem in TRAINS_FIRST and trained_first(stem, root):
        first = ", training chapter 6's model first (`runs/fashion` held none)"
    elif stem in TRAINS_FIRST and total(stem, kind, found, root) is not None:
        whole = total(stem, kind, found, root)
        extra, whole = minutes(whole - seconds), minutes(whole)
        first = (
            f", and {extra} more ({whole} in all) to train chapter 6's model first if "
            "`runs/fashion` holds none"
        )
    others = [
        f"{minutes(r['seconds'])} on {article(k)} (an earlier version of the page)"
        for k, r in found[stem].items()
        if k != kind
    ]
    also = f"; {'; '.join(others)}" if others else ""
    gpu = (
        "In Colab, choose a GPU first (*Runtime > Change runtime type > T4 GPU*): on a T4, "
        f"{ESTIMATE}."
        if uses_gpu(stem, root)
        else "A GPU does not help here: the page computes on the CPU."
    )
    gpu = GPU_NOTE.get(stem, gpu)
    return (
        f"{NOTE} Its full run, from the kernel's start, took {minutes(seconds)} on two threads of "
        f"{article(kind)}"
        f"{first}{also}. Every page's time on each kind of machine is in the set-up page's "
        f"table; Colab's free CPU runtime is a two-thread machine too. {gpu}"
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
        long = max(total(stem, k, found, root) or 0 for k in found[stem]) > LONG
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
