"""What building each model of the book costs, beside chapter 5's ViT: modules constructed,
modules kept, and seconds to build (issue: each model built once, from parts).

    python benchmarks/model_build.py [--rounds 5]

For each shape (ViT-B/16 and the fashion preset) it builds chapter 5's ViT, chapter 11's
ModernViT with every option off and with every option on (QK-norm, LayerScale, SwiGLU, two
registers, attention pooling, shifted patches), and chapter 9's HelpedViT with its stem and
distillation token. "constructed" counts nn.Module.__init__ calls while building, "kept" the
modules the model holds: equal when nothing is built and thrown away. Seconds are the median
of --rounds builds, taken in turns so that a slow spell of the machine hits every model alike;
"ratio" is each model's seconds over the ViT's in the same run.
"""

import argparse
import statistics
import time
from dataclasses import asdict

import torch
from torch import nn

from vitlib.cnn import STEM, HelpedViT, HelpedViTConfig
from vitlib.model import PRESETS, ViT
from vitlib.modern import ModernViT, ModernViTConfig
from vitlib.utils import log_header, pick

ALL_ON = dict(qk_norm=True, layer_scale=1e-5, mlp="swiglu", registers=2, pool="map")
ALL_ON |= dict(tokenizer="shifted")


def counted(make) -> tuple:
    """(the model make() builds, how many modules were constructed on the way)."""
    count, init = 0, nn.Module.__init__

    def counting(module, *args, **kwargs):
        nonlocal count
        count += 1
        init(module, *args, **kwargs)

    nn.Module.__init__ = counting
    try:
        model = make()
    finally:
        nn.Module.__init__ = init
    return model, count


def makers(preset: str) -> dict:
    shape = asdict(PRESETS[preset])
    makers = {
        "ViT (chapter 5)": lambda: ViT(PRESETS[preset]),
        "ModernViT, options off": lambda: ModernViT(ModernViTConfig(**shape)),
        "ModernViT, options on": lambda: ModernViT(
            ModernViTConfig(**{**shape, **ALL_ON})
        ),
    }
    if preset == "fashion":  # the stem's widths are for 28x28 images
        makers["HelpedViT, stem + token"] = lambda: HelpedViT(
            HelpedViTConfig(**shape, stem=STEM, distilled=True)
        )
    return makers


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rounds = pick(args.rounds, 1)
    print(log_header())
    torch.manual_seed(0)
    for preset in pick(("base", "fashion"), ("fashion",)):
        built = makers(preset)
        times = {name: [] for name in built}
        for _ in range(rounds):
            for name, make in built.items():  # in turns
                start = time.perf_counter()
                make()
                times[name].append(time.perf_counter() - start)
        base = statistics.median(times["ViT (chapter 5)"])
        print(
            f"\n{preset}: {'model':26s} {'constructed':>11s} {'kept':>5s} "
            f"{'seconds':>8s} {'ratio':>6s}"
        )
        for name, make in built.items():
            model, made = counted(make)
            kept = len(list(model.modules()))
            seconds = statistics.median(times[name])
            print(
                f"{preset}: {name:26s} {made:11d} {kept:5d} {seconds:8.3f} "
                f"{seconds / base:6.2f}"
            )


if __name__ == "__main__":
    main()
