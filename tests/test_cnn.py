"""vitlib.cnn (page 9): the ResNet, the convolutional stem, the distillation token and loss,
the command line's --model and --teacher, shift, principal_filters."""

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from test_loop import random_data

from vitlib.checkpoint import load_checkpoint, save_checkpoint
from vitlib.cnn import (
    ConvStem,
    Distillation,
    HelpedViT,
    HelpedViTConfig,
    ResNet,
    ResNetConfig,
    principal_filters,
    shift,
)
from vitlib.loop import RECIPES, TrainConfig
from vitlib.model import ViT, build_model, create_vit
from vitlib.train import load_teacher, main, train

ROOT = Path(__file__).resolve().parents[1]
SHAPE = dict(patch_size=7, dim=32, depth=2, heads=2, mlp_dim=64)


def _count(model):
    return sum(p.numel() for p in model.parameters())


def test_the_resnet_is_within_a_fifth_of_the_cpu_vit_in_parameters():
    vit = create_vit("fashion", **RECIPES["fashion-cpu"].model)
    for images, config in [((2, 1, 28, 28), {}), ((2, 3, 32, 32), dict(in_channels=3))]:
        cnn = ResNet(img_size=images[-1], **config)
        assert cnn(torch.randn(images)).shape == (2, 10)
        assert abs(_count(cnn) / _count(vit) - 1) < 0.2


def test_the_resnet_names_the_wrong_image_shape():
    with pytest.raises(
        ValueError, match=r"\(3, 28, 28\); this ResNet takes \(1, 28, 28\)"
    ):
        ResNet()(torch.randn(1, 3, 28, 28))
    with pytest.raises(ValueError, match="widths"):
        ResNetConfig(widths=())


def test_the_resnet_is_translation_equivariant_before_pooling():
    # stride 1, no border effects inside: a shifted image gives a shifted first feature map
    torch.manual_seed(0)
    cnn = ResNet(stride=1).eval()
    x = torch.zeros(1, 1, 28, 28)
    x[..., 8:14, 8:14] = torch.rand(6, 6)
    with torch.no_grad():
        a, b = cnn.stem(x), cnn.stem(shift(x, 3, 2))
    torch.testing.assert_close(shift(a, 3, 2), b)


@pytest.mark.parametrize("size, convs, tokens", [(28, 3, 16), (32, 3, 16), (28, 2, 49)])
def test_the_stem_makes_one_token_per_position(size, convs, tokens):
    widths = (8, 16, 16)[:convs]
    stem = ConvStem(1, 24, widths, img_size=size)
    assert stem(torch.randn(2, 1, size, size)).shape == (2, tokens, 24)
    config = HelpedViTConfig(img_size=size, in_channels=1, stem=widths, **SHAPE)
    assert config.num_patches == tokens
    with pytest.raises(ValueError, match="this stem takes"):
        stem(torch.randn(2, 3, size, size))


def test_without_help_a_helped_vit_is_the_vit():
    torch.manual_seed(0)
    plain = create_vit("fashion", **SHAPE)
    torch.manual_seed(0)
    helped = build_model("HelpedViT", "fashion", **SHAPE)  # no stem, no token
    assert (
        isinstance(helped, HelpedViT)
        and helped.state_dict().keys() == plain.state_dict().keys()
    )
    helped.load_state_dict(plain.state_dict())
    x = torch.randn(3, 1, 28, 28)
    torch.testing.assert_close(helped(x), plain(x))


