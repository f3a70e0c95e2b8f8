"""Chapter 11's changes at equal CPU time: each change of vitlib.modern.CHANGES alone on the
chapter-6 CPU model (the fashion-cpu recipe's ViT), and any combinations given, trained for
the same number of seconds with each seed and read on the validation split.

    python benchmarks/modern_vit.py --budget 60 --seeds 0 1 2
    python benchmarks/modern_vit.py --only baseline registers --budget 20 --seeds 0
    python benchmarks/modern_vit.py --combine "mean pooling" "shifted patches" --test

Each run trains with the recipe's TrainConfig (AdamW, warm-up of one epoch, label smoothing,
crop and flip) through vitlib.trainer.train with a time budget (seconds=--budget): the
cosine schedule ends with the clock, so a faster model takes more steps. The validation
accuracy is read after each epoch and when the time is up (the clock stops while it is
read). The rows take turns, seed by seed, so that a drift in the machine's speed touches
every row alike. `--test` also scores the test split once, after the last step, for the baseline and
the combinations (the final rows). Every run prints one JSON line (`run {...}`)
that page 11 reads; the table at the end gives each row's mean and range over the seeds.
"""

import argparse
import itertools
import json
import statistics
from dataclasses import replace

import torch

from vitlib.data import fashion_mnist
from vitlib.loop import RECIPES, evaluate
from vitlib.model import build_model
from vitlib.modern import CHANGES
from vitlib.trainer import train, validation_only
from vitlib.utils import is_smoke, log_header, pick

BASE = "fashion-cpu"  # chapter 6's CPU recipe: its model and its training settings


def rows(only, combine) -> dict:
    """name: the ModernViTConfig fields of each row (the baseline has none)."""
    table = {"baseline": {}, **CHANGES}
    if combine:
        table["combined: " + " + ".join(combine)] = {
            k: v for name in combine for k, v in CHANGES[name].items()
        }
    return {
        k: v for k, v in table.items() if not only or k in only or k.startswith("comb")
    }


def run(name, fields, seed, data, budget, test) -> dict:
    recipe = RECIPES[BASE]
    config = replace(recipe.train, seed=seed)
    torch.manual_seed(seed)
    model = build_model("vit-modern", recipe.preset, **{**recipe.model, **fields})
    options = dict(seconds=budget, progress=False, evaluate_fn=validation_only)
    epochs = train(model, data, config, **options)  # one row per epoch
    images = [
        s * rate for s, rate in zip(epochs["seconds"], epochs["images_per_second"])
    ]
    history = dict(  # at the end of each epoch, so far
        step=[round(n / config.batch_size) for n in itertools.accumulate(images)],
        seconds=list(itertools.accumulate(epochs["seconds"])),
        val_accuracy=epochs["val_accuracy"],
    )
    steps, seconds = history["step"][-1], history["seconds"][-1]
    result = dict(row=name, seed=seed, fields=fields, budget=budget, steps=steps)
    result |= dict(step_seconds=round(seconds / steps, 5), history=history)
    result |= dict(parameters=sum(p.numel() for p in model.parameters()))
    result |= dict(val_accuracy=history["val_accuracy"][-1], seconds=seconds)
    if test:
        result["test_accuracy"] = evaluate(model, data, "test")["accuracy"]
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", nargs="+", help="these rows only (and combinations)")
    parser.add_argument("--combine", nargs="+", choices=sorted(CHANGES), default=[])
    parser.add_argument("--test", action="store_true", help="test the final rows once")
    parser.add_argument(
        "--data", help="dataset folder (default: VITLIB_DATA or ./data)"
    )
    args = parser.parse_args()
    print(log_header())
    data = fashion_mnist(args.data).hold_out(pick(full=5_000, smoke=300))  # page 6a
    budget = args.budget
    if is_smoke():  # the tests: a slice of the data, a second per run
        budget = 1.0
    print(
        f"{BASE}'s model and training settings, {budget:g} s of training per run, {data}"
    )
    table = rows(args.only, args.combine)
    results = []
    # the seeds outermost, the rows in turn inside: a machine whose speed drifts during the
    # run (it does, by a tenth and more) slows every row alike, not the last ones
    for seed in args.seeds:
        for name, fields in table.items():
            final = args.test and (name == "baseline" or name.startswith("combined"))
            results.append(run(name, fields, seed, data, budget, final))
            print("run", json.dumps(results[-1]), flush=True)
    print(
        f"\n{'row':34s} {'params':>7s} {'steps':>5s} {'s':>5s} {'val mean':>8s} range"
    )
    for name in table:
        mine = [r for r in results if r["row"] == name]
        vals = [r["val_accuracy"] for r in mine]
        seconds = statistics.mean(r["seconds"] for r in mine)
        steps = statistics.mean(r["steps"] for r in mine)
        spread = f"{min(vals):.4f}-{max(vals):.4f}"
        print(
            f"{name:34s} {mine[0]['parameters']:7d} {steps:5.0f} {seconds:5.1f} "
            f"{statistics.mean(vals):8.4f} {spread}"
        )


if __name__ == "__main__":
    main()
