"""The one result type of the Stein discrepancies (SteinResult) and the warning for a solver stopped short."""

import dataclasses
import types
import warnings

import clarabel
import numpy as np
import pytest

import tallmcmc.stein.classical as classical_module
import tallmcmc.stein.graph_program as graph_program
import tallmcmc.stein.univariate as univariate_module
from tallmcmc.stein import (
    NON_OPTIMAL_STATUSES,
    STATUSES,
    ClassicalSteinResult,
    GraphSteinResult,
    SteinResult,
    SteinSolverWarning,
    classical_stein_discrepancy,
    graph_stein_discrepancy,
    kernel_stein_discrepancy,
    univariate_graph_stein_discrepancy,
)


def assert_short_repr(result, n, d):
    text = repr(result)
    assert "\n" not in text and len(text) < 120, text
    assert "array" not in text and "[" not in text, text
    assert text.startswith(f"SteinResult(kind={result.kind!r}, value=")
    assert f"status={result.status!r}, n={n}, d={d}, seconds=" in text
    assert str(result) == text


def test_every_discrepancy_returns_a_stein_result_with_a_short_repr_at_n_10000():
    x = np.random.default_rng(0).standard_normal(10_000)
    graph = univariate_graph_stein_discrepancy(x, -x)
    kernel = kernel_stein_discrepancy(x, -x)
    for result, kind, method, status in ((graph, "graph", "ipm", "optimal"), (kernel, "kernel", "numba", "exact")):
        assert type(result) is SteinResult
        assert (result.kind, result.status) == (kind, status)
        assert result.method == method or kind == "kernel"  # the kernel engine depends on JAX's device
        assert_short_repr(result, 10_000, 1)
        assert float(result) == result.value and isinstance(result.value, float)
        assert 0 < result.seconds == result.timings["total"]
    assert graph.function_values.shape == (10_000, 1)  # the arrays are there, just not in the repr
    # the aliases of the former result classes
    assert GraphSteinResult is SteinResult and ClassicalSteinResult is SteinResult
    with pytest.raises(dataclasses.FrozenInstanceError):
        graph.value = 0.0


def test_per_coordinate_parts_add_up_to_the_value_and_the_test_function_attains_it():
    rng = np.random.default_rng(1)
    plane = rng.standard_normal((60, 2)) * [1.0, 2.0]
    line = rng.standard_normal(80)
    results = {
        "graph d = 2": graph_stein_discrepancy(plane, lambda y: -y),
        "graph d = 1": graph_stein_discrepancy(line, -line),
        "graph d = 1, HiGHS": graph_stein_discrepancy(line, -line, method="highs-ds"),
        "classical": classical_stein_discrepancy(line, -line),
    }
    for name, result in results.items():
        assert result.status == "optimal", name
        assert result.per_coordinate.shape == (result.d,), name
        # the L1 norm on x splits the program by coordinate of g: the value is the sum of the optima
        assert result.value == pytest.approx(result.per_coordinate.sum(), rel=1e-12), name
        # each part is attained by the optimal test function: sum_i q_i (T g)(x_i) = value
        assert result.weights @ result.operator_values() == pytest.approx(result.value, rel=1e-6), name
        assert result.weights.sum() == pytest.approx(1.0)
    graph = results["graph d = 2"]
    assert (graph.n, graph.d, graph.method) == (60, 2, "highs-ipm") and graph.iterations > 0
    for j in range(2):
        part = graph.scores[:, j] * graph.function_values[:, j] + graph.gradients[:, j, j]
        assert graph.weights @ part == pytest.approx(graph.per_coordinate[j], rel=1e-6)
    assert results["graph d = 1, HiGHS"].value == pytest.approx(results["graph d = 1"].value, rel=1e-6)
    assert results["classical"].value <= results["graph d = 1"].value * (1 + 1e-6)
    assert (results["classical"].method, results["classical"].points.shape) == ("clarabel", (80,))

    kernel = kernel_stein_discrepancy(plane, -plane, statistic="u")
    assert kernel.per_coordinate is None  # a square root of a double sum over pairs does not split
    assert kernel.value == pytest.approx(np.sqrt(max(kernel.squared, 0.0)))
    with pytest.raises(ValueError, match="no optimal test function"):
        kernel.operator_values()
    approximate = kernel_stein_discrepancy(plane, -plane, method="nystroem", landmarks=10)
    assert (approximate.status, approximate.method) == ("approximate", "nystroem")
    assert set(NON_OPTIMAL_STATUSES) < set(STATUSES)
    with pytest.raises(ValueError, match="status"):
        SteinResult(value=1.0, kind="graph", method="ipm", status="Solved", seconds=0.0, n=1, d=1)


