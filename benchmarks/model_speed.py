"""Chapter 5b's timing on any machine: vitlib's ViT, plain and fast path, against timm's.

    python benchmarks/model_speed.py [--rounds 10] [--no-compile] [--device cuda]

Three rows, on the CPU and, where there is one, on a CUDA GPU with bf16 autocast:

- ViT-S/16 at 224x224, a training step (forward and backward), batch 64;
- ViT-B/16 at 224x224, a training step, batch 16 (a quarter of the batch for about four
  times the work per image);
- ViT-S/16, inference on one image: what a demo does.

Each eagerly and with torch.compile (compiled before timing; where compilation fails, the
script says why and goes on). Three models hold the same weights: vitlib's ViT (the textbook
forward, the same operations as timm's), vitlib.pretrained.FastViT (the last block computes
the class token's row only) and timm's, built with vitlib.pretrained.to_timm. They are timed in turns
(vitlib.utils.compare_times), so that a slow spell of the machine hits both alike, and each
table prints images per second, each speed over timm's (the goal: the plain path within the
noise of 1.00, the fast path above it on the CPU; on a GPU it measures level, see
benchmarks/GPU_NOTES.md) and the middle half of the per-round ratios. The last
lines of each run are `plain ratios: ...` and `fast ratios: ...`, one ratio per row, for the log.
"""

import argparse

import torch
from _devices import add_device_flag
from _devices import devices as devices_to_time

from vitlib.model import vit_base, vit_small
from vitlib.pretrained import FastViT, to_timm
from vitlib.utils import (
    autocast,
    compare_times,
    hardware,
    log_header,
    pick,
    timing_table,
    training_step,
)


def inference_step(model, images):
    model.eval()

    def step():
        with torch.inference_mode(), autocast(images.device):
            model(images)

    return step


ROWS = {  # name: (preset, batch, step)
    "ViT-S/16, training step, batch 64": (vit_small, 64, training_step),
    "ViT-B/16, training step, batch 16": (vit_base, 16, training_step),
    "ViT-S/16, inference, batch 1": (vit_small, 1, inference_step),
}


def run_row(name, device, rounds, compiled) -> float:
    preset, batch, make_step = ROWS[name]
    size, depth = pick(full=224, smoke=32), pick(full=12, smoke=1)
    batch = pick(full=batch, smoke=min(batch, 2))
    torch.manual_seed(0)
    ours = preset(img_size=size, depth=depth).to(device)
    fast = FastViT(ours.config).to(device)
    fast.load_state_dict(ours.state_dict())
    models = {"vitlib": ours, "vitlib fast": fast, "timm": to_timm(ours)}
    images = torch.randn(batch, 3, size, size, device=device)
    if compiled:
        models = {name: torch.compile(m) for name, m in models.items()}
    steps = {name: make_step(m, images) for name, m in models.items()}
    for step in steps.values():
        step()  # compile now, not inside the timing
    results = compare_times(steps, baseline="timm", rounds=rounds)
    mode = "torch.compile" if compiled else "eager"
    print(f"\n{name}, {mode}")
    print(timing_table(results, "timm", items=batch))
    return 1 / results["vitlib"].ratio, 1 / results["vitlib fast"].ratio


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--no-compile", action="store_true", help="eager mode only")
    add_device_flag(parser)
    args = parser.parse_args()
    print(log_header())
    devices = devices_to_time(args.device)
    for device in devices:
        print(f"\n{hardware(device)}{' (bf16 autocast)' if device == 'cuda' else ''}")
        ratios = []
        for compiled in [False] if args.no_compile else [False, True]:
            for name in ROWS:
                # torch.compile may fail: no C++ compiler, an unsupported platform, ...
                try:
                    ratios.append(run_row(name, device, args.rounds, compiled))
                except Exception as error:
                    print(f"\n{name}: unavailable: {type(error).__name__}: {error}")
        print()
        for column, path in enumerate(("plain", "fast")):
            row = " ".join(f"{r[column]:.3f}" for r in ratios)
            print(f"{path} ratios on {device}: {row}")


if __name__ == "__main__":
    main()
