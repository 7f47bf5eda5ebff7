"""Tests for tallmcmc.stein.univariate, the nodal data and the univariate Stein reproductions."""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import pytest
from scipy import special, stats

from tallmcmc.datasets import NODAL_COLUMNS, load_nodal
from tallmcmc.stein import univariate
from tallmcmc.stein.univariate import (
    CLASSICAL_STEIN_FACTORS,
    GAUSSIAN_STEIN_FACTORS,
    UNIFORM_STEIN_FACTORS,
    standard_normal_cdf,
    standard_normal_cdf_integral,
    stein_factors,
    uniform_cdf,
    uniform_cdf_integral,
    univariate_graph_stein_discrepancy,
    wasserstein_1d,
)

REFERENCE_SIZE = 2_000_000


@pytest.fixture(scope="module")
def normal_reference():
    # a huge "sample" from N(0, 1): its quantiles at the midpoints (i - 1/2) / M
    return special.ndtri((np.arange(REFERENCE_SIZE) + 0.5) / REFERENCE_SIZE)


@pytest.fixture(scope="module")
def uniform_reference():
    return (np.arange(REFERENCE_SIZE) + 0.5) / REFERENCE_SIZE


# ---------------------------------------------------------------------------
# Wasserstein distance
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 7, 300, 5000])
def test_wasserstein_matches_scipy_against_huge_normal_reference(n, normal_reference):
    rng = np.random.default_rng(n)
    sample = rng.standard_normal(n) * 1.3 + 0.2
    weights = rng.uniform(0.2, 1.0, size=n)
    expected = stats.wasserstein_distance(sample, normal_reference, u_weights=weights)
    for kwargs in ({}, {"target_quantile": special.ndtri}, {"target_cdf_integral": standard_normal_cdf_integral}):
        got = wasserstein_1d(sample, standard_normal_cdf, weights, **kwargs)
        # the reference sample's own W1 error is O(log(M) / M)
        assert got == pytest.approx(expected, abs=2e-5)


@pytest.mark.parametrize("n", [1, 10, 1000])
def test_wasserstein_matches_scipy_for_uniform_target_with_points_outside(n, uniform_reference):
    rng = np.random.default_rng(100 + n)
    sample = rng.uniform(-0.2, 1.3, size=n)
    expected = stats.wasserstein_distance(sample, uniform_reference)
    by_quadrature = wasserstein_1d(sample, uniform_cdf, breakpoints=(0.0, 1.0))
    exact = wasserstein_1d(sample, uniform_cdf, target_cdf_integral=uniform_cdf_integral)
    assert by_quadrature == pytest.approx(exact, abs=1e-9)
    assert exact == pytest.approx(expected, abs=2e-6)


def test_wasserstein_closed_form_single_point():
    for a in (0.0, 0.25, 0.5, 0.9):
        assert wasserstein_1d([a], uniform_cdf) == pytest.approx(a**2 / 2 + (1 - a) ** 2 / 2, abs=1e-9)
    # one point at 0 against N(0, 1): E|Z| = sqrt(2 / pi)
    assert wasserstein_1d([0.0], standard_normal_cdf) == pytest.approx(np.sqrt(2 / np.pi), abs=1e-9)


def test_wasserstein_weights_equal_duplicates_and_falls_with_n():
    rng = np.random.default_rng(1)
    points = rng.standard_normal(40)
    counts = rng.integers(1, 5, size=40)
    weighted = wasserstein_1d(points, standard_normal_cdf, counts)
    repeated = wasserstein_1d(np.repeat(points, counts), standard_normal_cdf)
    assert weighted == pytest.approx(repeated, rel=1e-12)
    sample = rng.standard_normal(20000)
    assert wasserstein_1d(sample, standard_normal_cdf) < 0.3 * wasserstein_1d(sample[:200], standard_normal_cdf)


def test_wasserstein_bad_input():
    with pytest.raises(ValueError, match="shape"):
        wasserstein_1d(np.ones((3, 2)), uniform_cdf)
    with pytest.raises(ValueError, match="non-finite"):
        wasserstein_1d([0.1, np.nan], uniform_cdf)
    with pytest.raises(ValueError, match="non-negative"):
        wasserstein_1d([0.1, 0.2], uniform_cdf, weights=[1.0, -1.0])
    with pytest.raises(ValueError, match="weights"):
        wasserstein_1d([0.1, 0.2], uniform_cdf, weights=[1.0])


