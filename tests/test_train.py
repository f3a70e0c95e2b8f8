"""vitlib.train: the schedule, the parameter groups, exact repeats and resumes, checkpoints
that never unpickle, the command line and a two-process torchrun run on the CPU."""

import json
import os
import pickle
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from vitlib import train as vt
from vitlib.data import fashion_mnist
from vitlib.model import create_vit
from vitlib.train import (
    RECIPES,
    TrainConfig,
    WarmupCosine,
    evaluate,
    load_checkpoint,
    main,
    parameter_groups,
    save_checkpoint,
    train,
)

ROOT = Path(__file__).resolve().parents[1]
TIMING = ("seconds", "images_per_second")


@pytest.fixture(scope="module")
def small():
    return fashion_mnist(ROOT / "data").subset(512, 256)


def _model(**changes):
    options = dict(patch_size=7, depth=2, dropout=0.1, drop_path=0.1)
    return create_vit("fashion", **{**options, **changes})


# augmentation of every kind, dropout and stochastic depth: every random stream is exercised
CONFIG = TrainConfig(
    epochs=3,
    batch_size=64,
    crop_padding=2,
    flip=True,
    auto_augment="trivial",
    mixup=0.8,
    cutmix=1.0,
)


def _same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _without_timing(history):
    return {k: v for k, v in history.items() if k not in TIMING}


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
    assert decayed == {n for n, p in model.named_parameters() if p.ndim >= 2} - {
        "pos_embed",
        "cls_token",
    }
    assert len(skipped) + len(decayed) == len(list(model.parameters()))


@pytest.mark.fashion_mnist
def test_seeded_runs_repeat_exactly(small):
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = _model()
        runs.append((model, train(model, small, CONFIG, progress=False)))
    assert _same_weights(runs[0][0], runs[1][0])
    assert _without_timing(runs[0][1]) == _without_timing(runs[1][1])
    assert len(runs[0][1]["epoch"]) == 3 and set(runs[0][1]) == set(vt.HISTORY_KEYS)


@pytest.mark.fashion_mnist
@pytest.mark.parametrize("stop", [1, 2])
def test_resume_continues_exactly(small, tmp_path, stop):
    torch.manual_seed(0)
    unbroken = _model()
    history = train(unbroken, small, CONFIG, progress=False)

    torch.manual_seed(0)
    first = _model()
    train(first, small, CONFIG, out=tmp_path, stop_after=stop, progress=False)
    assert load_checkpoint(tmp_path)[1]["epoch"] == stop
    torch.manual_seed(1234)  # another start: everything must come from the checkpoint
    resumed = _model()
    resumed_history = train(
        resumed, small, CONFIG, out=tmp_path, resume=True, progress=False
    )
    assert _same_weights(unbroken, resumed)
    assert _without_timing(history) == _without_timing(resumed_history)


@pytest.mark.fashion_mnist
def test_checkpoint_round_trip_and_metadata(small, tmp_path):
    torch.manual_seed(0)
    model = _model(pos="sincos")
    train(
        model, small, TrainConfig(epochs=1, batch_size=64), out=tmp_path, progress=False
    )
    assert sorted(os.listdir(tmp_path)) == [
        "model.safetensors",
        "train_state.safetensors",
    ]
    restored, info = load_checkpoint(tmp_path)  # builds the model from the metadata
    assert info["epoch"] == 1 and info["model_config"] == asdict(model.config)
    assert info["train_config"]["batch_size"] == 64
    assert _same_weights(model.cpu(), restored)
    assert evaluate(restored, small) == evaluate(model, small)
    # a safetensors file: an 8-byte header length, then JSON, then raw tensor bytes
    raw = (tmp_path / "model.safetensors").read_bytes()
    header = int.from_bytes(raw[:8], "little")
    assert (
        json.loads(raw[8 : 8 + header])["__metadata__"]["format"]
        == "vitlib-checkpoint-1"
    )


