"""The graph Stein discrepancy's linear programs, solved by HiGHS; the checks the programs share.

:func:`highs_graph_stein_discrepancy` builds, for each coordinate ``j`` of the
test function, the linear program of :func:`tallmcmc.stein.graph_stein_discrepancy`
on a graph of the points (the sorted path for ``d = 1``, a greedy 2-spanner for
``d >= 2``, or the complete graph) and solves the ``d`` programs with
:func:`scipy.optimize.linprog` (HiGHS). It is the exact general path:
:func:`~tallmcmc.stein.graph_stein_discrepancy` takes it for ``d >= 2`` and
when asked (``method="highs-ds"`` etc.), while one-dimensional points go by
default to the banded solver of :mod:`tallmcmc.stein.univariate`, which also
uses this module as its reference (``solver="highs"``). The programs are
written out in ``docs/stein.md``.

References
----------
.. [1] J. Gorham and L. Mackey, "Measuring Sample Quality with Stein's
   Method", Advances in Neural Information Processing Systems 28 (NIPS 2015).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import scipy.sparse as sparse
from scipy.optimize import linprog

from tallmcmc.stein.result import SteinResult
from tallmcmc.stein.scores import as_points, as_scores, normalised_weights
from tallmcmc.stein.spanner import greedy_spanner

__all__ = ["GraphSteinResult", "HIGHS_METHODS", "highs_graph_stein_discrepancy"]

#: The HiGHS solvers :func:`highs_graph_stein_discrepancy` accepts (``"auto"``: dual simplex for d = 1,
#: the interior point method for d >= 2).
HIGHS_METHODS = ("auto", "highs-ds", "highs-ipm", "highs")

ScoreFunction = Callable[[np.ndarray], np.ndarray]

# largest constraint coefficient created by row scaling (HiGHS treats values
# from 1e15 on as infinite)
_MAX_COEFFICIENT = 1e8


#: The former result class of the graph Stein discrepancy: now :class:`~tallmcmc.stein.SteinResult` (``kind="graph"``),
#: with the same attributes (``value``, ``per_coordinate``, ``function_values``, ``gradients``, ``points``,
#: ``weights``, ``num_edges``, ``timings``) and more.
GraphSteinResult = SteinResult


# --------------------------------------------------------------------------
# input handling
# --------------------------------------------------------------------------


def _as_bounds(bound, d: int, name: str, default: float) -> np.ndarray:
    if bound is None:
        return np.full(d, default)
    array = np.asarray(bound, dtype=np.float64)
    if array.ndim == 0:
        array = np.full(d, float(array))
    if array.shape != (d,):
        raise ValueError(f"{name} must be a scalar or have shape ({d},), got {array.shape}")
    if np.any(np.isnan(array)):
        raise ValueError(f"{name} must not contain NaN")
    return array


def _as_stein_factors(stein_factors: Sequence[float]) -> tuple[float, float, float]:
    factors = np.asarray(stein_factors, dtype=np.float64)
    if factors.shape != (3,):
        raise ValueError(f"stein_factors must be three numbers (c1, c2, c3), got shape {factors.shape}")
    if not np.all(np.isfinite(factors)) or np.any(factors <= 0):
        raise ValueError(f"stein_factors must be finite and positive, got {tuple(factors)}")
    return float(factors[0]), float(factors[1]), float(factors[2])


def checked_inputs(points, weights, lower, upper, stein_factors, dilation):
    """The checks of :func:`~tallmcmc.stein.graph_stein_discrepancy` (each error names its argument).

    Returns
    -------
    (points, weights, factors, lower, upper)
        Points as an (n, d) float array, weights normalised to one, the Stein
        factors as three floats, and the box ends as (d,) arrays.
    """
    raw_points = as_points(points)
    n_original, d = raw_points.shape
    raw_weights = normalised_weights(weights, n_original)
    factors = _as_stein_factors(stein_factors)
    lower_array = _as_bounds(lower, d, "lower", -np.inf)
    upper_array = _as_bounds(upper, d, "upper", np.inf)
    if np.any(lower_array >= upper_array):
        raise ValueError("lower must be strictly less than upper in every coordinate")
    if np.any(raw_points < lower_array) or np.any(raw_points > upper_array):
        raise ValueError("points must lie inside the box [lower, upper]")
    if not float(dilation) >= 1.0:
        raise ValueError(f"dilation must be >= 1, got {dilation}")
    return raw_points, raw_weights, factors, lower_array, upper_array


# --------------------------------------------------------------------------
# graphs
# --------------------------------------------------------------------------


def _path_edges(points: np.ndarray) -> np.ndarray:
    order = np.argsort(points[:, 0], kind="stable")
    return np.stack([order[:-1], order[1:]], axis=1).astype(np.int64)


def _complete_edges(n: int) -> np.ndarray:
    first, second = np.triu_indices(n, k=1)
    return np.stack([first, second], axis=1).astype(np.int64)


# --------------------------------------------------------------------------
# linear programs
# --------------------------------------------------------------------------


def _edge_rows(points: np.ndarray, edges: np.ndarray, factors: tuple[float, float, float]):
    """Sparse rows ``M`` and right-hand sides ``r`` of ``|M z| <= r`` for the edges.

    Variables ``z = [psi_0..psi_{n-1}, Gamma_{0,0..d-1}, ..., Gamma_{n-1,0..d-1}]``.
    These rows are the same for every coordinate program.
    """
    n, d = points.shape
    c1, c2, c3 = factors
    a = edges[:, 0]
    c = edges[:, 1]
    delta = points[a] - points[c]
    length = np.abs(delta).sum(axis=1)

    row_parts, col_parts, val_parts, rhs_parts = [], [], [], []
    n_rows = 0

    def gamma(index: np.ndarray, k) -> np.ndarray:
        return n + index * d + k

    # |psi_a - psi_c| <= c2 D, needed only for D < 2 c1 / c2
    sel = np.flatnonzero(length < 2.0 * c1 / c2)
    m = sel.size
    rows = n_rows + np.arange(m)
    row_parts += [rows, rows]
    col_parts += [a[sel], c[sel]]
    val_parts += [np.ones(m), -np.ones(m)]
    rhs_parts.append(c2 * length[sel])
    n_rows += m

    # |Gamma_{a,k} - Gamma_{c,k}| <= c3 D, needed only for D < 2 c2 / c3
    sel = np.flatnonzero(length < 2.0 * c2 / c3)
    m = sel.size
    for k in range(d):
        rows = n_rows + np.arange(m)
        row_parts += [rows, rows]
        col_parts += [gamma(a[sel], k), gamma(c[sel], k)]
        val_parts += [np.ones(m), -np.ones(m)]
        rhs_parts.append(c3 * length[sel])
        n_rows += m

    # |psi_a - psi_c - <Gamma_{e,.}, Delta>| <= c3/2 D^2 for e in {a, c},
    # needed only for D < 4 c2 / c3
    sel = np.flatnonzero(length < 4.0 * c2 / c3)
    m = sel.size
    for endpoint in (a, c):
        rows = n_rows + np.arange(m)
        row_parts += [rows, rows]
        col_parts += [a[sel], c[sel]]
        val_parts += [np.ones(m), -np.ones(m)]
        for k in range(d):
            row_parts.append(rows)
            col_parts.append(gamma(endpoint[sel], k))
            val_parts.append(-delta[sel, k])
        rhs_parts.append(0.5 * c3 * length[sel] ** 2)
        n_rows += m

    matrix = sparse.csr_matrix(
        (np.concatenate(val_parts), (np.concatenate(row_parts), np.concatenate(col_parts))),
        shape=(n_rows, n * (d + 1)),
    )
    matrix.eliminate_zeros()
    return matrix, np.concatenate(rhs_parts)


def _coordinate_program(
    j: int,
    points: np.ndarray,
    weights: np.ndarray,
    scores: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    factors: tuple[float, float, float],
    edge_matrix: sparse.csr_matrix,
    edge_rhs: np.ndarray,
):
    """Objective, inequality system and variable bounds of the j-th program."""
    n, d = points.shape
    c1, c2, c3 = factors
    n_variables = n * (d + 1)

    # maximise sum_i q_i (psi_i b_j(x_i) + Gamma_{i,j})  ->  minimise the negative
    objective = np.zeros(n_variables)
    objective[:n] = -weights * scores[:, j]
    objective[n + np.arange(n) * d + j] = -weights

    upper_bound = np.empty(n_variables)
    upper_bound[:n] = c1
    upper_bound[n:] = c2
    gamma_bound = upper_bound[n:].reshape(n, d)

    box_rows, box_cols, box_vals, box_rhs = [], [], [], []
    n_box_rows = 0
    for end in (lower[j], upper[j]):
        if not np.isfinite(end):
            continue
        offset = points[:, j] - end
        distance = np.abs(offset)
        # |psi_i| <= c2 |s|, binding only for |s| < 2 c1 / c2
        sel = distance < 2.0 * c1 / c2
        upper_bound[:n][sel] = np.minimum(upper_bound[:n][sel], c2 * distance[sel])
        # |Gamma_{i,k}| <= c3 |s| for k != j, binding only for |s| < 2 c2 / c3
        sel = distance < 2.0 * c2 / c3
        for k in range(d):
            if k != j:
                gamma_bound[sel, k] = np.minimum(gamma_bound[sel, k], c3 * distance[sel])
        # |psi_i - s Gamma_{i,j}| <= c3/2 s^2, binding only for |s| < 4 c2 / c3
        sel = np.flatnonzero(distance < 4.0 * c2 / c3)
        m = sel.size
        rows = n_box_rows + np.arange(m)
        box_rows += [rows, rows]
        box_cols += [sel, n + sel * d + j]
        box_vals += [np.ones(m), -offset[sel]]
        box_rhs.append(0.5 * c3 * distance[sel] ** 2)
        n_box_rows += m

    if n_box_rows:
        box_matrix = sparse.csr_matrix(
            (np.concatenate(box_vals), (np.concatenate(box_rows), np.concatenate(box_cols))),
            shape=(n_box_rows, n_variables),
        )
        rows = sparse.vstack([edge_matrix, box_matrix], format="csr")
        rhs = np.concatenate([edge_rhs, np.concatenate(box_rhs)])
    else:
        rows, rhs = edge_matrix, edge_rhs
    # Scale every row to |row . z| <= 1 (an equivalent system: the solver's
    # absolute feasibility tolerance then means the same relative slack for
    # the tiny O(D^2) Taylor bounds of close points, and the interior point
    # method needs ~10% less time at n = 1000, d = 2), but keep every
    # coefficient below _MAX_COEFFICIENT: HiGHS rejects huge entries, which
    # the scaling would create for nearly coincident points.
    row_max = np.asarray(abs(rows).max(axis=1).todense()).ravel()
    row_max[row_max == 0] = 1.0
    scale = _MAX_COEFFICIENT / row_max
    positive = rhs > 0
    scale[positive] = np.minimum(scale[positive], 1.0 / rhs[positive])
    scale[~positive] = 1.0 / row_max[~positive]
    rows = sparse.diags(scale) @ rows
    rhs = rhs * scale
    inequality_matrix = sparse.vstack([rows, -rows], format="csr")
    inequality_rhs = np.concatenate([rhs, rhs])
    bounds = np.stack([-upper_bound, upper_bound], axis=1)
    return objective, inequality_matrix, inequality_rhs, bounds


class _Solution(NamedTuple):
    """One coordinate program solved: the optimal ``z``, the program's maximum, the seconds and iterations taken."""

    z: np.ndarray
    optimum: float
    seconds: float
    iterations: int


