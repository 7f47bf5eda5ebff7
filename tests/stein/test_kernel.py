"""Tests for the Langevin kernel Stein discrepancy (tallmcmc.stein.kernel)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tallmcmc.stein.kernel as kernel_module
from tallmcmc.stein.kernel import (
    kernel_stein_discrepancy,
    kernel_stein_discrepancy_squared,
    stein_kernel_matrix,
)


# ---------------------------------------------------------------------------
# an independent reference: base kernel + central finite differences, double loop
# ---------------------------------------------------------------------------
def _base_kernel(x, y, kernel, c, beta, bandwidth):
    squared = float(np.sum((x - y) ** 2))
    if kernel == "imq":
        return (c * c + squared) ** beta
    return np.exp(-squared / (2 * bandwidth**2))


def _stein_kernel_finite_differences(x, y, bx, by, kernel, c, beta, bandwidth, step=1e-4):
    d = x.size
    unit = np.eye(d) * step

    def k(a, b):
        return _base_kernel(a, b, kernel, c, beta, bandwidth)

    gradient_x = np.array([(k(x + e, y) - k(x - e, y)) / (2 * step) for e in unit])
    gradient_y = np.array([(k(x, y + e) - k(x, y - e)) / (2 * step) for e in unit])
    trace = sum((k(x + e, y + e) - k(x + e, y - e) - k(x - e, y + e) + k(x - e, y - e)) / (4 * step**2) for e in unit)
    return bx @ by * k(x, y) + bx @ gradient_y + by @ gradient_x + trace


def _reference_squared(points, scores, weights, kernel, c, beta, bandwidth, statistic):
    n = points.shape[0]
    w = weights / weights.sum()
    total = 0.0
    diagonal = 0.0
    for i in range(n):
        for j in range(n):
            value = _stein_kernel_finite_differences(
                points[i], points[j], scores[i], scores[j], kernel, c, beta, bandwidth
            )
            total += w[i] * w[j] * value
            if i == j:
                diagonal += w[i] * w[j] * value
    if statistic == "v":
        return total
    return (total - diagonal) / (1 - np.sum(w**2))


@pytest.mark.parametrize(
    "kernel,c,beta,bandwidth",
    [
        ("imq", 1.0, -0.5, 1.0),
        ("imq", 1.7, -0.2, 1.0),
        ("imq", 0.6, -0.9, 1.0),
        ("gaussian", 1.0, -0.5, 0.7),
    ],
)
@pytest.mark.parametrize("statistic", ["v", "u"])
@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_matches_finite_difference_double_sum(kernel, c, beta, bandwidth, statistic, backend):
    rng = np.random.default_rng(3)
    points = rng.normal(size=(12, 2)) * 1.5
    scores = rng.normal(size=(12, 2))  # any vector field: the identity is algebraic
    weights = rng.uniform(0.1, 1.0, size=12)
    expected = _reference_squared(points, scores, weights, kernel, c, beta, bandwidth, statistic)
    got = kernel_stein_discrepancy_squared(
        points,
        scores,
        weights,
        kernel=kernel,
        c=c,
        beta=beta,
        bandwidth=bandwidth,
        statistic=statistic,
        block_size=5,
        backend=backend,
    )
    assert got == pytest.approx(expected, rel=1e-6, abs=1e-8)


def test_matrix_matches_finite_differences_in_three_dimensions():
    rng = np.random.default_rng(4)
    points = rng.normal(size=(6, 3))
    scores = rng.normal(size=(6, 3))
    matrix = stein_kernel_matrix(points, scores, c=1.3, beta=-0.3)
    for i in range(6):
        for j in range(6):
            expected = _stein_kernel_finite_differences(
                points[i], points[j], scores[i], scores[j], "imq", 1.3, -0.3, 1.0
            )
            assert matrix[i, j] == pytest.approx(expected, rel=1e-6, abs=1e-8)
    assert np.allclose(matrix, matrix.T)
    # positive semi-definite (up to rounding)
    assert np.linalg.eigvalsh(matrix).min() > -1e-10


def test_block_size_does_not_change_the_value():
    rng = np.random.default_rng(5)
    points = rng.normal(size=(203, 2))
    values = [kernel_stein_discrepancy(points, -points, block_size=b).value for b in (1, 17, 64, None, 500)]
    assert np.allclose(values, values[0], rtol=1e-12)
    dense = np.sqrt(stein_kernel_matrix(points, -points).mean())
    assert values[0] == pytest.approx(dense, rel=1e-10)


def test_u_statistic_is_near_zero_for_exact_samples_and_positive_when_shifted():
    rng = np.random.default_rng(6)
    n = 2000
    points = rng.standard_normal((n, 2))
    u_value = kernel_stein_discrepancy_squared(points, -points, statistic="u")
    # Under P the U-statistic is degenerate: n U -> sum_j lambda_j (Z_j^2 - 1),
    # whose standard deviation is sqrt(2 E[k0(X, Y)^2]).
    matrix = stein_kernel_matrix(points, -points)
    off_diagonal = matrix[~np.eye(n, dtype=bool)]
    standard_error = np.sqrt(2 * np.mean(off_diagonal**2)) / n
    assert abs(u_value) < 5 * standard_error

    shifted = points + np.array([0.5, 0.0])
    shifted_value = kernel_stein_discrepancy_squared(shifted, -shifted, statistic="u")
    assert shifted_value > 20 * standard_error
    assert kernel_stein_discrepancy(shifted, -shifted).value > 3 * kernel_stein_discrepancy(points, -points).value


def test_discrepancy_falls_with_n_for_iid_samples():
    rng = np.random.default_rng(7)
    points = rng.standard_normal((4000, 2))
    values = [kernel_stein_discrepancy(points[:n], -points[:n]).value for n in (100, 1000, 4000)]
    assert values[0] > values[1] > values[2]
    assert values[2] < 0.5 * values[0]


def test_student_t_sample_stays_away_from_zero():
    rng = np.random.default_rng(8)
    sample = rng.standard_t(3, size=(3000, 1)) * 2.0
    gaussian = rng.standard_normal((3000, 1))
    assert kernel_stein_discrepancy(sample, -sample).value > 3 * kernel_stein_discrepancy(gaussian, -gaussian).value


def test_weights_equal_duplicates():
    rng = np.random.default_rng(9)
    points = rng.normal(size=(30, 2))
    counts = rng.integers(1, 4, size=30)
    repeated = np.repeat(points, counts, axis=0)
    weighted = kernel_stein_discrepancy(points, -points, weights=counts).value
    duplicated = kernel_stein_discrepancy(repeated, -repeated).value
    assert weighted == pytest.approx(duplicated, rel=1e-12)
    # weights are normalised
    assert kernel_stein_discrepancy(points, -points, weights=3.0 * counts).value == pytest.approx(weighted)


def test_callable_scores_and_one_dimensional_points():
    rng = np.random.default_rng(10)
    points = rng.normal(size=50)
    by_array = kernel_stein_discrepancy(points, -points).value
    by_batch = kernel_stein_discrepancy(points, lambda x: -x).value
    by_point = kernel_stein_discrepancy(points[:, None], lambda x: -np.atleast_1d(x)).value
    assert by_array == pytest.approx(by_batch) == pytest.approx(by_point)


def test_gaussian_kernel_warns_in_three_or_more_dimensions():
    rng = np.random.default_rng(11)
    points = rng.normal(size=(20, 3))
    with pytest.warns(UserWarning, match="d >= 3"):
        kernel_stein_discrepancy(points, -points, kernel="gaussian", bandwidth=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel_stein_discrepancy(points[:, :2], -points[:, :2], kernel="gaussian")
        kernel_stein_discrepancy(points, -points, kernel="imq")


# ---------------------------------------------------------------------------
# the fast exact paths against a dense float64 reference
# ---------------------------------------------------------------------------
def _dense_reference(points, scores, weights, kernel, c, beta, bandwidth):
    """w^T K0 w with K0 from the closed form evaluated pair by pair in NumPy float64."""
    w = weights / weights.sum()
    n, d = points.shape
    difference = points[:, None, :] - points[None, :, :]
    squared = np.sum(difference**2, axis=-1)
    score_dot = scores @ scores.T
    score_difference_dot_r = np.sum((scores[:, None, :] - scores[None, :, :]) * difference, axis=-1)
    if kernel == "imq":
        u = c * c + squared
        matrix = u ** (beta - 1.0) * (
            score_dot * u - 2.0 * beta * (score_difference_dot_r + d) - 4.0 * beta * (beta - 1.0) * squared / u
        )
    else:
        h2 = bandwidth**2
        matrix = np.exp(-0.5 * squared / h2) * (score_dot + (score_difference_dot_r + d) / h2 - squared / h2**2)
    return w @ matrix @ w, np.sum(w**2 * np.diag(matrix)), np.sum(w**2)


@pytest.mark.parametrize("d", [1, 2, 5])
@pytest.mark.parametrize(
    "kernel,c,beta,bandwidth",
    [
        ("imq", 1.0, -0.5, 1.0),
        ("imq", 0.8, -0.5, 1.0),
        ("imq", 1.7, -0.3, 1.0),
        ("gaussian", 1.0, -0.5, 1.3),
    ],
)
def test_parallel_numba_and_jax_paths_match_a_dense_float64_reference(d, kernel, c, beta, bandwidth, monkeypatch):
    # the threaded loop runs (serial threshold lowered); n is not a multiple of the row block
    monkeypatch.setattr(kernel_module, "_NUMBA_SERIAL_BELOW", 0)
    rng = np.random.default_rng(20 + d)
    n = 701
    points = rng.normal(size=(n, d)) + 0.3
    scores = -points + 0.1 * rng.normal(size=(n, d))  # near a N(0, I) score: a small KSD (cancellation)
    weights = rng.uniform(0.2, 1.0, size=n)
    total, diagonal, sum_w2 = _dense_reference(points, scores, weights, kernel, c, beta, bandwidth)
    u_expected = (total - diagonal) / (1 - sum_w2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Gaussian kernel, d = 5
        for backend in ("numba", "jax"):
            for statistic, expected in (("v", total), ("u", u_expected)):
                got = kernel_stein_discrepancy_squared(
                    points,
                    scores,
                    weights,
                    kernel=kernel,
                    c=c,
                    beta=beta,
                    bandwidth=bandwidth,
                    statistic=statistic,
                    backend=backend,
                )
                # the bar is 1e-6 relative; float64 gives ~1e-13 even with the cancellation here
                assert got == pytest.approx(expected, rel=1e-10), (backend, statistic)


def test_parallel_block_sizes_agree_with_the_serial_loop(monkeypatch):
    rng = np.random.default_rng(12)
    points = rng.normal(size=(1333, 2))
    serial = kernel_stein_discrepancy_squared(points, -points, backend="numba")
    monkeypatch.setattr(kernel_module, "_NUMBA_SERIAL_BELOW", 0)
    values = [
        kernel_stein_discrepancy_squared(points, -points, block_size=b, backend="numba") for b in (1, 7, 64, 1000, 5000)
    ]
    assert np.allclose(values, serial, rtol=1e-12, atol=0)
    assert kernel_stein_discrepancy_squared(points, -points) == values[2]  # auto -> numba on a CPU


def test_float64_far_from_the_origin():
    # direct differences: no |x|^2 + |y|^2 - 2 x.y cancellation in the numba path
    rng = np.random.default_rng(13)
    points = rng.normal(size=(500, 2))
    near = kernel_stein_discrepancy_squared(points, -points, backend="numba")
    shifted = points + 1e4
    far = kernel_stein_discrepancy_squared(shifted, -(shifted - 1e4), backend="numba")
    assert far == pytest.approx(near, rel=1e-9)


# ---------------------------------------------------------------------------
# Nystroem approximation
# ---------------------------------------------------------------------------
def test_nystroem_with_every_point_a_landmark_is_exact():
    rng = np.random.default_rng(14)
    points = rng.normal(size=(150, 2))
    weights = rng.uniform(0.5, 1.0, size=150)
    for statistic in ("v", "u"):
        exact = kernel_stein_discrepancy_squared(points, -points, weights, statistic=statistic)
        approximate = kernel_stein_discrepancy_squared(
            points, -points, weights, statistic=statistic, method="nystroem", landmarks=150
        )
        assert approximate == pytest.approx(exact, rel=1e-6)


@pytest.mark.parametrize("name", ["iid", "shifted", "scaled"])
def test_nystroem_error_is_within_its_stated_tolerance(name):
    # docs/stein.md states: default 400 landmarks, relative error of the V-statistic
    # below 1e-2 on these samples (measured <= 6e-3 at n = 10^4 and 10^5).
    rng = np.random.default_rng(15)
    points = rng.standard_normal((4000, 2))
    points = {"iid": points, "shifted": points + [0.5, 0.0], "scaled": 1.3 * points}[name]
    exact = kernel_stein_discrepancy_squared(points, -points)
    approximate = kernel_stein_discrepancy_squared(points, -points, method="nystroem")
    assert abs(approximate - exact) < 1e-2 * exact
    # the same check fails for a deliberately poor approximation (5 landmarks)
    poor = kernel_stein_discrepancy_squared(points, -points, method="nystroem", landmarks=5)
    assert abs(poor - exact) > 1e-2 * exact


def test_nystroem_is_reproducible_and_depends_on_the_seed():
    rng = np.random.default_rng(16)
    points = rng.standard_normal((1000, 2))
    first = kernel_stein_discrepancy(points, -points, method="nystroem", landmarks=50, seed=1).value
    again = kernel_stein_discrepancy(points, -points, method="nystroem", landmarks=50, seed=1).value
    other = kernel_stein_discrepancy(points, -points, method="nystroem", landmarks=50, seed=2).value
    assert first == again
    assert first != other
    # landmarks beyond n are clipped to n
    small = points[:30]
    assert kernel_stein_discrepancy(small, -small, method="nystroem", landmarks=1000).value == pytest.approx(
        kernel_stein_discrepancy(small, -small).value, rel=1e-6
    )


@pytest.mark.parametrize(
    "arguments,message",
    [
        (dict(scores=np.zeros((5, 3))), "shape"),
        (dict(weights=np.ones(4)), "shape"),
        (dict(weights=np.array([1, 1, -1, 1, 1.0])), "non-negative"),
        (dict(weights=np.array([1, 1, np.nan, 1, 1.0])), "non-finite"),
        (dict(weights=np.zeros(5)), "positive sum"),
        (dict(beta=-1.0), "beta"),
        (dict(beta=0.0), "beta"),
        (dict(beta=0.3), "beta"),
        (dict(c=0.0), "c must"),
        (dict(kernel="laplace"), "kernel"),
        (dict(kernel="gaussian", bandwidth=-1.0), "bandwidth"),
        (dict(statistic="w"), "statistic"),
        (dict(block_size=0), "block_size"),
        (dict(block_size=0, backend="jax"), "block_size"),
        (dict(method="random"), "method"),
        (dict(backend="cuda"), "backend"),
        (dict(landmarks=3), "landmarks applies only"),
        (dict(method="nystroem", landmarks=0), "landmarks must"),
        (dict(method="nystroem", landmarks=2.5), "landmarks must"),
    ],
)
def test_bad_arguments_raise(arguments, message):
    points = np.arange(10.0).reshape(5, 2)
    call = dict(points=points, scores=-points)
    call.update(arguments)
    with pytest.raises(ValueError, match=message):
        kernel_stein_discrepancy(**call)


def test_non_finite_points_or_scores_raise():
    points = np.ones((4, 2))
    bad = points.copy()
    bad[1, 1] = np.inf
    with pytest.raises(ValueError, match="points"):
        kernel_stein_discrepancy(bad, points)
    with pytest.raises(ValueError, match="scores"):
        kernel_stein_discrepancy(points, bad)
    with pytest.raises(ValueError, match="two points"):
        kernel_stein_discrepancy(points[:1], points[:1], statistic="u")
