"""vitlib.model: configuration checks, exact parameter counts, the forward pass, presets, init."""

import pytest
import timm
import torch

from vitlib.model import (
    PRESETS,
    ViT,
    ViTConfig,
    create_vit,
    parameter_counts,
    vit_base,
    vit_large,
    vit_small,
    vit_tiny,
)
from vitlib.patches import pair
from vitlib.positions import resample_pos_embed, sincos_2d
from vitlib.pretrained import FastViT

SMALL = dict(
    img_size=32, patch_size=8, dim=32, depth=2, heads=2, mlp_dim=64, num_classes=5
)


def test_vit_b16_parameter_table_with_10_classes():
    with torch.device("meta"):
        counts = parameter_counts(vit_base(num_classes=10))
    assert counts == {
        "patch embedding": 590_592,
        "class token": 768,
        "positions": 151_296,
        "12 blocks": 85_054_464,
        "final norm and head": 9_226,
        "total": 85_806_346,
    }


@pytest.mark.parametrize(
    "preset, timm_name, total",
    [
        (vit_tiny, "vit_tiny_patch16_224", 5_717_416),
        (vit_small, "vit_small_patch16_224", 22_050_664),
        (vit_base, "vit_base_patch16_224", 86_567_656),
        (vit_large, "vit_large_patch16_224", 304_326_632),
    ],
)
def test_preset_totals_equal_the_paper_sizes_and_timm(preset, timm_name, total):
    with torch.device("meta"):
        ours = preset()
        theirs = timm.create_model(timm_name)
    assert parameter_counts(ours)["total"] == total
    assert sum(p.numel() for p in ours.parameters()) == total
    assert sum(p.numel() for p in theirs.parameters()) == total
    # same names and shapes as timm: the state dicts line up key by key
    assert {k: v.shape for k, v in ours.state_dict().items()} == {
        k: v.shape for k, v in theirs.state_dict().items()
    }


def test_presets_take_changes_and_unknown_names_list_the_valid_ones():
    with torch.device("meta"):
        model = vit_small(num_classes=10, drop_path=0.1)
    assert model.config.num_classes == 10 and model.head.out_features == 10
    assert model.config.dim == 384
    with pytest.raises(ValueError, match="choose one of.*'base'"):
        create_vit("huge")
    for name in PRESETS:
        with torch.device("meta"):
            assert create_vit(name).config == PRESETS[name]


def test_small_presets_run_on_their_images():
    torch.manual_seed(0)
    for name, shape in [("fashion", (2, 1, 28, 28)), ("cifar", (2, 3, 32, 32))]:
        assert create_vit(name).eval()(torch.randn(shape)).shape == (2, 10)


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(dim=100, heads=3), "cannot be split into 3 heads"),
        (dict(img_size=230), "230"),
        (dict(pool="max"), "pool must be"),
        (dict(pos="rope"), "pos must be"),
        (dict(pos="sincos", dim=66, heads=1), "divisible by 4"),
        (dict(dropout=1.0), "dropout must be"),
        (dict(depth=-1), "depth must be at least 1, got -1"),
        (dict(dim=0, heads=1), "dim must be at least 1, got 0"),
        (dict(heads=0), "heads must be at least 1, got 0"),
        (dict(mlp_dim=0), "mlp_dim must be at least 1, got 0"),
        (dict(patch_size=0), "patch_size must be at least 1, got 0"),
        (dict(patch_size=(16, 0)), "patch_size must be at least 1"),
        (dict(num_classes=-1), "num_classes must be at least 0, got -1"),
    ],
)
def test_config_rejects_bad_values(bad, message):
    with pytest.raises(ValueError, match=message):
        ViTConfig(**bad)


def test_config_grid_and_rectangular_images():
    config = ViTConfig(img_size=(32, 48), patch_size=8, dim=32, heads=2)
    assert config.grid == (4, 6) and config.num_patches == 24
    model = ViT(config, depth=1, mlp_dim=64, num_classes=3).eval()
    assert model(torch.randn(1, 3, 32, 48)).shape == (1, 3)


