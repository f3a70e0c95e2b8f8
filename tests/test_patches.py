"""vitlib.patches: the two patch embeddings agree, patchify is exact, bad input is explained."""

import pytest
import torch
from einops import rearrange

from vitlib.patches import (
    LinearPatchEmbed,
    PatchEmbed,
    check_image_size,
    conv_to_linear,
    load_photo,
    patchify,
    square_crop_resize,
    unpatchify,
)

SHAPES = [  # (batch, channels, height, width, patch, dim)
    (2, 3, 224, 224, 16, 768),
    (3, 1, 28, 28, 7, 64),
    (1, 3, 32, 48, 4, 96),  # not square
    (2, 4, 30, 20, (5, 10), 32),  # a rectangular patch
]


@pytest.mark.parametrize("b, c, h, w, p, d", SHAPES)
def test_conv_and_linear_embeddings_agree(b, c, h, w, p, d):
    torch.manual_seed(0)
    conv = PatchEmbed(patch_size=p, in_channels=c, dim=d)
    images = torch.randn(b, c, h, w)
    with torch.no_grad():
        expected = conv(images)
        got = conv_to_linear(conv)(images)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_embedding_shapes_for_vit_b16():
    conv = PatchEmbed(patch_size=16, in_channels=3, dim=768, img_size=224)
    assert conv.num_patches == 196
    assert conv.proj.weight.shape == (768, 3, 16, 16)
    assert conv(torch.rand(1, 3, 224, 224)).shape == (1, 196, 768)


def test_gradients_agree_too():
    torch.manual_seed(0)
    conv = PatchEmbed(patch_size=4, in_channels=3, dim=8)
    linear = conv_to_linear(conv)
    images = torch.randn(2, 3, 8, 12)
    conv(images).square().sum().backward()
    linear(images).square().sum().backward()
    torch.testing.assert_close(
        linear.proj.weight.grad, conv.proj.weight.grad.flatten(1), atol=1e-4, rtol=1e-5
    )


def test_patchify_is_the_einops_pattern_and_unpatchify_inverts_it():
    images = torch.arange(2 * 3 * 8 * 12, dtype=torch.float32).reshape(2, 3, 8, 12)
    patches = patchify(images, 4)
    assert patches.shape == (2, 6, 48)
    # first token: the top-left 4x4 patch, channel-major
    torch.testing.assert_close(patches[0, 0], images[0, :, :4, :4].flatten())
    # second token: the next patch to the right (raster order)
    torch.testing.assert_close(patches[0, 1], images[0, :, :4, 4:8].flatten())
    assert torch.equal(unpatchify(patches, 4, (2, 3)), images)


def test_wrong_flattening_order_is_not_the_same_function():
    torch.manual_seed(0)
    conv = PatchEmbed(patch_size=4, in_channels=3, dim=8)
    images = torch.randn(1, 3, 8, 8)
    other = rearrange(images, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4)
    with torch.no_grad():
        wrong = other @ conv.proj.weight.flatten(1).T + conv.proj.bias
        assert not torch.allclose(wrong, conv(images), atol=1e-3)


@pytest.mark.parametrize("embed_cls", [PatchEmbed, LinearPatchEmbed])
def test_indivisible_size_names_both_sizes_and_the_fixes(embed_cls):
    embed = embed_cls(patch_size=16, in_channels=3, dim=8)
    with pytest.raises(ValueError) as error:
        embed(torch.rand(1, 3, 30, 30))
    message = str(error.value)
    assert "30x30" in message and "16x16" in message
    assert (
        "resize it to 32x32" in message
        and "pad it to 32x32" in message
        and "crop it to 16x16" in message
    )


def test_check_image_size():
    assert check_image_size(224, 320, 16) == (14, 20)
    with pytest.raises(ValueError, match="224x225"):
        check_image_size(224, 225, 16)
    with pytest.raises(ValueError) as error:  # smaller than one patch: no crop can help
        check_image_size(10, 10, 16)
    assert "crop" not in str(error.value)


@pytest.mark.parametrize(
    "bad, error_type, words",
    [
        (
            torch.rand(1, 1, 32, 32),
            ValueError,
            ["expects 3 channels, got 1", "expand(-1, 3, -1, -1)"],
        ),
        (
            torch.rand(1, 32, 32, 3),
            ValueError,
            ["channels-last", "permute(0, 3, 1, 2)"],
        ),
        (torch.zeros(1, 3, 32, 32, dtype=torch.uint8), TypeError, ["float", "/ 255"]),
        (torch.rand(3, 32, 32), ValueError, ["unsqueeze(0)"]),
        (torch.rand(32, 32), ValueError, ["(b, c, h, w)"]),
        ([[0.0]], TypeError, ["torch.Tensor"]),
    ],
)
def test_bad_inputs_are_explained(bad, error_type, words):
    embed = PatchEmbed(patch_size=16, in_channels=3, dim=8)
    with pytest.raises(error_type) as error:
        embed(bad)
    for word in words:
        assert word in str(error.value)


def test_fixed_img_size_is_enforced_with_a_clear_message():
    embed = PatchEmbed(patch_size=16, in_channels=3, dim=8, img_size=224)
    with pytest.raises(ValueError, match="built for 224x224 images, got 240x240"):
        embed(torch.rand(1, 3, 240, 240))
    assert PatchEmbed(patch_size=16, dim=8)(torch.rand(1, 3, 240, 240)).shape == (
        1,
        225,
        8,
    )


def test_square_crop_resize_and_photo():
    image = torch.rand(3, 30, 50)
    out = square_crop_resize(image, 16)
    assert out.shape == (3, 16, 16) and 0 <= out.min() and out.max() <= 1
    photo = load_photo("chelsea", 224)
    assert photo.shape == (3, 224, 224) and photo.dtype == torch.float32
    with pytest.raises(ValueError, match="chelsea"):
        load_photo("not-a-photo")
