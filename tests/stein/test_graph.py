"""Tests for the greedy L1 spanner and the graph Stein discrepancy (Gorham & Mackey 2015)."""

import numpy as np
import pytest
import scipy.sparse as sparse
from scipy.sparse.csgraph import shortest_path

import tallmcmc.stein.graph as graph_module
from tallmcmc.stein import GraphSteinResult, graph_stein_discrepancy, greedy_spanner
from tallmcmc.stein.graph_program import highs_graph_stein_discrepancy
from tallmcmc.stein.univariate import univariate_graph_stein_discrepancy


def l1_distances(points):
    return np.abs(points[:, None, :] - points[None, :, :]).sum(axis=2)


def graph_distances(n, edges, lengths):
    matrix = sparse.coo_matrix((lengths, (edges[:, 0], edges[:, 1])), shape=(n, n)).tocsr()
    return shortest_path(matrix, directed=False)


def brute_force_greedy_spanner(points, dilation):
    """Textbook greedy spanner: all pairs by length, shortest paths recomputed each time."""
    n = points.shape[0]
    distance = l1_distances(points)
    first, second = np.triu_indices(n, k=1)
    order = np.argsort(distance[first, second], kind="stable")
    adjacency = np.zeros((n, n))
    chosen = set()
    for index in order:
        a, b = first[index], second[index]
        paths = shortest_path(sparse.csr_matrix(adjacency), directed=False, indices=[a])[0]
        if paths[b] > dilation * distance[a, b]:
            adjacency[a, b] = adjacency[b, a] = distance[a, b]
            chosen.add((a, b))
    return chosen


# ---------------------------------------------------------------------------
# spanner
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dimension", [2, 3])
@pytest.mark.parametrize("dilation", [1.5, 2.0, 3.0])
def test_spanner_has_dilation_property_on_every_pair(dimension, dilation):
    rng = np.random.default_rng(10 * dimension + int(dilation * 2))
    points = rng.standard_normal((80, dimension))
    edges, lengths = greedy_spanner(points, dilation=dilation)
    distance = l1_distances(points)
    np.testing.assert_allclose(lengths, distance[edges[:, 0], edges[:, 1]])
    paths = graph_distances(len(points), edges, lengths)
    off_diagonal = ~np.eye(len(points), dtype=bool)
    assert np.all(paths[off_diagonal] <= dilation * distance[off_diagonal] * (1 + 1e-12))


@pytest.mark.parametrize("seed", [0, 1])
def test_spanner_equals_brute_force_greedy(seed):
    rng = np.random.default_rng(seed)
    points = rng.uniform(size=(30, 2))
    edges, _ = greedy_spanner(points, dilation=2.0)
    assert {tuple(edge) for edge in edges} == brute_force_greedy_spanner(points, 2.0)


@pytest.mark.parametrize("n", [200, 1000])
def test_spanner_edge_count_is_linear(n):
    # observed about 1.5 n edges for Gaussian points in d = 2; allow c = 2
    rng = np.random.default_rng(n)
    edges, _ = greedy_spanner(rng.standard_normal((n, 2)), dilation=2.0)
    assert len(edges) <= 2 * n
    assert len(edges) >= n - 1  # connected


def test_spanner_handles_duplicates_and_tiny_inputs():
    points = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 2.0]])
    edges, lengths = greedy_spanner(points)
    paths = graph_distances(3, edges, np.where(lengths == 0, 1e-300, lengths))
    assert np.all(np.isfinite(paths))
    assert np.any(lengths == 0)
    assert greedy_spanner(np.zeros((1, 2)))[0].shape == (0, 2)
    with pytest.raises(ValueError):
        greedy_spanner(np.zeros(5))
    with pytest.raises(ValueError):
        greedy_spanner(np.zeros((3, 2)), dilation=0.5)


# ---------------------------------------------------------------------------
# graph Stein discrepancy: exactness of the graphs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_univariate_path_equals_complete_graph(seed):
    rng = np.random.default_rng(seed)
    points = rng.standard_t(3, size=25)
    weights = rng.uniform(0.1, 1.0, size=25)
    scores = -points  # standard normal target, deliberately mismatched sample
    path = graph_stein_discrepancy(points, scores, weights=weights)
    complete = graph_stein_discrepancy(points, scores, weights=weights, complete_graph=True)
    assert path.num_edges == 24
    assert complete.num_edges == 25 * 24 // 2
    np.testing.assert_allclose(path.value, complete.value, rtol=1e-7)
    # non-default Stein factors (the N(0, 1) Wasserstein choice)
    path = graph_stein_discrepancy(points, scores, stein_factors=(1, 4, 2))
    complete = graph_stein_discrepancy(points, scores, stein_factors=(1, 4, 2), complete_graph=True)
    np.testing.assert_allclose(path.value, complete.value, rtol=1e-7)


