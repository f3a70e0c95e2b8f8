"""Bad input meets clear answers (pages 1, 5a, 6b, 6c and 6d): every bad flag or value of
`python -m vitlib.train` ends in one `error:` line that names the flag, its value and the
fix, with argparse's exit status 2 and no traceback; configs and models refuse wrong kinds of
values and images; crafted checkpoints are refused before anything is built; a new run never
replaces an old one unasked, and one folder holds one run at a time."""

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from test_loop import random_data

from vitlib import train as vt
from vitlib import trainer
from vitlib.checkpoint import (
    FORMAT,
    NotACheckpoint,
    checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from vitlib.cnn import HelpedViT, HelpedViTConfig
from vitlib.data import FASHION_SAMPLE
from vitlib.loop import TrainConfig
from vitlib.model import ViTConfig, create_vit
from vitlib.train import Diverged, RunRefused, main, run_lock, train

ROOT = Path(__file__).resolve().parents[1]
PROG = "python -m vitlib.train: error: "
# a tiny run on the Fashion-MNIST sample: a few seconds of training where one is needed
TINY = ["--dataset", "fashion-mnist", "--preset", "fashion", "--patch-size", "7"]
TINY += ["--depth", "1", "--train-subset", "512", "--test-subset", "256"]
TINY += ["--batch-size", "64", "--epochs", "1", "--no-progress"]


def _refused(err: str) -> str:
    """The one `error:` line of a refusal, after checking that it is the only one and that
    no traceback came with it."""
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert sum("error:" in line for line in lines) == 1, err
    assert lines[0].startswith("usage:") and lines[-1].startswith(PROG), err
    return lines[-1].removeprefix(PROG)


def _model():
    return create_vit("fashion", patch_size=7, depth=1)


def _main_refuses(args, capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2
    return _refused(capsys.readouterr().err)


DEEP = "[" * 100_000 + "]" * 100_000  # JSON that Python's parser reads by recursing


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A file where a folder belongs, a file that is no checkpoint, a checkpoint whose
    metadata nests 100,000 deep, a link to nowhere, and Fashion-MNIST with a test file of
    0 images (a valid IDX header)."""
    folder = tmp_path_factory.mktemp("files")
    (folder / "file").write_text("not a folder")
    (folder / "junk.safetensors").write_bytes(os.urandom(64))
    _craft(folder / "deep.safetensors", model_config=DEEP)
    os.symlink(folder / "missing", folder / "dangling")
    raw = folder / "empty-test" / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for name in FASHION_SAMPLE.glob("*-ubyte.gz"):
        shutil.copy(name, raw)
    header = b"\x00\x00\x08\x03" + struct.pack(">3I", 0, 28, 28)
    (raw / "t10k-images-idx3-ubyte").write_bytes(header)
    return folder


# each bad flag: (flags, what the error line starts with, words the line must hold)
BAD_FLAGS = [
    (["--batch-size", "1024"], "--batch-size 1024, --train-subset 512", ["lower --batch-size"]),
    (["--train-subset", "0"], "--train-subset 0", ["at least one training image"]),
    (["--train-subset", "-1"], "--train-subset -1", ["at least one training image"]),
    (["--test-subset", "0"], "--test-subset 0", ["at least one test image"]),
    (["--val-size", "-1"], "--val-size -1", ["0 or more"]),
    (["--val-size", "2000"], "--val-size 2000", ["hold out 1 to 1,500 of 3,000"]),
    (["--stop-after", "0"], "--stop-after 0", ["1 or later"]),
    (["--stop-after", "-1"], "--stop-after -1", ["1 or later"]),
    (["--seconds", "0"], "--seconds 0.0", ["seconds must be a number above 0"]),
    (["--device", "banana"], "--device banana", ["choose auto, cpu, cuda"]),
    (["--device", "cuda:99"], "--device cuda:99", ["CUDA GPU"]),
    (["--epochs", "0"], "--epochs 0", ["epochs must be at least 1, got 0"]),
    (["--epochs", "1.5"], "argument --epochs", ["invalid int value: '1.5'"]),
    (["--seed", "-1"], "--seed -1", ["seed must be at least 0, got -1"]),
    (["--mixup", "-1"], "--mixup -1.0", ["mixup must be 0 or more (0 turns it off)"]),
    (["--cutmix", "-2"], "--cutmix -2.0", ["cutmix must be 0 or more"]),
    (["--crop-padding", "-3"], "--crop-padding -3", ["crop_padding must be 0 or more"]),
    (["--warmup-epochs", "-1"], "--warmup-epochs -1.0", ["warmup_epochs must be 0 or"]),
    (["--clip-grad", "-1"], "--clip-grad -1.0", ["clip_grad must be 0 or more"]),
    (["--weight-decay", "-1"], "--weight-decay -1.0", ["weight_decay must be 0 or"]),
    (["--label-smoothing", "1"], "--label-smoothing 1.0", ["must be below 1"]),
    (["--lr", "nan"], "--lr nan", ["lr must be a finite number"]),
    (["--min-lr", "0.1"], "--min-lr 0.1", ["need 0 < min_lr <= lr"]),
    (["--norm-eps", "-1"], "--norm-eps -1.0", ["norm_eps must be above 0"]),
    (["--norm-eps", "nan"], "--norm-eps nan", ["norm_eps must be a finite number"]),
    (["--dim", "30", "--heads", "4"], "--dim 30:", ["divisors of 30"]),  # 30 fails alone
    (["--dim", "48", "--heads", "32"], "--dim 48, --heads 32:", ["divisors of 48"]),  # clash
    (["--heads", "6", "--lr", "1e-3"], "--heads 6:", ["divisors of 64"]),
    (["--patch-size", "5"], "--patch-size 5", ["cannot be cut into patches of 5"]),
    (["--dropout", "1.5"], "--dropout 1.5", ["dropout must be in [0, 1)"]),
    (["--pool", "max"], "--pool max", ["pool must be 'cls' or 'mean'"]),
    (["--qk-norm"], "--qk-norm", ["--model vit has no qk_norm: --model vit-modern has"]),
    (["--model", "cnn"], "--patch-size 7", ["--model cnn has no patch_size"]),
    (["--model", "vit-modern", "--registers", "-1"], "--registers -1", ["registers must be 0 or more"]),
    (["--model", "vit-modern", "--tokenizer", "hex"], "--tokenizer hex", ["tokenizer must be one of"]),
    (["--model", "vit-stem", "--stem", "8", "0"], "--stem [8, 0]", ["stem widths must be at least 1"]),
    (["--resume", "--overwrite"], "argument --overwrite", ["not allowed with argument --resume"]),
    (["--teacher", "{files}/nowhere"], "--teacher ", ["no checkpoint at"]),
    (["--teacher", "{files}/junk.safetensors"], "--teacher ", ["is not a vitlib checkpoint"]),
    (["--out", "{files}/file"], "--out ", ["is a file: a run writes into a folder"]),
    (["--out", "{files}/file/run"], "--out ", ["cannot make the folder"]),
    (["--out", ""], "--out '': ", ["an empty name is no folder"]),
    (["--out", "{files}/dangling"], "--out ", ["is a link to", "which is not there"]),
    (["--crop-padding", "1000"], "--crop-padding 1000", ["28x28 image: at most 7 (a quarter"]),
    (["--crop-padding", "8"], "--crop-padding 8", ["at most 7"]),
    (["--teacher", "{files}/deep.safetensors"], "--teacher ", ["its model_config nests deeper"]),
    (["--data", "{files}/empty-test"], "--dataset fashion-mnist, --data ", ["t10k-images-idx3-ubyte holds no items", "(0, 28, 28)"]),
    (["--resume"], "--resume", ["holds no checkpoint to resume from"]),
    (["--dataset", "cifar10", "--data", "{files}/file"], "--dataset cifar10, --data", ["CIFAR-10"]),
]  # fmt: skip


@pytest.mark.parametrize(
    "flags, starts, words", BAD_FLAGS, ids=[" ".join(b[0]) for b in BAD_FLAGS]
)
def test_a_bad_flag_gets_one_line_naming_it(
    flags, starts, words, files, tmp_path, capsys, monkeypatch
):
    if "{files}/empty-test" in flags:  # smoke mode reads the sample, not --data
        monkeypatch.delenv("VITLIB_SMOKE")
    flags = [f.format(files=files) for f in flags]
    out = ["--out", str(tmp_path / "run")] if "--out" not in flags else []
    line = _main_refuses([*TINY, *out, *flags], capsys)
    assert line.startswith(starts), line
    for word in words:
        assert word in line, line
    assert not checkpoints(tmp_path / "run")  # refused before anything was trained


def test_every_field_of_every_models_config_has_a_flag():
    from dataclasses import fields

    from vitlib.model import ARCHITECTURES

    dests = {a.dest for a in vt._parser()._actions}
    for name in vt._command_line_models():
        for f in fields(ARCHITECTURES[name].config):
            if f.name not in ("img_size", "in_channels", "num_classes", "distilled"):
                assert "m_" + f.name in dests, (name, f.name)


def test_the_command_line_builds_a_model_with_its_own_fields(tmp_path):
    flags = [
        "--model",
        "vit-modern",
        "--registers",
        "2",
        "--qk-norm",
        "--mlp",
        "swiglu",
    ]
    metrics = main([*TINY, *flags, "--out", str(tmp_path)])
    assert metrics["model_changes"]["registers"] == 2
    model, _ = load_checkpoint(tmp_path)
    assert type(model).__name__ == "ModernViT" and model.reg_token.shape[1] == 2
    assert model.config.qk_norm and hasattr(model.blocks[0].mlp, "fc1_g")


def test_the_command_itself_answers_without_a_traceback(files, tmp_path):
    cases = {  # three refusals, run side by side: each costs the imports
        "--weight-decay -1.0": ["--weight-decay", "-1"],
        "--batch-size 1024": ["--batch-size", "1024"],
        "--teacher": ["--teacher", str(files / "nowhere")],
    }
    env = dict(os.environ, VITLIB_SMOKE="1", CUDA_VISIBLE_DEVICES="")
    running = {
        flag: subprocess.Popen(
            [sys.executable, "-m", "vitlib.train", *TINY, *args]
            + ["--out", str(tmp_path / flag.split()[0].strip("-"))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        for flag, args in cases.items()
    }
    for flag, process in running.items():
        _, err = process.communicate(timeout=300)
        assert process.returncode == 2, err
        assert _refused(err).startswith(flag)


def test_a_new_run_never_replaces_an_old_one_unasked(tmp_path, capsys):
    out = tmp_path / "run"
    main([*TINY, "--out", str(out)])
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    names = sorted(p.name for p in before)
    assert names == ["metrics.json", "model.safetensors", "train_state.safetensors"]
    capsys.readouterr()
    line = _main_refuses([*TINY, "--seed", "1", "--out", str(out)], capsys)
    assert line.startswith(f"--out {out}: the folder holds a run already")
    assert "(epoch-0001, metrics.json)" in line and "--resume" in line
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    # metrics.json alone is a run too
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "metrics.json").write_text("{}")
    line = _main_refuses([*TINY, "--out", str(tmp_path / "done")], capsys)
    assert "holds a run already (metrics.json)" in line
    # --overwrite: the old run's files go first, then the new run writes its own
    main([*TINY, "--seed", "1", "--overwrite", "--out", str(out)])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["train_config"]["seed"] == 1 and "--overwrite" in metrics["command"]
    assert checkpoints(out) == [out / "epoch-0001"] and not (out / ".lock").exists()
    weights = out / "epoch-0001" / "model.safetensors"
    assert weights.read_bytes() != before[weights]


HOLD = """
import sys, time
from vitlib.train import run_lock
with run_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def test_one_folder_holds_one_run(tmp_path, capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunRefused, match="another run is writing to") as refused:
            train(_model(), random_data(64), out=out)
        assert refused.value.setting == "out"
        line = _main_refuses([*TINY, "--out", str(out)], capsys)
        assert line.startswith(f"--out {out}: another run is writing to {out}")
    finally:
        holder.kill()  # as a crash would: the kernel lets go of its lock
        holder.wait()
    with run_lock(out):  # a killed run leaves no lock behind
        assert (out / ".lock").exists()
    assert not (out / ".lock").exists()


@pytest.mark.parametrize("flock", [True, False], ids=["flock", "without fcntl"])
def test_another_thread_cannot_enter_a_held_folder_but_the_holder_can(
    flock, tmp_path, monkeypatch
):
    if not flock:  # as on Windows: the process's own record still keeps threads apart
        monkeypatch.setattr(trainer, "fcntl", None)
    out, held, done = tmp_path / "run", threading.Event(), threading.Event()

    def hold():
        with run_lock(out):
            held.set()
            done.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        held.wait(60)
        with pytest.raises(RunRefused, match="another run is writing to"):
            train(_model(), random_data(64), out=out)
    finally:
        done.set()
        thread.join()
    model, data = _model(), random_data(64)
    with run_lock(out):  # main holds the folder around train: the same run
        config = TrainConfig(epochs=1, batch_size=32)
        history = train(model, data, config, out=out, progress=False)
    assert history["epoch"] == [1] and checkpoints(out) == [out / "epoch-0001"]


@pytest.mark.parametrize(
    "config, data, options, words",
    [
        (dict(batch_size=128), 64, {}, "batch_size 128 is more than the 64 training"),
        (dict(batch_size=32), 64, dict(stop_after=0), "stop_after must be 1 or more"),
        (dict(batch_size=32), 0, {}, "no test images"),
    ],
)
def test_train_refuses_a_run_without_one_full_epoch(config, data, options, words):
    data = random_data(64).subset(test=data) if data == 0 else random_data(data)
    model = _model()
    with pytest.raises(RunRefused, match=words):
        train(model, data, TrainConfig(epochs=1, **config), **options, progress=False)


def test_a_diverged_run_says_nothing_was_saved_when_nothing_was(tmp_path):
    model = _model()
    with torch.no_grad():
        model.head.weight[0, 0] = float("nan")
    config = TrainConfig(epochs=1, batch_size=32)
    with pytest.raises(Diverged, match="training stopped and nothing was saved"):
        train(model, random_data(64), config, out=tmp_path / "run", progress=False)
    assert not checkpoints(tmp_path / "run")


# --- checkpoints crafted with a valid safetensors header


def _craft(path, tensors=None, drop=(), **metadata):
    """A model.safetensors as save_checkpoint writes it, with `tensors` and metadata
    changed (None: left out)."""
    model = _model()
    meta = dict(
        format=FORMAT,
        architecture="ViT",
        dataset="None",
        model_config=json.dumps(asdict(model.config)),
        train_config="null",
        epoch="1",
    )
    meta = {k: v for k, v in {**meta, **metadata}.items() if v is not None}
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k not in drop}
    save_file(tensors if tensors is not None else state, str(path), metadata=meta)
    return path


def _config(**changes) -> str:
    return json.dumps({**asdict(_model().config), **changes})


CRAFTED = {
    "wrong keys": dict(tensors={"x": torch.zeros(2)}),
    "a missing tensor": dict(drop=("head.bias",)),
    "a tensor of another shape": dict(
        tensors=lambda s: {**s, "head.weight": torch.zeros(3, 64)}
    ),
    "float16 tensors": dict(
        tensors=lambda s: {k: v.half() for k, v in s.items()},
        says="torch.float16 in the file, torch.float32 in the model",
    ),
    "an int64 tensor": dict(
        tensors=lambda s: {**s, "head.weight": s["head.weight"].long()},
        says="head.weight: torch.int64 in the file",
    ),
    "a bool tensor": dict(
        tensors=lambda s: {**s, "head.bias": s["head.bias"].bool()},
        says="head.bias: torch.bool in the file",
    ),
    "no model_config": dict(model_config=None),
    "model_config not JSON": dict(model_config="{dim: 64"),
    "model_config a list": dict(model_config="[64, 1]"),
    "an unknown field": dict(model_config=_config(colour="red")),
    "a refused value": dict(model_config=_config(dim=64.5)),
    "another dim": dict(model_config=_config(dim=32, heads=2)),
    "a huge model": dict(model_config=_config(dim=10**6, depth=10**4, heads=1)),
    "a huge width": dict(model_config=_config(dim=10**6, mlp_dim=10**6, heads=1)),
    "no epoch": dict(epoch=None),
    "epoch not JSON": dict(epoch="last"),
    "epoch not a number": dict(epoch='"first"'),
    "train_config not JSON": dict(train_config="{lr"),
    "model_config nested 100,000 deep": dict(
        model_config=DEEP, says="its model_config nests deeper"
    ),
    "train_config nested 100,000 deep": dict(
        train_config=DEEP, says="its train_config nests deeper"
    ),
    "epoch true": dict(epoch="true", says="its epoch is True"),
    "epoch below 0": dict(epoch="-5", says="its epoch is -5"),
    "epoch not whole": dict(epoch="1.5", says="its epoch is 1.5"),
}


@pytest.mark.parametrize("crafted", CRAFTED, ids=list(CRAFTED))
def test_a_crafted_checkpoint_is_refused_before_it_is_built(crafted, tmp_path):
    changes = dict(CRAFTED[crafted])
    says = changes.pop("says", "")  # what the refusal must name, where a row says
    if callable(changes.get("tensors")):  # the model's tensors, changed
        state = {k: v.contiguous() for k, v in _model().state_dict().items()}
        changes["tensors"] = changes["tensors"](state)
    path = _craft(tmp_path / "model.safetensors", **changes)
    begin = time.perf_counter()
    with pytest.raises(
        NotACheckpoint, match="is not a usable vitlib checkpoint: "
    ) as no:
        load_checkpoint(path)
    assert time.perf_counter() - begin < 5  # a huge config is never built
    assert says in str(no.value)
    if "model_config" not in changes:  # with the model given: its tensors are checked
        with pytest.raises(
            ValueError, match="is not a usable vitlib checkpoint: "
        ) as no:
            load_checkpoint(path, _model())
        assert says in str(no.value)


def test_the_checks_pass_a_checkpoint_as_saved(tmp_path):
    path = _craft(tmp_path / "model.safetensors")
    model, info = load_checkpoint(path)
    assert info["epoch"] == 1 and info["model_config"] == asdict(model.config)
    with pytest.raises(ValueError, match="which no imported vitlib module registers"):
        load_checkpoint(_craft(tmp_path / "other.safetensors", architecture="Banana"))


def test_a_resume_from_a_checkpoint_that_cannot_resume_is_refused(tmp_path):
    model, data = _model(), random_data(64)
    config = TrainConfig(epochs=2, batch_size=32)
    save_checkpoint(tmp_path / "bare", model, config, epoch=1)  # no optimizer state
    with pytest.raises(RunRefused, match="cannot resume") as refused:
        train(model, data, config, out=tmp_path / "bare", resume=True, progress=False)
    assert refused.value.setting == "resume"
    train(model, data, config, out=tmp_path / "run", stop_after=1, progress=False)
    state = tmp_path / "run" / "epoch-0001" / "train_state.safetensors"
    save_file(
        {"0.exp_avg": torch.zeros(3)},
        str(state),
        metadata=dict(format=FORMAT, train_config=json.dumps(asdict(config))),
    )
    with pytest.raises(RunRefused, match="is not a usable vitlib checkpoint"):
        train(model, data, config, out=tmp_path / "run", resume=True, progress=False)


# a run's train_state.safetensors with one metadata key changed (None: left out):
# (key, value, what the refusal says after the file's name)
BAD_STATES = {
    "param_groups nested 100,000 deep": (
        "param_groups",
        DEEP,
        "its param_groups nests deeper",
    ),
    "history nested 100,000 deep": ("history", DEEP, "its history nests deeper"),
    "splits not JSON": ("splits", "{junk", "its splits is not JSON (Expecting"),
    "splits a number": ("splits", "3", "its splits are 3"),
    "no scheduler": ("scheduler", None, "its metadata has no scheduler"),
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A one-epoch run of the command line (TINY)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    main([*TINY, "--out", str(out)])
    return out


@pytest.mark.parametrize("bad", BAD_STATES, ids=list(BAD_STATES))
def test_a_damaged_training_state_is_named_with_its_file_and_key(
    bad, finished_run, tmp_path, capsys
):
    key, value, words = BAD_STATES[bad]
    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    state = checkpoints(out)[-1] / "train_state.safetensors"
    with safe_open(str(state), "pt") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    meta = {k: v for k, v in {**meta, key: value}.items() if v is not None}
    save_file(tensors, str(state), metadata=meta)
    line = _main_refuses([*TINY, "--out", str(out), "--resume"], capsys)
    assert line.startswith("--resume: "), line
    assert f"{state} is not a usable vitlib checkpoint: {words}" in line, line


def test_ctrl_c_says_what_was_saved_and_how_to_go_on(tmp_path, capsys):
    out = tmp_path / "run"
    flags = [*TINY, "--epochs", "1000", "--out", str(out)]  # longer than the test waits
    env = dict(os.environ, VITLIB_SMOKE="1", CUDA_VISIBLE_DEVICES="")
    command = [sys.executable, "-m", "vitlib.train", *flags]
    # a suite started in the background (`make test &`) ignores SIGINT, and a child
    # inherits that: Ctrl-C's default is restored for the run
    run = subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 300
    while not checkpoints(out):  # an epoch has ended
        assert run.poll() is None and time.monotonic() < deadline, run.stderr.read()
        time.sleep(0.05)
    run.send_signal(signal.SIGINT)  # what Ctrl-C sends
    _, err = run.communicate(timeout=120)
    assert run.returncode == 130 and "Traceback" not in err, err
    newest = checkpoints(out)[-1]  # the epoch that ended before the signal, or during
    epoch = int(newest.name.removeprefix("epoch-"))
    assert err.strip().splitlines()[-1] == (
        f"python -m vitlib.train: stopped: {newest} holds epoch {epoch}; the same "
        "command with --resume goes on"
    )
    metrics = main([*flags, "--resume", "--stop-after", str(epoch + 1)])
    assert metrics["epochs_done"] == epoch + 1  # it went on from there
    assert vt._kept(tmp_path / "nothing") == (
        f"no epoch had ended, so nothing was saved in {tmp_path / 'nothing'}"
    )


# --- configs and images


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (dict(dim=16.0), TypeError, "dim must be a whole number (an int), got 16.0 (float): write dim=16"),
        (dict(depth=1.5), TypeError, "depth must be a whole number (an int), got 1.5 (float): choose 1 or 2"),
        (dict(heads=2.0), TypeError, "heads must be a whole number"),
        (dict(dim=True), TypeError, "dim must be a whole number (an int), got True (bool)"),
        (dict(patch_size=(7.0, 7)), TypeError, "patch_size must be a whole number or a pair"),
        (dict(img_size=(28, 28, 3)), TypeError, "img_size must be a whole number or a pair"),
        (dict(dropout="0.1"), TypeError, "dropout must be a number, got '0.1' (str)"),
        (dict(qkv_bias="yes"), TypeError, "qkv_bias must be True or False"),
        (dict(norm_eps=-1e-6), ValueError, "norm_eps must be above 0"),
        (dict(norm_eps=0.0), ValueError, "norm_eps must be above 0"),
        (dict(norm_eps=float("nan")), ValueError, "norm_eps must be a finite number"),
        (dict(norm_eps=float("inf")), ValueError, "norm_eps must be a finite number"),
    ],
)  # fmt: skip
def test_vit_config_refuses_values_of_the_wrong_kind(bad, error, words):
    with pytest.raises(error) as refused:
        ViTConfig(**bad)
    assert words in str(refused.value)


