"""The book as shipped: stored outputs from a full run, Colab set-up, exercises, and a package
that needs no Jupyter."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHAPTERS = [p for p in NOTEBOOKS if p.name[:2].isdigit()]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


def cells(path):
    return json.loads(path.read_text())["cells"]


def code_cells(path):
    return [
        c
        for c in cells(path)
        if c["cell_type"] == "code" and "".join(c["source"]).strip()
    ]


def outputs_text(cell):
    parts = []
    for out in cell.get("outputs", []):
        parts += out.get("text", []) + out.get("data", {}).get("text/plain", [])
    return "".join(parts)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_come_from_one_full_run(notebook):
    counts = [c["execution_count"] for c in code_cells(notebook)]
    assert counts == list(range(1, len(counts) + 1)), (
        "run it top to bottom in a fresh kernel: make execute"
    )
    for cell in code_cells(notebook):
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error", f"a stored error: {out.get('ename')}"
        text = outputs_text(cell)
        assert "smoke" not in text.lower(), (
            "stored outputs must come from a full run, not smoke mode"
        )
        for local in ("/work/", "/tmp/", "/root/", "/home/"):
            assert local not in text, f"a stored output shows a local path: {local}"
        assert not any(o.get("name") == "stderr" for o in cell.get("outputs", [])), (
            f"a stored warning on the page: {text[:200]}"
        )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_widgets_keep_their_saved_state(notebook):
    text = notebook.read_text()
    if "application/vnd.jupyter.widget-view+json" in text:
        state = (
            json.loads(text)["metadata"]
            .get("widgets", {})
            .get("application/vnd.jupyter.widget-state+json")
        )
        assert state and state["state"], (
            "widget state not stored: make execute stores it"
        )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_first_cell_installs_vitlib_in_colab_only(notebook):
    first = "".join(code_cells(notebook)[0]["source"])
    url = CONFIG["repository"]["url"]
    assert 'if "google.colab" in sys.modules:' in first
    assert f"git+{url}" in first, (
        f"the Colab cell must install from _config.yml's repository.url ({url})"
    )


def test_colab_buttons_are_configured():
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert CONFIG["execute"]["execute_notebooks"] == "off"


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_exports_and_ends_with_checked_exercises(notebook):
    source = "\n".join("".join(c["source"]) for c in cells(notebook))
    assert "#| default_exp " in source
    assert source.count("### BEGIN SOLUTION") >= 3 and source.count(
        "### BEGIN SOLUTION"
    ) == source.count("### END SOLUTION")
    assert source.count("checks.") >= 3, (
        "each exercise needs a check from vitlib.checks"
    )


def test_every_notebook_is_in_the_table_of_contents():
    toc = (ROOT / "_toc.yml").read_text()
    for notebook in NOTEBOOKS:
        assert f"notebooks/{notebook.stem}" in toc


def test_runtime_dependencies_are_the_seven():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = sorted(
        d.split(">")[0].split("=")[0].split("<")[0].strip()
        for d in project["dependencies"]
    )
    # safetensors: chapter 6's checkpoints; tqdm: its progress bars
    assert names == [
        "einops",
        "matplotlib",
        "numpy",
        "safetensors",
        "torch",
        "torchvision",
        "tqdm",
    ]
    # chapter 8's overlays and explorer: an extra, so that `import vitlib` never needs them
    assert sorted(d.split(">")[0] for d in project["optional-dependencies"]["viz"]) == [
        "ipywidgets",
        "opencv-python-headless",
    ]


def test_vitlib_imports_and_runs_without_jupyter():
    # Block every Jupyter, figure-only and reference package, then import all of vitlib and use it.
    script = """
import sys
BLOCKED = ("IPython", "ipykernel", "ipywidgets", "jupyter", "nbdev", "nbformat", "skimage", "pytest",
           "timm", "transformers")
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked: vitlib must not need it")
sys.meta_path.insert(0, Block())
import torch, vitlib, vitlib.patches, vitlib.checks, vitlib.utils, vitlib.pretrained
print(vitlib.PatchEmbed(16, 3, 8)(torch.rand(1, 3, 32, 32)).shape)
model = vitlib.vit_fashion()
print(vitlib.from_timm(vitlib.to_timm_state_dict(model))(torch.rand(2, 1, 28, 28)).shape)
import tempfile
from vitlib.data import ImageData
from vitlib.loop import TrainConfig
from vitlib.train import load_checkpoint, train
images = torch.randint(0, 256, (64, 1, 28, 28), dtype=torch.uint8)
labels = torch.arange(64) % 10
data = ImageData("random", tuple("abcdefghij"), images, labels, images, labels, (0.5,), (0.25,))
with tempfile.TemporaryDirectory() as out:
    train(vitlib.vit_fashion(depth=1), data, TrainConfig(epochs=1, batch_size=32), out=out)
    print("checkpoint epoch", load_checkpoint(out)[1]["epoch"])
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert "torch.Size([1, 4, 8])" in result.stdout
    assert "checkpoint epoch 1" in result.stdout
