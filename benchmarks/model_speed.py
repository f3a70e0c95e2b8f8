"""Chapter 5's timing on any machine: a training step of vitlib's ViT-S/16 against timm's.

    python benchmarks/model_speed.py [--batch 64] [--rounds 10] [--no-compile]

Forward plus backward of ViT-S/16 at 224x224 with 1000 classes, batch 64, on the CPU and, where
there is one, on a CUDA GPU with bf16 autocast; each eagerly and with torch.compile. Both models
hold the same weights (timm's is built from vitlib's with vitlib.pretrained.to_timm). They are
timed in turns (vitlib.utils.compare_times), so that a slow spell of the machine hits both
alike. Prints images per second and the ratio vitlib / timm of the speeds; the goal is at
least 0.95.
"""

import argparse

import torch

from vitlib.model import vit_small
from vitlib.pretrained import to_timm
from vitlib.utils import compare_times, hardware, pick, training_step

GOAL = 0.95


def run(device: str, batch: int, rounds: int, compile_modes: list) -> list:
    size, depth = pick(full=224, smoke=32), pick(full=12, smoke=1)
    torch.manual_seed(0)
    ours = vit_small(img_size=size, depth=depth).to(device)
    theirs = to_timm(ours)
    images = torch.randn(batch, 3, size, size, device=device)
    print(f"\n{hardware(device)}{' (bf16 autocast)' if device == 'cuda' else ''}")
    print(
        f"ViT-S/16 ({depth} blocks) at {size}x{size}, batch {batch}: forward + backward"
    )
    ratios = []
    for compiled in compile_modes:
        label = "torch.compile" if compiled else "eager"
        models = {"vitlib": ours, "timm": theirs}
        if compiled:
            try:
                models = {name: torch.compile(m) for name, m in models.items()}
                for m in models.values():
                    # compile now, not inside the timing
                    training_step(m, images)()
            except Exception as error:  # no C++ compiler, an unsupported platform, ...
                print(
                    f"  {label:13s} unavailable here: {type(error).__name__}: {error}"
                )
                continue
        steps = {name: training_step(m, images) for name, m in models.items()}
        results = compare_times(steps, baseline="timm", rounds=rounds)
        speed = {name: batch / seconds for name, (seconds, _) in results.items()}
        ratio = 1 / results["vitlib"][1]
        ratios.append(ratio)
        verdict = "meets" if ratio >= GOAL else "MISSES"
        print(
            f"  {label:13s} vitlib {speed['vitlib']:8.1f} images/s   timm {speed['timm']:8.1f}"
            f" images/s   ratio vitlib / timm {ratio:.3f} ({verdict} the goal of {GOAL})"
        )
    return ratios


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=pick(full=64, smoke=2))
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--no-compile", action="store_true", help="time eager mode only"
    )
    args = parser.parse_args()
    compile_modes = [False] if args.no_compile else [False, True]
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        run(device, args.batch, args.rounds, compile_modes)


if __name__ == "__main__":
    main()
