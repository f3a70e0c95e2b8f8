"""vitlib.data: the loaders (Fashion-MNIST from disk or Debian, CIFAR-10 from files this test
writes), the batch augmentations and the device loader."""

import pickle
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from vitlib import data as vd
from vitlib.data import (
    CIFAR10_CLASSES,
    FASHION_CLASSES,
    DeviceLoader,
    auto_augment,
    channel_stats,
    cifar10,
    data_root,
    fashion_mnist,
    image_folder,
    load_dataset,
    mix_batch,
    random_crop,
    random_flip,
)


@pytest.fixture(scope="module")
def fashion():
    return (
        fashion_mnist()
    )  # smoke mode (conftest.py): the sample that ships with vitlib


def test_the_sample_is_balanced_and_looks_like_the_dataset(fashion):
    assert fashion.train_images.shape == (3000, 1, 28, 28)
    assert fashion.test_images.shape == (1000, 1, 28, 28)
    assert fashion.train_images.dtype == torch.uint8
    assert fashion.train_labels.dtype == torch.int64
    assert fashion.classes == FASHION_CLASSES and fashion.num_classes == 10
    assert torch.bincount(fashion.train_labels).tolist() == [300] * 10
    assert torch.bincount(fashion.test_labels).tolist() == [100] * 10
    # the published constants of the whole training split, to within the sample's noise
    assert fashion.mean[0] == pytest.approx(0.2860, abs=2e-3)
    assert fashion.std[0] == pytest.approx(0.3530, abs=2e-3)
    # in the dataset's own order, not sorted by class: a first slice holds every class
    assert len(fashion.train_labels[:100].unique()) == 10


def _fake_debian(tmp_path, monkeypatch):
    """A folder laid out as Debian's package is (the four .gz files), holding the sample."""
    debian = tmp_path / "debian"
    shutil.copytree(vd.FASHION_SAMPLE, debian)
    monkeypatch.setattr(vd, "DEBIAN_FASHION", debian)
    monkeypatch.setattr(vd._copy_debian_fashion, "__defaults__", (debian,))
    return debian


def test_fashion_mnist_from_debians_copy(tmp_path, monkeypatch, fashion):
    _fake_debian(tmp_path, monkeypatch)
    data = fashion_mnist(tmp_path / "root", download=False, sample=False)
    raw = tmp_path / "root" / "FashionMNIST" / "raw"
    assert (raw / "train-images-idx3-ubyte").is_file()
    assert not list(raw.glob("*.partial"))
    assert torch.equal(data.train_images, fashion.train_images)
    assert torch.equal(data.test_labels, fashion.test_labels)


def test_fashion_mnist_error_names_both_fixes(tmp_path, monkeypatch):
    monkeypatch.setattr(vd, "DEBIAN_FASHION", tmp_path / "nowhere")
    monkeypatch.setattr(
        vd._copy_debian_fashion, "__defaults__", (tmp_path / "nowhere",)
    )
    with pytest.raises(RuntimeError) as error:
        fashion_mnist(tmp_path / "empty", download=False, sample=False)
    text = str(error.value)
    assert "apt-get install dataset-fashion-mnist" in text and "download" in text


def _spoil(raw, name, change):
    path = raw / name
    path.write_bytes(change(path.read_bytes()))
    return name


@pytest.mark.parametrize(
    "name, change, words",
    [
        (
            "train-images-idx3-ubyte",
            lambda b: b[:-100],
            "cut short",
        ),  # a broken download
        ("t10k-labels-idx1-ubyte", lambda b: b[:10], "cut short"),
        (
            "train-images-idx3-ubyte",
            lambda b: b"\x00\x00\x09\x03" + b[4:],
            "not an IDX",
        ),
        ("t10k-images-idx3-ubyte", lambda b: b"", "not an IDX"),
        ("t10k-labels-idx1-ubyte", lambda b: b[:8] + bytes([12]) + b[9:], "10 classes"),
        (  # a valid header that counts 0 images, and nothing after it
            "t10k-images-idx3-ubyte",
            lambda b: b[:4] + (0).to_bytes(4, "big") + b[8:16],
            "holds no items",
        ),
        ("train-labels-idx1-ubyte", lambda b: b[:4] + bytes(4), "holds no items"),
        (  # one label fewer than images, header and length agreeing
            "train-labels-idx1-ubyte",
            lambda b: b[:4] + (2999).to_bytes(4, "big") + b[8:-1],
            "one label per image",
        ),
    ],
)
def test_a_damaged_file_is_named_with_the_fix(
    tmp_path, monkeypatch, name, change, words
):
    _fake_debian(tmp_path, monkeypatch)
    fashion_mnist(tmp_path, download=False, sample=False)  # gunzipped into raw/
    raw = tmp_path / "FashionMNIST" / "raw"
    _spoil(raw, name, change)
    with pytest.raises(ValueError, match=words) as error:
        fashion_mnist(tmp_path, download=False, sample=False)
    assert "make data" in str(error.value)
    assert (name in str(error.value)) or (str(raw) in str(error.value))