@pytest.mark.parametrize("dilation", [1.5, 2.0])
def test_spanner_value_between_complete_graph_value_and_its_multiple(dilation):
    rng = np.random.default_rng(3)
    points = rng.standard_normal((40, 2)) * [1.0, 2.0]
    scores = -points
    complete = graph_stein_discrepancy(points, scores, complete_graph=True)
    sparse_graph = graph_stein_discrepancy(points, scores, dilation=dilation)
    assert sparse_graph.num_edges < complete.num_edges
    assert complete.value <= sparse_graph.value * (1 + 1e-7)
    assert sparse_graph.value <= 2 * dilation**2 * complete.value
    # the spanner must actually drop constraints that matter
    assert sparse_graph.value > complete.value * (1 + 1e-6)


def test_methods_agree_and_result_is_consistent():
    rng = np.random.default_rng(4)
    points = rng.standard_normal((120, 2))
    results = [
        graph_stein_discrepancy(points, lambda x: -x, method=method, workers=workers)
        for method, workers in [("highs-ds", 1), ("highs-ipm", 2), ("highs", 1), ("auto", None)]
    ]
    for result in results[1:]:
        np.testing.assert_allclose(result.per_coordinate, results[0].per_coordinate, rtol=1e-6)
    result = results[0]
    assert isinstance(result, GraphSteinResult)
    n = result.points.shape[0]
    assert result.function_values.shape == (n, 2)
    assert result.gradients.shape == (n, 2, 2)
    assert np.all(np.abs(result.function_values) <= 1 + 1e-7)
    assert np.all(np.abs(result.gradients) <= 1 + 1e-7)
    # objective recomputed from the optimal test function: sum_i q_i (T g_j)(x_i)
    scores = -result.points
    for j in range(2):
        objective = np.sum(result.weights * (result.function_values[:, j] * scores[:, j] + result.gradients[:, j, j]))
        np.testing.assert_allclose(objective, result.per_coordinate[j], rtol=1e-6)
    np.testing.assert_allclose(result.value, result.per_coordinate.sum())
    assert set(result.timings) >= {"spanner", "linear_programs", "total"}
    assert len(result.timings["linear_programs"]) == 2


# ---------------------------------------------------------------------------
# one dimension: the univariate solver by default, HiGHS on request
# ---------------------------------------------------------------------------
ONE_DIMENSIONAL_SETTINGS = [  # (Stein factors, lower, upper)
    ((1.0, 1.0, 1.0), None, None),
    ((1.0, 4.0, 2.0), None, None),
    ((0.5, 0.5, 1.0), 0.0, 1.0),
    ((2.0, 0.5, 3.0), None, 1.2),
]


@pytest.mark.parametrize("setting", ONE_DIMENSIONAL_SETTINGS)
def test_one_dimensional_points_give_the_same_value_by_both_solvers(setting):
    """The default (banded interior point) and the HiGHS path program agree to 1e-6 relative (the golden tolerance
    of tests/stein/test_univariate.py), on weighted samples with duplicates, boxes and Stein factors."""
    factors, lower, upper = setting
    rng = np.random.default_rng(11 + ONE_DIMENSIONAL_SETTINGS.index(setting))
    points = rng.uniform(-0.3 if lower is None else lower, 1.0 if upper is None else upper, size=150)
    points[:15] = np.round(points[:15], 1)  # duplicates (and, with a box, points on its ends)
    scores = rng.normal(size=150) * 2
    weights = rng.uniform(0.0, 1.0, size=150) * (rng.uniform(size=150) > 0.05)
    weights[0] = 1.0
    options = dict(weights=weights, lower=lower, upper=upper, stein_factors=factors)
    default = graph_stein_discrepancy(points, scores, **options)
    for method in ("highs-ds", "highs"):
        exact = graph_stein_discrepancy(points[:, None], scores[:, None], method=method, **options)
        assert default.value == pytest.approx(exact.value, rel=1e-6), method
        np.testing.assert_array_equal(default.points, exact.points)
        np.testing.assert_allclose(default.weights, exact.weights, rtol=1e-12)
        assert default.num_edges == exact.num_edges
    assert type(default) is GraphSteinResult and type(exact) is GraphSteinResult
    assert default.function_values.shape == exact.function_values.shape
    assert default.gradients.shape == exact.gradients.shape
    assert default.per_coordinate.shape == (1,) and set(default.timings) == set(exact.timings)
    # the wrong program (every Stein factor 0.1 % too large) fails the same tolerance
    wrong = graph_stein_discrepancy(points, scores, **{**options, "stein_factors": tuple(1.001 * f for f in factors)})
    assert wrong.value != pytest.approx(exact.value, rel=1e-6)


