"""vitlib.modern (chapter 11): timm ViTs with registers, no class token, patch-only positions,
QK-norm, LayerScale, SwiGLU (packed or not) and average or attention pooling, drawn at random
here, converted both ways with logits equal to 1e-5 in float64; what timm lacks (2D rotary
positions, shifted patches) against its paper's description on tiny examples."""

import random
from functools import partial

import pytest
import timm
import torch
from torch import nn

import vitlib
from vitlib.model import ViT, ViTConfig
from vitlib.modern import (
    ModernAttention,
    ModernViT,
    ModernViTConfig,
    ShiftedPatchEmbed,
    apply_rope,
    rope_2d,
    shifted_copies,
)
from vitlib.patches import patchify

ATOL = 1e-5


@torch.no_grad()
def shake(module, seed=0):
    """Noise on every parameter: no LayerNorm the identity, no LayerScale near zero."""
    g = torch.Generator().manual_seed(seed)
    for p in module.parameters():
        p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.05)
    return module.eval()


def draw_timm(rng: random.Random) -> dict:
    """Arguments of a timm VisionTransformer with this chapter's options, drawn."""
    dim = rng.choice([32, 48, 64])
    pool = rng.choice(["token", "avg", "map"])
    mlp, ratio = rng.choice(["gelu", "swiglu", "packed"]), rng.choice([2.0, 2.5, 4.0])
    kw = dict(img_size=rng.choice([16, 24]), patch_size=rng.choice([4, 8]))
    kw |= dict(in_chans=rng.choice([1, 3]), num_classes=rng.choice([0, 5]))
    kw |= dict(global_pool=pool, embed_dim=dim, depth=rng.choice([1, 2, 3]))
    kw |= dict(num_heads=rng.choice([h for h in (1, 2, 4) if dim % h == 0]))
    kw |= dict(mlp_ratio=ratio, qkv_bias=rng.random() < 0.7, qk_norm=rng.random() < 0.5)
    kw |= dict(
        init_values=rng.choice([None, 1e-5, 0.1]), reg_tokens=rng.choice([0, 1, 4])
    )
    kw |= dict(class_token=pool == "token" or rng.random() < 0.5)
    kw |= dict(
        no_embed_class=rng.random() < 0.5, norm_layer=partial(nn.LayerNorm, eps=1e-6)
    )
    if mlp == "swiglu":
        kw |= dict(mlp_layer=timm.layers.SwiGLU, act_layer=nn.SiLU)
    if mlp == "packed":  # fc1 holds gate and value: twice the width
        kw |= dict(
            mlp_layer=timm.layers.SwiGLUPacked, act_layer=nn.SiLU, mlp_ratio=2 * ratio
        )
    return kw


def logits(model, x):
    with torch.no_grad():
        return model.double().eval()(x)


@pytest.mark.parametrize("seed", range(24))
def test_random_timm_configurations_convert_both_ways(seed):
    kw = draw_timm(random.Random(seed))
    torch.manual_seed(seed)
    reference = shake(timm.models.VisionTransformer(**kw).double(), seed)
    x = torch.randn(
        3, kw["in_chans"], kw["img_size"], kw["img_size"], dtype=torch.double
    )
    ours = vitlib.from_timm(reference)
    assert isinstance(ours, ModernViT) or not timm_has_options(kw)
    assert ours.num_prefix_tokens == reference.num_prefix_tokens
    expected = logits(reference, x)
    torch.testing.assert_close(logits(ours, x), expected, atol=ATOL, rtol=ATOL)
    back = vitlib.to_timm(
        ours
    )  # (a packed SwiGLU comes back unpacked unless the pool needs it)
    torch.testing.assert_close(logits(back, x), expected, atol=ATOL, rtol=ATOL)
    # from the weights alone, told what weights cannot say
    known = dict(heads=kw["num_heads"], pos_prefix=not kw["no_embed_class"])
    alone = vitlib.from_timm(reference.state_dict(), **known)
    torch.testing.assert_close(logits(alone, x), expected, atol=ATOL, rtol=ATOL)


def timm_has_options(kw) -> bool:
    plain = dict(reg_tokens=0, qk_norm=False, init_values=None, class_token=True)
    plain |= dict(no_embed_class=False, global_pool="token")
    return any(kw[k] != v for k, v in plain.items()) or "mlp_layer" in kw