def test_wrong_images_raise_clear_errors():
    model = ViT(**SMALL)
    with pytest.raises(ValueError, match="32"):
        model(torch.randn(1, 3, 64, 64))
    with pytest.raises(ValueError, match="channel"):
        model(torch.randn(1, 1, 32, 32))
    with pytest.raises(ValueError, match="unsqueeze"):
        model(torch.randn(3, 32, 32))


def test_forward_by_hand_and_attention_maps():
    torch.manual_seed(0)
    model = ViT(**SMALL).eval()
    x = torch.randn(3, 3, 32, 32)
    tokens = model.patch_embed(x)
    tokens = torch.cat([model.cls_token.expand(3, -1, -1), tokens], 1) + model.pos_embed
    for block in model.blocks:
        tokens = block(tokens)
    expected = model.head(model.norm(tokens)[:, 0])
    logits = model(x)
    assert isinstance(logits, torch.Tensor)
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)
    features = model.forward_features(x)
    torch.testing.assert_close(features, model.norm(tokens), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model.forward_head(features), expected)
    maps = model.attention_maps(x)
    assert len(maps) == 2 and all(m.shape == (3, 2, 17, 17) for m in maps)
    torch.testing.assert_close(maps[1].sum(-1), torch.ones(3, 2, 17))
    # block 1's map is what block 1's attention computes on block 0's output
    first = model.blocks[0](model.pos_drop(model._tokens(x)))
    torch.testing.assert_close(maps[1], model.blocks[1].attention_maps(first))


def test_mean_pooling_normalises_the_average_of_the_patch_tokens():
    torch.manual_seed(0)
    model = ViT(**SMALL, pool="mean").eval()
    with torch.no_grad():
        model.norm.weight.normal_()
    x = torch.randn(2, 3, 32, 32)
    tokens = torch.cat([model.cls_token.expand(2, -1, -1), model.patch_embed(x)], 1)
    tokens = model.blocks(tokens + model.pos_embed)
    expected = model.head(model.norm(tokens[:, 1:].mean(1)))
    torch.testing.assert_close(model(x), expected, atol=1e-5, rtol=1e-5)
    # as timm: the features are not normalised, the mean is (fc_norm)
    torch.testing.assert_close(model.forward_features(x), tokens, atol=1e-5, rtol=1e-5)


def test_sincos_positions_are_a_fixed_buffer():
    model = ViT(**SMALL, pos="sincos")
    assert "pos_embed" not in dict(model.named_parameters())
    assert "pos_embed" in model.state_dict()
    assert parameter_counts(model)["positions"] == 0
    torch.testing.assert_close(model.pos_embed[0, 1:], sincos_2d((4, 4), 32))
    assert torch.count_nonzero(model.pos_embed[0, 0]) == 0
    learned = ViT(**SMALL)
    assert (
        parameter_counts(learned)["total"] - parameter_counts(model)["total"] == 17 * 32
    )


def test_init_follows_timm():
    torch.manual_seed(0)
    model = vit_small(num_classes=10)
    assert model.cls_token.std().item() < 1e-5
    for w in (model.blocks[3].attn.qkv.weight, model.head.weight, model.pos_embed):
        # timm's trunc_normal_(std=0.02) cuts at -2 and 2 (absolute), so it never binds:
        # std 0.02, and about 4.55% of the draws beyond two std (none if cut at two std)
        assert abs(w.std().item() - 0.02) < 0.001
        beyond = (w.abs() > 0.04).float().mean().item()
        assert 0.035 < beyond < 0.056, f"{beyond:.2%} beyond two std"
    assert torch.count_nonzero(model.blocks[0].mlp.fc1.bias) == 0
    assert torch.equal(model.norm.weight, torch.ones(384))


