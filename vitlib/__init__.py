"""vitlib: the Vision Transformer of the ViT book, built from scratch chapter by chapter.

Every module except this file is generated from the book's notebooks (`make export`);
edit the notebook, never the module.
"""

__version__ = "0.1.0"

from . import attention, checks, patches, positions, utils
from .attention import MultiHeadAttention
from .patches import LinearPatchEmbed, PatchEmbed, patchify, unpatchify
from .positions import resample_pos_embed, sincos_2d

__all__ = [
    "attention",
    "checks",
    "patches",
    "positions",
    "utils",
    "LinearPatchEmbed",
    "MultiHeadAttention",
    "PatchEmbed",
    "patchify",
    "resample_pos_embed",
    "sincos_2d",
    "unpatchify",
]
