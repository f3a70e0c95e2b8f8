"""vitlib.viz (page 8a): OpenCV overlays and the gallery; vitlib.rollout's figures (page 8b): the
layer-by-head grid, the explorer and its choice of map."""

import sys

import matplotlib
import numpy as np
import pytest
import torch

from conftest import need_module
from vitlib.rollout import (
    attention_explorer,
    attention_rollout,
    cls_map,
    fuse_heads,
    plot_attention_grid,
    select_map,
)
from vitlib.viz import heatmap_overlay, plot_overlays

matplotlib.use("Agg")
cv2 = need_module("cv2")


def test_overlay_shapes_and_inputs():
    heat = torch.rand(4, 4)
    grey = torch.randint(0, 256, (1, 28, 28), dtype=torch.uint8)
    out = heatmap_overlay(grey, heat)
    assert out.shape == (28, 28, 3) and out.dtype == np.uint8
    colour = torch.rand(3, 32, 48)  # floats in [0, 1], not square
    assert heatmap_overlay(colour, torch.rand(2, 3)).shape == (32, 48, 3)
    assert heatmap_overlay(
        colour.permute(1, 2, 0).numpy(), np.random.rand(2, 3)
    ).shape == (32, 48, 3)
    assert heatmap_overlay(grey[0], heat, size=(60, 90)).shape == (
        60,
        90,
        3,
    )  # (height, width)


def test_overlay_blends_map_and_image():
    image = torch.full((1, 8, 8), 100, dtype=torch.uint8)
    heat = torch.zeros(2, 2)
    heat[0, 0] = 1.0  # the top-left patch is the hottest
    only_image = heatmap_overlay(image, heat, alpha=0.0)
    assert bool((only_image == 100).all())
    only_map = heatmap_overlay(image, heat, alpha=1.0, colormap="inferno")
    scale = np.arange(256, dtype=np.uint8)[:, None]
    inferno = cv2.cvtColor(
        cv2.applyColorMap(scale, cv2.COLORMAP_INFERNO), cv2.COLOR_BGR2RGB
    )[:, 0]
    assert (
        only_map[0, 0] == inferno[255]
    ).all()  # the map's maximum: the colour map's top
    assert (only_map[-1, -1] == inferno[0]).all()  # its minimum: the bottom
    flat = heatmap_overlay(image, torch.ones(2, 2), alpha=1.0)  # a constant map: no NaN
    assert (flat == inferno[0]).all()
    # compared maps share a scale: a weak map stays dark instead of filling the colour range
    weak = heatmap_overlay(image, heat * 0.1, alpha=1.0, limits=(0.0, 1.0))
    shade = [i for i in range(256) if (inferno[i] == weak[0, 0]).all()]
    assert shade and 0 < shade[0] <= round(0.1 * 255)  # at most a tenth of the way up
    assert (heatmap_overlay(image, heat * 0.1, alpha=1.0)[0, 0] == inferno[255]).all()


def test_overlay_errors():
    with pytest.raises(ValueError, match="OpenCV has no COLORMAP_RAINBOWS"):
        heatmap_overlay(torch.rand(1, 8, 8), torch.rand(2, 2), colormap="rainbows")
    with pytest.raises(ValueError, match="one \\(h, w\\) grid"):
        heatmap_overlay(torch.rand(1, 8, 8), torch.rand(2, 2, 2))
    with pytest.raises(ValueError, match="expected \\(c, H, W\\)"):
        heatmap_overlay(torch.rand(2, 5, 8, 8), torch.rand(2, 2))


def test_overlay_without_opencv_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cv2", None)
    with pytest.raises(ImportError, match="pip install opencv-python-headless"):
        heatmap_overlay(torch.rand(1, 8, 8), torch.rand(2, 2))


def maps(b=3, heads=4, n=17, layers=4):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(b, heads, n, n, generator=g).softmax(-1) for _ in range(layers)]


def test_select_map():
    attentions = maps()
    heat, what = select_map(attentions, 1, -1, fusion="max", discard=0.5)
    assert torch.equal(
        heat, cls_map(attention_rollout([a[1:2] for a in attentions], "max", 0.5))[0]
    )
    assert what == "rollout (max of heads, discard 50%)"
    heat, what = select_map(attentions, 2, 0, head=3)
    assert torch.equal(heat, cls_map(attentions[0][2, 3])) and what == "layer 1, head 4"
    heat, what = select_map(attentions, 0, 3, head=-1, fusion="min")
    assert torch.equal(heat, cls_map(fuse_heads(attentions[3][:1], "min"))[0])
    assert what == "layer 4, min of heads"


def test_figures():
    import matplotlib.pyplot as plt

    images = torch.randint(0, 256, (5, 1, 28, 28), dtype=torch.uint8)
    grid = torch.stack([cls_map(a) for a in maps(b=1)], 1)[0]  # (layers, heads, 4, 4)
    fig = plot_attention_grid(images[0], grid)
    assert len(fig.axes) == 4 * 5
    fig2 = plot_overlays(
        images, torch.rand(5, 4, 4), [f"image {i}" for i in range(5)], ncols=3
    )
    assert len(fig2.axes) == 2 * 2 * 3
    # compared maps on one scale: a colour bar says which
    fig3 = plot_overlays(images, torch.rand(5, 4, 4), ["x"] * 5, ncols=3, limits=(0, 1))
    assert len(fig3.axes) == 2 * 2 * 3 + 1
    assert fig3.axes[-1].get_ylabel() == "map (before blending)"
    plt.close("all")


def test_explorer_builds_and_follows_its_controls():
    widgets = need_module("ipywidgets")
    images = torch.randint(0, 256, (3, 1, 28, 28), dtype=torch.uint8)
    box = attention_explorer(images, maps(), ["a", "b", "c"])
    assert isinstance(box, widgets.VBox)
    controls = {
        w.description: w for w in box.children[0].children + box.children[1].children
    }
    controls["discard"] = box.children[2]
    assert (
        controls["head"].disabled and not controls["discard"].disabled
    )  # starts on rollout
    controls["layer"].value = 2
    assert not controls["head"].disabled and controls["discard"].disabled
    controls["head"].value = 1
    assert controls["fusion"].disabled  # one head: nothing to fuse
