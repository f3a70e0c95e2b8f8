"""vitlib.pretrain (page 10): masks, targets and the masked loss, the masked ViT, pretraining,
checkpoints and encoders moved into classifiers, few labels, and the Colab cell's code path
on a randomly initialised timm ViT-B/16."""

import subprocess
import sys
from dataclasses import replace

import pytest
import timm
import torch
import torch.nn.functional as F
from test_loop import random_data

from vitlib.checkpoint import load_checkpoint, save_checkpoint
from vitlib.loop import TrainConfig, parameter_groups
from vitlib.model import ViT, ViTConfig, create_vit
from vitlib.patches import patchify, unpatchify
from vitlib.pretrain import (
    MaskedViT,
    MaskedViTConfig,
    Resized,
    fine_tune_pretrained,
    freeze_encoder,
    hidden_count,
    labelled_subset,
    load_encoder,
    masked_loss,
    masked_mse,
    patch_targets,
    pretrain,
    random_mask,
    reconstruct,
)

SHAPE = dict(img_size=28, in_channels=1, patch_size=7, dim=32, depth=2, heads=2)
SHAPE |= dict(mlp_dim=64)


@pytest.mark.parametrize(
    "n, ratio, hidden",
    [(16, 0.25, 4), (16, 0.5, 8), (16, 0.75, 12), (64, 0.75, 48), (49, 0.5, 24)],
)
def test_every_image_hides_exactly_the_requested_share(n, ratio, hidden):
    g = torch.Generator().manual_seed(0)
    mask = random_mask(500, n, ratio, generator=g)
    assert mask.dtype == torch.bool and mask.shape == (500, n)
    assert (mask.sum(1) == hidden).all()
    assert hidden_count(n, ratio) == hidden
    # each image its own mask, every place hidden about `ratio` of the time
    assert len({tuple(row.tolist()) for row in mask}) > 400
    assert (mask.float().mean(0) - hidden / n).abs().max() < 0.1


