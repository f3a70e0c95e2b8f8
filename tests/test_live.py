"""vitlib.live: the ONNX export against PyTorch (onnxruntime, 1e-4), its refusals, occlusion,
and the demo's description."""

import json

import numpy as np
import pytest
import torch

from conftest import need_module

onnx = need_module("onnx")
onnxruntime = need_module("onnxruntime")

from vitlib.live import OPSET, demo_spec, live_demo, occlude, to_onnx  # noqa: E402
from vitlib.model import ViT, create_vit  # noqa: E402
from vitlib.patches import pair  # noqa: E402

CHAPTER6 = dict(patch_size=7, dim=64, depth=4, heads=4, mlp_dim=128)  # fashion-cpu


@torch.no_grad()
def spread(model, seed, scale=0.15):
    """Weights far from the initialisation: attention maps that differ from uniform, from
    their transpose and from block to block, so that a mix-up shows at 1e-4."""
    g = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.add_(torch.randn(p.shape, generator=g) * scale)
    return model


def run(path, images):
    session = onnxruntime.InferenceSession(str(path))
    return session.run(None, {"images": images.numpy()})


def assert_equal_to_torch(model, path, images):
    logits, attention = run(path, images)
    with torch.no_grad():
        expected_logits = model(images)
        expected_maps = torch.stack(model.attention_maps(images))
    assert logits.shape == tuple(expected_logits.shape)
    assert attention.shape == tuple(expected_maps.shape)
    np.testing.assert_allclose(logits, expected_logits.numpy(), atol=1e-4, rtol=0)
    np.testing.assert_allclose(attention, expected_maps.numpy(), atol=1e-4, rtol=0)


def test_chapter6_model_equals_pytorch_at_any_batch(tmp_path):
    torch.manual_seed(0)
    model = spread(create_vit("fashion", **CHAPTER6), seed=1).eval()
    with (
        torch.no_grad()
    ):  # maps that a mix-up would change: peaked, lopsided, per block
        maps = torch.stack(model.attention_maps(torch.randn(2, 1, 28, 28)))
    assert maps.amax() > 0.5 and (maps - maps.transpose(-1, -2)).abs().amax() > 0.1
    assert (maps[0] - maps[1]).abs().amax() > 0.1
    path = to_onnx(model, tmp_path / "m.onnx")
    for batch in (1, 2, 7):
        assert_equal_to_torch(model, path, torch.randn(batch, 1, 28, 28))
    names = [o.name for o in onnxruntime.InferenceSession(str(path)).get_outputs()]
    assert names == ["logits", "attention"]


def draw_config(seed):
    """A configuration no test names: sizes, channels, pooling, positions, bias, classes."""
    g = torch.Generator().manual_seed(seed)

    def draw(*choices):
        return choices[int(torch.randint(len(choices), (), generator=g))]

    patch = draw(4, (4, 2), 8)
    grid = (draw(2, 3, 4), draw(2, 3, 5))
    heads = draw(1, 2, 4)
    return dict(
        img_size=(grid[0] * pair(patch)[0], grid[1] * pair(patch)[1]),
        patch_size=patch,
        in_channels=draw(1, 3, 4),
        num_classes=draw(0, 3, 10),
        dim=heads * draw(4, 8),
        depth=draw(1, 2, 3),
        heads=heads,
        mlp_dim=draw(8, 24),
        pool=draw("cls", "mean"),
        pos=draw("learned", "sincos", "none"),
        qkv_bias=draw(True, False),
    )


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_drawn_configurations_equal_pytorch(tmp_path, seed):
    config = draw_config(seed)
    if config["pos"] == "sincos" and config["dim"] % 4:
        config["pos"] = "learned"
    model = spread(ViT(**config), seed)
    model.train()  # export must use eval mode and put the model back as it was
    path = to_onnx(model, tmp_path / "m.onnx", opset=OPSET + 3 * (seed % 2))
    assert model.training
    model.eval()
    images = torch.randn(3, config["in_channels"], *pair(config["img_size"]))
    assert_equal_to_torch(model, path, images)


@pytest.mark.parametrize("pool", ["cls", "mean"])
def test_both_pools_and_no_head(tmp_path, pool):
    model = spread(
        ViT(
            img_size=16,
            patch_size=4,
            dim=16,
            depth=2,
            heads=2,
            mlp_dim=8,
            num_classes=0,
            pool=pool,
            pos="sincos",
        ),
        seed=5,
    ).eval()
    path = to_onnx(model, tmp_path / "m.onnx")
    assert_equal_to_torch(model, path, torch.randn(2, 3, 16, 16))


