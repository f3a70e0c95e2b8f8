"""Time to accuracy on Fashion-MNIST: train a documented recipe with several seeds and report,
for each, the seconds of training it took to first reach the target test accuracy and the
final validation and test accuracies; then the minimum and the mean over the seeds.

    python benchmarks/time_to_accuracy.py --device cpu --seeds 0 1 2    # fashion-cpu, 90%
    python benchmarks/time_to_accuracy.py --device cuda --seeds 0 1 2   # fashion-gpu, 93.0%
    python benchmarks/time_to_accuracy.py --recipe NAME --target 0.92   # any recipe
    python benchmarks/time_to_accuracy.py --recipe A B --seeds 0 1 2    # A against B

With several recipes, each seed runs every recipe before the next seed starts (seed 0 of A,
seed 0 of B, seed 1 of A, ...), so a machine that speeds up or slows down during the run
touches every recipe alike; a line then says whether their validation ranges are apart.

The recipes are vitlib.loop.RECIPES; each is also one command line:
    python -m vitlib.train --recipe fashion-cpu --seed 3 --out runs/fashion-cpu

It runs the recipe through `python -m vitlib.train`'s own code, with its validation split
(5,000 training images held out, the same for every seed). Seconds count training steps
only (torch.compile's compilation, inside the first epoch, included); loading the data, the
evaluations and the checkpoint after each epoch are not counted. The last line (one per
recipe, the last recipe's last) reads:
min_final_test_accuracy=A mean_final_test_accuracy=M max_final_test_accuracy=X
min_final_val_accuracy=V max_final_val_accuracy=W max_seconds=S device=D recipe=R
"""

import argparse
import math
import statistics
import sys
import tempfile

import torch

from vitlib.data import data_root
from vitlib.loop import RECIPES
from vitlib.train import main as train_cli
from vitlib.utils import hardware, is_smoke, log_header

TARGETS = {"cpu": 0.90, "cuda": 0.93}
RECIPE_FOR = {"cpu": "fashion-cpu", "cuda": "fashion-gpu"}


def run(recipe: str, seed: int, device: str, data=None, keep=None) -> dict:
    """Train `recipe` with `seed` on `device` through the command line's code; the metrics.
    `keep`: a folder for the run (its checkpoint stays there), else a temporary one."""
    argv = [
        "--recipe",
        recipe,
        "--seed",
        str(seed),
        "--device",
        device,
        "--no-progress",
    ]
    if data:
        argv += ["--data", data]
    if is_smoke():
        small = ["--train-subset", "512", "--test-subset", "256", "--epochs", "1"]
        argv += [*small, "--no-compile"]
    if keep:
        return train_cli([*argv, "--out", str(keep), "--overwrite"])
    with tempfile.TemporaryDirectory() as out:
        return train_cli([*argv, "--out", out])


def cifar_source(root=None) -> str:
    """Which CIFAR-10 a run reads (vitlib.data.cifar10's order): the python batches, or an
    image folder, with the kind of files in it (a JPEG copy's pixels are not the original's)."""
    root = data_root(root)
    if (root / "cifar-10-batches-py").is_dir():
        return f"CIFAR-10, the python batches in {root / 'cifar-10-batches-py'}"
    first = next((root / "cifar10" / "train").glob("*/*"), None)
    kind = f"{first.suffix[1:].upper()} files" if first else "no files"
    return f"CIFAR-10 from the image folder {root / 'cifar10'} ({kind})"


def seconds_to(target: float, history: dict) -> float:
    """Seconds of training until the test accuracy first reached `target` (inf if never)."""
    total = 0.0
    for seconds, accuracy in zip(history["seconds"], history["test_accuracy"]):
        total += seconds
        if accuracy >= target:
            return total
    return math.inf


