"""Write vitlib/ from the notebooks (`make export`): nbdev's own `nb_export`, one notebook at a time.

    python scripts/export.py

Each notebook writes the module its `#| default_exp` cell names, afresh. Appendix B also writes
one module of checks for each page (`#| export checks.attention`): every module is written
afresh by the one notebook that exports it (nbdev itself would append to a second module, so
`ModuleMaker` is told each module is new; tests/test_export.py checks that no two notebooks
export the same module). The notebooks are
exported in the book's reading order: the pages of `_toc.yml`. `tests/test_export.py` exports a
copy of `notebooks/` with the same function and compares the result with `vitlib/`.
"""

from pathlib import Path

import yaml
from nbdev.export import nb_export
from nbdev.maker import ModuleMaker

ROOT = Path(__file__).resolve().parents[1]


def reading_order(root: Path = ROOT) -> list:
    """The notebooks of the table of contents, in reading order, as paths under notebooks/."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    return [root / f"{f}.ipynb" for f in files if f.startswith("notebooks/")]


class FreshModule(ModuleMaker):
    """nbdev's ModuleMaker, writing every module of a notebook afresh, not only its default."""

    def __init__(self, dest, name, nb_path, is_new=True, **kwargs):
        super().__init__(dest, name, nb_path, is_new=True, **kwargs)


def export(notebooks: list, lib: Path) -> None:
    """nbdev's nb_export of every notebook in `notebooks`, into the package folder `lib`.

    `lib` must be named `vitlib` and sit beside the notebooks' folder, as in the repository:
    nbdev then rewrites `from vitlib.x import y` as `from .x import y`."""
    for notebook in notebooks:
        nb_export(str(notebook), lib_path=str(lib), mod_maker=FreshModule)


if __name__ == "__main__":
    export(reading_order(), ROOT / "vitlib")
