"""The book's diagrams (scripts/diagrams.py): each listed page carries its diagrams inside the
notebook (a markdown attachment equal to the committed file), every file is vector and on its
own light card, and the source rebuilds the committed files. The built site showing them is
tests/test_site.py's."""

import base64
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import diagrams  # noqa: E402

FOLDER = ROOT / "book" / "diagrams"

# where the text first needs each picture (the pages the plan lists)
EXPECTED = {
    "book/intro.md": {"roadmap"},
    "notebooks/01_patches.ipynb": {"flatten-order", "patch-embed"},
    "notebooks/02_positions.ipynb": {"cls-and-positions"},
    "notebooks/03_attention.ipynb": {"one-head", "fused-qkv"},
    "notebooks/04_block.ipynb": {"pre-post-ln"},
    "notebooks/05a_vit.ipynb": {"vit"},
    "notebooks/05b_vit_weights.ipynb": {"fast-path"},
    "notebooks/06b_fashion_mnist.ipynb": {"train-step"},
    "notebooks/06c_checkpoints.ipynb": {"checkpoint-life"},
    "notebooks/06d_training_for_real.ipynb": {"ddp-shards"},
    "notebooks/08b_attention_maps.ipynb": {"rollout"},
    "notebooks/08d_faithfulness.ipynb": {"deletion-curve"},
    "notebooks/09_cnn_vs_vit.ipynb": {"conv-stem", "distillation-token"},
    "notebooks/10_pretraining.ipynb": {"masked-prediction"},
    "notebooks/11_modern_vit.ipynb": {"modern-vit"},
}
IMAGE = re.compile(r"!\[([^\]]*)\]\((?:attachment:|diagrams/)([\w-]+)\.svg\)")


def shown(path: Path) -> dict:
    """name -> (alt text, attachment bytes or None) of each diagram a page shows."""
    if path.suffix == ".md":
        return {name: (alt, None) for alt, name in IMAGE.findall(path.read_text())}
    found = {}
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for alt, name in IMAGE.findall("".join(cell["source"])):
            data = (
                cell.get("attachments", {}).get(f"{name}.svg", {}).get("image/svg+xml")
            )
            if isinstance(data, list):  # nbformat may write a long string as lines
                data = "".join(data)
            found[name] = (alt, base64.b64decode(data) if data else None)
    return found


def test_every_page_carries_its_diagrams_inside_it():
    assert len(diagrams.DIAGRAMS) >= 12
    placed = set()
    for page, names in EXPECTED.items():
        found = shown(ROOT / page)
        assert names <= set(found), f"{page} lacks {names - set(found)}"
        for name in found:
            alt, data = found[name]
            assert alt == diagrams.DIAGRAMS[name].alt, f"{page}: {name}'s alt text"
            assert len(alt) > 80, f"{name}: alt text that says what it shows"
            if page.endswith(".ipynb"):  # travels with the notebook: Jupyter and Colab
                assert data == (FOLDER / f"{name}.svg").read_bytes(), (
                    f"{page}: {name}'s attachment is not the committed file (make diagrams)"
                )
            assert diagrams.DIAGRAMS[name].where == page
        placed |= set(found)
    assert placed == set(diagrams.DIAGRAMS), "a diagram no page shows"


def test_no_page_carries_a_stale_attachment():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            used = {
                f"{n}.svg" for _, n in IMAGE.findall("".join(cell.get("source", "")))
            }
            extra = set(cell.get("attachments", {})) - used
            assert not extra, f"{path.name}: attachments no text shows: {extra}"


@pytest.mark.parametrize("name", sorted(diagrams.DIAGRAMS))
def test_each_diagram_is_vector_on_a_light_card(name):
    svg = (FOLDER / f"{name}.svg").read_text()
    assert "<image" not in svg, "a raster image inside the diagram"
    assert "<text" not in svg, "letters as outlines, the same on every machine"
    # the card: a white rounded rectangle behind everything, so dark themes read it too
    # (the figure's own patch is transparent; the axes' first patch is the card)
    card = re.search(r'<g id="patch_2">\s*<path d="[^"]+"[^>]*style="([^"]+)"', svg)
    assert card and "fill: #ffffff" in card.group(1), "no white card behind the drawing"


def test_the_sources_rebuild_the_committed_files(tmp_path):
    import matplotlib

    written = diagrams.write(tmp_path)
    assert {p.name for p in written} == {p.name for p in FOLDER.glob("*.svg")}
    for path in written:
        committed = (FOLDER / path.name).read_bytes()
        made = re.search(rb"Matplotlib v([\w.]+)", committed)
        if made and made.group(1).decode() == matplotlib.__version__:
            assert path.read_bytes() == committed, f"{path.name}: run make diagrams"
        else:  # another matplotlib writes other bytes: the drawing must still be the same size
            ratio = len(path.read_bytes()) / len(committed)
            assert 0.9 < ratio < 1.1, f"{path.name}: run make diagrams"


# --- what a reader sees at the site's width (diagrams.legibility) ---


@pytest.mark.parametrize("width", [diagrams.SITE_WIDTH, diagrams.NARROW_WIDTH])
@pytest.mark.parametrize("name", sorted(diagrams.DIAGRAMS))
def test_each_diagram_reads_at_the_sites_width(name, width):
    """At the widest layout and at the narrow one (a 1280-px window), where the drawing is
    scaled down the most: every letter at least SMALLEST px, no label over another or
    under a line."""
    import matplotlib.pyplot as plt

    with plt.rc_context(diagrams.STYLE):
        fig = diagrams.DIAGRAMS[name].draw()
        try:
            problems = diagrams.legibility(fig, width)
        finally:
            plt.close(fig)
    assert not problems, f"{name} at {width} px: {problems}"


def test_the_reading_rule_sees_small_text_overlaps_and_crossed_labels():
    import matplotlib.pyplot as plt

    with plt.rc_context(diagrams.STYLE):
        fig, ax = diagrams.canvas(9.6, 2)
        diagrams.label(ax, 1, 1, "tiny", size=5)
        diagrams.label(ax, 4, 1, "one label")
        diagrams.label(ax, 4.3, 1, "another")
        diagrams.label(ax, 7.5, 1, "crossed")
        ax.plot([7, 8], [1, 1])
        diagrams.plus(ax, 9, 1)  # a ⊕ sits on its line on purpose
        ax.plot([8.7, 9.3], [1, 1])
        diagrams.label(ax, 9.6, 1.7, "cut off")  # half of it past the card's edge
        diagrams.label(ax, 2.3, 1.6, "nine", size=9)  # 11.6 px at 893, 8.8 px at 676
        problems = diagrams.legibility(fig)
        narrow = diagrams.legibility(fig, diagrams.NARROW_WIDTH)
        plt.close(fig)
    assert any(p.startswith("'tiny' is 6.5 px") for p in problems), problems
    assert "'one label' overlaps 'another'" in problems, problems
    assert "a line runs through 'crossed'" in problems, problems
    assert "'cut off' runs past the card's edge" in problems, problems
    assert len(problems) == 4, problems
    # the narrow layout shows this 9.6-in drawing at 0.98 px a point: 9 pt is too small
    assert set(narrow) - set(problems) == {
        "'tiny' is 4.9 px high at 676 px",
        "'nine' is 8.8 px high at 676 px",
    }, narrow
