"""vitlib.rollout: attention rollout's invariants, checked against a plain reference on random
maps of many shapes, plus the class-token map and the mean attention distance."""

import itertools
import math
import re

import pytest
import torch

from vitlib.model import ViT, ViTConfig
from vitlib.rollout import (
    HEAD_FUSIONS,
    attention_rollout,
    cls_map,
    discard_weakest,
    fuse_heads,
    mean_attention_distance,
    patch_distances,
)

SHAPES = [
    (1, 1, 2, 1),
    (2, 3, 5, 2),
    (3, 4, 17, 4),
    (2, 12, 50, 3),
]  # (b, heads, n, layers)
RATIOS = [0.0, 0.1, 0.5, 0.9, 1.0]


def random_maps(b, heads, n, layers, seed=0, normalised=True, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    maps = []
    for _ in range(layers):
        x = torch.randn(b, heads, n, n, generator=g, dtype=torch.float64) * 3
        x = (
            x.softmax(-1) if normalised else x.exp()
        )  # positive, rows not summing to one
        maps.append(x.to(dtype))
    return maps


def reference_rollout(maps, fusion="mean"):
    """The definition, one image at a time, with explicit loops over rows."""
    b, _, n, _ = maps[0].shape
    out = torch.empty(b, n, n, dtype=torch.float64)
    for i in range(b):
        joint = torch.eye(n, dtype=torch.float64)
        for a in maps:
            heads = a[i].double()
            fused = {
                "mean": heads.mean(0),
                "max": heads.max(0).values,
                "min": heads.min(0).values,
            }[fusion]
            step = fused + torch.eye(n, dtype=torch.float64)
            for r in range(n):
                step[r] = step[r] / step[r].sum()
            joint = step @ joint
        out[i] = joint
    return out


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fusion", HEAD_FUSIONS)
def test_matches_the_definition(shape, fusion):
    for normalised in (True, False):
        maps = random_maps(*shape, normalised=normalised, dtype=torch.float64)
        got = attention_rollout(maps, fusion)
        assert got.dtype == torch.float64
        torch.testing.assert_close(
            got, reference_rollout(maps, fusion), rtol=1e-10, atol=1e-12
        )


@pytest.mark.parametrize("shape", SHAPES)
def test_identity_attention_gives_the_identity(shape):
    b, heads, n, layers = shape
    identity = [torch.eye(n).expand(b, heads, n, n)] * layers
    for fusion, ratio in itertools.product(HEAD_FUSIONS, RATIOS):
        got = attention_rollout(identity, fusion, ratio)
        assert torch.equal(got, torch.eye(n).expand(b, n, n)), (fusion, ratio)


@pytest.mark.parametrize("shape", SHAPES)
def test_rows_sum_to_one(shape):
    for normalised, fusion, ratio in itertools.product(
        (True, False), HEAD_FUSIONS, RATIOS
    ):
        got = attention_rollout(
            random_maps(*shape, seed=1, normalised=normalised), fusion, ratio
        )
        assert got.shape == shape[:1] + shape[2:3] * 2
        torch.testing.assert_close(
            got.sum(-1), torch.ones(got.shape[:-1]), atol=1e-5, rtol=0
        )
        assert bool((got >= 0).all())


@pytest.mark.parametrize("shape", SHAPES)
def test_a_batch_equals_its_images_one_at_a_time(shape):
    maps = random_maps(*shape, seed=2)
    for fusion, ratio in itertools.product(HEAD_FUSIONS, RATIOS):
        together = attention_rollout(maps, fusion, ratio)
        apart = torch.cat(
            [
                attention_rollout([a[i : i + 1] for a in maps], fusion, ratio)
                for i in range(shape[0])
            ]
        )
        torch.testing.assert_close(together, apart, atol=1e-6, rtol=1e-6)


def test_discard_ratio_zero_changes_nothing():
    maps = random_maps(2, 4, 17, 4, seed=3)
    for fusion in HEAD_FUSIONS:
        assert torch.equal(
            attention_rollout(maps, fusion, 0.0), attention_rollout(maps, fusion)
        )
        torch.testing.assert_close(
            attention_rollout(maps, fusion, 0.0).double(),
            reference_rollout(maps, fusion),
            atol=1e-6,
            rtol=1e-5,
        )
    fused = fuse_heads(maps[0])
    assert discard_weakest(fused, 0.0) is fused


def test_discard_drops_the_weakest_patch_links_of_each_image_never_the_class_token():
    b, n, ratio = 3, 10, 0.4
    a = (
        torch.rand(b, n, n, generator=torch.Generator().manual_seed(4)) + 0.01
    )  # distinct, positive
    a[:, 0, :] = 1e-6  # the class token's row and column are the weakest of all,
    a[:, :, 0] = 1e-6  # and still kept
    got = discard_weakest(a, ratio)
    assert torch.equal(got[:, 0, :], a[:, 0, :]) and torch.equal(
        got[:, :, 0], a[:, :, 0]
    )
    k = int((n - 1) ** 2 * ratio)
    for i in range(b):
        links, kept = a[i, 1:, 1:].flatten(), got[i, 1:, 1:].flatten()
        dropped = kept == 0
        assert int(dropped.sum()) == k
        assert links[dropped].max() < links[~dropped].min()  # exactly the k weakest
        assert torch.equal(kept[~dropped], links[~dropped])


def test_discard_changes_rollout_and_a_larger_ratio_sharpens_the_class_row():
    maps = random_maps(2, 4, 17, 4, seed=5)
    rows = [cls_map(attention_rollout(maps, "mean", r)) for r in (0.0, 0.9)]
    assert not torch.allclose(rows[0], rows[1])


def test_dtypes():
    maps = random_maps(2, 2, 5, 2)
    assert attention_rollout([a.bfloat16() for a in maps]).dtype == torch.float32
    assert attention_rollout([a.double() for a in maps]).dtype == torch.float64
    stacked = torch.stack(maps)  # (layers, b, heads, n, n) works too
    assert torch.equal(attention_rollout(stacked), attention_rollout(maps))
    assert torch.equal(attention_rollout(tuple(maps)), attention_rollout(maps))


@pytest.mark.parametrize(
    "maps, kwargs, message",
    [
        ([], {}, "no attention maps"),
        ([torch.rand(2, 5, 5)], {}, "expected (b, heads, n, n)"),
        ([torch.rand(2, 1, 5, 4)], {}, "expected (b, heads, n, n)"),
        ([torch.rand(2, 1, 5, 5), torch.rand(3, 1, 5, 5)], {}, "same batch and tokens"),
        ([torch.rand(2, 1, 5, 5), torch.rand(2, 1, 6, 6)], {}, "same batch and tokens"),
        ([torch.rand(2, 1, 5, 5)], {"head_fusion": "median"}, "use one of"),
        ([torch.rand(2, 1, 5, 5)], {"discard_ratio": 1.5}, "[0, 1]"),
        ([torch.rand(2, 1, 5, 5)], {"discard_ratio": -0.1}, "[0, 1]"),
        (torch.rand(2, 1, 5, 5), {}, "pass a list"),
    ],
)
def test_clear_errors(maps, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        attention_rollout(maps, **kwargs)


def test_a_layer_that_is_not_a_tensor():
    with pytest.raises(TypeError, match="layer 1: a list, not a tensor"):
        attention_rollout([torch.rand(1, 1, 3, 3), [[1.0]]])


def test_cls_map():
    joint = torch.arange(2 * 17 * 17, dtype=torch.float32).view(2, 17, 17)
    m = cls_map(joint)
    assert m.shape == (2, 4, 4)
    assert torch.equal(m.flatten(1), joint[:, 0, 1:])
    per_head = torch.rand(3, 6, 1 + 2 * 5, 1 + 2 * 5)
    assert cls_map(per_head, grid=(2, 5)).shape == (3, 6, 2, 5)
    assert torch.equal(
        cls_map(per_head, grid=(2, 5))[1, 2, 1, 3], per_head[1, 2, 0, 1 + 5 + 3]
    )
    with pytest.raises(ValueError, match="square grid"):
        cls_map(per_head)
    with pytest.raises(ValueError, match="holds 9 patches"):
        cls_map(per_head, grid=(3, 3))
    with pytest.raises(ValueError, match=r"expected \(\.\.\., n, n\)"):
        cls_map(torch.rand(2, 3, 4))


def test_rollout_of_a_vit():
    torch.manual_seed(0)
    model = ViT(
        ViTConfig(
            img_size=28,
            patch_size=7,
            in_channels=1,
            num_classes=10,
            dim=32,
            depth=3,
            heads=4,
            mlp_dim=64,
        )
    ).eval()
    with torch.no_grad():
        maps = model.attention_maps(torch.randn(5, 1, 28, 28))
    assert len(maps) == 3 and maps[0].shape == (5, 4, 17, 17)
    joint = attention_rollout(maps)
    torch.testing.assert_close(joint.sum(-1), torch.ones(5, 17))
    assert cls_map(joint).shape == (5, 4, 4)


def test_patch_distances():
    d = patch_distances((3, 4), 7)
    assert d.shape == (12, 12)
    assert torch.equal(d, d.T) and bool((d.diagonal() == 0).all())
    assert (
        d[0, 1] == 7 and d[0, 4] == 7 and math.isclose(d[0, 11], 7 * math.hypot(2, 3))
    )
    assert patch_distances((2, 2), (4, 8))[0, 3] == math.hypot(4, 8)


def test_mean_attention_distance():
    b, heads, n = 2, 3, 1 + 16
    own = torch.eye(n).expand(b, heads, n, n)  # each patch looks at itself: distance 0
    even = torch.full((b, heads, n, n), 1 / n)  # evenly over all tokens
    got = mean_attention_distance([own, even], patch_size=7)
    assert got.shape == (2, heads)
    assert torch.equal(got[0], torch.zeros(heads))
    torch.testing.assert_close(
        got[1], torch.full((heads,), patch_distances((4, 4), 7).mean().item())
    )
    # attention to the class token has no distance: it is left out, the rest renormalised
    half_cls = even.clone()
    half_cls[..., 0] = 0.5
    torch.testing.assert_close(mean_attention_distance([half_cls], 7), got[1:])
    # one head looks one patch to the right (the last column looks at itself)
    right = torch.zeros(1, 1, n, n)
    right[0, 0, 0, 0] = 1
    for p in range(16):
        right[0, 0, 1 + p, 1 + (p + 1 if p % 4 < 3 else p)] = 1
    assert math.isclose(
        mean_attention_distance([right], 7).item(), 7 * 12 / 16, rel_tol=1e-6
    )
    with pytest.raises(ValueError, match="pass grid"):
        mean_attention_distance([torch.rand(1, 1, 11, 11)], 7)
    assert mean_attention_distance(
        [torch.rand(1, 2, 11, 11)], 7, grid=(2, 5)
    ).shape == (1, 2)
