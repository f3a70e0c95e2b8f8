"""Time to accuracy on Fashion-MNIST: train the documented recipe for a device and report
how many seconds of training it took to first reach the target test accuracy.

    python benchmarks/time_to_accuracy.py --device cpu    # recipe fashion-cpu, target 90.0%
    python benchmarks/time_to_accuracy.py --device cuda   # recipe fashion-gpu, target 93.0%

The recipes are vitlib.train.RECIPES; each is also one command line:
    python -m vitlib.train --recipe fashion-cpu --out runs/fashion-cpu

It runs the recipe through `python -m vitlib.train`'s own code. Seconds count training steps
only (torch.compile's compilation, inside the first epoch, included); loading the data, the
test evaluation and the checkpoint after each epoch are not counted. The
last line reads: seconds_to_target=S final_test_accuracy=A device=D
"""

import argparse
import math
import sys
import tempfile

import torch

from vitlib.train import main as train_cli
from vitlib.utils import hardware, is_smoke, log_header

TARGETS = {"cpu": 0.90, "cuda": 0.93}
RECIPE_FOR = {"cpu": "fashion-cpu", "cuda": "fashion-gpu"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=sorted(TARGETS), default="cpu")
    parser.add_argument("--target", type=float, help="test accuracy to reach (0-1)")
    parser.add_argument(
        "--data", help="dataset folder (default: VITLIB_DATA or ./data)"
    )
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no GPU here")
    target = args.target or TARGETS[args.device]
    name = RECIPE_FOR[args.device]
    print(log_header())
    print(
        f"recipe {name}; one line: python -m vitlib.train --recipe {name} --out runs/{name}"
    )

    # the command line's own code, so the benchmark runs exactly the documented recipe
    argv = ["--recipe", name, "--device", args.device, "--no-progress"]
    if args.data:
        argv += ["--data", args.data]
    if is_smoke():
        argv += [
            "--train-subset",
            "512",
            "--test-subset",
            "256",
            "--epochs",
            "1",
            "--no-compile",
        ]
    with tempfile.TemporaryDirectory() as out:
        history = train_cli([*argv, "--out", out])["history"]

    print(f"\n{'epoch':>5} {'train s':>8} {'total s':>8} {'test acc':>9}")
    total, reached = 0.0, math.inf
    for epoch, seconds, accuracy in zip(
        history["epoch"], history["seconds"], history["test_accuracy"]
    ):
        total += seconds
        if accuracy >= target and reached == math.inf:
            reached = total
        print(f"{epoch:5d} {seconds:8.1f} {total:8.1f} {accuracy:9.4f}")
    final = history["test_accuracy"][-1]
    print(f"target {target:.3f}: {'reached' if reached < math.inf else 'NOT reached'}")
    print(
        f"seconds_to_target={reached:.1f} final_test_accuracy={final:.4f} "
        f"device={args.device}:{hardware(args.device).split(',')[0]}"
    )


if __name__ == "__main__":
    main()
