"""Write the small Fashion-MNIST sample that ships with vitlib (vitlib/fashion_sample/).

    python scripts/fashion_sample.py [--source /usr/share/datasets/fashion-mnist]

The tests and smoke mode read this sample, so `make test` needs no download, no Debian package
and no network. It is the first 300 training and the first 100 test images of each class, in
the dataset's own order, written in the dataset's own format (gzipped IDX files, the same four
names). The source is Debian's copy of the full dataset (apt-get install dataset-fashion-mnist)
or any folder holding the four files, gzipped or not. The output is the same bytes every time
(gzip without a time stamp), and the README beside the files records the source files' SHA-256.
"""

import argparse
import gzip
import hashlib
import struct
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "vitlib" / "fashion_sample"
FILES = {  # split: (images file, labels file, images per class)
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", 300),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 100),
}

LICENSE = """\
The MIT License (MIT)

Copyright (c) 2017 Zalando SE, https://tech.zalando.com

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""


def source_file(folder: Path, name: str) -> Path:
    for path in (folder / f"{name}.gz", folder / name):
        if path.is_file():
            return path
    raise SystemExit(
        f"{name} is not in {folder}: apt-get install dataset-fashion-mnist"
    )


def idx_bytes(tensor: torch.Tensor) -> bytes:
    """uint8 labels (n,) or images (n, rows, cols) in the IDX format of MNIST's files."""
    header = struct.pack(">BBBB", 0, 0, 8, tensor.ndim)
    header += struct.pack(f">{tensor.ndim}I", *tensor.shape)
    return header + tensor.contiguous().numpy().tobytes()


def first_per_class(labels: torch.Tensor, per_class: int) -> torch.Tensor:
    """Indices of the first `per_class` examples of each class, in the dataset's order."""
    keep = torch.zeros(len(labels), dtype=torch.bool)
    for c in labels.unique():
        keep[(labels == c).nonzero().flatten()[:per_class]] = True
    return keep.nonzero().flatten()


def main():
    from vitlib.data import DEBIAN_FASHION, read_idx

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEBIAN_FASHION)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sums = []
    for images_name, labels_name, per_class in FILES.values():
        images_path = source_file(args.source, images_name)
        labels_path = source_file(args.source, labels_name)
        images, labels = read_idx(images_path), read_idx(labels_path)
        keep = first_per_class(labels, per_class)
        for name, tensor in ((images_name, images[keep]), (labels_name, labels[keep])):
            data = gzip.compress(idx_bytes(tensor), compresslevel=9, mtime=0)
            (args.out / f"{name}.gz").write_bytes(data)
            print(f"{name}.gz: {tuple(tensor.shape)}, {len(data):,} bytes")
        for path in (images_path, labels_path):
            sums.append(
                f"    {hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}"
            )
    (args.out / "LICENSE").write_text(LICENSE)
    (args.out / "README.md").write_text(README.format(sums="\n".join(sums)))


README = """\
# A sample of Fashion-MNIST

Fashion-MNIST (Xiao, Rasul and Vollgraf, 2017, https://github.com/zalandoresearch/fashion-mnist)
is © Zalando SE and released under the MIT License: see LICENSE beside this file.

This folder holds 3,000 of its 60,000 training images and 1,000 of its 10,000 test images: the
first 300 training and the first 100 test images of each class, in the dataset's own order and
its own format (gzipped IDX files with the original names). vitlib's tests and smoke mode read
it (`vitlib.data.fashion_mnist(sample=True)`, the default when VITLIB_SMOKE=1), so the tests
need no download. The book's real runs use the whole dataset.

Written by `python scripts/fashion_sample.py` from the files with these SHA-256 sums:

{sums}
"""


if __name__ == "__main__":
    main()
