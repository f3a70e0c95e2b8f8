"""Do the maps explain the prediction (page 8d)? Deletion and insertion areas of every method
of vitlib.faithfulness, on the whole Fashion-MNIST test set, for trained models of several
recipes and seeds.

    python benchmarks/time_to_accuracy.py --recipe fashion-cpu fashion-cpu-modern \\
        --seeds 0 1 2 --keep notebooks/runs/seeds          # trains the six models
    python benchmarks/faithfulness.py --runs notebooks/runs/seeds \\
        --recipes fashion-cpu fashion-cpu-modern --seeds 0 1 2 --images 2000
    python benchmarks/faithfulness.py ... --device cuda   # the same in float32 on a GPU

Each model is the checkpoint in RUNS/RECIPE-seedN; `--images N` measures the first N test
images (default: all 10,000, about five minutes a model on two CPU threads; page 8d reads
the GPU log, faithfulness_cuda.txt). "Deleting" a patch sets it to the training set's mean
(0 after normalisation). For every model: one line `run {json}` with the test
accuracy and, per method, the mean deletion and insertion areas (random: three draws, each
its own row) and the deletion area per predicted class; then, per recipe and method, the
mean over the seeds and their range. Low deletion and high insertion areas are better.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from _devices import add_device_flag, devices

from vitlib.checkpoint import load_checkpoint
from vitlib.data import fashion_mnist
from vitlib.faithfulness import curve_area, measure
from vitlib.loop import RECIPES
from vitlib.model import build_model
from vitlib.utils import is_smoke, log_header, pick


def model_for(runs: Path, recipe: str, seed: int, wait: float = 1800):
    """The trained checkpoint RUNS/RECIPE-seedN once its run has finished (metrics.json is
    written last: a run still training is waited for, up to `wait` seconds); in smoke mode
    without one, the recipe's model untrained."""
    folder = runs / f"{recipe}-seed{seed}"
    waited = 0
    while folder.exists() and not (folder / "metrics.json").exists() and waited < wait:
        time.sleep(10)
        waited += 10
    if (folder / "metrics.json").exists():
        model, info = load_checkpoint(folder)
        if info["epoch"] != RECIPES[recipe].train.epochs and not is_smoke():
            sys.exit(f"{folder}: epoch {info['epoch']}, not the recipe's last")
        return model
    if is_smoke():
        torch.manual_seed(seed)
        r = RECIPES[recipe]
        return build_model(r.architecture, r.preset, **r.model)
    sys.exit(f"no checkpoint in {folder}: train it first (see this script's docstring)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("notebooks/runs/seeds"))
    parser.add_argument("--recipes", nargs="+", default=["fashion-cpu"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument(
        "--images", type=int, help="the first N test images (default: all)"
    )
    parser.add_argument(
        "--data", help="dataset folder (default: VITLIB_DATA or ./data)"
    )
    add_device_flag(parser)
    args = parser.parse_args()
    (device,) = devices(args.device or "cpu")
    if device == "cuda":  # float32 as on a CPU: no TF32 in products or convolutions
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    print(log_header())
    data = fashion_mnist(args.data)
    n = pick(full=args.images or len(data.test_labels), smoke=64)
    mean = torch.tensor(data.mean).view(1, -1, 1, 1)
    std = torch.tensor(data.std).view(1, -1, 1, 1)
    images = (data.test_images[:n].float() / 255 - mean) / std  # the model's input
    images, labels = images.to(device), data.test_labels[:n].to(device)
    print(
        f"{n:,} test images on {device}; deleting a patch sets it to the training mean"
    )
    table = {}
    for recipe in args.recipes:
        for seed in args.seeds:
            model = model_for(args.runs, recipe, seed).to(device).eval()
            with torch.no_grad():
                predicted = model(images).argmax(-1)
            curves = measure(model, images, batch_size=pick(full=1000, smoke=32))
            row = {
                "recipe": recipe,
                "seed": seed,
                "accuracy": (predicted == labels).float().mean().item(),
            }
            for method, kinds in curves.items():
                areas = {kind: curve_area(c) for kind, c in kinds.items()}
                per_class = [  # None: no image predicted as that class
                    round(areas["deletion"][predicted == k].mean().item(), 4)
                    if (predicted == k).any()
                    else None
                    for k in range(len(data.classes))
                ]
                row[method] = {k: round(a.mean().item(), 4) for k, a in areas.items()}
                row[method]["deletion per class"] = per_class
                table.setdefault((recipe, method), []).append(row[method])
            print("run " + json.dumps(row), flush=True)
    print(
        f"\n{'recipe':20s} {'method':28s} {'deletion (range)':>24s} {'insertion (range)':>24s}"
    )
    for (recipe, method), rows in table.items():
        cells = []
        for kind in ("deletion", "insertion"):
            values = [r[kind] for r in rows]
            low, high = min(values), max(values)
            cells.append(f"{statistics.mean(values):.4f} ({low:.4f}-{high:.4f})")
        print(f"{recipe:20s} {method:28s} {cells[0]:>24s} {cells[1]:>24s}")


if __name__ == "__main__":
    main()
