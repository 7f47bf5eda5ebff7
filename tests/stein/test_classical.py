"""Tests for the univariate classical Stein discrepancy (Gorham & Mackey 2015, Section 5.2, Theorem 14).

References used by the checks:

* analytic values: a point mass (the best g is found by hand) and Unif(0, 1), where with the
  Stein factors (0.5, 0.5, 1) the classical Stein discrepancy *is* the 1-Wasserstein distance
  (T g = g' ranges over the 1-Lipschitz functions of mean zero), computed independently by
  ``wasserstein_1d``;
* a brute-force lower bound: the best objective over an explicit family of classical Stein
  functions (g' piecewise linear on a fine grid), solved as an LP by HiGHS. Every member of the
  family is a genuine classical Stein function, so the program's value must be at least this bound
  (the program is not too tight), and the bound approaches the supremum as the grid is refined, so
  the program's value must also be close to it (the program is not too loose);
* the graph Stein discrepancy, a relaxation of the same set, is never smaller.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sparse
from scipy.optimize import linprog

from tallmcmc.stein import (
    ClassicalSteinResult,
    classical_stein_discrepancy,
    graph_stein_discrepancy,
    wasserstein_1d,
)
from tallmcmc.stein.univariate import (
    GAUSSIAN_STEIN_FACTORS,
    UNIFORM_STEIN_FACTORS,
    uniform_cdf,
    uniform_cdf_integral,
)


def uniform_wasserstein(points, weights=None):
    return wasserstein_1d(
        points,
        uniform_cdf,
        weights,
        target_quantile=lambda p: np.clip(p, 0, 1),
        target_cdf_integral=uniform_cdf_integral,
    )


def fine_grid_lower_bound(points, weights, scores, lower, upper, factors, cells=2000):
    r"""Best objective over an explicit family of classical Stein functions: a lower bound on the supremum.

    The family: on a grid of ``cells`` equal cells (plus the sample points) over the domain (an
    unbounded side truncated a margin beyond the sample), ``g'`` is piecewise linear with node values
    ``U_k``, ``|U_{k+1} - U_k| <= c3 delta_k`` (so ``g'`` is c3-Lipschitz) and ``|U_k| <= c2`` (so
    ``|g'| <= c2`` everywhere); ``g`` is its exact integral, ``G_{k+1} - G_k = delta_k (U_k + U_{k+1})/2``,
    with ``|G_k| <= c1 - c3 delta^2/8`` at the nodes (a parabola of curvature at most c3 exceeds its
    nearest node value by at most ``c3 (delta/2)^2/2``, so ``|g| <= c1`` everywhere); ``g = 0`` at a
    finite end, ``g' = 0`` at a truncated end (``g`` continues as a constant).
    """
    c1, c2, c3 = factors
    points = np.asarray(points, dtype=float)
    margin = 2.0 * np.sqrt(2.0 * c1 / c3) + 1.0
    lo = lower if lower is not None else points.min() - margin
    hi = upper if upper is not None else points.max() + margin
    nodes = np.unique(np.concatenate([np.linspace(lo, hi, cells + 1), points]))
    m = nodes.size
    delta = np.diff(nodes)
    where = np.searchsorted(nodes, points)
    cost = np.zeros(2 * m)  # G_0..G_{m-1}, U_0..U_{m-1}
    np.add.at(cost, where, -weights * scores)
    np.add.at(cost, m + where, -weights)
    k = np.arange(m - 1)
    ones = np.ones(m - 1)
    integral = sparse.csr_matrix(
        (
            np.concatenate([ones, -ones, -delta / 2, -delta / 2]),
            (np.tile(k, 4), np.concatenate([k + 1, k, m + k, m + k + 1])),
        ),
        shape=(m - 1, 2 * m),
    )
    pinned = [0 if lower is not None else m, m - 1 if upper is not None else 2 * m - 1]
    pin = sparse.csr_matrix((np.ones(2), (np.arange(2), pinned)), shape=(2, 2 * m))
    lipschitz = sparse.csr_matrix(
        (np.concatenate([ones, -ones]), (np.tile(k, 2), np.concatenate([m + k + 1, m + k]))), shape=(m - 1, 2 * m)
    )
    widest = np.maximum(np.concatenate([[0.0], delta]), np.concatenate([delta, [0.0]]))
    g_bound = c1 - c3 * widest**2 / 8.0
    bounds = np.concatenate([np.stack([-g_bound, g_bound], axis=1), np.tile([-c2, c2], (m, 1))])
    scale = np.abs(cost).max()
    result = linprog(
        cost / scale,
        A_ub=sparse.vstack([lipschitz, -lipschitz]),
        b_ub=np.concatenate([c3 * delta, c3 * delta]),
        A_eq=sparse.vstack([integral, pin]),
        b_eq=np.zeros(m + 1),
        bounds=bounds,
        method="highs",
    )
    assert result.status == 0, result.message
    return -result.fun * scale


# ---------------------------------------------------------------------------
# analytic values
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("factors", [(1.0, 1.0, 1.0), GAUSSIAN_STEIN_FACTORS, (0.5, 3.0, 0.25)])
def test_point_mass_at_the_mode_of_the_normal(factors):
    # Q = delta_0, b(0) = 0: the objective is g'(0). |g'| <= c2, and g' needs |g'(0)|/c3 to stop, during
    # which g grows by g'(0)^2/(2 c3) <= c1; g(x) = h x - c3 x|x|/2 near 0 attains h = min(c2, sqrt(2 c1 c3)).
    c1, c2, c3 = factors
    expected = min(c2, np.sqrt(2 * c1 * c3))
    result = classical_stein_discrepancy([0.0, 0.0, 0.0], lambda x: -x, stein_factors=factors)
    assert isinstance(result, ClassicalSteinResult)
    assert result.points.shape == (1,) and result.status == "optimal" and result.relative_gap < 1e-8
    assert result.value == pytest.approx(expected, rel=1e-7)
    assert result.derivatives[0] == pytest.approx(expected, rel=1e-6)
    # the graph Stein set only bounds g'(0) by c2
    assert graph_stein_discrepancy([0.0], [0.0], stein_factors=factors).value == pytest.approx(c2)


@pytest.mark.parametrize("x0", [0.3, 1.0, 3.0, -2.0])
def test_point_mass_away_from_the_mode(x0):
    # Q = delta_{x0}, b = -x0: maximise -x0 g + h with |g| <= c1 - h^2/(2 c3), |h| <= c2; take
    # g = -sign(x0)(c1 - h^2/(2 c3)), then h = min(c3/|x0|, c2, sqrt(2 c1 c3)).
    c1, c2, c3 = GAUSSIAN_STEIN_FACTORS
    h = min(c3 / abs(x0), c2, np.sqrt(2 * c1 * c3))
    expected = abs(x0) * (c1 - h * h / (2 * c3)) + h
    value = classical_stein_discrepancy([x0], [-x0], stein_factors=GAUSSIAN_STEIN_FACTORS).value
    assert value == pytest.approx(expected, rel=1e-7)


def test_uniform_point_mass_equals_wasserstein():
    # Q = delta_{1/2} against Unif(0, 1): d_W = int_0^1 |1{x >= 1/2} - x| dx = 1/4
    value = classical_stein_discrepancy([0.5], [0.0], lower=0.0, upper=1.0, stein_factors=UNIFORM_STEIN_FACTORS).value
    assert value == pytest.approx(0.25, rel=1e-7)


@pytest.mark.parametrize("points", [[0.0], [1.0], [0.2], [0.0, 1.0], [0.0, 0.3, 1.0], [0.999999]])
def test_uniform_small_samples_with_points_on_or_next_to_the_ends(points):
    value = classical_stein_discrepancy(
        points, np.zeros(len(points)), lower=0.0, upper=1.0, stein_factors=UNIFORM_STEIN_FACTORS
    ).value
    assert value == pytest.approx(uniform_wasserstein(np.array(points)), rel=1e-7)


@pytest.mark.parametrize("n", [40, 600])
def test_uniform_target_equals_wasserstein(n):
    rng = np.random.default_rng(n)
    points = rng.uniform(size=n)
    result = classical_stein_discrepancy(points, np.zeros(n), lower=0.0, upper=1.0, stein_factors=UNIFORM_STEIN_FACTORS)
    assert result.value == pytest.approx(uniform_wasserstein(points), rel=1e-6)


def test_uniform_target_equals_wasserstein_for_weighted_skewed_samples_with_close_points():
    rng = np.random.default_rng(5)
    points = rng.beta(2.0, 5.0, size=200)
    points = np.concatenate([points, points[:20] + 1e-11, [0.0, 1.0]])  # near-coincident points and the ends
    weights = rng.uniform(size=points.size)
    value = classical_stein_discrepancy(
        points, np.zeros(points.size), weights, lower=0.0, upper=1.0, stein_factors=UNIFORM_STEIN_FACTORS
    ).value
    assert value == pytest.approx(uniform_wasserstein(points, weights), rel=1e-6)


def test_wrong_programs_fail_the_uniform_check():
    # The same check rejects a program that misses the end conditions, and one with another c3.
    # (Any c1 >= 1/8, c2 >= 1/2 with c3 = 1 gives the Wasserstein distance: a 1-Lipschitz h of mean
    # zero on [0, 1] has |h| <= 1/2 and |int_0^x h| <= 1/8; so (1, 1, 1) would not be a wrong program.)
    rng = np.random.default_rng(1)
    points = rng.uniform(size=100)
    reference = uniform_wasserstein(points)
    no_ends = classical_stein_discrepancy(points, np.zeros(100), stein_factors=UNIFORM_STEIN_FACTORS).value
    other_c3 = classical_stein_discrepancy(points, np.zeros(100), lower=0.0, upper=1.0, stein_factors=(0.5, 0.5, 2.0))
    assert abs(no_ends - reference) > 0.1 * reference
    assert abs(other_c3.value - reference) > 0.1 * reference
    unit = classical_stein_discrepancy(points, np.zeros(100), lower=0.0, upper=1.0, stein_factors=(1.0, 1.0, 1.0))
    assert unit.value == pytest.approx(reference, rel=1e-6)


# ---------------------------------------------------------------------------
# brute force: explicit classical Stein functions on a fine grid
# ---------------------------------------------------------------------------

CASES = {
    # name: (points, scores, lower, upper, factors)
    "normal": lambda rng: (lambda x: (x, -x, None, None, GAUSSIAN_STEIN_FACTORS))(rng.standard_normal(12)),
    "normal-classical-factors": lambda rng: (lambda x: (x, -x, None, None, (1.0, 1.0, 1.0)))(
        2.0 * rng.standard_normal(12)
    ),
    "uniform-random-scores": lambda rng: (
        rng.uniform(size=12),
        2.0 * rng.standard_normal(12),
        0.0,
        1.0,
        UNIFORM_STEIN_FACTORS,
    ),
    "half-line": lambda rng: (0.3 * rng.uniform(size=8), -5.0 * np.ones(8), 0.0, None, (0.1, 1.0, 1.0)),
    "narrow-box": lambda rng: (rng.uniform(size=8), 3.0 * rng.standard_normal(8), 0.0, 1.0, (0.05, 2.0, 1.0)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_program_is_the_supremum_over_explicit_stein_functions(case):
    rng = np.random.default_rng(sorted(CASES).index(case))
    points, scores, lower, upper, factors = CASES[case](rng)
    weights = rng.uniform(0.5, 1.5, size=points.size)
    weights /= weights.sum()
    value = classical_stein_discrepancy(points, scores, weights, lower=lower, upper=upper, stein_factors=factors).value
    bound = fine_grid_lower_bound(points, weights, scores, lower, upper, factors)
    # no classical Stein function does better than the program ...
    assert value >= bound - 1e-7
    # ... and the explicit family comes within the grid's resolution of it
    assert value <= bound + 1e-4 * abs(value)


def test_a_relaxed_program_fails_the_brute_force_check():
    # the graph Stein set is a relaxation: its value is beyond what classical Stein functions reach
    rng = np.random.default_rng(0)
    points, scores, lower, upper, factors = CASES["normal"](rng)
    weights = np.full(points.size, 1.0 / points.size)
    bound = fine_grid_lower_bound(points, weights, scores, lower, upper, factors)
    relaxed = graph_stein_discrepancy(points, scores, weights, stein_factors=factors).value
    assert relaxed > bound + 2e-3 * abs(bound)


# ---------------------------------------------------------------------------
# classical <= graph
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_classical_never_exceeds_graph(seed):
    rng = np.random.default_rng(seed)
    n = 300
    x = rng.standard_normal(n)
    weights = rng.uniform(size=n)
    for factors in (GAUSSIAN_STEIN_FACTORS, (1.0, 1.0, 1.0)):
        classical = classical_stein_discrepancy(x, -x, weights, stein_factors=factors).value
        graph = graph_stein_discrepancy(x, -x, weights, stein_factors=factors).value
        assert 0 < classical <= graph * (1 + 1e-7)
    u = rng.uniform(size=n)
    classical = classical_stein_discrepancy(
        u, np.zeros(n), lower=0.0, upper=1.0, stein_factors=UNIFORM_STEIN_FACTORS
    ).value
    graph = graph_stein_discrepancy(u, np.zeros(n), lower=0.0, upper=1.0, stein_factors=UNIFORM_STEIN_FACTORS).value
    assert 0 < classical <= graph * (1 + 1e-7)


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------


def test_order_duplicates_weights_and_callable_scores():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(50)
    reference = classical_stein_discrepancy(x, -x, stein_factors=GAUSSIAN_STEIN_FACTORS)
    permutation = rng.permutation(50)
    shuffled = classical_stein_discrepancy(x[permutation], lambda y: -y, stein_factors=GAUSSIAN_STEIN_FACTORS)
    assert shuffled.value == pytest.approx(reference.value, rel=1e-7)
    np.testing.assert_array_equal(shuffled.points, np.sort(x))
    # a repeated point counts with its multiplicity, a zero-weight point not at all
    repeated = np.concatenate([x, x[:10], [5.0]])
    weights = np.concatenate([np.ones(50), np.ones(10), [0.0]])
    merged = np.concatenate([np.full(10, 2.0), np.ones(40)])
    a = classical_stein_discrepancy(repeated, -repeated, weights, stein_factors=GAUSSIAN_STEIN_FACTORS)
    b = classical_stein_discrepancy(x, -x, merged, stein_factors=GAUSSIAN_STEIN_FACTORS)
    assert a.points.size == 50 and a.value == pytest.approx(b.value, rel=1e-7)
    # T g at the points, and the objective it sums to
    assert np.sum(a.weights * a.operator_values()) == pytest.approx(a.value)
    assert np.all(np.abs(a.function_values) + a.derivatives**2 / 4.0 <= 1.0 + 1e-6)


@pytest.mark.parametrize(
    ("arguments", "match"),
    [
        (dict(points=np.zeros((5, 2)), scores=np.zeros((5, 2))), "univariate"),
        (dict(points=[0.0, np.nan], scores=[0.0, 0.0]), "non-finite"),
        (dict(points=[0.0, 1.0], scores=[0.0]), "scores"),
        (dict(points=[0.0, 1.0], scores=[0.0, np.inf]), "scores"),
        (dict(points=[0.0, 1.0], scores=[0.0, 0.0], weights=[1.0, -1.0]), "weights"),
        (dict(points=[0.0, 1.0], scores=[0.0, 0.0], weights=[1.0]), "weights"),
        (dict(points=[0.5], scores=[0.0], lower=1.0, upper=0.0), "lower"),
        (dict(points=[1.5], scores=[0.0], lower=0.0, upper=1.0), "inside"),
        (dict(points=[0.5], scores=[0.0], stein_factors=(1.0, 0.0, 1.0)), "stein_factors"),
        (dict(points=[0.5], scores=[0.0], stein_factors=(1.0, 1.0)), "stein_factors"),
        (dict(points=[0.5], scores=[0.0], tolerance=0.0), "tolerance"),
    ],
)
def test_bad_input_raises(arguments, match):
    with pytest.raises(ValueError, match=match):
        classical_stein_discrepancy(**arguments)
