"""vitlib: the Vision Transformer of the ViT book, built from scratch chapter by chapter.

Every module except this file is generated from the book's notebooks (`make export`);
edit the notebook, never the module.

Five modules are imported on demand, not here: `vitlib.train` (the training run with its
checkpoints, and the command line `python -m vitlib.train`), `vitlib.cnn` (chapter 9's
models and recipes, which the training module reads), and `vitlib.ablations`,
`vitlib.pretrain` and `vitlib.checks`, which use it. Importing the training module with the
package would make `python -m vitlib.train` warn that the module was imported twice. Write
`from vitlib.train import train`, `from vitlib.pretrain import MaskedViT` or
`from vitlib import checks`.
"""

__version__ = "0.1.0"

from . import (
    attention,
    block,
    data,
    live,
    loop,
    model,
    patches,
    positions,
    pretrained,
    rollout,
    utils,
    viz,
)
from .attention import MultiHeadAttention
from .block import DropPath, TransformerBlock, TransformerEncoder
from .data import DeviceLoader, ImageData, cifar10, fashion_mnist
from .live import occlude, to_onnx
from .model import (
    PRESETS,
    ViT,
    ViTConfig,
    create_vit,
    parameter_counts,
    vit_base,
    vit_cifar,
    vit_fashion,
    vit_large,
    vit_small,
    vit_tiny,
)
from .patches import LinearPatchEmbed, PatchEmbed, patchify, unpatchify
from .positions import patch_grid, resample_pos_embed, sincos_2d
from .pretrained import from_hf, from_timm, load_weights, to_timm_state_dict
from .rollout import attention_rollout, cls_map, mean_attention_distance
from .viz import heatmap_overlay, plot_overlays

__all__ = [
    "attention",
    "block",
    "data",
    "live",
    "loop",
    "model",
    "patches",
    "positions",
    "pretrained",
    "rollout",
    "utils",
    "viz",
    "DeviceLoader",
    "ImageData",
    "cifar10",
    "fashion_mnist",
    "DropPath",
    "LinearPatchEmbed",
    "MultiHeadAttention",
    "PRESETS",
    "PatchEmbed",
    "TransformerBlock",
    "TransformerEncoder",
    "attention_rollout",
    "cls_map",
    "ViT",
    "ViTConfig",
    "create_vit",
    "from_hf",
    "from_timm",
    "heatmap_overlay",
    "load_weights",
    "mean_attention_distance",
    "occlude",
    "parameter_counts",
    "patch_grid",
    "patchify",
    "plot_overlays",
    "resample_pos_embed",
    "sincos_2d",
    "to_onnx",
    "to_timm_state_dict",
    "unpatchify",
    "vit_base",
    "vit_cifar",
    "vit_fashion",
    "vit_large",
    "vit_small",
    "vit_tiny",
]