def test_masks_come_from_the_generator():
    a = random_mask(4, 16, 0.5, generator=torch.Generator().manual_seed(3))
    b = random_mask(4, 16, 0.5, generator=torch.Generator().manual_seed(3))
    c = random_mask(4, 16, 0.5, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("ratio", [0.0, 1.0, 0.01, 0.99, -0.5])
def test_a_ratio_that_hides_nothing_or_everything_is_refused(ratio):
    with pytest.raises(ValueError, match="mask ratio"):
        random_mask(2, 16, ratio)
    with pytest.raises(ValueError, match="mask ratio"):
        MaskedViTConfig(**SHAPE, mask_ratio=ratio)


def test_targets_are_each_patch_normalised_and_flat_patches_zero():
    g = torch.Generator().manual_seed(0)
    images = torch.rand(3, 2, 8, 12, generator=g) * 5 + 2
    images[0, :, :4, :4] = 0.7  # one flat patch
    targets = patch_targets(images, 4)
    assert targets.shape == (3, 6, 2 * 16)
    assert torch.allclose(targets.mean(-1), torch.zeros(3, 6), atol=1e-4)
    var = targets.var(-1, unbiased=False)
    assert torch.allclose(var[1:], torch.ones(2, 6), atol=1e-4)
    assert targets[0, 0].abs().max() < 1e-3  # float rounding, divided by sqrt(eps)
    # the pattern, not the brightness: an affine change of the pixels changes nothing
    assert torch.allclose(patch_targets(3 * images - 1, 4), targets, atol=1e-4)


def test_the_loss_counts_hidden_patches_only():
    g = torch.Generator().manual_seed(0)
    targets = torch.randn(4, 16, 49, generator=g)
    predictions = torch.randn(4, 16, 49, generator=g)
    mask = random_mask(4, 16, 0.25, generator=g)
    loss = masked_mse(predictions, targets, mask)
    by_hand = ((predictions - targets) ** 2).mean(-1)[mask].mean()
    assert torch.allclose(loss, by_hand)
    # anything at a visible patch changes nothing; at a hidden one it does
    visible = torch.where(mask[..., None], predictions, predictions + 100)
    assert torch.allclose(masked_mse(visible, targets, mask), loss)
    hidden = torch.where(mask[..., None], predictions + 1, predictions)
    assert not torch.allclose(masked_mse(hidden, targets, mask), loss)
    # and its gradient reaches hidden patches only
    predictions.requires_grad_(True)
    masked_mse(predictions, targets, mask).backward()
    assert (predictions.grad.abs().sum(-1) > 0).eq(mask).all()


def test_the_encoder_never_sees_a_hidden_patch():
    torch.manual_seed(0)
    model = MaskedViT(**SHAPE).eval()
    images = torch.randn(3, 1, 28, 28)
    mask = random_mask(3, 16, 0.5, generator=torch.Generator().manual_seed(0))
    patches = patchify(images, 7)
    changed = unpatchify(torch.where(mask[..., None], 9.0, patches), 7, (4, 4))
    with torch.no_grad():
        a, b = model.forward_masked(images, mask), model.forward_masked(changed, mask)
    assert a.shape == (3, 16, 49)
    assert torch.allclose(a, b, atol=1e-6)
    # while a visible patch's pixels do reach it
    changed = unpatchify(torch.where(mask[..., None], patches, 9.0), 7, (4, 4))
    with torch.no_grad():
        assert not torch.allclose(a, model.forward_masked(changed, mask), atol=1e-3)


def test_without_a_hidden_patch_the_encoder_is_the_vit():
    torch.manual_seed(0)
    masked = MaskedViT(**SHAPE).eval()
    vit = ViT(masked.config).eval()
    vit.load_state_dict(masked.state_dict(), strict=False)
    images = torch.randn(2, 1, 28, 28)
    none = torch.zeros(2, 16, dtype=torch.bool)
    with torch.no_grad():
        tokens = vit.forward_features(images)[:, 1:]
        assert torch.allclose(
            masked.forward_masked(images, none), masked.decoder(tokens), atol=1e-5
        )


def test_a_mask_of_the_wrong_shape_is_refused():
    model = MaskedViT(**SHAPE)
    with pytest.raises(ValueError, match=r"\(2, 16\)"):
        model.forward_masked(torch.randn(2, 1, 28, 28), torch.zeros(2, 49, dtype=bool))


def test_reconstruct_with_perfect_predictions_gives_the_images_back():
    images = torch.rand(2, 1, 28, 28)
    mask = random_mask(2, 16, 0.75, generator=torch.Generator().manual_seed(0))
    back = reconstruct(images, mask, patch_targets(images, 7), 7)
    assert torch.allclose(back, images, atol=1e-4)
    wrong = reconstruct(images, mask, torch.zeros(2, 16, 49), 7)
    assert not torch.allclose(wrong, images, atol=1e-2)


def test_pretraining_lowers_the_loss_and_keeps_snapshots():
    torch.manual_seed(0)
    data = random_data(256)
    # a pattern to learn: every image the same stripes, with noise
    stripes = (torch.arange(28) % 4 < 2).to(torch.uint8) * 200
    data.train_images[:] = stripes.view(1, 1, 1, 28) + data.train_images // 8
    model = MaskedViT(**SHAPE, mask_ratio=0.5)
    config = TrainConfig(epochs=6, batch_size=32, lr=3e-3, warmup_epochs=0.5)
    watch = (torch.randn(2, 1, 28, 28), torch.ones(2, 16, dtype=bool))
    watch[1][:, :8] = False
    history = pretrain(model, data, config, watch=watch, at=(0, 6))
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    assert sorted(history["snapshots"]) == [0, 6]
    assert history["snapshots"][6].shape == (2, 16, 49)


def test_masked_loss_is_train_steps_loss_function():
    model = MaskedViT(**SHAPE)
    images = torch.randn(2, 1, 28, 28)
    mask = random_mask(2, 16, 0.5)
    loss, predictions = masked_loss(model, images, mask, TrainConfig())
    targets = patch_targets(images, 7)
    assert torch.allclose(loss, masked_mse(predictions, targets, mask))


def test_a_pretraining_checkpoint_rebuilds_a_masked_vit(tmp_path):
    torch.manual_seed(0)
    model = MaskedViT(**SHAPE, mask_ratio=0.75)
    folder = save_checkpoint(tmp_path, model, TrainConfig(), epoch=3, dataset="random")
    again, info = load_checkpoint(folder)
    assert type(again) is MaskedViT and again.config == model.config
    assert info["epoch"] == 3
    for key, value in model.state_dict().items():
        assert torch.equal(again.state_dict()[key], value)


def test_a_masked_checkpoint_loads_through_vitlib_checkpoint_alone(tmp_path):
    # a fresh interpreter that imports only page 6c's module: the package registers every
    # model, and the command line stays out
    folder = save_checkpoint(tmp_path, MaskedViT(**SHAPE), epoch=1)
    code = (
        "import sys\n"
        "from vitlib.checkpoint import load_checkpoint\n"
        f"model, info = load_checkpoint({str(folder)!r})\n"
        "print(type(model).__name__, info['epoch'], 'vitlib.train' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["MaskedViT", "1", "False"]


def test_an_encoder_moves_into_a_classifier_of_another_class_count(tmp_path, capsys):
    torch.manual_seed(0)
    masked = MaskedViT(**SHAPE)
    folder = save_checkpoint(tmp_path, masked, epoch=1)
    classifier = create_vit("fashion", **SHAPE, num_classes=5)
    head = classifier.head.weight.clone()
    load_encoder(folder, classifier)
    said = capsys.readouterr().out
    assert "the head is new: 5 classes" in said and "no head" in said
    mine = classifier.state_dict()
    for key, value in masked.state_dict().items():
        if key in mine:
            assert torch.equal(mine[key], value), key
    assert torch.equal(classifier.head.weight, head)  # the head is the classifier's
    assert classifier(torch.randn(2, 1, 28, 28)).shape == (2, 5)


def test_a_classifiers_checkpoint_gives_its_encoder_not_its_head(tmp_path, capsys):
    torch.manual_seed(0)
    ten = create_vit("fashion", **SHAPE)
    folder = save_checkpoint(tmp_path, ten, epoch=1)
    three = load_encoder(folder, create_vit("fashion", **SHAPE, num_classes=3))
    assert "a head of 10 classes" in capsys.readouterr().out
    assert torch.equal(three.blocks[0].attn.qkv.weight, ten.blocks[0].attn.qkv.weight)


@pytest.mark.parametrize(
    "change, words",
    [
        (dict(dim=64), "has dim 32; this model has dim 64"),
        (dict(patch_size=4), "has patch_size 7; this model has patch_size 4"),
        (dict(depth=3), "has depth 2; this model has depth 3"),
        (dict(img_size=56), "has img_size 28; this model has img_size 56"),
    ],
)
def test_an_encoder_of_another_shape_is_refused_naming_both(change, words, tmp_path):
    folder = save_checkpoint(tmp_path, MaskedViT(**SHAPE), epoch=1)
    other = create_vit("fashion", **{**SHAPE, **change})
    with pytest.raises(ValueError, match=words):
        load_encoder(folder, other)


def test_a_labelled_subset_has_so_many_of_each_class():
    data = random_data(512)
    few = labelled_subset(data, 5, seed=1)
    assert len(few.train_labels) == 50
    assert torch.bincount(few.train_labels, minlength=10).tolist() == [5] * 10
    # the images are those of their labels
    index = [
        (data.train_images == image).flatten(1).all(1).nonzero()[0].item()
        for image in few.train_images
    ]
    assert torch.equal(data.train_labels[index], few.train_labels)
    assert not torch.equal(few.train_labels, labelled_subset(data, 5, 2).train_labels)
    assert few.test_images is data.test_images
    with pytest.raises(ValueError, match="fewer than"):
        labelled_subset(data, 200)


def test_a_linear_probe_trains_the_head_only():
    model = freeze_encoder(create_vit("fashion", **SHAPE))
    learning = [name for name, p in model.named_parameters() if p.requires_grad]
    assert learning == ["head.weight", "head.bias"]


def test_the_colab_cell_runs_on_a_random_timm_vit_b16():
    """The code after the downloads, on a timm ViT-B/16 with random weights: from_timm,
    Resized to 224 and normalised, steps of train, accuracy before and after."""
    torch.manual_seed(0)
    net = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=10)
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, 10, (8,), generator=g)
    data = replace(
        random_data(8),
        train_images=images,
        train_labels=labels,
        test_images=images[:4],
        test_labels=labels[:4],
    )
    before = net.head.weight.clone()
    result = fine_tune_pretrained(net, data, steps=2, batch_size=2, test=4)
    model = result["model"]
    assert isinstance(model, ViT) and model.config.dim == 768
    assert model.config.num_classes == 10 and model.config.img_size == 224
    assert 0 <= result["before"] <= 1 and 0 <= result["after"] <= 1
    assert not torch.equal(model.head.weight.detach(), before)  # it trained


