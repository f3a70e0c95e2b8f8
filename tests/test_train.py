"""vitlib.train and vitlib.checkpoint (pages 6c and 6d): exact repeats and resumes, checkpoints that survive a crash and never
unpickle, clear errors (junk files, other configs, divergence), the precision per GPU, the
command line, and a two-process torchrun run on the CPU."""

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
from dataclasses import asdict, replace
from pathlib import Path
from unittest import mock

import pytest
import torch
from test_loop import random_data

from vitlib import train as vt
from vitlib.checkpoint import (
    HISTORY_KEYS,
    TRAIN_STATE,
    _metadata,
    checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from vitlib.data import fashion_mnist
from vitlib.loop import TrainConfig, evaluate
from vitlib.model import create_vit
from vitlib.train import main
from vitlib.trainer import (
    ClockCosine,
    Diverged,
    RunRefused,
    first_non_finite,
    precision,
    split_sizes,
    train,
)
from vitlib.utils import amp_dtype, grad_scaler

ROOT = Path(__file__).resolve().parents[1]
TIMING = ("seconds", "images_per_second")


@pytest.fixture(scope="module")
def small():
    return random_data(320)


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


def test_seeded_runs_repeat_exactly(small):
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = _model()
        runs.append((model, train(model, small, CONFIG, progress=False)))
    assert _same_weights(runs[0][0], runs[1][0])
    assert _without_timing(runs[0][1]) == _without_timing(runs[1][1])
    assert len(runs[0][1]["epoch"]) == 3 and set(runs[0][1]) == set(HISTORY_KEYS)


def test_the_cosine_on_a_time_budget_follows_the_clock_not_the_steps():
    now = [0.0]
    factor = ClockCosine(warmup=2, seconds=10.0, floor=0.1, clock=lambda: now[0])
    assert [factor(0), factor(1)] == [0.5, 1.0]  # the warm-up counts steps
    now[0] = 2.0
    assert factor(2) == 1.0  # warm-up over at 2 s: the cosine starts from there
    now[0] = 6.0  # half of the 8 s left
    assert factor(3) == pytest.approx(0.55) == factor(1000)  # steps do not count now
    now[0] = 10.0
    assert factor(4) == pytest.approx(0.1) == factor(5)
    json.dumps(vars(factor))  # what a checkpoint keeps of it: numbers, not the clock


def test_a_time_budget_runs_until_the_clock_says_so(small):
    config = replace(CONFIG, epochs=1, warmup_epochs=0.2)
    torch.manual_seed(0)
    history = train(_model(), small, config, progress=False, seconds=1.5)
    assert sum(history["seconds"]) >= 1.5 and len(history["epoch"]) > config.epochs
    lrs = history["lr"]  # falling after the warm-up, and low when the time ran out
    assert lrs == sorted(lrs, reverse=True) and lrs[-1] < 0.1 * config.lr


@pytest.mark.parametrize("seconds", [0, -1.0, "60", True])
def test_a_time_budget_that_is_no_number_of_seconds_is_refused(small, seconds):
    with pytest.raises(RunRefused, match="seconds must be a number above 0") as error:
        train(_model(), small, CONFIG, progress=False, seconds=seconds)
    assert error.value.setting == "seconds"


def test_a_run_on_a_time_budget_does_not_resume(small, tmp_path):
    config, out = replace(CONFIG, epochs=1), tmp_path / "run"
    train(_model(), small, config, out, progress=False, seconds=0.5)
    for seconds in (None, 0.5):  # with a clock, or without one
        model = _model()
        before = {k: v.clone() for k, v in model.state_dict().items()}
        with pytest.raises(RunRefused, match="cannot resume"):
            train(model, small, config, out, True, progress=False, seconds=seconds)
        # refused before the checkpoint's weights were read into the caller's model
        assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


@pytest.mark.parametrize("stop", [1, 2])
def test_resume_continues_exactly(small, tmp_path, stop):
    data = small.hold_out(32)  # validation numbers too come back from the checkpoint
    torch.manual_seed(0)
    unbroken = _model()
    history = train(unbroken, data, CONFIG, progress=False)
    assert all(0 <= a <= 1 for a in history["val_accuracy"])

    torch.manual_seed(0)
    first = _model()
    train(first, data, CONFIG, out=tmp_path, stop_after=stop, progress=False)
    assert load_checkpoint(tmp_path)[1]["epoch"] == stop
    torch.manual_seed(1234)  # another start: everything must come from the checkpoint
    resumed = _model()
    resumed_history = train(
        resumed, data, CONFIG, out=tmp_path, resume=True, progress=False
    )
    assert _same_weights(unbroken, resumed)
    assert _without_timing(history) == _without_timing(resumed_history)


def test_a_resume_on_other_splits_is_refused(small, tmp_path):
    torch.manual_seed(0)
    data = small.hold_out(32)
    train(_model(), data, CONFIG, out=tmp_path, stop_after=1, progress=False)
    stored = json.loads(_metadata(checkpoints(tmp_path)[-1] / TRAIN_STATE)["splits"])
    assert stored == split_sizes(data) and stored["val"] == 32
    for other in (small.hold_out(64), small):  # another --val-size, or none
        with pytest.raises(RunRefused, match="trained on other splits"):
            train(_model(), other, CONFIG, out=tmp_path, resume=True, progress=False)
    train(
        _model(), data, CONFIG, out=tmp_path, resume=True, progress=False
    )  # same data


def test_a_checkpoint_is_a_folder_of_safetensors(small, tmp_path):
    torch.manual_seed(0)
    model = _model(pos="sincos")
    config = TrainConfig(epochs=2, batch_size=64)
    train(model, small, config, out=tmp_path, progress=False)
    assert sorted(os.listdir(tmp_path)) == ["epoch-0002"]  # only the newest is kept
    folder = tmp_path / "epoch-0002"
    assert sorted(os.listdir(folder)) == [
        "model.safetensors",
        "train_state.safetensors",
    ]
    restored, info = load_checkpoint(tmp_path)  # builds the model from the metadata
    assert info["epoch"] == 2 and info["model_config"] == asdict(model.config)
    assert info["train_config"]["batch_size"] == 64 and info["folder"] == folder
    assert _same_weights(model.cpu(), restored)
    assert evaluate(restored, small) == evaluate(model, small)
    for path in (folder, folder / "model.safetensors"):  # other ways to name it
        assert _same_weights(load_checkpoint(path)[0], restored)
    # a safetensors file: an 8-byte header length, then JSON, then raw tensor bytes
    raw = (folder / "model.safetensors").read_bytes()
    header = json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])
    assert header["__metadata__"]["format"] == "vitlib-checkpoint-1"