def _solve(objective, inequality_matrix, inequality_rhs, bounds, method: str, coordinate: int = 0) -> _Solution:
    """Solve ``min objective . z`` for one coordinate (the maximum is ``-min``).

    SciPy returns a point only when HiGHS reports the program optimal, so
    every other status (iteration or time limit, numerical trouble; these
    programs are always feasible and bounded) raises a ``RuntimeError``.
    """
    start = time.perf_counter()
    if inequality_matrix.shape[0] == 0:
        inequality_matrix, inequality_rhs = None, None
    # costs are O(1/n); rescale them to max |cost| = 1 (HiGHS warns about
    # tiny costs, and the interior point method takes fewer iterations)
    cost_scale = float(np.abs(objective).max())
    if not cost_scale > 0:
        cost_scale = 1.0
    # presolve off for the interior point solver: faster there (benchmarks/RESULTS.md)
    result = linprog(
        objective / cost_scale,
        A_ub=inequality_matrix,
        b_ub=inequality_rhs,
        bounds=bounds,
        method=method,
        options={"presolve": method != "highs-ipm"},
    )
    elapsed = time.perf_counter() - start
    if result.status != 0 or result.x is None:
        raise RuntimeError(
            f"graph Stein discrepancy: the linear program of coordinate {coordinate} failed (HiGHS via scipy, "
            f"method={method!r}, status {result.status}): {result.message}. The program is always feasible and "
            "bounded, so this is a numerical failure: try another method ('highs-ds', 'highs-ipm'), fewer or "
            "thinned points, or points rescaled to unit spread (with their scores)"
        )
    return _Solution(result.x, -result.fun * cost_scale, elapsed, int(getattr(result, "nit", 0) or 0))


