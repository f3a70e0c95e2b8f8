"""vitlib.pretrained: timm and Hugging Face ViTs, built offline with random weights, converted
to vitlib and back; logits agree to 1e-5, also at another image size."""

import re

import pytest
import timm
import torch
from transformers import ViTConfig as HFConfig
from transformers import ViTForImageClassification, ViTModel
from transformers.utils import logging as hf_logging

from vitlib.block import TransformerBlock
from vitlib.model import ViT, ViTConfig
from vitlib.pretrained import (
    from_hf,
    from_timm,
    hf_to_vitlib_state_dict,
    load_weights,
    prefix_block,
    to_timm,
    to_timm_state_dict,
)

hf_logging.set_verbosity_error()
ATOL = 1e-5


@torch.no_grad()
def shake(module, seed=0):
    """Noise on every parameter: no LayerNorm stays the identity, no bias zero, no CLS ~0."""
    g = torch.Generator().manual_seed(seed)
    for p in module.parameters():
        p.add_(torch.randn(p.shape, generator=g) * 0.05)
    return module.eval()


def close(a, b):
    torch.testing.assert_close(a, b, atol=ATOL, rtol=ATOL)


def timm_vit(**kw):
    args = dict(
        img_size=32,
        patch_size=8,
        embed_dim=48,
        depth=2,
        num_heads=3,
        mlp_ratio=2.0,
        num_classes=7,
    )
    torch.manual_seed(0)
    return shake(timm.models.VisionTransformer(**{**args, **kw}))


def hf_vit(cls=ViTForImageClassification, **kw):
    args = dict(
        image_size=32,
        patch_size=8,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=96,
        num_labels=7,
    )
    torch.manual_seed(0)
    return shake(cls(HFConfig(**{**args, **kw})))


TIMM_CASES = {
    "cls": {},
    "mean": dict(global_pool="avg"),
    "no qkv bias": dict(qkv_bias=False),
    "grey, patch 4, 28px": dict(img_size=28, patch_size=4, in_chans=1),
    "no head": dict(num_classes=0),
    "3 blocks, 4 heads, mlp 4x": dict(
        embed_dim=64, depth=3, num_heads=4, mlp_ratio=4.0
    ),
    "rectangular": dict(img_size=(32, 48)),
}


@pytest.mark.parametrize("kw", TIMM_CASES.values(), ids=TIMM_CASES.keys())
def test_from_timm_model_matches_logits(kw):
    theirs = timm_vit(**kw)
    ours = from_timm(theirs).eval()
    size = kw.get("img_size", 32)
    h, w = size if isinstance(size, tuple) else (size, size)
    x = torch.randn(3, kw.get("in_chans", 3), h, w)
    close(ours(x), theirs(x))
    assert ours.config.heads == theirs.blocks[0].attn.num_heads


def test_from_timm_state_dict_infers_heads_of_width_64():
    theirs = timm_vit(embed_dim=128, num_heads=2, mlp_ratio=3.0, global_pool="avg")
    ours = from_timm(theirs.state_dict()).eval()
    assert (ours.config.heads, ours.config.pool, ours.config.mlp_dim) == (
        2,
        "mean",
        384,
    )
    x = torch.randn(2, 3, 32, 32)
    close(ours(x), theirs(x))
    with pytest.raises(ValueError, match="pass heads"):
        from_timm(timm_vit().state_dict())  # width 48: heads cannot be guessed
    close(from_timm(timm_vit().state_dict(), heads=3).eval()(x), timm_vit()(x))


@pytest.mark.parametrize("new_size", [48, 24, (40, 56)])
def test_from_timm_at_another_size_matches_timm_resampling(new_size):
    theirs = timm_vit(dynamic_img_size=True)
    ours = from_timm(theirs, img_size=new_size).eval()
    h, w = new_size if isinstance(new_size, tuple) else (new_size, new_size)
    x = torch.randn(2, 3, h, w)
    close(ours(x), theirs(x))


@pytest.mark.parametrize("pool", ["cls", "mean"])
@pytest.mark.parametrize("pos", ["learned", "sincos"])
def test_to_timm_round_trip(pool, pos):
    torch.manual_seed(0)
    ours = shake(
        ViT(
            img_size=32,
            patch_size=8,
            dim=64,
            depth=2,
            heads=4,
            mlp_dim=128,
            num_classes=3,
            pool=pool,
            pos=pos,
        )
    )
    theirs = to_timm(ours).eval()
    assert set(to_timm_state_dict(ours)) == set(theirs.state_dict())
    x = torch.randn(2, 3, 32, 32)
    close(theirs(x), ours(x))
    back = from_timm(theirs).eval()
    close(back(x), ours(x))


