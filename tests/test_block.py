"""vitlib.block: the MLP, drop path, the block in both orders and the encoder, against timm."""

from functools import partial

import pytest
import torch
import torch.nn.functional as F
from timm.models.vision_transformer import Block as TimmBlock
from torch import nn

from vitlib.block import (
    MLP,
    DropPath,
    TransformerBlock,
    TransformerEncoder,
    drop_path,
    init_layers,
)


@torch.no_grad()
def shake(module, seed=0):
    g = torch.Generator().manual_seed(seed)
    for p in module.parameters():
        p.add_(torch.randn(p.shape, generator=g) * 0.05)
    return module


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9])
def test_drop_path_is_the_identity_in_eval_mode(p):
    x = torch.randn(64, 10, 8)
    module = DropPath(p).eval()
    assert module(x) is x or torch.equal(module(x), x)
    assert torch.equal(drop_path(x, p, training=False), x)


@pytest.mark.parametrize("p", [0.1, 0.25, 0.5])
def test_drop_path_keeps_the_expectation_in_training(p):
    torch.manual_seed(0)
    x = torch.randn(20_000, 3, 4)
    out = DropPath(p).train()(x)
    # every sample is dropped whole or kept whole and scaled by 1 / (1 - p)
    dropped = (out == 0).flatten(1).all(1)
    kept = torch.isclose(out, x / (1 - p)).flatten(1).all(1)
    assert bool((dropped ^ kept).all())
    # the dropped fraction is p (binomial std below 0.004 for 20,000 samples)
    assert abs(dropped.float().mean().item() - p) < 0.02
    # the expectation: the mean over samples of out / x is 1 (std below 0.01)
    ratio = (out / x)[:, 0, 0]
    assert abs(ratio.mean().item() - 1.0) < 0.04


def test_drop_path_changes_samples_in_training_and_rejects_bad_rates():
    torch.manual_seed(0)
    x = torch.ones(100, 2)
    assert not torch.equal(DropPath(0.5).train()(x), x)
    for bad in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="drop path probability"):
            DropPath(bad)


def test_mlp_shape_width_and_gelu():
    mlp = MLP(48)
    assert mlp.fc1.out_features == 192 and mlp.fc2.in_features == 192
    assert MLP(48, 100).fc1.out_features == 100
    x = torch.randn(2, 7, 48)
    expected = mlp.fc2(F.gelu(mlp.fc1(x)))
    torch.testing.assert_close(mlp(x), expected)


def test_init_layers():
    torch.manual_seed(0)
    block = TransformerBlock(256, 4).apply(init_layers)
    w = block.mlp.fc1.weight  # 262,144 draws
    # timm's rule: trunc_normal_(std=0.02) with its default cut at -2 and 2 (absolute), which
    # never binds; so a plain normal: std 0.02 and 4.55% of the draws beyond two std
    assert abs(w.std().item() - 0.02) < 0.0005
    beyond = (w.abs() > 0.04).float().mean().item()
    assert 0.042 < beyond < 0.049, f"{beyond:.2%} of the weights beyond two std"
    assert torch.count_nonzero(block.attn.qkv.bias) == 0
    assert torch.equal(block.norm1.weight, torch.ones(256))


@pytest.mark.parametrize("qkv_bias", [True, False])
def test_block_equals_timm_block(qkv_bias):
    torch.manual_seed(0)
    ours = shake(TransformerBlock(96, 3, mlp_dim=192, qkv_bias=qkv_bias)).eval()
    theirs = TimmBlock(
        96,
        3,
        mlp_ratio=2.0,
        qkv_bias=qkv_bias,
        norm_layer=partial(torch.nn.LayerNorm, eps=1e-6),
    )
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, 17, 96)
    torch.testing.assert_close(ours(x), theirs.eval()(x), atol=1e-5, rtol=1e-5)


def test_pre_and_post_norm_follow_their_formulas():
    torch.manual_seed(0)
    x = torch.randn(2, 9, 32)
    for prenorm in (True, False):
        b = shake(TransformerBlock(32, 4, prenorm=prenorm)).eval()
        if prenorm:
            h = x + b.attn(b.norm1(x))
            expected = h + b.mlp(b.norm2(h))
        else:
            h = b.norm1(x + b.attn(x))
            expected = b.norm2(h + b.mlp(h))
        torch.testing.assert_close(b(x), expected)


@pytest.mark.parametrize("prenorm", [True, False])
def test_block_maps_come_from_what_its_attention_reads(prenorm):
    torch.manual_seed(0)
    b = shake(TransformerBlock(32, 4, prenorm=prenorm)).eval()
    x = torch.randn(3, 11, 32)
    weights = b.attention_maps(x)
    assert weights.shape == (3, 4, 11, 11)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 11))
    seen = b.norm1(x) if prenorm else x  # what the attention reads
    torch.testing.assert_close(weights, b.attn.attention_maps(seen))


def test_encoder_rates_keys_attention_and_equivariance():
    torch.manual_seed(0)
    enc = TransformerEncoder(32, depth=5, heads=2, drop_path=0.2).eval()
    assert [round(b.drop_path.p, 6) for b in enc] == [0.0, 0.05, 0.1, 0.15, 0.2]
    assert "0.norm1.weight" in enc.state_dict() and "4.mlp.fc2.bias" in enc.state_dict()
    x = torch.randn(2, 10, 32)
    out, maps = enc(x), enc.attention_maps(x)
    assert len(maps) == 5 and all(m.shape == (2, 2, 10, 10) for m in maps)
    # block i's map is computed from block i's input
    torch.testing.assert_close(maps[1], enc[1].attention_maps(enc[0](x)))
    order = torch.randperm(10)
    torch.testing.assert_close(enc(x[:, order]), out[:, order], atol=1e-5, rtol=1e-5)


def test_encoder_maps_take_one_pass_and_name_an_attention_they_cannot_read():
    torch.manual_seed(0)
    enc = TransformerEncoder(32, depth=3, heads=2).eval()
    calls = []
    for block in enc:
        block.attn.qkv.register_forward_hook(lambda *_: calls.append(1))
    maps = enc.attention_maps(torch.randn(2, 6, 32))
    assert len(maps) == 3 and len(calls) == 3  # each attention computed q, k, v once

    class Opaque(nn.Module):  # torch's attention: no switch to read its weights by
        def __init__(self, dim, heads, *_):
            super().__init__()
            self.inner = nn.MultiheadAttention(dim, heads, batch_first=True)

        def forward(self, x):
            return self.inner(x, x, x, need_weights=False)[0]

    opaque = TransformerEncoder(32, depth=2, heads=2, attn_layer=Opaque).eval()
    with pytest.raises(ValueError, match="2 blocks"):
        opaque.attention_maps(torch.randn(2, 6, 32))


def test_encoder_builds_on_the_meta_device():
    with torch.device("meta"):
        enc = TransformerEncoder(768, depth=12, heads=12, drop_path=0.1)
    assert sum(p.numel() for p in enc.parameters()) == 85_054_464
