"""Export the notebooks into vitlib (`make export`; the export-sync test calls `export` too).

    python scripts/export.py [LIB_PATH]

nbdev's `nb_export` writes the `#| default_exp` module of a notebook afresh, but a cell marked
`#| export other_module` only updates an existing file. Chapter 5 exports two modules (model
and pretrained), so every module is written afresh here: each module has exactly one notebook.
"""

import sys
from pathlib import Path

from nbdev.export import nb_export
from nbdev.maker import ModuleMaker

ROOT = Path(__file__).resolve().parents[1]


def fresh_module(*args, is_new=False, **kwargs):
    return ModuleMaker(*args, is_new=True, **kwargs)


def export(lib_path=ROOT / "vitlib") -> None:
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb_export(str(notebook), lib_path=str(lib_path), mod_maker=fresh_module)


if __name__ == "__main__":
    export(sys.argv[1] if len(sys.argv) > 1 else ROOT / "vitlib")
