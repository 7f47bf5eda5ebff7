"""Shipped data sets: MNIST 1s and 7s (counts, shapes, range, labels), their deformations, the cache."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from tallmcmc import datasets, deformations
from tallmcmc.datasets import (
    MNIST_PAPER_TRAIN_COUNT,
    load_mnist_100k,
    load_mnist_ones_sevens,
    load_nodal,
    plot_deformation_grid,
)
from tallmcmc.deformations import DeformationParams, deform_images, deformed_by_index, generate_deformations


def test_load_nodal_unchanged():
    covariates, response = load_nodal()
    assert covariates.shape == (53, 6) and response.shape == (53,)


# --------------------------------------------------------------------------- MNIST loader


@pytest.mark.parametrize(
    ("split", "ones", "sevens"),
    [("train", 6742, 6265), ("test", 1135, 1028)],
)
def test_mnist_counts_shapes_range_labels(split, ones, sevens):
    x, y = load_mnist_ones_sevens(split)
    n = ones + sevens
    assert x.shape == (n, 784) and y.shape == (n,)
    assert x.dtype == np.float32 and y.dtype == np.float32
    assert x.min() == 0.0 and x.max() == 1.0
    # pixels are bytes / 255 exactly
    np.testing.assert_array_equal(np.round(x * 255) / np.float32(255), x)
    assert set(np.unique(y).tolist()) == {0.0, 1.0}
    assert int((y == 0).sum()) == ones and int((y == 1).sum()) == sevens  # 1.0 means the digit 7


def test_mnist_is_mnist():
    """Published facts about the original files: order, positions and pixel statistics."""
    arrays = datasets._mnist_arrays()
    # the first training images are 5 0 4 1 9 2 1 3 1 4: the 1s are at 3, 6, 8; the first 7 is at 15
    assert arrays["train_index"][:4].tolist() == [3, 6, 8, 14]
    assert arrays["train_digits"][:4].tolist() == [1, 1, 1, 1]
    assert int(arrays["train_index"][np.argmax(arrays["train_digits"] == 7)]) == 15
    # the first test images are 7 2 1 0 4 1 ...
    assert arrays["test_index"][:3].tolist() == [0, 2, 5]
    assert arrays["test_digits"][:3].tolist() == [7, 1, 1]
    assert arrays["train_index"].max() < 60000 and arrays["test_index"].max() < 10000
    assert np.all(np.diff(arrays["train_index"].astype(int)) > 0)
    # 1s have fewer ink pixels than 7s
    x, y = load_mnist_ones_sevens()
    assert x[y == 0].mean() < x[y == 1].mean()


def test_mnist_paper_count_and_validation():
    x, y = load_mnist_ones_sevens(num_examples=MNIST_PAPER_TRAIN_COUNT)
    full_x, full_y = load_mnist_ones_sevens()
    assert x.shape == (13_000, 784)
    np.testing.assert_array_equal(x, full_x[:13_000])
    np.testing.assert_array_equal(y, full_y[:13_000])
    with pytest.raises(ValueError):
        load_mnist_ones_sevens("validation")
    with pytest.raises(ValueError):
        load_mnist_ones_sevens("test", num_examples=3000)


def test_mnist_arrays_are_read_only():
    arrays = datasets._mnist_arrays()
    with pytest.raises(ValueError):
        arrays["train_images"][0, 0, 0] = 1
    x, _ = load_mnist_ones_sevens("test")
    x[0, 0] = 0.5  # the returned features are the caller's own copy
    assert load_mnist_ones_sevens("test")[0][0, 0] == 0.0


# --------------------------------------------------------------------------- deformations


@pytest.fixture(scope="module")
def originals():
    arrays = datasets._mnist_arrays()
    return arrays["train_images"], arrays["train_digits"]


def test_deformation_is_deterministic_and_prefix_stable(originals):
    images, _ = originals
    a, src_a = generate_deformations(images, 1200, seed=3)
    b, src_b = generate_deformations(images, 1200, seed=3)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(src_a, src_b)
    assert a.dtype == np.uint8 and a.shape == (1200, 28, 28)
    short, _ = generate_deformations(images, 700, seed=3)
    np.testing.assert_array_equal(short, a[:700])
    other, _ = generate_deformations(images, 700, seed=4)
    assert not np.array_equal(other, short)
    picked = np.array([5, 999, 1000, 1199, 3])
    np.testing.assert_array_equal(deformed_by_index(images, picked, seed=3), a[picked])
    np.testing.assert_array_equal(src_a, np.arange(1200) % images.shape[0])


def test_deformation_changes_pixels(originals):
    images, _ = originals
    deformed, sources = generate_deformations(images, 300, seed=0)
    source = images[sources].astype(int)
    changed = (deformed.astype(int) != source).reshape(300, -1)
    assert changed.any(axis=1).all()  # every image is changed
    assert changed.mean() > 0.05  # ink covers about 12% of a 1 or 7
    # ink is roughly kept (scales 0.9-1.1 alone change the area by -19% to +21%):
    # total intensity within 40% of the source's for 95% of images (measured 99% within 34%)
    ratio = deformed.reshape(300, -1).sum(1) / source.reshape(300, -1).sum(1)
    assert np.mean(np.abs(ratio - 1) < 0.4) >= 0.95
    assert abs(np.median(ratio) - 1) < 0.05


def test_identity_parameters_give_the_originals(originals):
    images, _ = originals
    identity = DeformationParams(alpha=0, max_rotation=0, min_scale=1, max_scale=1, max_shear=0, max_translation=0)
    out, sources = generate_deformations(images, 50, seed=1, params=identity)
    np.testing.assert_array_equal(out, images[sources])
    with pytest.raises(ValueError):
        DeformationParams(min_scale=1.2, max_scale=1.1)
    rng_out = deform_images(images[:4], np.random.default_rng(0), identity)
    np.testing.assert_array_equal(rng_out, images[:4])


def test_deformation_keeps_the_label_look(originals):
    """Image distance: Euclidean distance after a Gaussian blur of 1 pixel (pixels in [0, 1]).

    The nearest of the 2,163 MNIST test 1s and 7s to a deformed image has the
    digit of its source for at least 93% of 500 deformed images (measured 96%
    with the default parameters; 99% for undeformed training images).
    """
    images, digits = originals
    test = datasets._mnist_arrays()
    deformed, sources = generate_deformations(images, 500, seed=11)

    def features(a):
        return ndimage.gaussian_filter(a.astype(np.float64) / 255.0, (0, 1.0, 1.0)).reshape(len(a), -1)

    reference, query = features(test["test_images"]), features(deformed)
    squared = (query**2).sum(1)[:, None] - 2 * query @ reference.T + (reference**2).sum(1)[None, :]
    nearest = test["test_digits"][squared.argmin(1)]
    agreement = np.mean(nearest == digits[sources])
    assert agreement >= 0.93, agreement


# --------------------------------------------------------------------------- MNIST-100k and its cache


def test_mnist_100k_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("TALLMCMC_CACHE", str(tmp_path / "cache"))
    assert datasets.cache_dir() == tmp_path / "cache"
    x, y, sources = load_mnist_100k(num_deformed=60, seed=2, progress=False, return_sources=True)
    n = 13_007
    assert x.shape == (n + 60, 784) and y.shape == (n + 60,) and x.dtype == np.float32
    assert 0.0 <= x.min() and x.max() <= 1.0
    originals_x, originals_y = load_mnist_ones_sevens()
    np.testing.assert_array_equal(x[:n], originals_x)
    np.testing.assert_array_equal(y[n:], originals_y[sources[n:]])
    np.testing.assert_array_equal(sources[n:], np.arange(60))
    files = list((tmp_path / "cache").iterdir())
    assert len(files) == 1 and files[0].suffix == ".npz"  # no temporary file left behind

    def refuse(*args, **kwargs):
        raise AssertionError("regenerated although cached")

    monkeypatch.setattr(datasets, "generate_deformations", refuse)
    x2, y2 = load_mnist_100k(num_deformed=60, seed=2, progress=False)
    np.testing.assert_array_equal(x2, x)
    np.testing.assert_array_equal(y2, y)
    with pytest.raises(AssertionError):  # another seed is another cache entry
        load_mnist_100k(num_deformed=60, seed=5, progress=False)
    monkeypatch.undo()

    # a damaged cache file is regenerated, and the result is the same
    monkeypatch.setenv("TALLMCMC_CACHE", str(tmp_path / "cache"))
    good = files[0].read_bytes()
    for damaged in (b"not an npz", good[: len(good) // 2]):
        files[0].write_bytes(damaged)
        x3, _ = load_mnist_100k(num_deformed=60, seed=2, progress=False)
        np.testing.assert_array_equal(x3, x)
        assert files[0].read_bytes() == good


def test_mnist_100k_paper_count_without_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TALLMCMC_CACHE", str(tmp_path / "cache"))
    x, y = load_mnist_100k(num_deformed=20, num_originals=MNIST_PAPER_TRAIN_COUNT, cache=False, progress=False)
    assert x.shape == (13_020, 784) and y.shape == (13_020,)
    assert not (tmp_path / "cache").exists()


def test_default_cache_dir_is_a_user_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("TALLMCMC_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = datasets.cache_dir()
    assert path.name == "tallmcmc"


def test_plot_deformation_grid(tmp_path):
    out = plot_deformation_grid(tmp_path / "grid.png", num_originals=2, num_deformations=2)
    assert out.exists() and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_deformation_module_constants():
    assert deformations.BLOCK_SIZE == 1000
    assert datasets.MNIST_100K_NUM_DEFORMED == 87_000