def test_the_file_carries_config_and_metadata_and_no_source_notes(tmp_path):
    model = create_vit("fashion", **CHAPTER6)
    path = to_onnx(
        model, tmp_path / "m.onnx", metadata={"mean": [0.286], "classes": ["a"]}
    )
    proto = onnx.load(str(path))
    props = {p.key: json.loads(p.value) for p in proto.metadata_props}
    assert props["vitlib.config"]["patch_size"] == 7
    assert props["vitlib.mean"] == [0.286] and props["vitlib.classes"] == ["a"]
    assert proto.opset_import[0].version == OPSET
    assert not [n for n in proto.graph.node if n.metadata_props]
    assert str(tmp_path) not in path.read_bytes().decode("latin-1")
    assert not list(tmp_path.glob("*.partial"))


class NoMaps(torch.nn.Module):
    def __init__(self, attn):
        super().__init__()
        self.inner = attn

    def forward(self, x):
        return self.inner(x)


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda m: torch.compile(m), TypeError, "_orig_mod"),
        (lambda m: m.double(), TypeError, "float64"),
        (lambda m: torch.nn.Linear(2, 2), TypeError, "Linear"),
        (
            lambda m: setattr(m.blocks[1], "attn", NoMaps(m.blocks[1].attn)) or m,
            ValueError,
            "block 1",
        ),
    ],
)
def test_models_that_cannot_be_exported_are_refused(tmp_path, make, error, words):
    model = make(create_vit("fashion", **CHAPTER6))
    with pytest.raises(error, match=words):
        to_onnx(model, tmp_path / "m.onnx")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("opset", [OPSET - 1, 10_000])
def test_opsets_out_of_range_are_refused(tmp_path, opset):
    with pytest.raises(ValueError, match="opset"):
        to_onnx(create_vit("fashion", **CHAPTER6), tmp_path / "m.onnx", opset=opset)


def test_occlude_paints_whole_patches_row_by_row_on_a_copy():
    images = torch.full((2, 3, 8, 12), 200, dtype=torch.uint8)
    out = occlude(
        images, [1, 4], 4
    )  # a 2x3 grid: patch 1 is row 0, col 1; 4 is row 1, col 1
    assert images.eq(200).all()
    zero = torch.zeros(8, 12, dtype=torch.bool)
    zero[0:4, 4:8] = zero[4:8, 4:8] = True
    assert torch.equal(out[0, 0] == 0, zero) and torch.equal(out[1, 2] == 0, zero)


def test_demo_spec_and_html():
    torch.manual_seed(0)
    model = create_vit("fashion", **CHAPTER6).eval()
    images = torch.randint(0, 256, (3, 1, 28, 28), dtype=torch.uint8)
    classes = [f"class {i}" for i in range(10)]
    spec = demo_spec(
        model, "live/m.onnx", images, torch.tensor([0, 1, 2]), classes, [0.3], [0.35]
    )
    assert spec["patch_size"] == [7, 7] and spec["image_size"] == [28, 28]
    first = spec["images"][0]
    import base64

    assert base64.b64decode(first["pixels"]) == images[0].numpy().tobytes()
    with torch.no_grad():
        predicted = model((images.float() / 255 - 0.3) / 0.35).argmax(-1)
    assert [im["prediction"] for im in spec["images"]] == predicted.tolist()
    page = live_demo(spec | {"classes": ["</script><b>"] * 10}).data
    assert "data-live-vit" in page and "../_static/live-vit.js" in page
    assert (
        page.count("</script>") == 3
    )  # the payload closes no script: its own and two src
    with pytest.raises(ValueError, match=r"uint8 grey.*model reads \(b, 1, \.\.\.\)"):
        demo_spec(model, "m.onnx", images.float(), [0] * 3, classes, [0.3], [0.35])


def test_the_committed_site_model_is_the_one_page_8c_shows():
    # the page's stored demo lists each image with the committed file's prediction, and the
    # file carries the accuracy the page printed: a file and a page from different runs differ
    import base64
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    model_file = root / "book" / "static" / "live" / "fashion_vit.onnx"
    page = json.loads((root / "notebooks" / "08c_live_demo.ipynb").read_text())
    outputs = [
        o for c in page["cells"] if c["cell_type"] == "code" for o in c["outputs"]
    ]
    html_out = next(
        o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})
    )
    spec = json.loads(
        re.search(
            r'<script type="application/json">(.*?)</script>', "".join(html_out), re.S
        ).group(1)
    )
    assert spec["model"] == "live/fashion_vit.onnx"
    h, w = spec["image_size"]
    pixels = [
        np.frombuffer(base64.b64decode(im["pixels"]), np.uint8) for im in spec["images"]
    ]
    x = (
        np.stack(pixels).reshape(-1, 1, h, w).astype(np.float32) / 255 - spec["mean"][0]
    ) / spec["std"][0]
    logits, _ = run(model_file, torch.from_numpy(x))
    assert logits.argmax(1).tolist() == [im["prediction"] for im in spec["images"]]
    props = {
        p.key: json.loads(p.value) for p in onnx.load(str(model_file)).metadata_props
    }
    printed = "".join(t for o in outputs for t in o.get("text", []))
    assert f"test accuracy {props['vitlib.accuracy']:.2%}" in printed
    assert spec["about"].endswith(f"{props['vitlib.accuracy']:.2%}")