def test_a_truncated_gzip_file_is_named_with_the_fix(tmp_path):
    path = tmp_path / "t10k-labels-idx1-ubyte.gz"
    path.write_bytes((vd.FASHION_SAMPLE / path.name).read_bytes()[:-30])
    with pytest.raises(ValueError, match="t10k-labels-idx1-ubyte.gz.*make data"):
        vd.read_idx(path)


def test_channel_stats_by_definition():
    images = torch.randint(0, 256, (7, 3, 4, 5), dtype=torch.uint8)
    mean, std = channel_stats(images)
    x = images.double() / 255
    for c in range(3):
        assert mean[c] == pytest.approx(x[:, c].mean().item())
        assert std[c] == pytest.approx(x[:, c].std().item())


def test_data_root_argument_environment_default(monkeypatch, tmp_path):
    monkeypatch.setenv("VITLIB_DATA", str(tmp_path / "env"))
    assert data_root() == tmp_path / "env"
    assert data_root(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("VITLIB_DATA")
    monkeypatch.chdir(tmp_path)
    assert str(data_root()) == "data"


def test_unknown_dataset_lists_the_valid_ones():
    with pytest.raises(ValueError, match="cifar10.*fashion-mnist"):
        load_dataset("mnist")


def _write_cifar(root, n=6):
    """CIFAR-10's python format: pickled dicts, rows of 3072 bytes (1024 red, green, blue)."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    batches = {}
    for b, name in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
        images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
        images[0, 0], images[0, 1], images[0, 2] = 10 + b, 20, 30  # a known colour
        labels = [(b + i) % 10 for i in range(n)]
        batch = {
            b"batch_label": name.encode(),
            b"labels": labels,
            b"data": images.reshape(n, -1),
        }
        (folder / name).write_bytes(pickle.dumps(batch))
        batches[name] = (images, labels)
    meta = {b"label_names": [c.encode() for c in CIFAR10_CLASSES]}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta))
    return batches


def test_cifar10_reads_the_python_format(tmp_path):
    batches = _write_cifar(tmp_path)
    data = cifar10(tmp_path, download=False)
    assert data.train_images.shape == (30, 3, 32, 32) and data.test_images.shape == (
        6,
        3,
        32,
        32,
    )
    assert data.train_images.dtype == torch.uint8 and data.classes == CIFAR10_CLASSES
    # batches in order, channels first: red, green, blue
    assert data.train_images[6, :, 5, 5].tolist() == [11, 20, 30]
    assert torch.equal(
        data.train_images[:6], torch.from_numpy(batches["data_batch_1"][0])
    )
    assert data.train_labels[6:12].tolist() == batches["data_batch_2"][1]
    assert data.test_labels.tolist() == batches["test_batch"][1]
    expected = channel_stats(data.train_images)
    assert data.mean == pytest.approx(expected[0]) and len(data.std) == 3


def test_cifar10_refuses_pickles_that_are_not_arrays(tmp_path):
    import datetime

    _write_cifar(tmp_path)
    bad = {b"labels": [0], b"data": datetime.date(2020, 1, 1)}
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(pickle.dumps(bad))
    with pytest.raises(pickle.UnpicklingError, match="refusing datetime"):
        cifar10(tmp_path, download=False)


def test_cifar10_missing_says_it_needs_a_network(tmp_path):
    with pytest.raises(RuntimeError, match="needs a network once"):
        cifar10(tmp_path, download=False)


# --- image folders: train/<class>/*, test/<class>/* (Kaggle's CIFAR-10, cifar2png) ---


def _write_folder(root, classes, n=3, shape=(3, 8, 8), suffix="png", test=None):
    """An image folder of random images, n per class and split; `test`: test/'s classes if
    other than train/'s. Returns {(split, class): [images in file order]}."""
    from torchvision.io import write_jpeg, write_png

    g, written = torch.Generator().manual_seed(0), {}
    for split, names in (("train", classes), ("test", test or classes)):
        for name in names:
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(n):
                image = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
                write = write_png if suffix == "png" else write_jpeg
                write(image, str(folder / f"{i:04d}.{suffix}"))
                written.setdefault((split, name), []).append(image)
    return written


def test_an_image_folder_reads_every_image_with_its_class(tmp_path):
    written = _write_folder(tmp_path, ["cat", "dog", "emu"], n=4)
    data = image_folder(tmp_path, "pets")
    assert data.name == "pets" and data.classes == ("cat", "dog", "emu")
    assert data.train_images.shape == (12, 3, 8, 8) and data.test_images.shape[0] == 12
    for split in ("train", "test"):
        images, labels = (
            getattr(data, f"{split}_images"),
            getattr(data, f"{split}_labels"),
        )
        for label, name in enumerate(data.classes):  # PNG is lossless: the same pixels
            ours = sorted(images[labels == label].flatten(1).tolist())
            theirs = sorted(t.flatten().tolist() for t in written[(split, name)])
            assert ours == theirs
    # shuffled once, with a fixed seed: the first images mix the classes, every time
    assert len(set(data.train_labels[:4].tolist())) > 1
    assert torch.equal(image_folder(tmp_path).train_labels, data.train_labels)
    assert data.mean == pytest.approx(channel_stats(data.train_images)[0])


def test_an_image_folder_reads_jpeg_and_grey_images(tmp_path):
    _write_folder(tmp_path / "jpeg", ["a", "b"], suffix="jpg", shape=(3, 16, 16))
    assert image_folder(tmp_path / "jpeg").train_images.shape == (6, 3, 16, 16)
    _write_folder(tmp_path / "grey", ["a", "b"], shape=(1, 8, 8))
    assert image_folder(tmp_path / "grey").image_shape == (1, 8, 8)


def test_an_image_folder_names_what_is_wrong(tmp_path):
    from PIL import Image

    _write_folder(tmp_path / "splits", ["cat", "dog"], test=["cat"])
    with pytest.raises(
        ValueError, match="test needs one folder per class .*missing dog"
    ):
        image_folder(tmp_path / "splits")
    _write_folder(tmp_path / "few", ["cat", "dog"])
    with pytest.raises(
        ValueError, match="train needs one folder per class.*missing emu"
    ):
        image_folder(tmp_path / "few", classes=("cat", "dog", "emu"))
    with pytest.raises(ValueError, match="has no train/ folder"):
        image_folder(tmp_path / "nowhere")
    _write_folder(tmp_path / "size", ["cat"])
    Image.new("RGB", (9, 8)).save(tmp_path / "size" / "test" / "cat" / "9999.png")
    with pytest.raises(ValueError, match=r"9999.png is 8x9 colour \(RGB\), but .*8x8"):
        image_folder(tmp_path / "size")
    _write_folder(tmp_path / "mode", ["cat"])
    Image.new("L", (8, 8)).save(tmp_path / "mode" / "train" / "cat" / "9999.png")
    with pytest.raises(ValueError, match=r"is 8x8 grey \(L\), but .* colour \(RGB\)"):
        image_folder(tmp_path / "mode")
    for split in ("train", "test"):
        folder = tmp_path / "alpha" / split / "cat"
        folder.mkdir(parents=True)
        Image.new("RGBA", (8, 8)).save(folder / "0000.png")
    with pytest.raises(ValueError, match=r"colour with alpha \(RGBA\).*without alpha"):
        image_folder(tmp_path / "alpha")
    (tmp_path / "empty" / "train" / "cat").mkdir(parents=True)
    (tmp_path / "empty" / "test" / "cat").mkdir(parents=True)
    with pytest.raises(ValueError, match="holds no PNG or JPEG image"):
        image_folder(tmp_path / "empty")


def test_cifar10_reads_an_image_folder_when_the_python_files_are_absent(tmp_path):
    _write_folder(tmp_path / "cifar10", list(CIFAR10_CLASSES), n=2, shape=(3, 32, 32))
    data = cifar10(tmp_path, download=False)
    assert data.name == "cifar10" and data.classes == CIFAR10_CLASSES
    assert data.train_images.shape == (20, 3, 32, 32)
    _write_cifar(tmp_path)  # the python version wins where both are there
    assert cifar10(tmp_path, download=False).train_images.shape == (30, 3, 32, 32)


def test_random_crop_is_a_window_of_the_padded_image():
    images = torch.randint(1, 256, (200, 3, 6, 7), dtype=torch.uint8)
    g = torch.Generator().manual_seed(0)
    out = random_crop(images, 2, g)
    assert out.shape == images.shape and out.dtype == torch.uint8
    padded = F.pad(images, (2,) * 4)
    offsets = torch.full((200,), -1)
    for dy in range(5):
        for dx in range(5):
            match = (padded[:, :, dy : dy + 6, dx : dx + 7] == out).flatten(1).all(1)
            offsets[match & (offsets < 0)] = dy * 5 + dx
    assert bool((offsets >= 0).all())
    assert len(offsets.unique()) == 25  # every offset occurs in 200 draws
    assert torch.equal(random_crop(images, 0), images)


def test_random_flip_mirrors_about_half():
    images = torch.randint(0, 256, (2000, 1, 4, 5), dtype=torch.uint8)
    out = random_flip(images, torch.Generator().manual_seed(0))
    same = (out == images).flatten(1).all(1)
    mirrored = (out == images.flip(-1)).flatten(1).all(1)
    assert bool((same | mirrored).all())
    assert abs(mirrored.float().mean().item() - 0.5) < 0.05


@pytest.mark.parametrize("policy", ["trivial", "rand"])
@pytest.mark.parametrize("channels", [1, 3])
def test_auto_augment_keeps_shape_and_dtype(policy, channels):
    torch.manual_seed(0)
    images = torch.randint(0, 256, (64, channels, 28, 28), dtype=torch.uint8)
    out = auto_augment(images, policy, groups=8)
    assert out.shape == images.shape and out.dtype == torch.uint8
    assert not torch.equal(out, images)
    assert torch.equal(auto_augment(images, "none"), images)
    with pytest.raises(ValueError, match="trivial"):
        auto_augment(images, "autoaugment")


def test_mix_batch_gives_soft_labels_that_sum_to_one():
    torch.manual_seed(0)
    images, labels = torch.rand(32, 1, 28, 28), torch.randint(0, 10, (32,))
    mixed, soft = mix_batch(images, labels, 10, mixup=0.8, cutmix=1.0)
    assert mixed.shape == images.shape and soft.shape == (32, 10)
    assert torch.allclose(soft.sum(1), torch.ones(32))
    assert mix_batch(images, labels, 10) == (images, labels)


def _loader(images, labels, **options):
    return DeviceLoader(images, labels, 8, (0.5,), (0.25,), **options)


def test_loader_epochs_are_seeded_permutations():
    images = torch.arange(100, dtype=torch.uint8).view(100, 1, 1, 1)
    labels = torch.arange(100)

    def epoch(loader, e):
        loader.set_epoch(e)
        return torch.cat([y for _, y in loader])

    a, b = _loader(images, labels, train=True), _loader(images, labels, train=True)
    first = epoch(a, 0)
    assert len(a) == 12 and len(first) == 96 and len(first.unique()) == 96  # drop_last
    assert torch.equal(first, epoch(b, 0))  # same seed and epoch: same order
    assert not torch.equal(first, epoch(a, 1))  # another epoch: another order
    # images follow their labels and are normalised with the given mean and std
    x, y = next(iter(a))
    assert torch.allclose(x.flatten(), (y.float() / 255 - 0.5) / 0.25)
    # evaluation: everything, in order, the last batch short
    test = _loader(images, labels)
    assert len(test) == 13 and torch.equal(torch.cat([y for _, y in test]), labels)


def test_loader_shards_do_not_overlap():
    images = torch.zeros(100, 1, 2, 2, dtype=torch.uint8)
    labels = torch.arange(100)
    shards = [
        torch.cat(
            [y for _, y in _loader(images, labels, train=True, rank=r, world_size=2)]
        )
        for r in range(2)
    ]
    assert len(shards[0]) == len(shards[1]) == 48
    assert not set(shards[0].tolist()) & set(shards[1].tolist())
    full = torch.cat([y for _, y in _loader(images, labels, train=True)])
    # the two ranks share out what one process would have seen, batch by batch
    single = _loader(images, labels, train=True)
    order = single._order()
    assert set(shards[0].tolist()) == set(order[:96:2].tolist())
    assert len(full) == 96
    test = [
        torch.cat([y for _, y in _loader(images, labels, rank=r, world_size=2)])
        for r in range(2)
    ]
    assert sorted(torch.cat(test).tolist()) == list(range(100))


def _rows(images: torch.Tensor) -> list:
    """Each image as bytes, sorted: the split's contents whatever their order."""
    return sorted(bytes(image.flatten().tolist()) for image in images)


def test_hold_out_is_a_fixed_stratified_part_of_the_training_split(fashion):
    split = fashion.hold_out(300)
    assert split.val_labels.bincount(minlength=10).tolist() == [30] * 10  # stratified
    assert len(split.train_images) == len(fashion.train_images) - 300
    assert (split.mean, split.std) == (fashion.mean, fashion.std)
    assert torch.equal(
        split.test_images, fashion.test_images
    )  # the test split untouched
    # train and validation are the old training split, each image in exactly one
    both = torch.cat([split.train_images, split.val_images])
    assert _rows(both) == _rows(fashion.train_images)
    again, other = fashion.hold_out(300), fashion.hold_out(300, seed=1)
    assert torch.equal(again.val_images, split.val_images)  # fixed by its seed
    assert not torch.equal(other.val_images, split.val_images)
    assert "val (300, 1, 28, 28)" in repr(split) and "val" not in repr(fashion)
    assert split.subset(10, 5, 7).val_images.shape[0] == 7
    assert len(split.to("cpu").val_labels) == 300


def test_hold_out_shares_an_unbalanced_split_by_class(fashion):
    # classes of 120, 60 and 20 images: 20 held out are 12, 6 and 2
    counts = {0: 120, 1: 60, 2: 20}
    keep = torch.cat(
        [(fashion.train_labels == c).nonzero()[:n, 0] for c, n in counts.items()]
    )
    small = fashion.subset()
    small.train_images, small.train_labels = (
        fashion.train_images[keep],
        fashion.train_labels[keep],
    )
    held = small.hold_out(20).val_labels.bincount(minlength=3).tolist()
    assert held[:3] == [12, 6, 2]
    # 7 of 200: exact shares 4.2, 2.1, 0.7; the largest remainder (class 2) gets the extra
    assert small.hold_out(7).val_labels.bincount(minlength=3).tolist()[:3] == [4, 2, 1]


def test_hold_out_refuses_twice_and_too_many(fashion):
    with pytest.raises(ValueError, match="already"):
        fashion.hold_out(300).hold_out(300)
    with pytest.raises(ValueError, match="1 to 1,500 of 3,000"):
        fashion.hold_out(2000)
    with pytest.raises(ValueError):
        fashion.hold_out(0)


def test_the_cifar10_cpu_recipe_trains_from_an_image_folder(tmp_path):
    # CIFAR-10's classes as folders of 32x32 colour images: the layout of page 7's copy
    from vitlib.data import CIFAR10_CLASSES
    from vitlib.train import main

    _write_folder(tmp_path / "cifar10", list(CIFAR10_CLASSES), n=3, shape=(3, 32, 32))
    args = [
        "--recipe",
        "cifar10-cpu",
        "--data",
        str(tmp_path),
        "--out",
        str(tmp_path / "run"),
    ]
    args += ["--epochs", "1", "--batch-size", "8", "--val-size", "10", "--no-progress"]
    metrics = main(args)
    assert metrics["dataset"] == "cifar10" and metrics["train_size"] == 20
    assert metrics["model_changes"]["patch_size"] == 4
    assert metrics["model_changes"]["in_channels"] == 3
    assert 0.0 <= metrics["final_test_accuracy"] <= 1.0