@pytest.mark.parametrize("new_size", [32, 40])
def test_resize_with_registers_matches_timm(new_size):
    kw = dict(
        img_size=24, patch_size=8, embed_dim=32, depth=2, num_heads=2, reg_tokens=4
    )
    for no_embed_class in (False, True):
        torch.manual_seed(0)
        reference = timm.models.VisionTransformer(**kw, no_embed_class=no_embed_class)
        reference = shake(reference.double())
        ours = vitlib.from_timm(reference, img_size=new_size)
        reference.set_input_size(img_size=new_size)
        x = torch.randn(2, 3, new_size, new_size, dtype=torch.double)
        torch.testing.assert_close(
            logits(ours, x), logits(reference, x), atol=ATOL, rtol=ATOL
        )


def test_with_every_option_off_it_is_chapter_5s_vit():
    config = dict(
        img_size=16, patch_size=4, in_channels=1, num_classes=3, dim=16, depth=2
    )
    config |= dict(heads=2, mlp_dim=32)
    plain, modern = ViT(ViTConfig(**config)), ModernViT(ModernViTConfig(**config))
    assert list(modern.state_dict()) == list(plain.state_dict())
    modern.load_state_dict(shake(plain).state_dict())
    x = torch.randn(2, 1, 16, 16)
    torch.testing.assert_close(modern.eval()(x), plain(x))
    torch.testing.assert_close(modern.attention_maps(x), plain.attention_maps(x))


def test_registers_are_prefix_tokens_that_decay_not_and_are_seen_in_the_maps():
    model = ModernViT(
        ModernViTConfig(img_size=16, patch_size=4, dim=16, heads=2, registers=3)
    )
    assert model.num_prefix_tokens == 4 and model.reg_token.shape == (1, 3, 16)
    assert {"cls_token", "reg_token", "pos_embed"} == model.no_weight_decay()
    x = torch.randn(2, 3, 16, 16)
    maps = model.attention_maps(x)
    assert maps[0].shape == (2, 2, 4 + 16, 4 + 16)
    torch.testing.assert_close(maps[-1].sum(-1), torch.ones(2, 2, 20))
    assert model.forward_features(x).shape == (2, 20, 16)


def test_attention_maps_are_what_forward_computes_with_qk_norm_and_rope():
    torch.manual_seed(0)
    attn = shake(ModernAttention(32, heads=2, qk_norm=True))
    cos, sin = rope_2d((3, 3), 16)
    x = torch.randn(2, 2 + 9, 32)
    rope = (cos, sin, 2)
    weights = attn.attention_maps(x, rope=rope)  # (b, h, n, n)
    _, _, v = attn._qkv(x, rope)
    by_hand = attn.proj((weights @ v).transpose(1, 2).flatten(2))
    torch.testing.assert_close(attn(x, rope=rope), by_hand, atol=1e-5, rtol=1e-5)
    q, k, _ = attn._qkv(x, rope)  # QK-norm: each head's query has mean 0, variance ~1
    plain_q, _, _ = ModernAttention._qkv(attn, x)
    assert not torch.allclose(q[..., 2:, :], plain_q[..., 2:, :])  # rope turned them
    torch.testing.assert_close(q[..., :2, :], plain_q[..., :2, :])  # prefix: not turned