# --------------------------------------------------------------------------
# the HiGHS path
# --------------------------------------------------------------------------


def highs_graph_stein_discrepancy(
    points: np.ndarray,
    scores: np.ndarray | ScoreFunction,
    weights: np.ndarray | None = None,
    lower: float | np.ndarray | None = None,
    upper: float | np.ndarray | None = None,
    stein_factors: Sequence[float] = (1.0, 1.0, 1.0),
    dilation: float = 2.0,
    complete_graph: bool = False,
    method: str = "auto",
    workers: int | None = None,
) -> SteinResult:
    """The graph Stein discrepancy by HiGHS linear programs, in any dimension.

    The arguments and the result are those of
    :func:`tallmcmc.stein.graph_stein_discrepancy`, except ``method``: one of
    :data:`HIGHS_METHODS`, the HiGHS solver passed to
    :func:`scipy.optimize.linprog` (``"auto"``: dual simplex ``"highs-ds"``
    for ``d = 1``, the interior point method with crossover ``"highs-ipm"``,
    presolve off, for ``d >= 2``). The result's ``method`` is the HiGHS
    solver used and its ``status`` is ``"optimal"``: SciPy returns no point
    for any other HiGHS status, which raises a ``RuntimeError``.
    """
    start_total = time.perf_counter()
    if method not in HIGHS_METHODS:
        raise ValueError(f"method must be one of {HIGHS_METHODS}, got {method!r}")
    raw_points, raw_weights, factors, lower_array, upper_array = checked_inputs(
        points, weights, lower, upper, stein_factors, dilation
    )
    d = raw_points.shape[1]
    if method == "auto":
        method = "highs-ds" if d == 1 else "highs-ipm"

    # collapse duplicates, summing weights; drop points of zero weight
    unique_points, first_index, inverse = np.unique(raw_points, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    unique_weights = np.bincount(inverse, weights=raw_weights, minlength=unique_points.shape[0])
    keep_unique = unique_weights > 0
    unique_points = np.ascontiguousarray(unique_points[keep_unique])
    unique_weights = unique_weights[keep_unique]
    unique_weights = unique_weights / unique_weights.sum()
    if callable(scores):  # evaluate the score once per distinct point
        scores_array = as_scores(scores, unique_points)
    else:
        scores_array = as_scores(scores, raw_points)[first_index[keep_unique]]
    n = unique_points.shape[0]

    # graph
    start = time.perf_counter()
    if complete_graph:
        edges = _complete_edges(n)
    elif d == 1:
        edges = _path_edges(unique_points)
    else:
        edges, _ = greedy_spanner(unique_points, dilation=dilation)
    graph_seconds = time.perf_counter() - start

    # constraint matrices
    start = time.perf_counter()
    edge_matrix, edge_rhs = _edge_rows(unique_points, edges, factors)
    programs = [
        _coordinate_program(
            j, unique_points, unique_weights, scores_array, lower_array, upper_array, factors, edge_matrix, edge_rhs
        )
        for j in range(d)
    ]
    setup_seconds = time.perf_counter() - start

    # solve the d programs concurrently
    start = time.perf_counter()
    n_workers = min(d, os.cpu_count() or 1) if workers is None else max(1, int(workers))
    if n_workers > 1 and d > 1:
        with ThreadPoolExecutor(max_workers=n_workers) as pool:
            solutions = list(pool.map(lambda j: _solve(*programs[j], method, j), range(d)))
    else:
        solutions = [_solve(*program, method, j) for j, program in enumerate(programs)]
    solve_seconds = time.perf_counter() - start

    per_coordinate = np.empty(d)
    function_values = np.empty((n, d))
    gradients = np.empty((n, d, d))
    for j, solution in enumerate(solutions):
        per_coordinate[j] = solution.optimum
        function_values[:, j] = solution.z[:n]
        gradients[:, j, :] = solution.z[n:].reshape(n, d)

    total_seconds = time.perf_counter() - start_total
    return SteinResult(
        value=float(per_coordinate.sum()),
        kind="graph",
        method=method,
        status="optimal",
        seconds=total_seconds,
        n=n,
        d=d,
        per_coordinate=per_coordinate,
        points=unique_points,
        weights=unique_weights,
        scores=scores_array,
        function_values=function_values,
        gradients=gradients,
        num_edges=int(edges.shape[0]),
        iterations=int(sum(solution.iterations for solution in solutions)),
        timings={
            "spanner": graph_seconds,
            "setup": setup_seconds,
            "linear_programs": [solution.seconds for solution in solutions],
            "solve": solve_seconds,
            "total": total_seconds,
        },
    )