def report(recipe: str, rows: list, device: str) -> tuple:
    """Print one recipe's table and summary line; its (min, max) final validation accuracy."""
    head = f"{'seed':>4} {'s to target':>11} {'final acc':>9} {'training s':>10}"
    print(f"\nrecipe {recipe}\n{head} {'final val':>9}")
    for seed, reached, final, total, val in rows:
        print(f"{seed:4d} {reached:11.1f} {final:9.4f} {total:10.1f} {val:9.4f}")
    finals, totals, vals = (
        [r[2] for r in rows],
        [r[3] for r in rows],
        [r[4] for r in rows],
    )
    low = f"{min(finals):9.4f} {min(totals):10.1f} {min(vals):9.4f}"
    print(f"min  {min(r[1] for r in rows):11.1f} {low}")
    mean = [statistics.mean(v) for v in (finals, totals, vals)]
    print(f"mean {'':11s} {mean[0]:9.4f} {mean[1]:10.1f} {mean[2]:9.4f}")
    print(f"max  {'':11s} {max(finals):9.4f} {max(totals):10.1f} {max(vals):9.4f}")
    print(
        f"min_final_test_accuracy={min(finals):.4f} "
        f"mean_final_test_accuracy={statistics.mean(finals):.4f} "
        f"max_final_test_accuracy={max(finals):.4f} "
        f"min_final_val_accuracy={min(vals):.4f} "
        f"max_final_val_accuracy={max(vals):.4f} "
        f"max_seconds={max(totals):.1f} "
        f"device={device}:{hardware(device).split(',')[0]} recipe={recipe}"
    )
    return min(vals), max(vals)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=sorted(TARGETS), default="cpu")
    parser.add_argument(
        "--recipe", nargs="+", help="one or more recipes of vitlib.loop.RECIPES"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--target", type=float, help="test accuracy to reach (0-1)")
    parser.add_argument(
        "--data", help="dataset folder (default: VITLIB_DATA or ./data)"
    )
    parser.add_argument(
        "--keep", help="keep each run in KEEP/RECIPE-seedN (page 8d measures them)"
    )
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no GPU here")
    target = args.target or TARGETS[args.device]
    recipes = args.recipe or [RECIPE_FOR[args.device]]
    print(log_header())
    print(f"recipes {recipes}, seeds {args.seeds}, target {target:.1%}")
    if any(RECIPES[r].dataset == "cifar10" for r in recipes):  # which copy: it matters
        print("data:", cifar_source(args.data))
    rows = {recipe: [] for recipe in recipes}
    for seed in args.seeds:  # every recipe for this seed before the next seed
        for recipe in recipes:
            keep = args.keep and f"{args.keep}/{recipe}-seed{seed}"
            history = run(recipe, seed, args.device, args.data, keep)["history"]
            print(f"\nrecipe {recipe}")
            for split in ("val", "test"):
                epochs = " ".join(f"{a:.4f}" for a in history[f"{split}_accuracy"])
                print(f"seed {seed}: {split} accuracy per epoch: {epochs}")
            seconds = [round(s, 1) for s in history["seconds"]]
            print(f"seed {seed}: seconds per epoch: {seconds}")
            rows[recipe].append(
                (seed, seconds_to(target, history), history["test_accuracy"][-1])
            )
            rows[recipe][-1] += (sum(history["seconds"]), history["val_accuracy"][-1])
    # the book's rule: a difference is real where the ranges of the seeds do not overlap
    if len(recipes) > 1:
        ranges = {
            r: (min(x[4] for x in v), max(x[4] for x in v)) for r, v in rows.items()
        }
        order = sorted(recipes, key=lambda r: ranges[r][1], reverse=True)
        for better, worse in zip(order, order[1:]):
            apart = ranges[better][0] > ranges[worse][1]
            print(
                f"\nvalidation: {better} {ranges[better][0]:.4f}-{ranges[better][1]:.4f}"
                f", {worse} {ranges[worse][0]:.4f}-{ranges[worse][1]:.4f}: "
                + ("apart" if apart else "overlapping")
            )
    for recipe in recipes:
        report(recipe, rows[recipe], args.device)


if __name__ == "__main__":
    main()