def test_rotary_scores_depend_on_the_offset_between_patches_only():
    # RoFormer's property (Su et al., 2021), on a 4x5 grid: the same query and key vector
    # at every patch; after turning, q_i . k_j depends on (row_i - row_j, col_i - col_j)
    grid, head_dim = (4, 5), 8
    cos, sin = rope_2d(grid, head_dim)
    torch.manual_seed(0)
    q = torch.randn(head_dim).expand(1, 1, 20, head_dim)
    k = torch.randn(head_dim).expand(1, 1, 20, head_dim)
    scores = apply_rope(q, cos, sin) @ apply_rope(k, cos, sin).transpose(-2, -1)
    by_offset = {}
    for i in range(20):
        for j in range(20):
            offset = (i // 5 - j // 5, i % 5 - j % 5)
            by_offset.setdefault(offset, []).append(scores[0, 0, i, j])
    assert len(by_offset) == 7 * 9
    for values in by_offset.values():
        torch.testing.assert_close(torch.stack(values), values[0].expand(len(values)))
    assert (
        len({round(float(v[0]), 4) for v in by_offset.values()}) > 50
    )  # not all equal
    # a rotation: lengths are kept
    torch.testing.assert_close(apply_rope(q, cos, sin).norm(dim=-1), q.norm(dim=-1))
    # rows and columns both count: one step down is not one step right
    assert not torch.isclose(by_offset[(1, 0)][0], by_offset[(0, 1)][0])


def test_shifted_copies_move_half_a_patch_diagonally_as_the_paper_draws():
    image = torch.arange(1.0, 17.0).reshape(1, 1, 4, 4)  # pixel values 1..16
    copies = shifted_copies(image, 1, 1)  # (1, 5, 4, 4)
    assert copies.shape == (1, 5, 4, 4)
    assert torch.equal(copies[0, 0], image[0, 0])
    # copy 1 moved up and left: pixel (0, 0) now holds what was at (1, 1); the last row
    # and column are empty. Copy 4 moved down and right: the reverse.
    assert copies[0, 1, 0, 0] == image[0, 0, 1, 1] and copies[0, 1, 3].eq(0).all()
    assert copies[0, 1, :, 3].eq(0).all()
    assert copies[0, 4, 1, 1] == image[0, 0, 0, 0] and copies[0, 4, 0].eq(0).all()
    assert copies[0, 2, 0, 1] == image[0, 0, 1, 0]  # up and right
    assert copies[0, 3, 1, 0] == image[0, 0, 0, 1]  # down and left
    # every copy holds the same pixels, moved: nothing is invented
    for c in range(1, 5):
        assert set(copies[0, c].unique().tolist()) - {0.0} <= set(range(1, 17))
        assert copies[0, c].count_nonzero() == 9


def test_shifted_patch_tokens_are_layernorm_and_linear_of_the_five_images_patches():
    torch.manual_seed(0)
    embed = shake(ShiftedPatchEmbed(patch_size=2, in_channels=3, dim=8, img_size=6))
    images = torch.randn(2, 3, 6, 6)
    tokens = embed(images)
    assert tokens.shape == (2, 9, 8)  # as many tokens as plain patches of 2
    patches = patchify(shifted_copies(images, 1, 1), 2)  # (b, 9, 5 * 3 * 2 * 2)
    assert patches.shape == (2, 9, 60)
    by_hand = embed.proj(embed.norm(patches))
    torch.testing.assert_close(tokens, by_hand)


def test_bad_configurations_are_refused_by_name():
    with pytest.raises(ValueError, match="pool='cls' reads the class token"):
        ModernViTConfig(class_token=False)
    with pytest.raises(ValueError, match="dim/heads divisible by 4"):
        ModernViTConfig(dim=36, heads=6, pos="rope")
    with pytest.raises(ValueError, match="mlp must be one of"):
        ModernViTConfig(mlp="geglu")
    with pytest.raises(ValueError, match="registers must be 0 or more"):
        ModernViTConfig(registers=-1)
    with pytest.raises(TypeError, match="registers must be a whole number"):
        ModernViTConfig(registers=1.5)
    with pytest.raises(ValueError, match="patch_size must be 2 or more"):
        ModernViTConfig(patch_size=1, img_size=8, tokenizer="shifted")
    for option in (dict(pos="rope"), dict(tokenizer="shifted")):
        model = ModernViT(
            ModernViTConfig(img_size=16, patch_size=4, dim=16, heads=2, **option)
        )
        with pytest.raises(ValueError, match="timm's VisionTransformer has no rotary"):
            vitlib.to_timm(model)


@pytest.mark.parametrize(
    "option",
    [dict(pos="rope"), dict(tokenizer="shifted"), dict(pos="sincos", pos_prefix=False)],
)
def test_resize_keeps_rope_shifted_and_sincos_models_working(option):
    config = ModernViTConfig(
        img_size=16, patch_size=4, dim=16, heads=2, registers=1, **option
    )
    model = ModernViT(config).eval()
    model.resize(24)
    assert model(torch.randn(2, 3, 24, 24)).shape == (2, 1000)
    fresh = ModernViT(ModernViTConfig(**{**vars(config), "img_size": 24}))
    for name, buffer in fresh.named_buffers():
        torch.testing.assert_close(model.get_buffer(name), buffer)