def test_loading_never_unpickles(small, tmp_path, monkeypatch):
    torch.manual_seed(0)
    config = TrainConfig(epochs=2, batch_size=64)
    train(_model(), small, config, out=tmp_path, stop_after=1, progress=False)

    def refuse(*args, **kwargs):
        raise AssertionError("something was unpickled")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    load_checkpoint(tmp_path)
    history = train(_model(), small, config, out=tmp_path, resume=True, progress=False)
    assert history["epoch"] == [1, 2]


@pytest.mark.parametrize(
    "content", [b"", os.urandom(64), pickle.dumps({"weights": [1, 2]}), b"\xff" * 8]
)
def test_a_file_that_is_no_checkpoint_says_so(tmp_path, content):
    junk = tmp_path / "model.safetensors"
    junk.write_bytes(content)
    with pytest.raises(ValueError, match="is not a vitlib checkpoint"):
        load_checkpoint(junk)


def test_a_safetensors_file_of_another_kind_says_so(tmp_path):
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(2)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match="not a vitlib checkpoint .no vitlib metadata"):
        load_checkpoint(tmp_path / "other.safetensors")
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing")


def test_another_configuration_is_refused_clearly(small, tmp_path):
    torch.manual_seed(0)
    config = TrainConfig(epochs=2, batch_size=64)
    train(_model(), small, config, out=tmp_path, stop_after=1, progress=False)
    with pytest.raises(
        ValueError, match=r"another configuration.*depth: 2 there, 3 here"
    ):
        load_checkpoint(tmp_path, _model(depth=3))
    other = TrainConfig(epochs=2, batch_size=64, lr=2e-3)
    with pytest.raises(
        ValueError, match=r"another TrainConfig.*lr: 0.001 there, 0.002"
    ):
        train(_model(), small, other, out=tmp_path, resume=True, progress=False)
    with pytest.raises(ValueError, match="another configuration"):
        train(_model(dim=32), small, config, out=tmp_path, resume=True, progress=False)