def test_resized_reads_the_loaders_small_images_as_the_weights_expect():
    # the loader normalises with the data's statistics; the model wants its own, at its size
    torch.manual_seed(0)
    model = ViT(
        ViTConfig(img_size=16, patch_size=4, in_channels=3, dim=16, depth=1, heads=2)
    )
    data = replace(random_data(4), mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.3))
    wrapped = Resized(
        model, data, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)
    )
    pixels = torch.rand(2, 3, 8, 8)  # in [0, 1], as the dataset stores them (over 255)
    column = lambda v: torch.tensor(v).view(1, -1, 1, 1)  # noqa: E731
    loaded = (pixels - column(data.mean)) / column(data.std)
    expected = F.interpolate(pixels, size=(16, 16), mode="bilinear")
    expected = (expected - column((0.485, 0.456, 0.406))) / column(
        (0.229, 0.224, 0.225)
    )
    torch.testing.assert_close(wrapped(loaded), model(expected))
    # the optimizer asks the wrapper: the model's own tokens still do not decay
    assert wrapped.no_weight_decay() == {"model.cls_token", "model.pos_embed"}
    _, no_decay = parameter_groups(wrapped, 0.05)
    assert any(p is model.cls_token for p in no_decay["params"])


def test_a_fast_path_checkpoint_gives_its_encoder_too(tmp_path):
    from vitlib.pretrained import FastViT

    torch.manual_seed(0)
    shape = dict(img_size=28, patch_size=7, in_channels=1, dim=16, depth=1, heads=2)
    source = FastViT(ViTConfig(**shape, mlp_dim=16, num_classes=10))
    save_checkpoint(tmp_path, source.eval(), dataset="fashion-mnist")
    target = load_encoder(tmp_path, ViT(ViTConfig(**shape, mlp_dim=16, num_classes=3)))
    torch.testing.assert_close(target.pos_embed, source.pos_embed)
