"""Where a training step of vitlib's ViT-S/16 and timm's spends its time, op by op.

    python benchmarks/profile_step.py [--batch 64] [--steps 3] [--top 25]

One forward and backward pass of each model (the same weights: timm's is built from vitlib's
with vitlib.pretrained.to_timm), eager, under torch.profiler, after a warm-up step. Prints, for
the ops that take the most time in either model, the self CPU time per step and the number of
calls of each, then the totals and their ratio. An op that one model calls and the other does
not shows where their work differs.
"""

import argparse
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from vitlib.model import vit_small
from vitlib.pretrained import to_timm
from vitlib.utils import hardware, log_header, pick, training_step


def op_times(step, steps: int) -> dict:
    """{op name: (self CPU milliseconds per step, calls per step)} over `steps` steps."""
    step()  # warm-up: allocations and kernel choices
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    table = defaultdict(lambda: [0.0, 0])
    for event in prof.key_averages():
        table[event.key][0] += event.self_cpu_time_total / 1e3 / steps
        table[event.key][1] += event.count / steps
    return {name: tuple(v) for name, v in table.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=pick(full=64, smoke=2))
    parser.add_argument("--steps", type=int, default=pick(full=3, smoke=1))
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    size, depth = pick(full=224, smoke=32), pick(full=12, smoke=1)
    print(log_header())
    print(hardware("cpu"))
    torch.manual_seed(0)
    ours = vit_small(img_size=size, depth=depth)
    theirs = to_timm(ours)
    images = torch.randn(args.batch, 3, size, size)
    print(f"ViT-S/16 ({depth} blocks) at {size}x{size}, batch {args.batch}, eager")
    times = {
        "vitlib": op_times(training_step(ours, images), args.steps),
        "timm": op_times(training_step(theirs, images), args.steps),
    }
    names = set(times["vitlib"]) | set(times["timm"])
    busiest = sorted(
        names,
        key=lambda n: -max(times[m].get(n, (0, 0))[0] for m in times),
    )[: args.top]
    print(
        f"\n{'op':44s} {'vitlib ms':>10s} {'calls':>6s} {'timm ms':>10s} {'calls':>6s}"
    )
    for name in busiest:
        (a, na), (b, nb) = (times[m].get(name, (0.0, 0)) for m in ("vitlib", "timm"))
        print(f"{name[:44]:44s} {a:10.1f} {na:6.0f} {b:10.1f} {nb:6.0f}")
    total = {m: sum(t for t, _ in times[m].values()) for m in times}
    print(
        f"{'total self CPU time per step':44s} {total['vitlib']:10.1f} {'':6s} "
        f"{total['timm']:10.1f}"
    )
    print(f"ratio of the totals vitlib / timm: {total['vitlib'] / total['timm']:.3f}")


if __name__ == "__main__":
    main()