def test_vit_config_takes_what_json_gives_back():
    config = ViTConfig(img_size=[32, 48], patch_size=[8, 8], dim=32, heads=2, dropout=0)
    assert config.grid == (4, 6)


@pytest.mark.parametrize(
    "bad, words",
    [
        (dict(epochs=1.5), "epochs must be a whole number"),
        (dict(batch_size=64.0), "write batch_size=64"),
        (dict(seed=-1), "seed must be at least 0, got -1"),
        (dict(weight_decay=-0.1), "weight_decay must be 0 or more (0 turns it off)"),
        (dict(warmup_epochs=-1.0), "warmup_epochs must be 0 or more"),
        (dict(clip_grad=-1.0), "clip_grad must be 0 or more"),
        (dict(crop_padding=-3), "crop_padding must be 0 or more"),
        (dict(mixup=-1.0), "mixup must be 0 or more"),
        (dict(cutmix=-1.0), "cutmix must be 0 or more"),
        (dict(label_smoothing=1.0), "label_smoothing must be below 1"),
        (dict(lr=float("nan")), "lr must be a finite number"),
        (dict(flip="yes"), "flip must be True or False"),
    ],
)
def test_train_config_refuses_settings_no_run_can_use(bad, words):
    with pytest.raises((TypeError, ValueError)) as refused:
        TrainConfig(**bad)
    assert words in str(refused.value)


def _models():
    vit = _model()
    helped = HelpedViT(HelpedViTConfig(**{**asdict(vit.config), "distilled": True}))
    return [vit.eval(), helped.eval()]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_images_of_another_dtype_get_the_fix(dtype):
    images = torch.rand(2, 1, 28, 28, dtype=dtype)
    for model in _models():
        for forward in (model, model.forward_features, model.attention_maps):
            with pytest.raises(TypeError) as refused:
                forward(images)
            assert (
                f"the model's weights are torch.float32 and the images {dtype}"
                in str(refused.value)
                and "images.float()" in str(refused.value)
            )


def test_an_empty_batch_is_refused_at_the_door():
    for model in _models():
        with pytest.raises(ValueError, match=r"empty batch of shape \(0, 1, 28, 28\)"):
            model(torch.rand(0, 1, 28, 28))


def test_the_dtype_check_follows_the_model_and_autocast():
    model = _model().eval()
    images = torch.rand(2, 1, 28, 28)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast casts for itself
        assert model(images.bfloat16()).shape == (2, 10)
    model = model.to(torch.bfloat16)
    assert model(images.bfloat16()).dtype == torch.bfloat16
    with pytest.raises(TypeError, match=r"images.to\(torch.bfloat16\)"):
        model(images)