@pytest.mark.fashion_mnist
def test_loading_never_unpickles(small, tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = _model()
    config = TrainConfig(epochs=2, batch_size=64)
    train(model, small, config, out=tmp_path, stop_after=1, progress=False)

    def refuse(*args, **kwargs):
        raise AssertionError("something was unpickled")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    load_checkpoint(tmp_path)
    history = train(_model(), small, config, out=tmp_path, resume=True, progress=False)
    assert history["epoch"] == [1, 2]


@pytest.mark.fashion_mnist
def test_another_configuration_is_refused_clearly(small, tmp_path):
    torch.manual_seed(0)
    config = TrainConfig(epochs=2, batch_size=64)
    train(_model(), small, config, out=tmp_path, stop_after=1, progress=False)
    with pytest.raises(
        ValueError, match=r"another configuration.*depth: 2 there, 3 here"
    ):
        load_checkpoint(tmp_path, _model(depth=3))
    with pytest.raises(
        ValueError, match=r"another TrainConfig.*lr: 0.001 there, 0.002 here"
    ):
        train(
            _model(),
            small,
            TrainConfig(epochs=2, batch_size=64, lr=2e-3),
            out=tmp_path,
            resume=True,
            progress=False,
        )
    with pytest.raises(ValueError, match="another configuration"):
        train(_model(dim=32), small, config, out=tmp_path, resume=True, progress=False)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing")


@pytest.mark.fashion_mnist
def test_checkpoints_are_written_atomically(small, tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = _model()
    save_checkpoint(tmp_path, model, epoch=1)
    before = (tmp_path / "model.safetensors").read_bytes()

    def crash(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"half a file")
        raise KeyboardInterrupt("killed while writing")

    monkeypatch.setattr(vt, "save_file", crash)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, _model(depth=1), epoch=2)
    assert (tmp_path / "model.safetensors").read_bytes() == before
    assert load_checkpoint(tmp_path)[1]["epoch"] == 1


def _cli(args, **env):
    return subprocess.run(
        [sys.executable, "-m", "vitlib.train", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, CUDA_VISIBLE_DEVICES="", **env),
        timeout=600,
    )


TINY = [
    "--dataset",
    "fashion-mnist",
    "--preset",
    "fashion",
    "--patch-size",
    "7",
    "--depth",
    "1",
    "--train-subset",
    "512",
    "--test-subset",
    "256",
    "--batch-size",
    "64",
    "--no-progress",
]


@pytest.mark.parametrize(
    "args, valid",
    [
        (["--dataset", "mnist"], "['cifar10', 'fashion-mnist']"),
        (["--preset", "huge"], "'fashion', 'large', 'small', 'tiny'"),
        (["--recipe", "fast"], "['cifar10-gpu', 'fashion-cpu', 'fashion-gpu']"),
    ],
)
def test_cli_lists_the_valid_names(args, valid, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([*args, "--out", str(tmp_path)])
    assert valid in capsys.readouterr().err


@pytest.mark.fashion_mnist
def test_cli_writes_metrics_and_checkpoint_and_resumes(tmp_path):
    out = tmp_path / "run"
    stopped = _cli([*TINY, "--epochs", "2", "--stop-after", "1", "--out", str(out)])
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads((out / "metrics.json").read_text())["epochs_done"] == 1
    resumed = _cli([*TINY, "--epochs", "2", "--resume", "--out", str(out)])
    assert resumed.returncode == 0, resumed.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epochs_done"] == 2 and metrics["history"]["epoch"] == [1, 2]
    assert {"final_test_accuracy", "training_seconds", "device", "history"} <= set(
        metrics
    )
    assert metrics["device"].startswith("CPU")
    model, info = load_checkpoint(out)
    assert info["epoch"] == 2
    data = fashion_mnist(ROOT / "data").subset(512, 256)
    assert evaluate(model, data)["accuracy"] == pytest.approx(
        metrics["final_test_accuracy"]
    )


@pytest.mark.fashion_mnist
def test_torchrun_two_processes_on_cpu(tmp_path):
    out = tmp_path / "ddp"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "vitlib.train",
            *TINY,
            "--epochs",
            "1",
            "--device",
            "cpu",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1"),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2 process(es)" in result.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2
    # the test accuracy was summed over both ranks' halves: it equals one process on all of it
    model, _ = load_checkpoint(out)
    data = fashion_mnist(ROOT / "data").subset(512, 256)
    assert evaluate(model, data)["accuracy"] == pytest.approx(
        metrics["final_test_accuracy"]
    )


def test_recipes_build():
    for name, recipe in RECIPES.items():
        model = create_vit(
            recipe.preset,
            **recipe.model,
            img_size=28 if "fashion" in name else 32,
            in_channels=1 if "fashion" in name else 3,
        )
        assert model.config.num_classes == 10 and recipe.train.epochs > 0
