"""Graph Stein discrepancy of Gorham & Mackey (2015).

The Langevin graph Stein discrepancy of a weighted sample
``Q = sum_i q_i delta_{x_i}`` with respect to a target ``P`` with score
``b = grad log p`` is the optimal value of a linear program over the values
``psi_i = g(x_i)`` and gradients ``Gamma_i = grad g(x_i)`` of a test
function ``g: R^d -> R^d`` at the sample points.  With the L1 norm on ``x``
the program splits into ``d`` independent programs, one per coordinate of
``g``; the discrepancy is the sum of their optimal values.  Smoothness
constraints are imposed along the edges of a graph on the points: the sorted
path for ``d = 1`` (exact), a greedy 2-spanner for ``d >= 2`` (within a
constant factor of the complete graph), or optionally the complete graph.

:func:`graph_stein_discrepancy` chooses the solver: one-dimensional points go
to the banded interior point method of :mod:`tallmcmc.stein.univariate`
(near-linear in ``n``), everything else to the HiGHS linear programs of
:mod:`tallmcmc.stein.graph_program`, which ``method`` also selects for
``d = 1``.  The programs are written out in ``docs/stein.md``.

References
----------
.. [1] J. Gorham and L. Mackey, "Measuring Sample Quality with Stein's
   Method", Advances in Neural Information Processing Systems 28 (NIPS 2015).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tallmcmc.stein.graph_program import (
    HIGHS_METHODS,
    GraphSteinResult,
    checked_inputs,
    highs_graph_stein_discrepancy,
)
from tallmcmc.stein.result import SteinResult
from tallmcmc.stein.scores import as_points
from tallmcmc.stein.univariate import univariate_graph_stein_discrepancy

__all__ = ["GRAPH_METHODS", "GraphSteinResult", "graph_stein_discrepancy"]

#: The values of ``method`` :func:`graph_stein_discrepancy` accepts.
GRAPH_METHODS = ("auto", "univariate", "highs-ds", "highs-ipm", "highs")

ScoreFunction = Callable[[np.ndarray], np.ndarray]


def graph_stein_discrepancy(
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
    """Langevin graph Stein discrepancy of a weighted sample (Gorham & Mackey 2015).

    Solves, for each coordinate ``j``, the linear program

    .. math::

        \\max \\sum_i q_i \\big(\\psi_i b_j(x_i) + \\Gamma_{i,j}\\big)

    over values ``psi_i = g_j(x_i)`` and gradients ``Gamma_i = grad g_j(x_i)``
    subject to ``|psi_i| <= c1``, ``|Gamma_{i,k}| <= c2`` and, along every
    graph edge ``(a, c)`` with ``Delta = x_a - x_c`` and ``D = ||Delta||_1``,
    ``|psi_a - psi_c| <= c2 D``, ``|Gamma_{a,k} - Gamma_{c,k}| <= c3 D`` and
    ``|psi_a - psi_c - <Gamma_e, Delta>| <= c3 D^2 / 2`` for ``e in {a, c}``
    (each family dropped beyond the distance where it cannot bind).  Finite
    box bounds add the Neumann-type boundary constraints in coordinate ``j``.
    The discrepancy is the sum of the ``d`` optimal values.

    Parameters
    ----------
    points : ndarray, shape (n, d) or (n,)
        Sample points (any sampler; rows may repeat, e.g. rejected MH moves).
    scores : ndarray, shape (n, d), or callable
        Target score ``b(x) = grad log p(x)`` at the points, or a function
        mapping an ``(m, d)`` array of points to the ``(m, d)`` scores.
    weights : ndarray, shape (n,), optional
        Non-negative sample weights; uniform by default.  Normalised to sum to
        one.  Duplicate points are collapsed and their weights added; points
        of zero weight are dropped (they are not in the support of ``Q``).
    lower, upper : float or ndarray of shape (d,), optional
        Box domain ``prod_j (lower_j, upper_j)`` of the target; ``None`` or
        infinite entries mean unbounded.  Points must lie in the closed box.
    stein_factors : (float, float, float), default (1, 1, 1)
        Stein factors ``(c1, c2, c3)`` bounding ``|g|``, ``|grad g|`` and the
        Lipschitz constant of ``grad g`` (non-uniform Stein set).
    dilation : float, default 2.0
        Dilation factor of the greedy spanner used when ``d >= 2``.
    complete_graph : bool, default False
        Use all pairs of points as edges (O(n^2) constraints; for small ``n``).
    method : {"auto", "univariate", "highs-ds", "highs-ipm", "highs"}, default "auto"
        How the programs are solved.  ``"auto"``: for ``d = 1`` (unless
        ``complete_graph``) the banded interior point method of
        :func:`~tallmcmc.stein.univariate_graph_stein_discrepancy`
        (``"univariate"``: near-linear time, the same value to its tolerance,
        relative duality gap 1e-9; its ``function_values`` and ``gradients``
        are an optimal test function, not necessarily HiGHS's when the optimum
        is not unique), otherwise the interior point method of HiGHS with
        crossover (``"highs-ipm"``, presolve off).  ``"highs-ds"`` (dual
        simplex), ``"highs-ipm"`` and ``"highs"`` (HiGHS's own choice) solve
        the linear programs below with :func:`scipy.optimize.linprog` in any
        dimension: the exact general path, roughly quadratic in ``n`` for
        ``d = 1`` (``docs/stein.md``).
    workers : int, optional
        Threads solving the coordinate programs concurrently (HiGHS releases
        the GIL); defaults to ``min(d, os.cpu_count())``.

    Returns
    -------
    SteinResult
        ``kind="graph"``: the discrepancy ``value`` (also ``float(result)``),
        the ``per_coordinate`` optima it is the sum of, the solver ``status``
        and ``seconds``; the optimal ``function_values`` and ``gradients`` at
        the collapsed ``points`` (with their ``weights`` and ``scores``),
        ``num_edges``, ``iterations`` and ``timings``.

    Raises
    ------
    ValueError
        On malformed inputs (shapes, non-finite values, negative weights,
        points outside the box, non-positive Stein factors), or
        ``method="univariate"`` for ``d >= 2`` or the complete graph.
    RuntimeError
        If a solver fails without a usable point (a HiGHS program not solved
        to optimality; see :func:`univariate_graph_stein_discrepancy` for
        ``d = 1``).

    Warns
    -----
    SteinSolverWarning
        For ``d = 1``, if the banded interior point method stops short of its
        tolerance (the result's ``status`` says how).

    Notes
    -----
    For ``d = 1`` the sorted path graph gives exactly the complete-graph
    value (Gorham & Mackey, Algorithm 2), and the univariate solver solves an
    equivalent program on it.  For ``d >= 2`` the value on a
    ``t``-spanner lies between the complete-graph value and ``2 t^2`` times it
    (their Proposition 6).

    References
    ----------
    .. [1] J. Gorham and L. Mackey, "Measuring Sample Quality with Stein's
       Method", Advances in Neural Information Processing Systems 28
       (NIPS 2015), Sections 3-4 and Algorithms 1-2.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((200, 2))
    >>> result = graph_stein_discrepancy(x, lambda y: -y)
    >>> result.per_coordinate.shape, result.status
    ((2,), 'optimal')
    >>> bool(np.isclose(result.per_coordinate.sum(), float(result)))
    True
    """
    if method not in GRAPH_METHODS:
        raise ValueError(f"method must be one of {GRAPH_METHODS}, got {method!r}")
    dimension = as_points(points).shape[1]
    if method == "auto":
        method = "univariate" if dimension == 1 and not complete_graph else "auto"
    if method != "univariate":
        return highs_graph_stein_discrepancy(
            points,
            scores,
            weights=weights,
            lower=lower,
            upper=upper,
            stein_factors=stein_factors,
            dilation=dilation,
            complete_graph=complete_graph,
            method=method,
            workers=workers,
        )
    if dimension != 1 or complete_graph:
        raise ValueError(
            "method='univariate' solves one-dimensional points on the sorted path: it needs d = 1 and "
            f"complete_graph=False (got d = {dimension}, complete_graph={complete_graph}); use method='auto' or a "
            f"HiGHS method ({', '.join(repr(name) for name in HIGHS_METHODS[1:])})"
        )
    checked_inputs(points, weights, lower, upper, stein_factors, dilation)  # the same errors as the HiGHS path
    return univariate_graph_stein_discrepancy(
        points, scores, weights=weights, lower=lower, upper=upper, stein_factors=stein_factors
    )
