"""Time to accuracy on Fashion-MNIST: train the documented recipe for a device and report
how many seconds of training it took to first reach the target test accuracy.

    python benchmarks/time_to_accuracy.py --device cpu    # recipe fashion-cpu, target 90.0%
    python benchmarks/time_to_accuracy.py --device cuda   # recipe fashion-gpu, target 93.0%

The recipes are vitlib.train.RECIPES; each is also one command line:
    python -m vitlib.train --recipe fashion-cpu --out runs/fashion-cpu

Seconds count training steps only (torch.compile's compilation, inside the first epoch,
included); loading the data and the test evaluation after each epoch are not counted. The
last line reads: seconds_to_target=S final_test_accuracy=A device=D
"""

import argparse
import math
import sys
import time

import torch

from vitlib.data import fashion_mnist
from vitlib.model import create_vit
from vitlib.train import RECIPES
from vitlib.utils import hardware, is_smoke

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
    device = torch.device(args.device)
    target = args.target or TARGETS[args.device]
    name = RECIPE_FOR[args.device]
    recipe = RECIPES[name]

    start = time.perf_counter()
    data = fashion_mnist(args.data, device=device)
    config = recipe.train
    if is_smoke():
        from dataclasses import replace

        data = data.subset(512, 256)
        config = replace(config, epochs=1, compile=False)
    print(f"data: {data} loaded in {time.perf_counter() - start:.1f} s (not counted)")
    print(f"hardware: {hardware(device)}")
    print(f"recipe {name}: preset {recipe.preset} {recipe.model}")
    print(f"  {config}")
    print(f"  one line: python -m vitlib.train --recipe {name} --out runs/{name}")

    from vitlib.train import train

    torch.manual_seed(config.seed)
    model = create_vit(
        recipe.preset,
        **recipe.model,
        img_size=data.image_shape[1],
        in_channels=data.image_shape[0],
        num_classes=data.num_classes,
    )
    print(f"  {sum(p.numel() for p in model.parameters()):,} parameters")
    history = train(model, data, config, progress=False)

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
        f"device={args.device}:{hardware(device).split(',')[0]}"
    )


if __name__ == "__main__":
    main()
