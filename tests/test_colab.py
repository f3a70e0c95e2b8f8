"""What a student runs in Colab, as closely as this machine allows: a fresh virtual environment
holding only what Colab preinstalls that the book relies on, `google.colab` importable, a
working folder outside the repository (Colab's /content), and a chapter opened on its own.
Its first cell's `%pip install` runs for real, pointed at a clone of this tree (`git+file://localhost/...`
standing in for GitHub), then the page runs top to bottom in smoke mode.

The environment is made in seconds: the preinstalled distributions are linked from this
machine's .venv, each with its files and metadata, so pip sees them as installed and downloads
only what the page itself asks for (vitlib's small dependencies, timm). That needs the package
index: without it the test skips (conftest.py), as Colab would fail too.
"""

import json
import os
import re
import subprocess
import venv
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
# what Colab preinstalls that the book relies on (the kernel's own machinery comes with them)
COLAB = [
    "torch",
    "torchvision",
    "numpy",
    "matplotlib",
    "opencv-python-headless",  # Colab's is opencv-python: the same cv2
    "scikit-image",  # the photos of chapters 1 to 3
    "ipykernel",
    "ipywidgets",
]
PAGES = ["01_patches", "05a_vit"]
INSTALL = re.compile(r'"vitlib @ git\+(\S+?)(@[^"\s]+)?"')


def _closure(names: list) -> list:
    """The distributions `names` need, themselves included (this machine's versions)."""
    seen, todo = {}, list(names)
    while todo:
        dist = metadata.distribution(todo.pop())
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen[key] = dist
        for line in dist.requires or []:
            need = Requirement(line)
            if need.marker is None or need.marker.evaluate({"extra": ""}):
                todo.append(need.name)
    return list(seen.values())


def _link_preinstalled(into: Path) -> int:
    """Link every top-level file and folder of the Colab distributions into `into`."""
    into.mkdir()
    linked = set()
    for dist in _closure(COLAB):
        site = Path(dist.locate_file(""))
        for file in dist.files or []:
            top = file.parts[0]
            if top == ".." or top in linked or top == "__pycache__":
                continue
            (into / top).symlink_to(site / top)
            linked.add(top)
    return len(linked)


def _colab_environment(tmp: Path) -> Path:
    """A new venv that sees only the Colab distributions; returns its python."""
    venv.create(tmp / "env", with_pip=True)
    python = tmp / "env" / "bin" / "python"
    site = subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True,
    ).strip()
    assert _link_preinstalled(tmp / "preinstalled") > 10
    (Path(site) / "colab_preinstalled.pth").write_text(f"{tmp / 'preinstalled'}\n")
    colab = tmp / "preinstalled" / "google" / "colab"  # a namespace package, as Colab's
    colab.mkdir(parents=True)
    (colab / "__init__.py").write_text('"""Stands in for Colab\'s own module."""\n')
    return python


def _clone(tmp: Path) -> Path:
    """This working tree (tracked and new files) as a one-commit repository on `main`."""
    listed = subprocess.check_output(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, text=True
    )
    clone = tmp / "clone"
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            (clone / name).write_bytes((ROOT / name).read_bytes())
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "the tree under test"], check=True)
    return clone


def _kernel(tmp: Path, python: Path) -> str:
    """A Jupyter kernel running `python`, which imports google.colab at start, as Colab's."""
    spec = tmp / "jupyter" / "kernels" / "colab"
    spec.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "Colab", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    startup = tmp / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-colab.py").write_text("import google.colab  # noqa: F401\n")
    return "colab"


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("colab")
    python = _colab_environment(tmp)
    return tmp, python, _kernel(tmp, python), _clone(tmp)


@pytest.mark.network
def test_the_environment_holds_only_what_colab_preinstalls(colab):
    tmp, python, _, _ = colab
    probe = "import importlib.util as u; print([m for m in {} if u.find_spec(m)])"
    wanted = ["torch", "torchvision", "cv2", "skimage", "google.colab"]
    absent = ["vitlib", "einops", "timm", "transformers", "safetensors", "nbval"]
    for names, expected in ((wanted, wanted), (absent, [])):
        found = subprocess.check_output(
            [python, "-c", probe.format(names)], text=True, cwd=tmp
        )
        assert found.strip() == str(expected)


@pytest.mark.network
@pytest.mark.parametrize("page", PAGES)
def test_a_chapter_runs_in_colab_from_its_first_cell(colab, page, monkeypatch):
    tmp, python, kernel, clone = colab
    notebook = nbformat.read(ROOT / "notebooks" / f"{page}.ipynb", as_version=4)
    first = next(c for c in notebook.cells if c.cell_type == "code")
    assert INSTALL.search(first.source), "the first cell installs vitlib from GitHub"
    first.source = INSTALL.sub(
        f'"vitlib @ git+file://localhost{clone}@main"', first.source
    )
    first.source = first.source.replace("%pip install -q", "%pip install")
    content = tmp / "content" / page  # Colab's working folder: no repository around it
    content.mkdir(parents=True)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp / "jupyter"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp / "ipython"))
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    client = NotebookClient(
        notebook,
        kernel_name=kernel,
        timeout=600,
        resources={"metadata": {"path": str(content)}},
    )
    client.execute()
    installed = "".join(o.get("text", "") for o in first.outputs)
    assert "Successfully installed" in installed and "vitlib" in installed, installed
    shown = subprocess.check_output(
        [python, "-m", "pip", "show", "-f", "vitlib"], text=True
    )
    assert "fashion_sample/train-images-idx3-ubyte.gz" in shown  # the sample ships
    assert not (ROOT / "vitlib").samefile(_imported_vitlib(python, content))
    # and the logs the pages read: result_log finds them with no repository around
    find = (
        "from vitlib.utils import result_log; print(result_log('modern_vit_cpu.txt'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.check_output([python, "-c", find], text=True, cwd=content, env=env)
    log = Path(out.strip())
    assert log.is_file() and not log.resolve().is_relative_to(ROOT), log


def _imported_vitlib(python: Path, cwd: Path) -> Path:
    where = "import vitlib, os; print(os.path.dirname(vitlib.__file__))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.check_output([python, "-c", where], text=True, cwd=cwd, env=env)
    return Path(out.strip())
