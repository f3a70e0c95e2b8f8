"""vitlib: the Vision Transformer of the ViT book, built from scratch chapter by chapter.

Every module except this file is generated from the book's notebooks (`make export`);
edit the notebook, never the module.

Importing the package imports every chapter's library module, so that page 5a's model
registry (`vitlib.model.ARCHITECTURES`), page 6b's recipes and page 5b's timm converters hold
every entry they will ever hold, whatever is imported first. Three modules are imported on
demand, not here: the command line `vitlib.train` (appendix C; `python -m vitlib.train`
would warn that the module was imported twice if the package imported it), `vitlib.ablations`
(page 7's runner of command lines, which imports it) and `vitlib.checks` (appendix B). The
library never imports the command line: page 6d's training run is `vitlib.trainer.train`.
"""

__version__ = "0.1.0"

from . import (
    attention,
    block,
    checkpoint,
    cnn,
    data,
    live,
    loop,
    model,
    modern,
    patches,
    positions,
    pretrain,
    pretrained,
    rollout,
    trainer,
    utils,
    viz,
)
from .attention import MultiHeadAttention
from .checkpoint import load_checkpoint, save_checkpoint
from .block import DropPath, TransformerBlock, TransformerEncoder
from .cnn import HelpedViT, ResNet
from .data import DeviceLoader, ImageData, cifar10, fashion_mnist
from .loop import RECIPES, TrainConfig, evaluate
from .live import occlude, to_onnx
from .model import (
    ARCHITECTURES,
    PRESETS,
    ViT,
    ViTConfig,
    build_model,
    create_model,
    create_vit,
    parameter_counts,
    vit_base,
    vit_cifar,
    vit_fashion,
    vit_large,
    vit_small,
    vit_tiny,
)
from .modern import ModernViT, ModernViTConfig
from .patches import LinearPatchEmbed, PatchEmbed, patchify, unpatchify
from .positions import patch_grid, resample_pos_embed, sincos_2d
from .pretrain import MaskedViT
from .pretrained import (
    FastViT,
    from_hf,
    from_timm,
    load_weights,
    to_timm,
    to_timm_state_dict,
)
from .rollout import attention_rollout, cls_map, mean_attention_distance
from .viz import heatmap_overlay, plot_overlays

__all__ = [
    "attention",
    "block",
    "checkpoint",
    "cnn",
    "data",
    "live",
    "loop",
    "model",
    "modern",
    "patches",
    "positions",
    "pretrain",
    "pretrained",
    "rollout",
    "trainer",
    "utils",
    "viz",
    "ARCHITECTURES",
    "DeviceLoader",
    "FastViT",
    "HelpedViT",
    "ModernViT",
    "ModernViTConfig",
    "RECIPES",
    "ResNet",
    "TrainConfig",
    "build_model",
    "create_model",
    "evaluate",
    "to_timm",
    "ImageData",
    "cifar10",
    "fashion_mnist",
    "DropPath",
    "LinearPatchEmbed",
    "MaskedViT",
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
    "load_checkpoint",
    "load_weights",
    "mean_attention_distance",
    "occlude",
    "parameter_counts",
    "patch_grid",
    "patchify",
    "plot_overlays",
    "resample_pos_embed",
    "save_checkpoint",
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