def test_a_loss_that_diverges_stops_the_run_and_keeps_the_good_checkpoint(
    small, tmp_path
):
    torch.manual_seed(0)
    config = TrainConfig(epochs=3, batch_size=64, lr=1e-3)
    train(_model(), small, config, out=tmp_path, stop_after=1, progress=False)
    before = (tmp_path / "epoch-0001" / "model.safetensors").read_bytes()
    model = _model()
    with torch.no_grad():  # a poisoned weight: the next forward pass gives nan
        model.head.weight[0, 0] = float("nan")
    with pytest.raises(Diverged) as error:
        train(model, small, config, out=tmp_path, resume=False, progress=False)
    message = str(error.value)
    # the rate of that step: the first of a 5-step warm-up to 1e-3
    assert "at epoch 1, step 1 (learning rate 0.0002)" in message and "--lr" in message
    assert checkpoints(tmp_path) == [tmp_path / "epoch-0001"]
    assert (tmp_path / "epoch-0001" / "model.safetensors").read_bytes() == before


def test_the_hooks_a_run_without_classes_uses(small):
    """Chapter 10's shape of run: a loss whose outputs are no class scores, no test split
    measured (none is needed), and a call after each epoch."""
    import math

    def pixels(model, images, labels, config):  # outputs (b, n, c*p*p), not logits
        out = model.forward_features(images)[:, 1:]
        return out.float().pow(2).mean(), out

    seen = []
    torch.manual_seed(0)
    history = train(
        _model(),
        small.subset(test=0),  # without evaluate_fn=None: refused, see below
        TrainConfig(epochs=2, batch_size=64),
        progress=False,
        loss_fn=pixels,
        evaluate_fn=None,
        after_epoch=lambda epoch, model: seen.append((epoch, model.training)),
    )
    assert seen == [(1, True), (2, True)]
    assert history["epoch"] == [1, 2] and all(map(math.isfinite, history["train_loss"]))
    for key in ("train_accuracy", "test_loss", "test_accuracy"):
        assert all(map(math.isnan, history[key])), key
    with pytest.raises(vt.RunRefused, match="no test images"):
        train(_model(), small.subset(test=0), TrainConfig(epochs=1, batch_size=64))


def test_first_non_finite():
    nan, inf = float("nan"), float("inf")
    assert first_non_finite(torch.tensor([1.0, nan, inf])) == 1
    assert first_non_finite(torch.tensor([1.0, 2.0, -inf])) == 2
    assert first_non_finite(torch.ones(4)) == -1


@pytest.mark.parametrize(
    "capability, dtype, words",
    [
        ((7, 5), torch.float16, "float16 autocast with a gradient scaler"),  # a T4
        ((8, 0), torch.bfloat16, "bfloat16 autocast"),  # an A100
        ((9, 0), torch.bfloat16, "bfloat16 autocast"),  # an H100
    ],
)
def test_the_precision_follows_the_gpu(capability, dtype, words):
    with mock.patch("torch.cuda.get_device_capability", return_value=capability):
        assert amp_dtype("cuda") == dtype and precision("cuda") == words
    assert amp_dtype("cpu") is None and precision("cpu") == "float32"
    assert not grad_scaler("cpu").is_enabled()


def test_vitlib_amp_chooses_the_format_on_a_gpu(monkeypatch):
    with mock.patch("torch.cuda.get_device_capability", return_value=(9, 0)):
        monkeypatch.setenv("VITLIB_AMP", "float16")  # an H100 training as a T4 would
        assert amp_dtype("cuda") == torch.float16
        assert precision("cuda") == "float16 autocast with a gradient scaler"
        assert amp_dtype("cpu") is None  # a CPU stays in float32
        monkeypatch.setenv("VITLIB_AMP", "half")
        with pytest.raises(ValueError, match="float16 or bfloat16"):
            amp_dtype("cuda")


