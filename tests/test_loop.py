"""vitlib.loop (page 6b): the configuration, the schedule, the parameter groups, one step, and
the evaluation."""

import pytest
import torch

from vitlib.data import ImageData
from vitlib.loop import (
    RECIPES,
    TrainConfig,
    WarmupCosine,
    batches,
    evaluate,
    make_optimizer,
    parameter_groups,
    predict,
    train_step,
)
from vitlib.model import build_model, create_vit
from vitlib.utils import grad_scaler


def random_data(n=256, seed=0) -> ImageData:
    """Fashion-MNIST's shapes, random pixels and labels: enough to test the machinery."""
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 1, 28, 28), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, 10, (n,), generator=g)
    classes = tuple("abcdefghij")
    return ImageData("random", classes, images, labels, images, labels, (0.5,), (0.3,))


def test_warmup_then_cosine():
    f = WarmupCosine(warmup=10, total=110, floor=0.1)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(10) == pytest.approx(1.0) and f(60) == pytest.approx(0.55)
    assert f(110) == pytest.approx(0.1) and f(500) == pytest.approx(0.1)
    after = [f(s) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(after, after[1:]))
    assert WarmupCosine(0, 10)(0) == pytest.approx(1.0)


def test_no_weight_decay_on_norms_biases_positions_and_cls():
    model = create_vit("fashion", depth=2)
    decay, no_decay = parameter_groups(model, 0.05)
    assert decay["weight_decay"] == 0.05 and no_decay["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    skipped = {names[id(p)] for p in no_decay["params"]}
    decayed = {names[id(p)] for p in decay["params"]}
    assert {
        "pos_embed",
        "cls_token",
        "norm.weight",
        "norm.bias",
        "head.bias",
    } <= skipped
    assert all(
        n.endswith("bias") or "norm" in n or n in ("pos_embed", "cls_token")
        for n in skipped
    )
    matrices = {n for n, p in model.named_parameters() if p.ndim >= 2}
    assert decayed == matrices - {"pos_embed", "cls_token"}
    assert len(skipped) + len(decayed) == len(list(model.parameters()))


def test_make_optimizer_follows_the_schedule():
    model = create_vit("fashion", depth=1)
    config = TrainConfig(epochs=3, lr=1e-3, min_lr=1e-5, warmup_epochs=1.0)
    optimizer, scheduler = make_optimizer(model, config, steps_per_epoch=10)
    rates = []
    for _ in range(30):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates[0] == pytest.approx(1e-4) and rates[9] == pytest.approx(1e-3)
    assert rates[-1] < 2e-5 and rates[10:] == sorted(rates[10:], reverse=True)


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(epochs=0), "epochs must be at least 1, got 0"),
        (dict(batch_size=-2), "batch_size must be at least 1"),
        (dict(lr=0.0), "need 0 < min_lr <= lr"),
        (dict(lr=1e-4, min_lr=1e-3), "need 0 < min_lr <= lr"),
        (dict(auto_augment="strong"), "auto_augment must be one of"),
    ],
)
def test_bad_configs_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**bad)


def test_train_step_is_forward_loss_backward_clip_adamw():
    torch.manual_seed(0)
    data = random_data()
    config = TrainConfig(epochs=1, batch_size=64, label_smoothing=0.1, clip_grad=0.5)
    model = create_vit("fashion", patch_size=7, depth=1)
    reference = create_vit("fashion", patch_size=7, depth=1)
    reference.load_state_dict(model.state_dict())
    images, labels = next(iter(batches(data, "train", 64, config)))
    optimizer, _ = make_optimizer(model, config, 1)
    loss, logits = train_step(
        model, images, labels, optimizer, config, grad_scaler("cpu")
    )
    # the same by hand
    expected = torch.nn.functional.cross_entropy(
        reference(images), labels, label_smoothing=0.1
    )
    expected.backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
    by_hand, _ = make_optimizer(reference, config, 1)
    by_hand.step()
    assert torch.allclose(loss, expected.detach())
    assert logits.shape == (64, 10) and not logits.requires_grad
    for a, b in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b)


def test_predict_and_evaluate_agree():
    torch.manual_seed(0)
    data = random_data(300)
    model = create_vit("fashion", patch_size=7, depth=1)
    logits, labels = predict(model, data, batch_size=128)
    assert logits.shape == (300, 10) and torch.equal(labels, data.test_labels)
    scores = evaluate(model, data)
    accuracy = (logits.argmax(1) == labels).float().mean().item()
    assert scores["accuracy"] == pytest.approx(accuracy)
    # a rank's share under torchrun: every other example
    share, _ = predict(model, data, rank=1, world_size=2)
    torch.testing.assert_close(share, logits[1::2])


def test_recipes_build():
    # every recipe of every chapter: importing vitlib imports every module that adds one
    assert {"fashion-cpu", "fashion-cpu-stem"} <= set(RECIPES)
    for name, recipe in RECIPES.items():
        size, channels = (28, 1) if "fashion" in name else (32, 3)
        model = build_model(
            recipe.architecture,
            recipe.preset,
            **recipe.model,
            img_size=size,
            in_channels=channels,
        )
        assert model.config.num_classes == 10 and recipe.train.epochs > 0


@pytest.mark.parametrize("training", [True, False])
def test_evaluating_restores_the_mode_it_found_even_after_an_error(training):
    from vitlib.loop import evaluating

    model = create_vit("fashion", depth=1).train(training)
    with evaluating(model):
        assert not model.training and not torch.is_grad_enabled()
    assert model.training is training and torch.is_grad_enabled()
    with pytest.raises(RuntimeError), evaluating(model):
        raise RuntimeError("a failing evaluation")
    assert model.training is training
