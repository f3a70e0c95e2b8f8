"""The cost of tokens: what a ViT's work and memory do as the patch shrinks and the tokens grow.

    python benchmarks/token_cost.py [--size 224] [--batch 1]

For ViT-Ti, ViT-S and ViT-B at `--size` pixels with patches of 32, 16 and 8 (49, 196 and 784
tokens at 224), counted on PyTorch's meta device (shapes only, no memory, no time):

- the floating-point operations of one forward pass per image (torch.utils.flop_counter; a
  multiply-add counts 2), and the share of them in attention's two products (scores and the
  weighted sum; on the meta device attention runs as those written-out products);
- the activations one training step keeps for the backward pass, per image: the bytes of every
  tensor autograd saves except the weights, in float32, as a written-out attention keeps them
  (with its (heads, n, n) weights); a fused kernel such as FlashAttention saves much less for
  attention; a tensor saved by two operations counts twice, so this is an upper bound.

Both count every token through every block, as a ViT's forward does (page 5b's FastViT would
skip the last block's other rows); the counting is vitlib.cnn's forward_flops and saved_bytes
(page 9).

Where a CUDA GPU is present, the peak memory of a real float32 training step per image is
measured for ViT-S/16 too (torch.cuda.max_memory_allocated, weights and their gradients
included), labelled with the GPU's name. The last line gives the ratios of the largest to the
smallest token count, for the log.
"""

import argparse

import torch

from vitlib.cnn import forward_flops, saved_bytes
from vitlib.model import vit_base, vit_small, vit_tiny
from vitlib.utils import hardware, log_header, pick

PRESETS = {"ViT-Ti": vit_tiny, "ViT-S": vit_small, "ViT-B": vit_base}


def cuda_peak_per_image(batch: int) -> float:
    """Peak bytes per image of a float32 ViT-S/16 training step on the GPU, measured."""
    device = torch.device("cuda")
    model = vit_small(num_classes=10).to(device)
    images = torch.randn(batch, 3, 224, 224, device=device)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    model(images).float().sum().backward()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / batch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=pick(full=224, smoke=64))
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    print(log_header())
    print(hardware("cpu"), "| counted on the meta device, float32")
    patches = [p for p in (32, 16, 8) if args.size % p == 0]
    print(
        f"\n{'model':8s} {'patch':>5s} {'tokens':>6s} {'GFLOPs':>8s} {'attention':>9s}"
        f" {'saved MB':>9s}   per image, forward FLOPs, training activations"
    )
    rows = {}
    for name, preset in PRESETS.items():
        for p in patches:
            with torch.device("meta"):
                model = preset(img_size=args.size, patch_size=p)
                images = torch.empty(args.batch, 3, args.size, args.size)
            flops, attention = forward_flops(model, images)
            memory = saved_bytes(model, images)
            tokens = 1 + (args.size // p) ** 2
            rows[name, p] = (flops / args.batch, memory / args.batch)
            print(
                f"{name:8s} {p:5d} {tokens:6d} {flops / args.batch / 1e9:8.2f}"
                f" {attention / flops:9.1%} {memory / args.batch / 2**20:9.1f}"
            )
    if torch.cuda.is_available():
        peak = cuda_peak_per_image(args.batch)
        print(
            f"\n{hardware('cuda')}: ViT-S/16 float32 training step, peak {peak / 2**20:.1f} MB per image"
        )
    big, small = min(patches), max(patches)
    ratios = [
        rows[name, big][k] / rows[name, small][k] for name in PRESETS for k in (0, 1)
    ]
    print(
        f"\nratios patch {big} / patch {small} (FLOPs, memory), Ti S B: "
        + " ".join(f"{r:.1f}" for r in ratios)
    )


if __name__ == "__main__":
    main()
