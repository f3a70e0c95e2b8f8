"""vitlib.positions: order is lost without positions, the fixed tables have the structure the
chapter claims, and resample_pos_embed matches timm."""

import math

import pytest
import torch
from torch import nn

from conftest import need_module
from vitlib.patches import PatchEmbed
from vitlib.positions import (
    learned_pos_embed,
    patch_grid,
    pool,
    prepend_cls,
    resample_pos_embed,
    similarity_grid,
    sincos_1d,
    sincos_2d,
)


def encoder_layer(dim=32):
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(
        dim, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True
    ).eval()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_without_positions_a_transformer_layer_is_permutation_equivariant(seed):
    torch.manual_seed(seed)
    layer = encoder_layer()
    embed = PatchEmbed(patch_size=8, in_channels=3, dim=32)
    tokens = embed(torch.rand(3, 3, 64, 64)).detach()  # (3, 64, 32)
    perm = torch.randperm(tokens.shape[1])
    with torch.no_grad():
        torch.testing.assert_close(
            layer(tokens[:, perm]), layer(tokens)[:, perm], atol=1e-5, rtol=0
        )


def test_positions_break_the_equivariance():
    layer = encoder_layer()
    tokens = torch.randn(1, 49, 32)
    positions = sincos_2d(7, 32)[None]
    perm = torch.randperm(49, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        gap = (
            layer(tokens[:, perm] + positions) - layer(tokens + positions)[:, perm]
        ).abs()
    assert gap.max() > 1e-2


def test_sincos_1d_is_the_formula():
    n, d = 10, 8
    table = sincos_1d(n, d)
    for p in range(n):
        for i in range(d // 2):
            angle = p / 10000 ** (2 * i / d)
            assert table[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[p, 2 * i + 1].item() == pytest.approx(
                math.cos(angle), abs=1e-6
            )


def test_sincos_2d_halves_are_row_and_column():
    h, w, d = 3, 5, 16
    table = sincos_2d((h, w), d)
    assert table.shape == (h * w, d)
    rows, cols = sincos_1d(h, d // 2), sincos_1d(w, d // 2)
    for r in range(h):
        for c in range(w):
            torch.testing.assert_close(table[r * w + c], torch.cat([rows[r], cols[c]]))


def test_2d_knows_columns_and_1d_does_not():
    """The chapter's claim: the patch below is as similar as the patch beside in 2D, not in 1D."""
    one = similarity_grid(sincos_1d(196, 768), 14)
    two = similarity_grid(sincos_2d(14, 768), 14)
    for r, c in [(0, 0), (6, 6), (12, 13)]:
        assert two[r, c, r + 1, c] == pytest.approx(
            two[r, c, r, c - 1 if c else 1].item(), abs=1e-5
        )
        # in 1D, the patch below is less like (r, c) than every patch of row r
        assert one[r, c, r + 1, c] < one[r, c, r].min()


def test_widths_that_do_not_fit_are_explained():
    with pytest.raises(ValueError, match="even width, got dim=7"):
        sincos_1d(4, 7)
    with pytest.raises(ValueError, match="divisible by 4, got dim=6"):
        sincos_2d(4, 6)


def test_learned_table_follows_timm():
    torch.manual_seed(0)
    table = learned_pos_embed(197, 768)  # 151,296 draws
    assert isinstance(table, nn.Parameter) and table.shape == (1, 197, 768)
    # trunc_normal_(std=0.02) cut at -2 and 2 (absolute): a plain normal with std 0.02
    assert table.std().item() == pytest.approx(0.02, rel=0.02)
    beyond = (table.abs() > 0.04).float().mean().item()
    assert 0.042 < beyond < 0.049, f"{beyond:.2%} of the table beyond two std"


def test_cls_and_pooling():
    tokens = torch.randn(4, 9, 6)
    cls = torch.randn(1, 1, 6)
    out = prepend_cls(tokens, cls)
    assert out.shape == (4, 10, 6)
    torch.testing.assert_close(out[:, 0], cls[0].expand(4, 6))
    torch.testing.assert_close(pool(out, "cls"), cls[0].expand(4, 6))
    torch.testing.assert_close(pool(out, "mean"), tokens.mean(1))
    torch.testing.assert_close(
        pool(tokens, "mean", num_prefix_tokens=0), tokens.mean(1)
    )
    with pytest.raises(ValueError, match="choose 'cls' or 'mean'"):
        pool(out, "max")


timm_layers = need_module("timm.layers")


@pytest.mark.parametrize(
    "old, new, prefix",
    [
        (14, 24, 1),
        (14, 7, 1),
        (7, 10, 0),
        ((14, 20), (24, 30), 1),
        ((6, 4), (9, 13), 2),
        ((3, 1), (6, 1), 1),
        ((4, 1), (2, 1), 1),
        ((1, 4), (1, 7), 1),
    ],
)
def test_resample_matches_timm(old, new, prefix):
    torch.manual_seed(0)
    oh, ow = old if isinstance(old, tuple) else (old, old)
    nh, nw = new if isinstance(new, tuple) else (new, new)
    table = torch.randn(1, prefix + oh * ow, 48)
    got = resample_pos_embed(
        table,
        new,
        num_prefix_tokens=prefix,
        old_grid=old if isinstance(old, tuple) else None,
    )
    expected = timm_layers.resample_abs_pos_embed(
        table, (nh, nw), old_size=(oh, ow), num_prefix_tokens=prefix
    )
    assert got.shape == (1, prefix + nh * nw, 48)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(got[:, :prefix], table[:, :prefix], atol=0, rtol=0)


@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("old, new", [(3, 6), (2, 3), (4, 2)])
def test_resample_a_one_wide_grid_like_its_repeated_columns(old, new, antialias):
    # A grid one column wide, resized in height, must give what the same column repeated three
    # times gives. (PyTorch's antialiased bicubic fails this on a plain NCHW layout.)
    torch.manual_seed(0)
    column = torch.randn(1, old, 1, 8)
    got = resample_pos_embed(
        column.reshape(1, old, 8), (new, 1), 0, (old, 1), antialias
    )
    wide = column.expand(1, old, 3, 8).reshape(1, old * 3, 8)
    expected = resample_pos_embed(wide, (new, 3), 0, (old, 3), antialias)
    expected = expected.reshape(1, new, 3, 8)[:, :, 0]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_resample_to_the_same_grid_changes_nothing():
    table = torch.randn(1, 1 + 49, 16)
    torch.testing.assert_close(resample_pos_embed(table, 7), table, atol=1e-5, rtol=0)


def test_resample_explains_a_table_that_does_not_fit():
    with pytest.raises(ValueError, match="not form a square grid: pass old_grid"):
        resample_pos_embed(torch.randn(1, 1 + 280, 8), 24)
    with pytest.raises(ValueError, match="old_grid 14x14 holds 196 patches, not 280"):
        resample_pos_embed(torch.randn(1, 1 + 280, 8), 24, old_grid=14)


def test_patch_grid():
    assert patch_grid(196) == (14, 14) and patch_grid(1) == (1, 1)
    assert patch_grid(280, (14, 20)) == (14, 20) and patch_grid(49, 7) == (7, 7)
    with pytest.raises(ValueError, match="280 patches do not form a square grid"):
        patch_grid(280)
    with pytest.raises(ValueError, match="size 3x3 holds 9 patches, not 10"):
        patch_grid(10, 3, name="size")