def test_cdf_antiderivatives():
    x = np.linspace(-4, 4, 9)
    step = 1e-5
    numeric = (standard_normal_cdf_integral(x + step) - standard_normal_cdf_integral(x - step)) / (2 * step)
    assert np.allclose(numeric, standard_normal_cdf(x), atol=1e-8)
    assert standard_normal_cdf_integral(-40.0) == pytest.approx(0.0, abs=1e-300)
    assert uniform_cdf_integral(0.5) == pytest.approx(0.125)
    assert uniform_cdf_integral(2.0) == pytest.approx(1.5)


# ---------------------------------------------------------------------------
# Stein factors
# ---------------------------------------------------------------------------
def test_stein_factor_constants():
    assert GAUSSIAN_STEIN_FACTORS == (1.0, 4.0, 2.0)
    assert UNIFORM_STEIN_FACTORS == (0.5, 0.5, 1.0)
    assert CLASSICAL_STEIN_FACTORS == (1.0, 1.0, 1.0)
    assert stein_factors("Gaussian") == stein_factors("normal") == GAUSSIAN_STEIN_FACTORS
    assert stein_factors("uniform") == UNIFORM_STEIN_FACTORS
    with pytest.raises(ValueError, match="unknown target"):
        stein_factors("cauchy")


# ---------------------------------------------------------------------------
# univariate graph Stein discrepancy: banded IPM and Clarabel against HiGHS
# ---------------------------------------------------------------------------
SETTINGS = [  # (Stein factors, lower, upper, sampler)
    ((1.0, 1.0, 1.0), None, None, "t3"),
    ((1.0, 4.0, 2.0), None, None, "normal"),
    ((0.5, 0.5, 1.0), 0.0, 1.0, "uniform"),
    ((1.0, 1.0, 1.0), -0.3, None, "uniform"),
    ((2.0, 0.5, 3.0), None, 1.2, "uniform"),
]