def test_saving_cleans_what_a_crash_left(tmp_path):
    model = _model()
    (tmp_path / "epoch-0003.partial").mkdir(parents=True)
    (tmp_path / "epoch-0001.old").mkdir()
    # a second save of epoch 4, killed while it deleted the old copy
    (tmp_path / "epoch-0004").mkdir()
    (tmp_path / "epoch-0004.previous").mkdir()
    save_checkpoint(tmp_path, model, epoch=2)
    assert sorted(os.listdir(tmp_path)) == ["epoch-0002"]


def test_a_crash_while_saving_an_epoch_again_keeps_its_old_copy(tmp_path, monkeypatch):
    first = _model()
    save_checkpoint(tmp_path, first, epoch=3)
    rename = os.replace

    def killed_before_the_new_copy(source, target):
        if str(source).endswith(".partial"):
            raise OSError("killed between the two renames")
        rename(source, target)

    monkeypatch.setattr(os, "replace", killed_before_the_new_copy)
    with pytest.raises(OSError, match="between the two renames"):
        save_checkpoint(tmp_path, _model(), epoch=3)  # a second run into the folder
    monkeypatch.undo()
    assert [c.name for c in checkpoints(tmp_path)] == ["epoch-0003.previous"]
    assert _same_weights(first, load_checkpoint(tmp_path)[0])
    save_checkpoint(tmp_path, _model(), epoch=4)
    assert sorted(os.listdir(tmp_path)) == ["epoch-0004"]


def test_a_shorter_run_replaces_a_longer_one_in_the_same_folder(tmp_path):
    save_checkpoint(tmp_path, _model(), epoch=36)  # an earlier, longer run
    save_checkpoint(tmp_path, _model(), epoch=24)
    assert sorted(os.listdir(tmp_path)) == ["epoch-0024"]
    assert load_checkpoint(tmp_path)[1]["epoch"] == 24


def test_a_run_folder_loads_its_newest_checkpoint_before_a_loose_file(tmp_path):
    save_checkpoint(tmp_path / "old", _model(), epoch=36)
    loose = tmp_path / "old" / "epoch-0036" / "model.safetensors"
    os.replace(loose, tmp_path / "model.safetensors")  # a file beside the checkpoints
    save_checkpoint(tmp_path, _model(), epoch=24)
    assert load_checkpoint(tmp_path)[1]["epoch"] == 24


# A run in a subprocess, killed (SIGKILL, nothing flushed) while it saves the checkpoint of
# epoch 2: inside the first file, inside the second, or after the rename, while deleting.
CRASH = textwrap.dedent(
    """
    import os, shutil, signal, sys, torch
    sys.path.insert(0, "tests")
    from test_loop import random_data
    from test_train import CONFIG, _model
    from vitlib import checkpoint as vc, train as vt

    where, out = sys.argv[1], sys.argv[2]
    calls = {"n": 0}

    def kill(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    save_file, rmtree = vc.save_file, shutil.rmtree

    def save_and_die(tensors, filename, metadata=None):
        calls["n"] += 1
        if calls["n"] == {"model": 3, "state": 4}.get(where):  # epoch 2's files
            open(filename, "wb").write(b"half a file")
            kill()
        save_file(tensors, filename, metadata=metadata)

    def rmtree_and_die(path, *args, **kwargs):
        if where == "delete" and str(path).endswith("epoch-0001.old"):
            kill()
        rmtree(path, *args, **kwargs)

    vc.save_file, vc.shutil.rmtree = save_and_die, rmtree_and_die
    torch.manual_seed(0)
    vt.train(_model(), random_data(320), CONFIG, out=out, progress=False)
    """
)


