"""Chapter 1's timing on any machine: Conv2d against einops + Linear patch embedding.

    python benchmarks/patch_embed.py [--batch 64] [--dim 768] [--patch 16] [--size 224]

Times the forward pass and the forward plus backward pass of both versions in one run, on the
CPU and, where there is one, on a CUDA GPU with bf16 autocast, and prints each ratio
einops / Conv2d (below 1: einops is faster). The chapter shows the same table for its CPU.
"""

import argparse

import torch
from _devices import devices as devices_to_time

from vitlib.patches import PatchEmbed, conv_to_linear
from vitlib.utils import autocast, hardware, log_header, measure, pick


def time_versions(device: str, batch: int, dim: int, patch: int, size: int) -> dict:
    conv = PatchEmbed(patch_size=patch, in_channels=3, dim=dim).to(device)
    versions = {"Conv2d": conv, "einops + Linear": conv_to_linear(conv)}
    images = torch.rand(batch, 3, size, size, device=device)
    results = {}
    for name, embed in versions.items():

        def forward(embed=embed):
            with torch.inference_mode(), autocast(device):
                embed(images)

        def forward_backward(embed=embed):
            embed.zero_grad(set_to_none=True)
            with autocast(device):
                out = embed(images)
            out.float().sum().backward()

        results[name] = (measure(forward), measure(forward_backward))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=pick(full=64, smoke=2))
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--patch", type=int, default=16)
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()
    devices = devices_to_time()
    print(log_header())
    print(
        f"batch {args.batch} x 3 x {args.size} x {args.size}, patch {args.patch}, d = {args.dim}"
    )
    for device in devices:
        results = time_versions(device, args.batch, args.dim, args.patch, args.size)
        print(f"\n{hardware(device)}{' (bf16 autocast)' if device == 'cuda' else ''}")
        print(f"{'version':<16} {'forward':>10} {'fwd + bwd':>11}")
        for name, (forward, both) in results.items():
            print(f"{name:<16} {forward * 1e3:>7.2f} ms {both * 1e3:>8.2f} ms")
        (cf, cb), (lf, lb) = results["Conv2d"], results["einops + Linear"]
        print(
            f"ratio einops / Conv2d: forward {lf / cf:.2f}x, forward + backward {lb / cb:.2f}x"
        )


if __name__ == "__main__":
    main()
