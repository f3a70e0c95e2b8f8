"""What leaving hidden patches out of the encoder saves: one pretraining step, two ways.

    python benchmarks/mask_speed.py [--batch 256] [--ratio 0.75]

Page 10's MaskedViT keeps every token and puts a mask token in place of each hidden patch
(SimMIM, the ViT paper). MAE (He et al., 2022) runs the encoder on the visible tokens only.
This times one training step (forward, loss, backward, AdamW) of each on chapter 6's ViT shape
(patches of 7, width 64, four blocks) at 28x28 and at 56x56 images (16 and 64 patches):

- "in place": MaskedViT and its masked loss, as page 10 trains it;
- "visible only": the same encoder on the class token and the visible tokens (their positions
  added before the hidden ones are dropped), a linear layer on each visible output token.
  This is the encoder half of MAE, enough for timing; MAE's decoder (a small transformer
  over all tokens) would add some time back. The answer to exercise 10.6.

The last line gives the ratios of the two times, for the log.
"""

import argparse

import torch

from vitlib.loop import RECIPES, TrainConfig, make_optimizer
from vitlib.positions import prepend_cls
from vitlib.pretrain import MaskedViT, masked_loss, patch_targets, random_mask
from vitlib.utils import compare_times, hardware, log_header, pick, timing_table


def forward_visible(model, images, mask):
    """Output tokens (b, 1 + n - k, d) of the encoder on the class token and the visible
    patches only; `mask` (b, n) hides k patches in every row."""
    x = model.patch_embed(images) + model.pos_embed[:, 1:]  # (b, n, d), positions added
    b, n, d = x.shape
    keep = (
        (~mask).nonzero()[:, 1].view(b, -1)
    )  # (b, n - k): the visible patches' places
    x = x.gather(1, keep[..., None].expand(-1, -1, d))  # (b, n - k, d)
    cls = model.cls_token + model.pos_embed[:, :1]
    return model.norm(model.blocks(prepend_cls(x, cls))), keep


def visible_loss(model, images, mask):
    """A stand-in loss on the visible tokens' outputs (timing only)."""
    tokens, keep = forward_visible(model, images, mask)
    predictions = model.decoder(tokens[:, 1:])  # (b, n - k, c*p*p)
    targets = patch_targets(images, model.config.patch_size)
    targets = targets.gather(1, keep[..., None].expand(-1, -1, targets.shape[-1]))
    return (predictions - targets).pow(2).mean()


def step_fn(optimizer, loss, *inputs):
    """One training step: loss(*inputs), backward, AdamW."""

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss(*inputs).backward()
        optimizer.step()

    return step


def in_place_loss(model, images, mask):
    return masked_loss(model, images, mask)[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=pick(full=256, smoke=8))
    parser.add_argument("--ratio", type=float, default=0.75)
    args = parser.parse_args()
    print(log_header())
    print(
        hardware("cpu"), f"| batch {args.batch}, mask ratio {args.ratio:.0%}, float32"
    )
    shape = RECIPES["fashion-cpu"].model
    ratios = []
    for size in (28, 56):
        torch.manual_seed(0)
        model = MaskedViT(img_size=size, in_channels=1, **shape, mask_ratio=args.ratio)
        optimizer, _ = make_optimizer(model, TrainConfig(), 1)
        images = torch.randn(args.batch, 1, size, size)
        n = model.config.num_patches
        mask = random_mask(args.batch, n, args.ratio, torch.Generator().manual_seed(0))
        inputs = (model, images, mask)
        fns = {
            "in place": step_fn(optimizer, in_place_loss, *inputs),
            "visible only": step_fn(optimizer, visible_loss, *inputs),
        }
        results = compare_times(fns, baseline="in place")
        print(f"\n{size}x{size} images, {n} patches, {mask[0].sum().item()} hidden:")
        print(timing_table(results, "in place", items=args.batch))
        ratios.append(1 / results["visible only"].ratio)
    print(
        "\nratio (visible only's speed / in place's): "
        + ", ".join(f"{r:.2f} at {s}x{s}" for r, s in zip(ratios, (28, 56)))
    )


if __name__ == "__main__":
    main()
