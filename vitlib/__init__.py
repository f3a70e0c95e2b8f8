"""vitlib: the Vision Transformer of the ViT book, built from scratch chapter by chapter.

Every module except this file is generated from the book's notebooks (`make export`);
edit the notebook, never the module.

Importing the package imports every chapter's module up to chapter 11, so that page 5a's
model registry (`vitlib.model.ARCHITECTURES`) holds every class they define, whatever is
imported first. Four modules are imported on demand, not here: `vitlib.train` (page 6d's
training run and the command line `python -m vitlib.train`), and `vitlib.ablations`,
`vitlib.pretrain` and `vitlib.checks`, which import it. Importing the training module with
the package would make `python -m vitlib.train` warn that the module was imported twice.
`vitlib.load_checkpoint`, `vitlib.save_checkpoint` (page 6c's `vitlib.checkpoint`) and
`vitlib.MaskedViT` import vitlib.pretrain on first use, and so fill the registry with every
class that a checkpoint may name; write `from vitlib.train import train`,
`from vitlib.pretrain import MaskedViT` or `from vitlib import checks` as usual.
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
    pretrained,
    rollout,
    utils,
    viz,
)
from .attention import MultiHeadAttention
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
    "pretrained",
    "rollout",
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

# names of the modules imported on demand: (module, name); read by __getattr__ (PEP 562)
_ON_DEMAND = {
    "load_checkpoint": "checkpoint",
    "save_checkpoint": "checkpoint",
    "MaskedViT": "pretrain",
}


def __getattr__(name):
    """vitlib.load_checkpoint and the other names of the modules imported on demand: the
    first use imports them (vitlib.pretrain too, so that every model class is registered)."""
    if name not in _ON_DEMAND:
        raise AttributeError(f"module 'vitlib' has no attribute {name!r}")
    import importlib

    importlib.import_module(".pretrain", __name__)  # registers MaskedViT; imports vitlib.train
    return getattr(importlib.import_module(f".{_ON_DEMAND[name]}", __name__), name)


def __dir__():
    return sorted([*globals(), *_ON_DEMAND])
