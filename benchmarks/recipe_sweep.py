"""Variants of a recipe side by side, to choose on validation: each variant is the recipe plus
flags of `python -m vitlib.train`, one seed each, all running at once as separate processes
on one device. A GPU shares its time among them, so their accuracies compare and their
seconds do not; `--solo` first times named variants alone, a few epochs each, for the
seconds an epoch costs (the first epoch, compiling included, is shown apart).

    python benchmarks/recipe_sweep.py --device cuda --recipe fashion-gpu-modern --seed 0 \\
        --variant recipe --variant "trivial: --auto-augment trivial" \\
        --variant "130 epochs: --epochs 130" --solo recipe trivial --deadline 420

A variant "recipe" (no flags) is the recipe unchanged. `--deadline` seconds after the script
starts (the solo timings count), the runs still going are stopped and reported from their
last checkpoint (marked "stopped"): give it a margin under any outer time limit. Per variant: validation
accuracy every tenth epoch, the last ten epochs' validation, test and training accuracy
(training: on augmented images, drop-path on), and the best validation;
then one line per variant:
variant=NAME epochs=E final_val_accuracy=V final_test_accuracy=T best_val_accuracy=B
"""

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from safetensors import safe_open

from vitlib.checkpoint import TRAIN_STATE, checkpoints
from vitlib.utils import is_smoke, log_header


def command(recipe, flags, seed, device, out) -> list:
    """The training command of one variant."""
    argv = [sys.executable, "-m", "vitlib.train", "--recipe", recipe]
    argv += ["--seed", str(seed), "--device", device, "--no-progress", "--out", out]
    if is_smoke():
        argv += ["--train-subset", "512", "--test-subset", "256", "--epochs", "2"]
        argv += ["--no-compile"]
    return argv + flags


def history(out) -> dict:
    """The history of the newest checkpoint in `out` ({} when no epoch ended)."""
    found = checkpoints(out)
    if not found:
        return {}
    with safe_open(str(found[-1] / TRAIN_STATE), "pt") as f:
        return json.loads(f.metadata()["history"])


def variants(specs) -> dict:
    """{name: flags} from 'name: --flag value ...' strings ('recipe': the recipe as is)."""
    found = {}
    for spec in specs:
        name, _, flags = spec.partition(":")
        found[name.strip()] = shlex.split(flags)
    return found


def solo(name, flags, args, folder, epochs) -> None:
    """Time `name` alone for `epochs` epochs: seconds of the first and of the others."""
    out = str(Path(folder) / f"solo-{len(list(Path(folder).iterdir()))}")
    argv = command(args.recipe, flags, args.seed, args.device, out)
    subprocess.run(
        [*argv, "--stop-after", str(epochs)], check=True, capture_output=True
    )
    seconds = history(out)["seconds"]
    rest = seconds[1:] or [float("nan")]
    print(
        f"solo {name}: first epoch {seconds[0]:.1f} s (compiling included), then "
        f"{min(rest):.2f}-{max(rest):.2f} s an epoch ({len(rest)} epochs)"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="fashion-cpu")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", action="append", default=[], help="NAME: FLAGS")
    parser.add_argument("--solo", nargs="*", default=[], help="variants to time alone")
    parser.add_argument("--solo-epochs", type=int, default=4)
    parser.add_argument("--deadline", type=float, default=float("inf"))
    args = parser.parse_args()
    found = variants(args.variant or ["recipe", "smaller lr: --lr 0.001"])
    start = time.perf_counter()  # the deadline counts from here, the solo timings too
    print(log_header())
    print(f"recipe {args.recipe}, seed {args.seed}, variants {found}")
    with tempfile.TemporaryDirectory() as folder:
        for name in args.solo:
            solo(name, found[name], args, folder, 2 if is_smoke() else args.solo_epochs)
        begin, runs = time.perf_counter(), {}
        for name, flags in found.items():
            out = str(Path(folder) / f"run-{len(runs)}")
            argv = command(args.recipe, flags, args.seed, args.device, out)
            log = open(Path(folder) / f"run-{len(runs)}.log", "w")
            runs[name] = (out, log, subprocess.Popen(argv, stdout=log, stderr=log))
        while any(p.poll() is None for _, _, p in runs.values()):
            if time.perf_counter() - start > args.deadline:
                for _, _, p in runs.values():
                    p.terminate()
                break
            time.sleep(1)
        wall = time.perf_counter() - begin
        print(f"{len(runs)} runs at once, {wall:.0f} s of wall-clock time")
        lines = []
        for name, (out, log, p) in runs.items():
            p.wait()
            log.close()
            h = history(out)
            if not h:  # no epoch ended
                tail = Path(out).with_suffix(".log").read_text()[-2000:]
                print(f"\nvariant {name}: failed (exit {p.returncode})\n{tail}")
                continue
            state = "finished" if p.returncode == 0 else "stopped"
            val, test = h["val_accuracy"], h["test_accuracy"]
            best = max(range(len(val)), key=val.__getitem__)
            every = " ".join(f"{v:.4f}" for v in val[9::10])
            print(
                f"\nvariant {name} ({state}, {len(val)} epochs): {shlex.join(found[name])}"
            )
            print(f"  validation every tenth epoch: {every}")
            print(
                f"  validation, last 10 epochs: {' '.join(f'{v:.4f}' for v in val[-10:])}"
            )
            print(f"  test, last 10 epochs: {' '.join(f'{v:.4f}' for v in test[-10:])}")
            train = h["train_accuracy"][-10:]  # augmented images, drop-path on
            print(f"  train, last 10 epochs: {' '.join(f'{v:.4f}' for v in train)}")
            print(f"  seconds, shared device: {sum(h['seconds']):.1f}")
            lines.append(
                f"variant={name.replace(' ', '_')} epochs={len(val)} "
                f"final_val_accuracy={val[-1]:.4f} final_test_accuracy={test[-1]:.4f} "
                f"best_val_accuracy={val[best]:.4f}@{best + 1}"
            )
        print("\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
