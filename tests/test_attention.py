"""vitlib.attention: the four versions compute one function, they equal timm's Attention with the
same weights, and the attention maps are proper."""

import pytest
import torch

from conftest import need_module
from vitlib.attention import (
    AttentionHead,
    MultiHeadAttention,
    MultiHeadEinsum,
    MultiHeadFused,
    MultiHeadList,
    attend,
    copy_fused_weights,
    recorded_attention,
)

VERSIONS = [MultiHeadList, MultiHeadEinsum, MultiHeadFused, MultiHeadAttention]
SHAPES = [(2, 197, 384, 6), (3, 50, 768, 12), (1, 17, 64, 1), (2, 5, 48, 4)]


def by_the_formula(module, x):
    """Multi-head attention written out in the test, head by head, from the weights of a
    fused module: (output (b, n, d), weights (b, heads, n, n)). Independent of vitlib."""
    dim, heads = x.shape[-1], module.num_heads
    w, bias = module.qkv.weight, module.qkv.bias
    bias = torch.zeros(3 * dim) if bias is None else bias
    width = dim // heads
    outputs, maps = [], []
    for h in range(heads):
        # rows of head h inside the Q, K and V thirds of the fused weight
        rows = [part * dim + h * width + torch.arange(width) for part in range(3)]
        q, k, v = (x @ w[r].T + bias[r] for r in rows)
        scores = torch.einsum("bid,bjd->bij", q, k) / width**0.5
        weights = torch.exp(scores - scores.amax(-1, keepdim=True))
        weights = weights / weights.sum(-1, keepdim=True)
        outputs.append(torch.einsum("bij,bjd->bid", weights, v))
        maps.append(weights)
    out = torch.cat(outputs, -1) @ module.proj.weight.T + module.proj.bias
    return out, torch.stack(maps, 1)


@pytest.mark.parametrize("b, n, dim, heads", SHAPES)
@pytest.mark.parametrize("qkv_bias", [True, False])
def test_four_versions_equal_the_formula(b, n, dim, heads, qkv_bias):
    torch.manual_seed(0)
    source = MultiHeadFused(dim, heads, qkv_bias=qkv_bias).eval()
    with torch.no_grad():
        for p in source.parameters():  # no zero bias may hide a slip
            p.add_(0.05 * torch.randn(p.shape))
        x = torch.randn(b, n, dim)
        expected, _ = by_the_formula(source, x)
        for version in VERSIONS:
            module = copy_fused_weights(
                source, version(dim, heads, qkv_bias=qkv_bias)
            ).eval()
            torch.testing.assert_close(module(x), expected, atol=1e-5, rtol=0)


def test_versions_differ_before_copying():
    """The agreement above comes from the copy, not from equal initialisations."""
    torch.manual_seed(0)
    x = torch.randn(1, 9, 32)
    a, b = MultiHeadAttention(32, 4).eval(), MultiHeadList(32, 4).eval()
    with torch.no_grad():
        assert (a(x) - b(x)).abs().max() > 1e-3


def test_gradients_agree_too():
    torch.manual_seed(0)
    reference = MultiHeadAttention(64, 4)
    other = copy_fused_weights(reference, MultiHeadEinsum(64, 4))
    x = torch.randn(2, 10, 64, requires_grad=True)
    (g1,) = torch.autograd.grad(reference(x).square().sum(), x)
    (g2,) = torch.autograd.grad(other(x).square().sum(), x)
    torch.testing.assert_close(g1, g2, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("b, n, dim, heads", SHAPES)
def test_attention_maps_are_the_weights_forward_uses(b, n, dim, heads):
    torch.manual_seed(0)
    module = MultiHeadAttention(dim, heads).eval()
    x = torch.randn(b, n, dim)
    with torch.no_grad():
        weights = module.attention_maps(x)
        expected_out, expected_weights = by_the_formula(module, x)
        torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=0)
        torch.testing.assert_close(module(x), expected_out, atol=1e-5, rtol=0)
    assert weights.shape == (b, heads, n, n)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(b, heads, n))