def test_unsupported_timm_variants_are_refused_by_name():
    # register tokens, LayerScale, ... become chapter 11's ModernViT (tests/test_modern.py);
    # what neither model has is refused, naming it
    with pytest.raises(ValueError, match="instead of the exact GELU"):
        from_timm(timm_vit(act_layer="gelu_tanh"))
    with pytest.raises(ValueError, match="pool 'max'"):
        from_timm(timm_vit(reg_tokens=2, global_pool="max"))
    with pytest.raises(ValueError, match="a norm before the blocks"):
        from_timm(timm_vit(class_token=False, global_pool="avg", pre_norm=True))


HF_CASES = {
    "default": {},
    "no qkv bias": dict(qkv_bias=False),
    "grey, patch 4, 28px": dict(image_size=28, patch_size=4, num_channels=1),
    "eps 1e-6, 3 blocks": dict(layer_norm_eps=1e-6, num_hidden_layers=3),
}


def hf_logits(model, x, **kw):
    with torch.no_grad():
        out = model(pixel_values=x, **kw)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state[:, 0]


@pytest.mark.parametrize("kw", HF_CASES.values(), ids=HF_CASES.keys())
def test_from_hf_model_matches_logits(kw):
    theirs = hf_vit(**kw)
    ours = from_hf(theirs).eval()
    size = kw.get("image_size", 32)
    x = torch.randn(3, kw.get("num_channels", 3), size, size)
    close(ours(x), hf_logits(theirs, x))
    assert ours.config.norm_eps == theirs.config.layer_norm_eps


def to_hub_layout(state_dict):
    """transformers 5's in-memory names -> the names in the hub's files (vit.encoder.layer.i...,
    the layout of the files that transformers 4 wrote)."""
    table = [
        (
            r"^vit\.layers\.(\d+)\.attention\.q_proj\.",
            r"vit.encoder.layer.\1.attention.attention.query.",
        ),
        (
            r"^vit\.layers\.(\d+)\.attention\.k_proj\.",
            r"vit.encoder.layer.\1.attention.attention.key.",
        ),
        (
            r"^vit\.layers\.(\d+)\.attention\.v_proj\.",
            r"vit.encoder.layer.\1.attention.attention.value.",
        ),
        (
            r"^vit\.layers\.(\d+)\.attention\.o_proj\.",
            r"vit.encoder.layer.\1.attention.output.dense.",
        ),
        (
            r"^vit\.layers\.(\d+)\.mlp\.fc1\.",
            r"vit.encoder.layer.\1.intermediate.dense.",
        ),
        (r"^vit\.layers\.(\d+)\.mlp\.fc2\.", r"vit.encoder.layer.\1.output.dense."),
        (r"^vit\.layers\.(\d+)\.layernorm_", r"vit.encoder.layer.\1.layernorm_"),
    ]
    out = {}
    for key, value in state_dict.items():
        for pattern, new in table:
            key = re.sub(pattern, new, key)
        out[key] = value
    return out


def test_from_hf_accepts_the_hub_file_layout():
    theirs = hf_vit()
    hub = to_hub_layout(theirs.state_dict())
    assert "vit.encoder.layer.1.attention.attention.value.bias" in hub
    assert not any(".layers." in k for k in hub)
    ours = from_hf(hub, heads=3).eval()
    assert ours.config.norm_eps == 1e-12
    x = torch.randn(2, 3, 32, 32)
    close(ours(x), hf_logits(theirs, x))
    # both layouts give the same vitlib state dict
    new = hf_to_vitlib_state_dict(theirs.state_dict())
    old = hf_to_vitlib_state_dict(hub)
    assert new.keys() == old.keys() and all(torch.equal(new[k], old[k]) for k in new)


def test_from_hf_vit_model_without_head_drops_the_pooler():
    theirs = hf_vit(ViTModel)
    assert any(k.startswith("pooler.") for k in theirs.state_dict())
    ours = from_hf(theirs).eval()
    assert ours.config.num_classes == 0
    x = torch.randn(2, 3, 32, 32)
    close(ours(x), hf_logits(theirs, x))


@pytest.mark.parametrize("new_size", [48, 64, 24])
def test_from_hf_at_another_size_matches_interpolate_pos_encoding(new_size):
    theirs = hf_vit()
    ours = from_hf(theirs, img_size=new_size).eval()
    x = torch.randn(2, 3, new_size, new_size)
    close(ours(x), hf_logits(theirs, x, interpolate_pos_encoding=True))


def test_hf_to_timm_through_vitlib():
    theirs = hf_vit(layer_norm_eps=1e-6)
    timm_model = to_timm(from_hf(theirs)).eval()
    x = torch.randn(2, 3, 32, 32)
    close(timm_model(x), hf_logits(theirs, x))


