"""vitlib.faithfulness: the deletion and insertion curves on a model whose answer is known (its
logits read one patch only), batching, the maps' shapes and their known properties, and the
sanity-check tools."""

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from vitlib.faithfulness import (
    METHODS,
    attention_scores,
    batched,
    cascade,
    curve_area,
    delete_patches,
    deletion_curve,
    gradient_attention_scores,
    gradient_input_scores,
    measure,
    occlusion_scores,
    patch_order,
    random_scores,
    randomise_top,
    rank_correlation,
    recorded_attention,
)
from vitlib.live import occlude
from vitlib.model import build_model

KEY = 6  # the one patch the synthetic model reads: row 1, column 2 of the 4x4 grid


class OnePatch(nn.Module):
    """Logits from the mean of patch KEY alone: (b, 1, 28, 28) -> (b, 2). Bright key patch:
    class 0, confidently; a key patch at 0 (the baseline): 50/50."""

    config = SimpleNamespace(patch_size=7)

    def forward(self, x):
        row, col = divmod(KEY, 4)
        value = x[:, :, row * 7 : (row + 1) * 7, col * 7 : (col + 1) * 7].mean(
            (1, 2, 3)
        )
        return torch.stack([4 * value, -4 * value], -1)


def bright_images(b=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(b, 1, 28, 28, generator=g) + 0.5  # every pixel in [0.5, 1.5)


def key_first(b, n=16):
    scores = torch.zeros(b, n)
    scores[:, KEY] = 1.0
    return scores


def test_the_patch_the_model_reads_gives_the_steepest_deletion_and_random_does_not():
    model, images = OnePatch(), bright_images()
    best = curve_area(deletion_curve(model, images, key_first(6)))
    # the key patch first: the probability falls to 1/2 at the first step and stays there
    curve = deletion_curve(model, images, key_first(6))
    assert torch.allclose(curve[:, 1:], torch.full_like(curve[:, 1:], 0.5))
    assert (curve[:, 0] > 0.85).all()
    # no order does better: the key patch last is the worst, random orders in between
    worst = -key_first(6)
    assert (curve_area(deletion_curve(model, images, worst)) > best + 0.3).all()
    randoms = torch.stack(
        [
            curve_area(deletion_curve(model, images, random_scores(images, 16, s)))
            for s in range(20)
        ]
    )
    assert (randoms >= best - 1e-6).all()
    assert (randoms.mean(0) > best + 0.1).all()  # random does not find it


def test_insertion_rises_at_once_with_the_key_patch_first():
    model, images = OnePatch(), bright_images()
    curve = deletion_curve(model, images, key_first(6), insertion=True)
    assert torch.allclose(
        curve[:, 0], torch.full((6,), 0.5)
    )  # nothing of the image yet
    assert (curve[:, 1:] > 0.85).all()
    last = deletion_curve(model, images, -key_first(6), insertion=True)
    assert (curve_area(curve) > curve_area(last) + 0.3).all()


def test_maps_that_read_the_model_put_the_key_patch_first():
    model, images = OnePatch(), bright_images()
    target = model(images).argmax(-1)
    for scores in (
        occlusion_scores(model, images, target),
        gradient_input_scores(model, images, target),
    ):
        assert (patch_order(scores)[:, 0] == KEY).all()
        others = torch.cat([scores[:, :KEY], scores[:, KEY + 1 :]], 1)
        assert torch.allclose(others, torch.zeros_like(others), atol=1e-6)


def test_curve_ends_agree_and_the_area_is_the_trapezoid_rule():
    torch.manual_seed(0)
    model = build_model("vit", "fashion", patch_size=7, depth=2).eval()
    images = torch.randn(5, 1, 28, 28)
    scores = torch.randn(5, 16)
    deletion = deletion_curve(model, images, scores)
    insertion = deletion_curve(model, images, scores, insertion=True)
    assert deletion.shape == insertion.shape == (5, 17)
    with torch.no_grad():
        probs = model(images).softmax(-1)
        blank = model(torch.zeros_like(images)).softmax(-1)
    target = probs.argmax(-1)
    assert torch.allclose(deletion[:, 0], probs.gather(1, target[:, None])[:, 0])
    assert torch.allclose(deletion[:, -1], blank.gather(1, target[:, None])[:, 0])
    assert torch.allclose(insertion[:, 0], deletion[:, -1])
    assert torch.allclose(insertion[:, -1], deletion[:, 0])
    assert curve_area(torch.tensor([1.0, 0.0])) == 0.5
    assert curve_area(torch.tensor([1.0, 1.0, 0.0])) == 0.75
    assert torch.allclose(curve_area(torch.full((3, 17), 0.3)), torch.full((3,), 0.3))


def test_delete_patches_is_occlude_for_each_image_and_takes_baseline_images():
    images = torch.randn(3, 2, 12, 8)  # a 3x2 grid of 4x4 patches
    chosen = torch.tensor(
        [[1, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]]
    ).bool()
    out = delete_patches(images, chosen, 4, baseline=-1.5)
    for i in range(3):
        patches = chosen[i].nonzero()[:, 0].tolist()
        assert torch.equal(out[i : i + 1], occlude(images[i : i + 1], patches, 4, -1.5))
    other = torch.randn_like(images)
    mixed = delete_patches(images, chosen, 4, baseline=other)
    assert torch.equal(mixed[2], other[2]) and torch.equal(mixed[1], images[1])


def test_ties_keep_the_lower_patch_first_and_batches_do_not_change_the_answer():
    scores = torch.tensor([[1.0, 2.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    assert patch_order(scores).tolist() == [[1, 2, 0, 3], [0, 1, 2, 3]]
    torch.manual_seed(0)
    model = build_model("vit-modern", "fashion", patch_size=7, depth=2, qk_norm=True)
    images = torch.randn(9, 1, 28, 28)
    whole = measure(model, images, batch_size=9)
    pieces = measure(model, images, batch_size=4)
    assert set(whole) == {*METHODS, "random 1", "random 2", "random 3"}
    for name in whole:
        for kind in ("deletion", "insertion"):
            assert whole[name][kind].shape == (9, 17)
            assert torch.allclose(whole[name][kind], pieces[name][kind], atol=1e-6), (
                name
            )
    assert torch.equal(batched(lambda x: x * 2, images, batch_size=2), images * 2)


@pytest.mark.parametrize("architecture", ["vit", "vit-modern"])
def test_recorded_attention_is_the_models_own_and_carries_gradients(architecture):
    torch.manual_seed(0)
    options = dict(registers=2, qk_norm=True) if architecture == "vit-modern" else {}
    model = build_model(
        architecture, "fashion", patch_size=7, depth=3, **options
    ).eval()
    images = torch.randn(4, 1, 28, 28)
    with recorded_attention(model) as weights:
        logits = model(images)
    assert torch.allclose(logits, model(images), atol=1e-5)  # the same function
    assert len(weights) == 3 and all(w.requires_grad for w in weights)
    for w, a in zip(weights, model.attention_maps(images)):
        assert torch.allclose(w, a, atol=1e-6)
    target = logits.argmax(-1)
    scores = gradient_attention_scores(model, images, target)
    assert scores.shape == (4, 16) and (scores >= 0).all()
    assert attention_scores(model, images).shape == (4, 16)


def test_gradient_attention_needs_eval_mode():
    model = build_model(
        "vit", "fashion", patch_size=7, depth=2, attn_dropout=0.1
    ).train()
    images = torch.randn(2, 1, 28, 28)
    with pytest.raises(ValueError, match="eval"):
        gradient_attention_scores(model, images, torch.zeros(2, dtype=torch.long))


def test_randomising_the_head_leaves_attention_but_not_gradients():
    torch.manual_seed(0)
    model = build_model("vit", "fashion", patch_size=7, depth=3).eval()
    assert [name for name, _ in cascade(model)] == [
        "head",
        "block 3",
        "block 2",
        "block 1",
    ]
    images = torch.randn(16, 1, 28, 28)
    target = model(images).argmax(-1)
    headless = randomise_top(model, 1, seed=1).eval()
    assert not torch.equal(headless.head.weight, model.head.weight)
    assert torch.equal(
        headless.blocks[2].mlp.fc1.weight, model.blocks[2].mlp.fc1.weight
    )
    same = rank_correlation(
        attention_scores(model, images), attention_scores(headless, images)
    )
    assert torch.allclose(same, torch.ones(16))
    grads = [gradient_input_scores(m, images, target) for m in (model, headless)]
    assert rank_correlation(*grads).mean() < 0.9
    deeper = randomise_top(model, 2, seed=1)
    assert not torch.equal(
        deeper.blocks[2].mlp.fc1.weight, model.blocks[2].mlp.fc1.weight
    )
    assert torch.equal(deeper.blocks[1].mlp.fc1.weight, model.blocks[1].mlp.fc1.weight)


def test_rank_correlation_is_spearman():
    a = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    assert rank_correlation(a, a * 10).item() == pytest.approx(1.0)
    assert rank_correlation(a, -a).item() == pytest.approx(-1.0)
    b = torch.tensor([[1.0, 3.0, 2.0, 4.0]])  # one swap: 1 - 6 * 2 / (4 * 15)
    assert rank_correlation(a, b).item() == pytest.approx(0.8)


def test_scores_of_the_wrong_size_are_refused():
    model = OnePatch()
    with pytest.raises(ValueError, match="one per patch"):
        deletion_curve(model, bright_images(2), torch.zeros(2, 9))


def test_the_curve_follows_the_first_prediction_not_the_class_on_top():
    # a dark key patch turns the synthetic model to class 1: the curve of class 0 must fall
    # to almost 0, where the class on top would stay near 1
    model, images = OnePatch(), bright_images()
    curve = deletion_curve(model, images, key_first(6), baseline=-1.0)
    assert (curve[:, 1:] < 0.01).all()


def test_gradient_attention_is_chefers_rule_by_hand():
    # R = I, then R <- R + mean_heads((grad * A)^+) R for each layer, first layer first
    torch.manual_seed(0)
    model = build_model("vit", "fashion", patch_size=7, depth=2).eval()
    images = torch.randn(3, 1, 28, 28)
    target = torch.tensor([0, 4, 9])
    with recorded_attention(model) as weights:
        picked = model(images).gather(1, target[:, None]).sum()
    grads = torch.autograd.grad(picked, weights)
    a1, a2 = ((a * g).clamp(min=0).mean(1).detach() for a, g in zip(weights, grads))
    eye = torch.eye(17)
    joint = (eye + a2) @ (eye + a1)
    expected = joint[:, 0, 1:]
    assert torch.allclose(
        gradient_attention_scores(model, images, target), expected, atol=1e-6
    )


def test_ties_share_their_rank():
    a = torch.tensor([[1.0, 1.0, 2.0, 3.0]])
    b = torch.tensor([[1.0, 2.0, 1.0, 3.0]])
    # average ranks (0.5, 0.5, 2, 3) and (0.5, 2, 0.5, 3): 0.5; ties broken by position,
    # (0, 1, 2, 3) and (0, 2, 1, 3), would give 0.8
    assert rank_correlation(a, a).item() == pytest.approx(1.0)
    assert rank_correlation(a, b).item() == pytest.approx(0.5)
    flat = torch.zeros(1, 4)
    assert rank_correlation(flat, a).item() == 0.0


def test_maps_of_models_whose_head_does_not_read_the_class_token_are_refused():
    images = torch.randn(2, 1, 28, 28)
    pooled = build_model(
        "vit-modern", "fashion", patch_size=7, depth=2, pool="map"
    ).eval()
    with recorded_attention(pooled) as weights:
        pooled(
            images
        )  # the pooling query (one row) is not a self-attention: not recorded
    assert len(weights) == 2
    mean = build_model("vit", "fashion", patch_size=7, depth=2, pool="mean").eval()
    for model in (pooled, mean):
        for method in ("attention", "rollout mean", "gradient x attention"):
            with pytest.raises(ValueError, match="class token"):
                METHODS[method](model, images, torch.zeros(2, dtype=torch.long), 0.0)


def test_measure_takes_one_baseline_image_per_image():
    torch.manual_seed(0)
    model = build_model("vit", "fashion", patch_size=7, depth=2)
    images = torch.randn(5, 1, 28, 28)
    blurred = images.mean((2, 3), keepdim=True).expand_as(images).clone()
    some = {m: METHODS[m] for m in ("gradient x input", "occlusion")}  # both read it
    whole = measure(model, images, blurred, some, draws=1, batch_size=5)
    pieces = measure(model, images, blurred, some, draws=1, batch_size=2)
    for name in whole:
        assert torch.allclose(
            whole[name]["deletion"], pieces[name]["deletion"], atol=1e-6
        )
    last = deletion_curve(model, images, torch.zeros(5, 16), baseline=blurred)[:, -1]
    assert torch.allclose(whole["random 1"]["deletion"][:, -1], last, atol=1e-6)
