"""vitlib: the Vision Transformer of the ViT book, built from scratch chapter by chapter.

Every module except this file is generated from the book's notebooks (`make export`);
edit the notebook, never the module.
"""

__version__ = "0.1.0"

from . import checks, patches, utils
from .patches import LinearPatchEmbed, PatchEmbed, patchify, unpatchify

__all__ = ["checks", "patches", "utils", "PatchEmbed", "LinearPatchEmbed", "patchify", "unpatchify"]