def _random_problem(seed, setting):
    rng = np.random.default_rng(seed)
    factors, lower, upper, sampler = setting
    n = int(rng.integers(2, 300))
    if sampler == "t3":
        x = rng.standard_t(3, size=n)
    elif sampler == "normal":
        x = 1.3 * rng.standard_normal(n) + 0.2
    else:
        x = rng.uniform(0.0 if lower is None else lower, 1.0 if upper is None else upper, size=n)
        x[: n // 10] = np.round(x[: n // 10], 1)  # duplicates, and points on the ends
    scores = rng.normal(size=n) * 2 if sampler == "uniform" else -x
    weights = rng.uniform(0.0, 1.0, size=n) * (rng.uniform(size=n) > 0.05)
    weights[0] = 1.0
    return x, scores, weights, dict(lower=lower, upper=upper, stein_factors=factors)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_univariate_solvers_match_highs_on_random_inputs(seed, setting):
    x, scores, weights, options = _random_problem(100 * seed + SETTINGS.index(setting), setting)
    reference = univariate_graph_stein_discrepancy(x, scores, weights, solver="highs", **options)
    for solver in ("ipm", "clarabel"):
        result = univariate_graph_stein_discrepancy(x, scores, weights, solver=solver, **options)
        assert result.value == pytest.approx(reference.value, rel=1e-6), solver
        np.testing.assert_array_equal(result.points[:, 0], np.sort(reference.points[:, 0]))
    # a deliberately wrong program (every Stein factor 0.1 % too large: the value is 0.1 % too
    # large, since the feasible set scales with the factors) fails the same tolerance
    wrong = univariate_graph_stein_discrepancy(
        x, scores, weights, **{**options, "stein_factors": tuple(1.001 * f for f in options["stein_factors"])}
    )
    assert wrong.value != pytest.approx(reference.value, rel=1e-6)


def test_fast_univariate_matches_highs_at_moderate_n():
    x = np.random.default_rng(5).standard_normal(2000)
    reference = univariate_graph_stein_discrepancy(x, -x, solver="highs")
    result = univariate_graph_stein_discrepancy(x, -x)
    assert result.value == pytest.approx(reference.value, rel=1e-6)


def test_fast_univariate_test_function_is_feasible_and_attains_the_value():
    rng = np.random.default_rng(3)
    x = rng.standard_t(4, size=400)
    c1, c2, c3 = 1.0, 4.0, 2.0
    result = univariate_graph_stein_discrepancy(x, -x, stein_factors=(c1, c2, c3))
    points, g, dg = result.points[:, 0], result.function_values[:, 0], result.gradients[:, 0, 0]
    assert np.all(np.diff(points) > 0)
    # the objective recomputed from the optimal g: sum_i q_i (T g)(x_i)
    assert np.sum(result.weights * (g * -points + dg)) == pytest.approx(result.value, rel=1e-9)
    # the original path program's constraints (docs/stein.md) hold up to the solver tolerance
    slack = 1e-7
    gap = np.diff(points)
    assert np.all(np.abs(g) <= c1 + slack) and np.all(np.abs(dg) <= c2 + slack)
    assert np.all(np.abs(np.diff(g)) <= c2 * gap + slack)
    assert np.all(np.abs(np.diff(dg)) <= c3 * gap + slack)
    for gradient in (dg[:-1], dg[1:]):
        assert np.all(np.abs(np.diff(g) - gradient * gap) <= 0.5 * c3 * gap**2 + slack)


def test_fast_univariate_merges_duplicates_and_accepts_callable_scores():
    rng = np.random.default_rng(4)
    points = rng.standard_normal(60)
    counts = rng.integers(1, 4, size=60)
    weighted = univariate_graph_stein_discrepancy(points, -points, counts)
    repeated = univariate_graph_stein_discrepancy(np.repeat(points, counts), lambda y: -y)
    assert weighted.value == pytest.approx(repeated.value, rel=1e-9)
    single = univariate_graph_stein_discrepancy([0.5], [2.0])  # no edges: c1 |b| + c2
    assert single.value == pytest.approx(3.0)


@pytest.mark.parametrize("ends", [(-np.inf, np.inf), (-4.0, np.inf), (-4.0, 4.0)])
def test_band_template_holds_the_augmented_system(ends):
    # the compiled IPM works on [[0, A^T], [A, 0]] stored as a band in point order: its band
    # mat-vec must reproduce A^T y and A z from the sparse matrix
    rng = np.random.default_rng(11)
    x = np.sort(rng.uniform(-3.0, 3.0, size=50))
    program = univariate._banded_program(x, np.full(50, 0.02), -x, *ends, (1.0, 2.0, 3.0))
    template, is_variable, var_position, row_position = univariate._band_template(
        program.matrix, program.var_key, program.row_key
    )
    assert template.shape[1] - 1 == {0: 6, 1: 8, 2: 10}[int(np.isfinite(ends).sum())]
    z = rng.normal(size=program.matrix.shape[1])
    y = rng.normal(size=program.matrix.shape[0])
    vector = np.empty(template.shape[0])
    vector[var_position], vector[row_position] = z, y
    out = np.empty_like(vector)
    univariate._band_matvec(template, vector, out)
    np.testing.assert_allclose(out[var_position], program.matrix.T @ y, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(out[row_position], program.matrix @ z, rtol=1e-13, atol=1e-13)
    assert np.all(is_variable[var_position]) and not np.any(is_variable[row_position])


def test_fast_univariate_converges_on_heavy_tails_without_warning():
    # Student-t samples (the reproduction's mismatched case) must converge to the tolerance, and
    # the stopping rule's certified gap must mean the value agrees with HiGHS
    x = np.random.default_rng(12).standard_t(3, size=3000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = univariate_graph_stein_discrepancy(x, -x, stein_factors=(1.0, 4.0, 2.0))
    reference = univariate_graph_stein_discrepancy(x, -x, stein_factors=(1.0, 4.0, 2.0), solver="highs")
    assert result.value == pytest.approx(reference.value, rel=1e-6)


def test_fast_univariate_warns_when_the_interior_point_method_stops_early(monkeypatch):
    original = univariate._interior_point
    monkeypatch.setattr(univariate, "_interior_point", lambda *a, **k: original(*a, **{**k, "max_iter": 3}))
    x = np.random.default_rng(0).standard_normal(100)
    with pytest.warns(RuntimeWarning, match="stopped after 3 iterations"):
        univariate_graph_stein_discrepancy(x, -x)


@pytest.mark.parametrize(
    ("arguments", "match"),
    [
        (dict(points=np.zeros((3, 2)), scores=np.zeros((3, 2))), "univariate"),
        (dict(points=np.arange(3.0), scores=np.zeros(3), solver="gurobi"), "solver"),
        (dict(points=np.arange(3.0), scores=np.zeros(3), lower=0.5), "inside"),
        (dict(points=np.arange(3.0), scores=np.zeros(3), tol=0.0), "tol"),
        (dict(points=np.arange(3.0), scores=np.zeros(2)), "scores"),
    ],
)
def test_fast_univariate_bad_input(arguments, match):
    with pytest.raises(ValueError, match=match):
        univariate_graph_stein_discrepancy(**arguments)


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------
def test_nodal_data_loads_with_the_right_shape():
    covariates, response = load_nodal()
    assert covariates.shape == (53, 6)
    assert response.shape == (53,)
    assert covariates.dtype == np.float64
    assert np.all(covariates[:, 0] == 1.0)
    assert set(np.unique(covariates[:, 1:])) <= {0.0, 1.0}
    assert set(np.unique(response)) == {0.0, 1.0}
    assert response.sum() == 20  # 20 of the 53 patients have nodal involvement
    assert NODAL_COLUMNS == ("r", "aged", "stage", "grade", "xray", "acid")


# ---------------------------------------------------------------------------
# reproductions (smoke tests with tiny sizes)
# ---------------------------------------------------------------------------
def _run_experiment(module, tmp_path, *arguments):
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    args = parser.parse_args(["--out", str(tmp_path), *arguments])
    assert module.run(args) == 0
    return json.loads((tmp_path / "summary.json").read_text())


def test_stein_gaussian_vs_t_smoke(tmp_path):
    from tallmcmc.reproduce import stein_gaussian_vs_t as module

    summary = _run_experiment(module, tmp_path, "--max-n", "200", "--min-n", "20", "--grid-size", "4")
    for key in ("sizes", "discrepancy", "fitted_slope", "seconds_per_n", "max_n", "paper_gaussian_slope"):
        assert key in summary
    assert summary["max_n"] == 200
    assert set(summary["discrepancy"]) == {"gaussian", "scaled_student_t"}
    assert all(v is not None and v > 0 for v in summary["discrepancy"]["gaussian"])
    assert (tmp_path / "discrepancy.png").exists() and (tmp_path / "test_functions.png").exists()


def test_stein_compare_smoke(tmp_path):
    from tallmcmc.reproduce import stein_compare as module

    summary = _run_experiment(module, tmp_path, "--max-n", "150", "--min-n", "20", "--grid-size", "3", "--seeds", "7")
    for key in ("sizes", "targets", "paper_claim", "max_n"):
        assert key in summary
    for target in ("gaussian", "uniform"):
        # Wasserstein lower-bounds the Stein discrepancy with these Stein factors
        assert summary["targets"][target]["stein_at_least_wasserstein_fraction"] == 1.0
    assert (tmp_path / "comparison.png").exists()


def test_stein_rates_smoke(tmp_path):
    from tallmcmc.reproduce import stein_rates as module

    summary = _run_experiment(
        module, tmp_path, "--max-n", "60", "--min-n", "10", "--grid-size", "4", "--num-sequences", "3"
    )
    for key in ("sizes", "discrepancy", "fitted_slope", "paper_slope", "herding_kernel"):
        assert key in summary
    assert set(summary["fitted_slope"]) == {"iid", "sobol", "herding"}
    assert (tmp_path / "rates.png").exists()


def test_herding_kernel_and_sequences():
    from tallmcmc.reproduce.stein_rates import herding_kernel, kernel_herding, sobol_sequence

    grid = (np.arange(4000) + 0.5) / 4000
    # mean embedding of Unif(0, 1) is zero: int_0^1 k(x, y) dy = 0
    assert np.abs(herding_kernel(np.array([0.1, 0.5, 0.93]), grid).mean(axis=1)).max() < 1e-6
    sequence = kernel_herding(16, 200)
    assert sequence[0] == 0.5
    assert np.all((sequence >= 0) & (sequence < 1))
    # herding spreads its points: the first 8 fill 8 distinct eighths of [0, 1)
    assert len(set(np.floor(sequence[:8] * 8).astype(int))) == 8
    assert np.allclose(sobol_sequence(4), [0.0, 0.5, 0.75, 0.25])


@pytest.mark.slow
def test_stein_rates_slopes_near_paper(tmp_path):
    from tallmcmc.reproduce import stein_rates as module

    summary = _run_experiment(module, tmp_path, "--num-sequences", "20")
    slopes = summary["fitted_slope"]
    assert -0.7 < slopes["iid"] < -0.35
    assert -1.3 < slopes["sobol"] < -0.8
    assert -1.3 < slopes["herding"] < -0.75