@pytest.mark.parametrize("stem", [(), (8, 16, 16)])
@pytest.mark.parametrize("pos", ["learned", "sincos", "none"])
def test_forward_equals_the_full_path_with_and_without_the_token(stem, pos):
    torch.manual_seed(0)
    for distilled in (False, True):
        config = HelpedViTConfig(
            img_size=28, in_channels=1, num_classes=10, pos=pos, stem=stem,
            distilled=distilled, **SHAPE,
        )  # fmt: skip
        model = HelpedViT(config).double().eval()
        x = torch.randn(3, 1, 28, 28, dtype=torch.float64)
        full = model.forward_head(model.forward_features(x))
        torch.testing.assert_close(model(x), full)
        tokens = model.forward_features(x).shape[1]
        assert tokens == model.num_prefix_tokens + config.num_patches
        assert model.pos_embed.shape[1] == tokens
    heads = model.logits_per_head(model.forward_features(x))  # the last one: distilled
    torch.testing.assert_close(heads.mean(1), full)
    torch.testing.assert_close(
        heads[:, 1], model.head_dist(model.forward_features(x)[:, 1])
    )


def test_a_distilled_vit_refuses_mean_pooling():
    with pytest.raises(ValueError, match="pool must be 'cls'"):
        HelpedViTConfig(distilled=True, pool="mean")
    with pytest.raises(ValueError, match="unknown model 'cnn-distilled'"):
        build_model("cnn-distilled")


def test_distillation_loss_is_half_labels_half_teacher_and_spares_the_teacher():
    torch.manual_seed(0)
    teacher = ResNet(widths=(8, 16))
    student = build_model("vit-distilled", "fashion", **SHAPE)
    images, labels = torch.randn(4, 1, 28, 28), torch.randint(0, 10, (4,))
    config = TrainConfig(label_smoothing=0.1)
    lesson = Distillation(teacher)
    loss, logits = lesson(student, images, labels, config)
    both = student.logits_per_head(student.forward_features(images))
    taught = teacher(images).argmax(1)
    expected = (
        F.cross_entropy(both[:, 0], labels, label_smoothing=0.1)
        + F.cross_entropy(both[:, 1], taught)
    ) / 2
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(logits, both.mean(1))
    assert not teacher.training and not any(
        p.requires_grad for p in teacher.parameters()
    )


def test_training_with_a_teacher_moves_the_student_only():
    data = random_data(256)
    torch.manual_seed(0)
    teacher = ResNet(widths=(8, 16))
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    student = build_model("vit-distilled", "fashion", **SHAPE)
    start = student.dist_token.detach().clone()
    config = TrainConfig(epochs=1, batch_size=64)
    train(student, data, config, progress=False, loss_fn=Distillation(teacher))
    assert all(torch.equal(before[k], v) for k, v in teacher.state_dict().items())
    assert not torch.equal(student.dist_token, start)  # the token learned


@pytest.mark.parametrize("architecture", ["cnn", "vit-stem-distilled"])
def test_checkpoints_know_their_class(architecture, tmp_path):
    torch.manual_seed(0)
    if architecture == "cnn":
        model = ResNet(widths=(8, 16))
    else:
        model = build_model("vit-stem-distilled", "fashion", **SHAPE)
    save_checkpoint(tmp_path, model.eval(), dataset="fashion-mnist")
    loaded, _ = load_checkpoint(tmp_path)
    assert type(loaded) is type(model) and loaded.config == model.config
    x = torch.randn(2, 1, 28, 28)
    torch.testing.assert_close(loaded.eval()(x), model(x))
    load_checkpoint(tmp_path, model)  # the same config: tuples read back as lists
    other = replace(model.config, num_classes=5)
    with pytest.raises(ValueError, match="num_classes: 10 there, 5 here"):
        load_checkpoint(tmp_path, type(model)(other))


def test_plain_vit_checkpoints_still_load_as_vit(tmp_path):
    model = create_vit("fashion", **SHAPE)
    save_checkpoint(tmp_path, model)
    assert type(load_checkpoint(tmp_path)[0]) is ViT