def spy_on_solvers(monkeypatch):
    """Record which solver graph_stein_discrepancy calls (both still run)."""
    calls = []

    def univariate(*args, **kwargs):
        calls.append("univariate")
        return univariate_graph_stein_discrepancy(*args, **kwargs)

    def highs(*args, **kwargs):
        calls.append(f"highs {kwargs['method']}")
        return highs_graph_stein_discrepancy(*args, **kwargs)

    monkeypatch.setattr(graph_module, "univariate_graph_stein_discrepancy", univariate)
    monkeypatch.setattr(graph_module, "highs_graph_stein_discrepancy", highs)
    return calls


def test_one_dimensional_points_go_to_the_univariate_solver_by_default(monkeypatch):
    calls = spy_on_solvers(monkeypatch)
    rng = np.random.default_rng(12)
    x = rng.standard_normal(40)
    plane = rng.standard_normal((40, 2))
    graph_stein_discrepancy(x, -x)
    graph_stein_discrepancy(x[:, None], -x[:, None], method="univariate")
    assert calls == ["univariate", "univariate"]
    calls.clear()
    graph_stein_discrepancy(x, -x, method="highs-ds")
    graph_stein_discrepancy(x, -x, method="highs")
    graph_stein_discrepancy(x, -x, complete_graph=True)  # the complete graph is a HiGHS program
    graph_stein_discrepancy(plane, -plane)
    assert calls == ["highs highs-ds", "highs highs", "highs auto", "highs auto"]
    with pytest.raises(ValueError, match="univariate"):
        graph_stein_discrepancy(plane, -plane, method="univariate")
    with pytest.raises(ValueError, match="univariate"):
        graph_stein_discrepancy(x, -x, method="univariate", complete_graph=True)
    # the checks come first, with the HiGHS path's messages, whichever solver runs
    with pytest.raises(ValueError, match="box"):
        graph_stein_discrepancy(x, -x, lower=10.0)
    assert calls == ["highs highs-ds", "highs highs", "highs auto", "highs auto"]


# ---------------------------------------------------------------------------
# statistical behaviour
# ---------------------------------------------------------------------------


def mean_discrepancy(draw, n, seeds):
    values = []
    for seed in seeds:
        points = draw(np.random.default_rng(seed), n)
        values.append(graph_stein_discrepancy(points, -points).value)
    return float(np.mean(values))


def test_discrepancy_falls_with_sample_size_for_exact_samples():
    def normal(rng, n):
        return rng.standard_normal(n)

    small = mean_discrepancy(normal, 100, range(4))
    large = mean_discrepancy(normal, 1000, range(4))
    # n^{-1/2} rate would give a factor 3.2; observed about 2.5
    assert large < 0.6 * small
    assert large < 0.12


def test_discrepancy_stays_away_from_zero_for_mismatched_samples():
    def normal(rng, n):
        return rng.standard_normal(n)

    def shifted(rng, n):
        return rng.standard_normal(n) + 0.5

    def student(rng, n):
        return rng.standard_t(5, size=n) * np.sqrt(3 / 5)  # unit variance

    exact = mean_discrepancy(normal, 2000, range(2))
    for n in (500, 2000):
        # |E_Q b(X)| = 0.5 is attained by the constant test function g = c1
        assert mean_discrepancy(shifted, n, range(2)) > 0.4
        assert mean_discrepancy(student, n, range(2)) > 0.15
    assert mean_discrepancy(student, 2000, range(2)) > 2.5 * exact


def test_box_constraints_encode_the_boundary_condition():
    rng = np.random.default_rng(5)
    points = rng.uniform(size=500)
    scores = np.zeros(500)  # Unif(0, 1) target: the score vanishes
    with_box = graph_stein_discrepancy(points, scores, lower=0.0, upper=1.0)
    without_box = graph_stein_discrepancy(points, scores)
    one_sided = graph_stein_discrepancy(points, scores, lower=0.0)
    assert with_box.value < 0.03
    assert without_box.value > 0.9  # g' = 1 everywhere is allowed without the box
    # g(x) = x satisfies g(0) = 0 and reaches the unconstrained optimum
    assert with_box.value < 0.5 < one_sided.value <= without_box.value + 1e-9
    # g vanishes at the boundary: psi is 0 at a point on the boundary
    edge_points = np.concatenate([[0.0, 1.0], points])
    result = graph_stein_discrepancy(edge_points, np.zeros(502), lower=0.0, upper=1.0)
    at_boundary = (result.points[:, 0] == 0.0) | (result.points[:, 0] == 1.0)
    np.testing.assert_allclose(result.function_values[at_boundary, 0], 0.0, atol=1e-9)


