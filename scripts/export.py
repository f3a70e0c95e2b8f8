"""Write vitlib/ from the notebooks (`make export`): nbdev's own `nb_export`, one notebook at a time.

    python scripts/export.py

Each notebook writes the one module its `#| default_exp` cell names, afresh, as nbdev's own
`nbdev_export` does: Appendix B writes the checks' core, and its pages B.1 to B.18 one module
of checks each (tests/test_export.py checks that every notebook exports one module and that no
two export the same). The notebooks are exported in the book's reading order: the pages of
`_toc.yml`, with their sections. `tests/test_export.py` exports a
copy of `notebooks/` with the same function and compares the result with `vitlib/`.
"""

from pathlib import Path

import yaml
from nbdev.export import nb_export

ROOT = Path(__file__).resolve().parents[1]


def reading_order(root: Path = ROOT) -> list:
    """The notebooks of the table of contents, in reading order, as paths under notebooks/."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = []
    for entry in [c for part in toc["parts"] for c in part["chapters"]]:
        files += [entry["file"]] + [s["file"] for s in entry.get("sections", [])]
    return [root / f"{f}.ipynb" for f in files if f.startswith("notebooks/")]


def export(notebooks: list, lib: Path) -> None:
    """nbdev's nb_export of every notebook in `notebooks`, into the package folder `lib`.

    `lib` must be named `vitlib` and sit beside the notebooks' folder, as in the repository:
    nbdev then rewrites `from vitlib.x import y` as `from .x import y`."""
    for notebook in notebooks:
        nb_export(str(notebook), lib_path=str(lib))


if __name__ == "__main__":
    export(reading_order(), ROOT / "vitlib")