# ---------------------------------------------------------------------------
# solver statuses
# ---------------------------------------------------------------------------
def caught_warning(call):
    """Run ``call`` recording every warning; return (result, the one SteinSolverWarning)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    solver_warnings = [w for w in caught if issubclass(w.category, SteinSolverWarning)]
    assert len(solver_warnings) == 1, [str(w.message) for w in caught]
    assert solver_warnings[0].filename == __file__  # attributed to the caller, not to tallmcmc.stein
    return result, solver_warnings[0]


def test_an_iteration_cap_gives_a_status_and_a_warning_naming_it():
    x = np.random.default_rng(2).standard_normal(200)
    result, warning = caught_warning(lambda: classical_stein_discrepancy(x, -x, max_iter=3))
    assert result.status == "iteration limit" and result.iterations == 3
    assert "MaxIterations" in str(warning.message) and "max_iter" in str(warning.message)
    result, warning = caught_warning(lambda: univariate_graph_stein_discrepancy(x, -x, max_iter=3))
    assert (result.status, result.method) == ("iteration limit", "ipm") and "stopped after 3" in str(warning.message)
    result, warning = caught_warning(lambda: univariate_graph_stein_discrepancy(x, -x, solver="clarabel", max_iter=2))
    assert (result.status, result.method) == ("iteration limit", "clarabel")
    assert issubclass(SteinSolverWarning, RuntimeWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # an optimal solve does not warn
        assert univariate_graph_stein_discrepancy(x, -x).status == "optimal"


def test_the_univariate_default_of_graph_stein_discrepancy_warns_at_the_callers_line(monkeypatch):
    original = univariate_module._interior_point
    monkeypatch.setattr(univariate_module, "_interior_point", lambda *a, **k: original(*a, **{**k, "max_iter": 2}))
    x = np.random.default_rng(3).standard_normal(50)
    result, _ = caught_warning(lambda: graph_stein_discrepancy(x, -x))
    assert result.status == "iteration limit"


def clarabel_reporting(status):
    """A Clarabel solver class that solves as usual but reports ``status``."""

    class Solver:
        def __init__(self, *args):
            self.inner = clarabel.DefaultSolver(*args)

        def solve(self):
            solution = self.inner.solve()
            return types.SimpleNamespace(status=status, x=solution.x, iterations=solution.iterations)

        def get_info(self):
            return self.inner.get_info()

    return types.SimpleNamespace(**{**vars(clarabel), "DefaultSolver": Solver})


def test_classical_almost_solved_is_kept_and_warned_about(monkeypatch):
    x = np.random.default_rng(4).standard_normal(100)
    reference = classical_stein_discrepancy(x, -x)
    monkeypatch.setattr(classical_module, "clarabel", clarabel_reporting("AlmostSolved"))
    result, warning = caught_warning(lambda: classical_stein_discrepancy(x, -x))
    assert result.status == "almost solved" and result.value == reference.value
    assert "AlmostSolved" in str(warning.message) and "tolerance=1e-06" in str(warning.message)
    assert "status='almost solved'" in repr(result)


@pytest.mark.parametrize("status", ["NumericalError", "PrimalInfeasible", "AlmostDualInfeasible"])
def test_failed_clarabel_statuses_raise(monkeypatch, status):
    x = np.random.default_rng(5).standard_normal(30)
    fake = clarabel_reporting(status)
    monkeypatch.setattr(classical_module, "clarabel", fake)
    monkeypatch.setattr(univariate_module, "clarabel", fake)
    with pytest.raises(RuntimeError, match=f"{status}.*numerical failure"):
        classical_stein_discrepancy(x, -x)
    with pytest.raises(RuntimeError, match=f"{status}.*numerical failure"):
        univariate_graph_stein_discrepancy(x, -x, solver="clarabel")


def test_a_highs_program_not_solved_to_optimality_raises(monkeypatch):
    def stopped(*args, **kwargs):  # what scipy returns at HiGHS's iteration limit: no point
        return types.SimpleNamespace(status=1, x=None, fun=None, message="Iteration limit reached.")

    monkeypatch.setattr(graph_program, "linprog", stopped)
    plane = np.random.default_rng(6).standard_normal((20, 2))
    with pytest.raises(RuntimeError, match="coordinate 0 failed.*Iteration limit reached"):
        graph_stein_discrepancy(plane, -plane, workers=1)