def test_dropout_and_drop_path_reach_the_blocks():
    model = ViT(**SMALL, dropout=0.1, attn_dropout=0.2, drop_path=0.3)
    assert model.pos_drop.p == 0.1
    assert (
        model.blocks[0].attn.attn_drop.p == 0.2 and model.blocks[0].mlp.drop1.p == 0.1
    )
    assert [b.drop_path.p for b in model.blocks] == [0.0, 0.3]
    torch.manual_seed(0)
    x = torch.randn(4, 3, 32, 32)
    assert not torch.equal(model.train()(x), model(x))
    model.eval()
    assert torch.equal(model(x), model(x))


def test_num_classes_zero_gives_features():
    model = ViT(**{**SMALL, "num_classes": 0}).eval()
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 32)


def test_resize_resamples_learned_positions_and_recomputes_sincos():
    torch.manual_seed(0)
    model = ViT(**SMALL)
    table = model.pos_embed.detach().clone()
    model.resize(48)
    assert model.config.img_size == 48 and model.pos_embed.shape == (1, 37, 32)
    torch.testing.assert_close(model.pos_embed.detach(), resample_pos_embed(table, 6))
    assert isinstance(model.pos_embed, torch.nn.Parameter)
    assert model.eval()(torch.randn(1, 3, 48, 48)).shape == (1, 5)
    with pytest.raises(ValueError):
        model(torch.randn(1, 3, 32, 32))
    fixed = ViT(**SMALL, pos="sincos").resize(64)
    torch.testing.assert_close(fixed.pos_embed[0, 1:], sincos_2d((8, 8), 32))
    assert "pos_embed" not in dict(fixed.named_parameters())


def test_gradients_reach_every_parameter():
    torch.manual_seed(0)
    model = ViT(**SMALL)
    model(torch.randn(2, 3, 32, 32)).sum().backward()
    missing = [
        n
        for n, p in model.named_parameters()
        if p.grad is None or not p.grad.abs().sum()
    ]
    assert not missing


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("pool", ["cls", "mean"])
def test_the_fast_path_equals_the_plain_path_in_logits_and_every_gradient(seed, pool):
    # page 5b's FastViT computes only the class token's row in the last block; its logits
    # and every gradient must equal the ViT's plain forward, in training mode too
    g = torch.Generator().manual_seed(seed)
    draw = lambda *choices: choices[torch.randint(len(choices), (), generator=g)]  # noqa: E731
    config = dict(
        img_size=draw(16, 24, (16, 24)),
        patch_size=draw(4, 8),
        in_channels=draw(1, 3),
        dim=draw(16, 32),
        depth=draw(1, 2, 3),
        heads=draw(1, 2, 4),
        mlp_dim=draw(8, 48),
        num_classes=draw(3, 10),
        qkv_bias=draw(True, False),
        pos=draw("learned", "sincos", "none"),
        drop_path=draw(0.0, 0.3),
        pool=pool,
    )
    model = ViT(**config).double()  # float64: rounding far below the 1e-5 compared
    with torch.no_grad():  # weights far from the initialisation, so that rows differ
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)
    shape = (4, config["in_channels"], *pair(config["img_size"]))
    images = torch.randn(shape, generator=g, dtype=torch.float64)
    results = []
    fast = FastViT(model.config).double()
    fast.load_state_dict(model.state_dict())
    for run in (fast, model):
        run.zero_grad()
        torch.manual_seed(seed)  # the same drop path draws on both paths
        logits = run(images)
        (logits * torch.arange(logits.shape[1])).sum().backward()
        results.append((logits, {n: p.grad.clone() for n, p in run.named_parameters()}))
    (fast, fast_grads), (full, full_grads) = results
    torch.testing.assert_close(fast, full, atol=1e-5, rtol=1e-5)
    for name in full_grads:
        torch.testing.assert_close(
            fast_grads[name], full_grads[name], atol=1e-5, rtol=1e-5
        )