def test_recorded_attention_is_forwards_own_and_leaves_torch_alone():
    torch.manual_seed(0)
    module = MultiHeadAttention(48, 4, attn_drop=0.5)
    x = torch.randn(2, 9, 48)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with recorded_attention(module) as weights:
        assert torch.nn.functional.scaled_dot_product_attention is sdpa
        assert module.fused_attn is False
        module.eval()
        out = module(x)
    assert module.fused_attn is True and not module.attn_drop._forward_hooks
    assert len(weights) == 1 and weights[0].requires_grad
    torch.testing.assert_close(out, module(x), atol=1e-5, rtol=0)
    torch.testing.assert_close(weights[0], module.attention_maps(x))
    with recorded_attention(module) as weights:  # training: the weights before dropout
        module.train()(x)
    torch.testing.assert_close(weights[0].sum(-1), torch.ones(2, 4, 9))


def test_recorded_attention_reads_timms_attention_too():
    torch.manual_seed(0)
    timm_attn = (
        need_module("timm.layers").Attention(48, num_heads=4, qkv_bias=True).eval()
    )
    ours = copy_fused_weights(timm_attn, MultiHeadAttention(48, 4)).eval()
    x = torch.randn(2, 9, 48)
    fused = timm_attn.fused_attn
    with torch.no_grad(), recorded_attention(timm_attn) as weights:
        timm_attn(x)
    assert timm_attn.fused_attn == fused and len(weights) == 1
    torch.testing.assert_close(weights[0], ours.attention_maps(x), atol=1e-5, rtol=0)


def test_attend_is_the_formula():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 7, 5), torch.randn(3, 7, 5), torch.randn(3, 7, 2)
    out, weights = attend(q, k, v)
    expected = torch.softmax(q @ k.transpose(1, 2) / 5**0.5, dim=-1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(out, expected @ v)
    torch.testing.assert_close(
        out,
        torch.nn.functional.scaled_dot_product_attention(q, k, v),
        atol=1e-5,
        rtol=0,
    )


def test_single_head_shapes():
    head = AttentionHead(dim=32, head_dim=8)
    assert head(torch.randn(2, 11, 32)).shape == (2, 11, 8)


def test_dropout_is_off_in_eval_and_on_in_training():
    torch.manual_seed(0)
    module = MultiHeadAttention(32, 4, attn_drop=0.5, proj_drop=0.5)
    x = torch.randn(2, 9, 32)
    module.eval()
    with torch.no_grad():
        torch.testing.assert_close(module(x), module(x))
        module.train()
        assert (module(x) - module(x)).abs().max() > 1e-3


def test_bad_sizes_are_explained():
    with pytest.raises(
        ValueError, match=r"dim 100 cannot be split into 3 heads.*\[1, 2, 4, 5"
    ):
        MultiHeadAttention(100, 3)
    with pytest.raises(
        ValueError, match=r"expected tokens of shape \(batch, tokens, 64\)"
    ):
        MultiHeadAttention(64, 4)(torch.randn(2, 10, 32))


timm_layers = need_module("timm.layers")


@pytest.mark.parametrize("dim, heads", [(384, 6), (192, 3), (96, 8)])
def test_equal_to_timm_attention(dim, heads):
    torch.manual_seed(0)
    timm_attention = timm_layers.Attention(dim, heads, qkv_bias=True).eval()
    ours = MultiHeadAttention(dim, heads).eval()
    ours.load_state_dict(timm_attention.state_dict())  # same names, same layout
    x = torch.randn(2, 197, dim)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), timm_attention(x), atol=1e-5, rtol=0)
        for version in VERSIONS[:3]:
            module = copy_fused_weights(timm_attention, version(dim, heads)).eval()
            torch.testing.assert_close(module(x), timm_attention(x), atol=1e-5, rtol=0)
