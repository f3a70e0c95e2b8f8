"""`make export`: the notebooks -> vitlib/*.py, with nbdev.

What `nbdev.export.nb_export` does, with one change: a cell marked `#| export other` goes
into a fresh `vitlib/other.py`. nb_export would append it to an existing `other.py`, which
must then come from another notebook, and a second run would append it again. With this, one
chapter can write two modules (chapter 8: rollout and viz) and every run gives the same files.

    python scripts/export.py [--lib vitlib] [notebooks ...]   (default: notebooks/*.ipynb)
"""

import argparse
from pathlib import Path

from nbdev.export import ExportModuleProc
from nbdev.maker import ModuleMaker
from nbdev.process import NBProcessor

ROOT = Path(__file__).resolve().parents[1]


def export(notebook, lib_path) -> list:
    """Write every module that `notebook` exports into `lib_path`; returns their names."""
    exp = ExportModuleProc()
    NBProcessor(str(notebook), [exp]).process()
    written = []
    for target, cells in exp.modules.items():
        if not any(c.cell_type == "code" for c in cells):
            continue
        name = getattr(exp, "default_exp", None) if target == "#" else target
        if not name:
            raise SystemExit(
                f"{notebook}: `#| export` cells but no `#| default_exp` cell"
            )
        maker = ModuleMaker(
            dest=str(lib_path), name=name, nb_path=str(notebook), is_new=True
        )
        maker.make(cells, exp.in_all[target], lib_path=str(lib_path))
        written.append(name)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", default=str(ROOT / "vitlib"))
    parser.add_argument("notebooks", nargs="*")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for notebook in notebooks:
        export(notebook, args.lib)


if __name__ == "__main__":
    main()
