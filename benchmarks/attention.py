"""Chapter 3's timing on any machine: the four attention versions and timm's Attention.

    python benchmarks/attention.py [--batch 32] [--tokens 197] [--rounds 15] [--device cuda]

Forward plus backward at ViT-S/16 (width 384, 6 heads) and ViT-B/16 (768, 12 heads) shapes, on
the CPU and, where there is one, on a CUDA GPU with bf16 autocast. All versions share one set of
weights. They are timed in turns (vitlib.utils.compare_times), so that a slow spell of the
machine hits all of them alike. Prints the median time of each, the median of its per-round
ratios to version 4 (SDPA) with their middle half, the same for vitlib / timm and, on CUDA,
peak memory.
"""

import argparse

import torch
from _devices import add_device_flag
from _devices import devices as devices_to_time

from vitlib.attention import (
    MultiHeadAttention,
    MultiHeadEinsum,
    MultiHeadFused,
    MultiHeadList,
    copy_fused_weights,
)
from vitlib.utils import (
    compare_times,
    hardware,
    log_header,
    pick,
    timing_table,
    training_step,
)

SHAPES = {"ViT-S/16": (384, 6), "ViT-B/16": (768, 12)}
BASELINE = "4: SDPA (vitlib)"


def build(dim: int, heads: int, device: str) -> dict:
    reference = MultiHeadAttention(dim, heads)
    modules = {
        "1: list of heads": MultiHeadList(dim, heads),
        "2: einops + einsum": MultiHeadEinsum(dim, heads),
        "3: fused qkv": MultiHeadFused(dim, heads),
        BASELINE: reference,
    }
    try:
        from timm.layers import Attention

        modules["timm Attention"] = Attention(dim, heads, qkv_bias=True)
    except ImportError:
        print("timm is not installed (pip install timm): no timm row")
    return {
        name: copy_fused_weights(reference, m).to(device) for name, m in modules.items()
    }


def peak_memory(step) -> float:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**20


def run(device: str, batch: int, tokens: int, rounds: int):
    print(f"\n{hardware(device)}{' (bf16 autocast)' if device == 'cuda' else ''}")
    for shape, (dim, heads) in SHAPES.items():
        modules = build(dim, heads, device)
        x = torch.randn(batch, tokens, dim, device=device)
        steps = {name: training_step(m, x) for name, m in modules.items()}
        results = compare_times(steps, baseline=BASELINE, rounds=rounds)
        print(
            f"{shape}: forward + backward, batch {batch} x {tokens} tokens x {dim}, "
            f"{heads} heads"
        )
        print(timing_table(results, BASELINE))
        if device == "cuda":
            for name, step in steps.items():
                print(f"  peak memory {name:<20} {peak_memory(step):8.0f} MiB")
        if "timm Attention" in results:
            ratio = 1 / results["timm Attention"].ratio  # within its middle half
            low, high = (1 / r for r in reversed(results["timm Attention"].spread))
            print(
                f"time ratio vitlib / timm: {ratio:.3f} (middle half of rounds "
                f"{low:.3f} to {high:.3f})"
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=pick(full=32, smoke=2))
    parser.add_argument("--tokens", type=int, default=pick(full=197, smoke=17))
    parser.add_argument("--rounds", type=int, default=15)
    add_device_flag(parser)
    args = parser.parse_args()
    devices = devices_to_time(args.device)
    print(log_header())
    for device in devices:
        run(device, args.batch, args.tokens, args.rounds)


if __name__ == "__main__":
    main()