@pytest.mark.parametrize(
    "saved, words",
    [
        (dict(img_size=32, in_channels=3, dataset="cifar10"), "cifar10 (10 classes, images 3x32x32)"),
        (dict(num_classes=5, dataset="fashion-mnist"), "fashion-mnist (5 classes, images 1x28x28)"),
        (dict(dataset="cifar10"), "cifar10 (10 classes, images 1x28x28)"),
    ],
)  # fmt: skip
def test_a_teacher_of_another_task_is_refused_naming_both(saved, words, tmp_path):
    dataset = saved.pop("dataset")
    save_checkpoint(tmp_path, ResNet(widths=(8, 16), **saved), dataset=dataset)
    data = replace(random_data(64), name="fashion-mnist")
    with pytest.raises(ValueError) as error:
        load_teacher(tmp_path, data)
    message = str(error.value)
    assert words in message and "fashion-mnist (10 classes, images 1x28x28)" in message
    good = tmp_path / "good"
    save_checkpoint(good, ResNet(widths=(8, 16)), dataset="fashion-mnist")
    assert isinstance(load_teacher(good, data), ResNet)


def test_cnn_flags_that_shape_a_vit_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--model", "cnn", "--dim", "32", "--out", str(tmp_path)])
    assert "--dim 32: --model cnn has no dim: --model vit or" in capsys.readouterr().err


TINY = ["--train-subset", "512", "--test-subset", "256", "--epochs", "1"]
TINY += ["--batch-size", "64", "--no-progress"]


def test_the_command_line_trains_a_cnn_then_distils_from_it(tmp_path):
    data = ["--data", str(ROOT / "data")]
    teacher = main(["--model", "cnn", *TINY, *data, "--out", str(tmp_path / "cnn")])
    assert teacher["architecture"] == "cnn" and teacher["parameters"] == _count(
        ResNet()
    )
    args = ["--recipe", "fashion-cpu-stem", "--teacher", str(tmp_path / "cnn")]
    student = main([*args, *TINY, *data, "--out", str(tmp_path / "student")])
    model, info = load_checkpoint(tmp_path / "student")
    assert isinstance(model, HelpedViT) and model.config.distilled and model.config.stem
    assert student["teacher"] == str(tmp_path / "cnn")
    saved = json.loads((tmp_path / "student" / "metrics.json").read_text())
    assert saved["architecture"] == "vit-stem"


def test_the_stem_recipe_builds_the_stem_vit():
    recipe = RECIPES["fashion-cpu-stem"]
    model = build_model(recipe.architecture, recipe.preset, **recipe.model)
    assert (
        isinstance(model, HelpedViT)
        and model.config.stem
        and not model.config.distilled
    )
    base = RECIPES["fashion-cpu"]
    assert asdict(replace(recipe.train, epochs=base.train.epochs)) == asdict(base.train)


def test_shift_moves_and_fills_with_zeros():
    x = torch.arange(1, 26).reshape(1, 1, 5, 5)
    y = shift(x, 2, 1)
    assert torch.equal(y[..., 1:, 2:], x[..., :4, :3])
    assert y[..., :1, :].eq(0).all() and y[..., :, :2].eq(0).all()
    assert torch.equal(shift(x, 0, 0), x) and shift(x, 5, 0).eq(0).all()
    with pytest.raises(ValueError):
        shift(x, -1)


def test_principal_filters_find_the_spread_not_the_offset():
    g = torch.Generator().manual_seed(0)
    direction = torch.randn(1, 1, 5, 5, generator=g)
    direction /= direction.norm()
    amounts = torch.randn(64, 1, 1, 1, generator=g) * 3
    noise = 0.01 * torch.randn(64, 1, 5, 5, generator=g)
    weight = 10 * torch.randn(1, 1, 5, 5, generator=g) + amounts * direction + noise
    components, share = principal_filters(weight, 3)
    assert components.shape == (3, 1, 5, 5) and share.shape == (3,)
    flat = components.flatten(1)
    torch.testing.assert_close(flat @ flat.T, torch.eye(3), atol=1e-5, rtol=0)
    assert abs(float(flat[0] @ direction.flatten())) > 0.99 and share[0] > 0.95