def test_box_constraints_in_two_dimensions_apply_per_coordinate():
    rng = np.random.default_rng(6)
    points = np.column_stack([rng.uniform(size=300), rng.standard_normal(300)])
    scores = np.column_stack([np.zeros(300), -points[:, 1]])
    result = graph_stein_discrepancy(points, scores, lower=[0.0, -np.inf], upper=[1.0, np.inf])
    unbounded = graph_stein_discrepancy(points, scores)
    assert result.per_coordinate[0] < 0.2 < 0.9 < unbounded.per_coordinate[0]
    np.testing.assert_allclose(result.per_coordinate[1], unbounded.per_coordinate[1], rtol=0.2)


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dimension", [1, 2])
def test_duplicates_collapse_to_weighted_sample(dimension):
    rng = np.random.default_rng(7)
    distinct = rng.standard_normal((30, dimension))
    counts = rng.integers(1, 5, size=30)
    repeated = np.repeat(distinct, counts, axis=0)
    rng.shuffle(repeated)
    from_repeats = graph_stein_discrepancy(repeated, lambda x: -x)
    from_weights = graph_stein_discrepancy(distinct, -distinct, weights=counts)
    assert from_repeats.points.shape == (30, dimension)
    np.testing.assert_allclose(from_repeats.value, from_weights.value, rtol=1e-7)
    np.testing.assert_allclose(np.sort(from_repeats.weights), np.sort(counts / counts.sum()))


@pytest.mark.parametrize("dimension", [1, 2])
def test_nearly_coincident_points_are_solved(dimension):
    # gaps of 1e-13 once made the row-scaled programs unsolvable (HiGHS model error)
    rng = np.random.default_rng(9)
    points = rng.standard_normal((200, dimension))
    points[1] = points[0] + 1e-13
    points[2] = points[0] + 1e-9
    near = graph_stein_discrepancy(points, -points)
    merged = points.copy()
    merged[1] = merged[2] = merged[0]
    exact = graph_stein_discrepancy(merged, -merged)
    assert near.points.shape[0] == 200
    assert exact.points.shape[0] == 198
    np.testing.assert_allclose(near.value, exact.value, rtol=1e-5)


def test_callable_and_array_scores_agree_and_zero_weights_are_dropped():
    rng = np.random.default_rng(8)
    points = rng.standard_normal((50, 2))
    weights = np.ones(50)
    weights[:5] = 0.0
    with_callable = graph_stein_discrepancy(points, lambda x: -2 * x, weights=weights)
    with_array = graph_stein_discrepancy(points[5:], -2 * points[5:])
    assert with_callable.points.shape == (45, 2)
    np.testing.assert_allclose(with_callable.value, with_array.value, rtol=1e-6)


@pytest.mark.parametrize(
    "arguments, match",
    [
        (dict(points=np.array([0.0, np.nan, 1.0]), scores=np.zeros(3)), "points"),
        (dict(points=np.zeros((2, 2, 2)), scores=np.zeros((2, 2))), "points"),
        (dict(points=np.arange(3.0), scores=np.zeros(4)), "scores"),
        (dict(points=np.arange(3.0), scores=np.array([0.0, np.inf, 0.0])), "scores"),
        (dict(points=np.arange(3.0), scores=lambda x: np.zeros((2, 1))), "scores"),
        (dict(points=np.arange(3.0), scores=np.zeros(3), weights=np.array([1.0, -1.0, 1.0])), "weights"),
        (dict(points=np.arange(3.0), scores=np.zeros(3), weights=np.ones(2)), "weights"),
        (dict(points=np.arange(3.0), scores=np.zeros(3), weights=np.zeros(3)), "weights"),
        (dict(points=np.arange(3.0), scores=np.zeros(3), lower=1.0), "box"),
        (dict(points=np.arange(3.0), scores=np.zeros(3), lower=5.0, upper=4.0), "lower"),
        (dict(points=np.arange(3.0), scores=np.zeros(3), upper=np.ones(2)), "upper"),
        (dict(points=np.arange(3.0), scores=np.zeros(3), stein_factors=(1.0, 0.0, 1.0)), "stein_factors"),
        (dict(points=np.arange(3.0), scores=np.zeros(3), stein_factors=(1.0, 1.0)), "stein_factors"),
        (dict(points=np.arange(3.0), scores=np.zeros(3), method="simplex"), "method"),
        (dict(points=np.zeros((3, 2)) + np.arange(3)[:, None], scores=np.zeros((3, 2)), dilation=0.9), "dilation"),
    ],
)
def test_bad_input_raises(arguments, match):
    with pytest.raises(ValueError, match=match):
        graph_stein_discrepancy(**arguments)


# ---------------------------------------------------------------------------
# paper scale
# ---------------------------------------------------------------------------


@pytest.mark.slow
def test_bivariate_discrepancy_falls_with_sample_size():
    values = {}
    for n in (100, 1000):
        points = np.random.default_rng(n).standard_normal((n, 2))
        values[n] = graph_stein_discrepancy(points, -points).value
    assert values[1000] < 0.6 * values[100]