@pytest.mark.parametrize("seed", range(6))
def test_random_configurations_match_timm_and_hf(seed):
    """Configurations drawn at random: widths, heads, patches, grids (rectangular, sides of 1),
    channels, classes, pooling, biases, eps, and a second image size."""
    import random

    rng = random.Random(seed)
    heads, patch = rng.choice([1, 2, 3, 4]), rng.choice([2, 4, 7, 8])
    dim, ratio = heads * rng.choice([8, 16]), rng.choice([1.0, 2.0, 4.0])
    gh, gw = rng.randint(1, 4), rng.randint(1, 4)
    channels, classes = rng.choice([1, 3, 4]), rng.choice([0, 1, 10])
    depth, bias = rng.randint(1, 3), rng.random() < 0.7
    theirs = timm_vit(
        img_size=(patch * gh, patch * gw),
        patch_size=patch,
        embed_dim=dim,
        depth=depth,
        num_heads=heads,
        mlp_ratio=ratio,
        num_classes=classes,
        in_chans=channels,
        qkv_bias=bias,
        global_pool=rng.choice(["token", "avg"]),
        dynamic_img_size=True,
    )
    x = torch.randn(2, channels, patch * gh, patch * gw)
    close(from_timm(theirs).eval()(x), theirs(x))
    new = (patch * (gh + rng.randint(0, 2)), patch * (gw + rng.randint(0, 2)))
    x = torch.randn(2, channels, *new)
    close(from_timm(theirs, img_size=new).eval()(x), theirs(x))
    hf = hf_vit(
        image_size=patch * gh,
        patch_size=patch,
        hidden_size=dim,
        num_hidden_layers=depth,
        num_attention_heads=heads,
        intermediate_size=int(dim * ratio),
        num_labels=max(classes, 1),
        num_channels=channels,
        qkv_bias=bias,
        layer_norm_eps=rng.choice([1e-12, 1e-6]),
    )
    x = torch.randn(2, channels, patch * gh, patch * gh)
    close(from_hf(hf).eval()(x), hf_logits(hf, x))
    size = patch * (gh + rng.randint(1, 2))
    x = torch.randn(2, channels, size, size)
    close(
        from_hf(hf, img_size=size).eval()(x),
        hf_logits(hf, x, interpolate_pos_encoding=True),
    )


def test_weights_that_do_not_fit_raise_one_error_listing_everything():
    model = ViT(
        img_size=32, patch_size=8, dim=32, depth=2, heads=2, mlp_dim=64, num_classes=5
    )
    weights = dict(model.state_dict())
    weights.pop("blocks.1.mlp.fc2.bias")
    weights["blocks.0.attn.extra"] = torch.zeros(3)
    weights["head.weight"] = torch.zeros(10, 32)
    with pytest.raises(ValueError) as caught:
        load_weights(model, weights, "my checkpoint")
    text = str(caught.value)
    assert "my checkpoint do not fit" in text
    assert "1 missing keys: blocks.1.mlp.fc2.bias" in text
    assert "1 unexpected keys: blocks.0.attn.extra" in text
    assert "head.weight (10, 32) -> (5, 32)" in text
    # and from the converters
    bad = timm_vit().state_dict()
    bad.pop("blocks.0.norm1.weight")
    with pytest.raises(ValueError, match="missing keys: blocks.0.norm1.weight"):
        from_timm(bad, heads=3)
    with pytest.raises(ValueError, match="is this a ViT"):
        from_hf({"conv.weight": torch.zeros(1)})


@pytest.mark.parametrize("prenorm", [True, False])
@pytest.mark.parametrize("rows", [1, 2, 3, 11])
def test_a_block_for_the_first_rows_computes_what_the_whole_block_does_there(
    prenorm, rows
):
    torch.manual_seed(0)
    block = shake(TransformerBlock(32, 4, prenorm=prenorm, qkv_bias=prenorm))
    x = torch.randn(3, 11, 32)
    out = prefix_block(block, x, rows)
    assert out.shape == (3, rows, 32)
    close(out, block(x)[:, :rows])


def test_a_model_converts_through_its_class_or_its_nearest_registered_parent():
    from vitlib.cnn import ResNet, ResNetConfig
    from vitlib.modern import ModernTimmConverter, ModernViT
    from vitlib.pretrained import FastViT, TimmConverter, converter_for

    small = dict(img_size=28, patch_size=7, in_channels=1, dim=64, depth=1, heads=4)
    x = torch.randn(2, 1, 28, 28)
    fast = shake(FastViT(ViTConfig(**small, mlp_dim=128, num_classes=10)))
    assert type(converter_for(fast)) is TimmConverter  # a ViT subclass: the ViT's
    assert type(converter_for(ModernViT(qk_norm=True, **small))) is ModernTimmConverter
    close(to_timm(fast).eval()(x), fast(x))
    with pytest.raises(ValueError, match="timm has no counterpart for a ResNet"):
        to_timm(ResNet(ResNetConfig()))
    # the ViT's MLP need not be a multiple of its width: timm gets mlp_dim exactly
    odd = shake(ViT(ViTConfig(**small, mlp_dim=86, num_classes=10)))
    close(to_timm(odd).eval()(x), odd(x))