@pytest.mark.parametrize("where", ["model", "state", "delete"])
def test_a_run_killed_while_saving_resumes_to_the_same_weights(small, tmp_path, where):
    out = tmp_path / "run"
    killed = subprocess.run(
        [sys.executable, "-c", CRASH, where, str(out)], cwd=ROOT, capture_output=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    # the last whole checkpoint is there, and nothing half-written passes for one
    done = {"model": 1, "state": 1, "delete": 2}[where]
    assert [c.name for c in checkpoints(out)] == [f"epoch-{done:04d}"], os.listdir(out)
    # what the killed process saved is what this process computes for those epochs, so a
    # difference below is the resume's, not two processes computing differently
    torch.manual_seed(0)
    first = _model()
    train(first, small, CONFIG, stop_after=done, progress=False)
    assert _same_weights(first, load_checkpoint(out)[0]), (
        "epochs differ across processes"
    )
    torch.manual_seed(1234)  # everything must come from the checkpoint
    resumed = _model()
    train(resumed, small, CONFIG, out=out, resume=True, progress=False)
    torch.manual_seed(0)
    unbroken = _model()
    train(unbroken, small, CONFIG, progress=False)
    assert _same_weights(unbroken, resumed)


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
        (
            ["--recipe", "fast"],
            "['cifar10-cpu', 'cifar10-gpu', 'fashion-cpu', 'fashion-cpu-modern', 'fashion-cpu-stem', 'fashion-gpu', 'fashion-gpu-modern']",
        ),
    ],
)
def test_cli_lists_the_valid_names(args, valid, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([*args, "--out", str(tmp_path)])
    assert valid in capsys.readouterr().err


def test_cli_writes_metrics_and_checkpoint_and_resumes(tmp_path):
    out = tmp_path / "run"
    stopped = _cli([*TINY, "--epochs", "2", "--stop-after", "1", "--out", str(out)])
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads((out / "metrics.json").read_text())["epochs_done"] == 1
    resumed = _cli([*TINY, "--epochs", "2", "--resume", "--out", str(out)])
    assert resumed.returncode == 0, resumed.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epochs_done"] == 2 and metrics["history"]["epoch"] == [1, 2]
    keys = {"final_test_accuracy", "training_seconds", "device", "history", "command"}
    assert keys <= set(metrics) and metrics["device"].startswith("CPU")
    # choices are made on validation: the run measured both splits after every epoch
    assert len(metrics["history"]["val_accuracy"]) == 2
    assert metrics["final_val_accuracy"] == metrics["history"]["val_accuracy"][-1]
    assert (
        0 < metrics["final_val_accuracy"] <= 1
        and "final_val_accuracy=" in resumed.stdout
    )
    held = fashion_mnist().hold_out(300)  # a tenth of the sample's 3,000, the default
    val = evaluate(load_checkpoint(out)[0], held, "val")["accuracy"]
    assert val == pytest.approx(metrics["final_val_accuracy"])
    model, info = load_checkpoint(out)
    assert info["epoch"] == 2
    data = fashion_mnist().subset(512, 256)
    accuracy = evaluate(model, data)["accuracy"]
    assert accuracy == pytest.approx(metrics["final_test_accuracy"])


def test_torchrun_two_processes_on_cpu(tmp_path):
    out = tmp_path / "ddp"
    run = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    result = subprocess.run(
        [*run, "--nproc_per_node=2", "-m", "vitlib.train", *TINY, "--epochs", "1"]
        + ["--device", "cpu", "--out", str(out)],
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
    data = fashion_mnist().subset(512, 256)
    accuracy = evaluate(model, data)["accuracy"]
    assert accuracy == pytest.approx(metrics["final_test_accuracy"])


def test_a_divergence_names_the_learning_rate_of_its_step():
    """An epoch cut short (a time budget) still counts the schedule's steps by full epochs."""
    from vitlib.loop import make_optimizer
    from vitlib.trainer import Diverged, _check_finite

    config = replace(CONFIG, epochs=4, warmup_epochs=1.0)
    _, scheduler = make_optimizer(_model(), config, steps_per_epoch=10)
    losses = torch.tensor([float("nan"), 1.0, 1.0])  # epoch 2 cut after 3 steps
    with pytest.raises(Diverged) as error:
        _check_finite(losses, 1, scheduler, None, steps=10)
    wanted = config.lr * scheduler.lr_lambdas[0](10)  # step 10: the first of epoch 2
    assert f"learning rate {wanted:.3g}" in str(error.value)
