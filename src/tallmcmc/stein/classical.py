r"""Classical Stein discrepancy of a univariate sample (Gorham & Mackey 2015, Theorem 14).

For a target :math:`P` on an interval :math:`\mathcal X = (\alpha, \beta)`
(either end may be infinite) with score :math:`b = (\log p)'` and a weighted
sample :math:`Q = \sum_i q_i \delta_{x_i}`, the classical Stein discrepancy
with Stein factors :math:`(c_1, c_2, c_3)` is

.. math::

    \sup_g \sum_i q_i \big(b(x_i) g(x_i) + g'(x_i)\big)

over the non-uniform classical Stein set: :math:`g \in C^1(\mathcal X)` with
:math:`|g| \le c_1`, :math:`|g'| \le c_2`, :math:`g'` :math:`c_3`-Lipschitz,
and :math:`g = 0` at every finite end. The supremum is over functions, but
only the values :math:`g_i = g(x_i)` and :math:`h_i = g'(x_i)` enter the
objective, and in one dimension the data :math:`(g_i, h_i)` that extend to a
function of the set are described exactly by finitely many convex
constraints between *consecutive* sorted points, the ends of the domain and
each point alone. :func:`classical_stein_discrepancy` writes that description
as a second-order cone program and solves it with Clarabel.

The constraints, for sorted distinct points :math:`x_1 < \dots < x_n`:

* :math:`|h_i| \le c_2`;
* "energy": :math:`|g_i| + h_i^2 / (2 c_3) \le c_1` (moving away from
  :math:`x_i` in the direction in which :math:`g` grows, :math:`g'` needs a
  distance :math:`|h_i|/c_3` to stop, during which :math:`g` gains at least
  :math:`h_i^2/(2c_3)`; near a finite end the other constraints make this
  hold too, see ``docs/stein.md``);
* between neighbours at distance :math:`L`, with :math:`\Delta = g_{i+1} - g_i`
  and :math:`p_\pm = c_3 L/2 \pm (h_i + h_{i+1})/2 - c_2`:

  .. math::

      \pm\Big(\Delta - \frac{L (h_i + h_{i+1})}{2}\Big)
      + \frac{(h_{i+1} - h_i)^2}{4 c_3} + \frac{(p_\pm)_+^2}{c_3}
      \le \frac{c_3 L^2}{4},

  i.e. :math:`\Delta` lies between the smallest and largest integrals of a
  :math:`c_3`-Lipschitz, :math:`c_2`-bounded :math:`g'` joining
  :math:`h_i` to :math:`h_{i+1}`;
* at a finite end at distance :math:`s` from the nearest point, the same
  with one free end: :math:`g` must return to zero at the end.

Each is a (rotated) second-order cone constraint. The derivation, the proof
that the description is exact and how it compares with SteinDiscrepancy.jl
are in ``docs/stein.md``.

References
----------
.. [1] J. Gorham and L. Mackey (2015). Measuring sample quality with Stein's
   method. *Advances in Neural Information Processing Systems 28*, Section
   5.2 and Theorem 14.
.. [2] P. J. Goulart and Y. Chen (2024). Clarabel: an interior-point solver
   for conic programs with quadratic objectives. arXiv:2405.12762.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import clarabel
import numpy as np
import scipy.sparse as sparse

from tallmcmc.stein.graph_program import _as_bounds, _as_stein_factors
from tallmcmc.stein.result import CLARABEL_STATUSES, SteinResult, warn_non_optimal
from tallmcmc.stein.scores import as_points, as_scores, normalised_weights

__all__ = ["ClassicalSteinResult", "classical_stein_discrepancy"]

#: Relative duality gap and feasibility accepted when rounding stops the solver short of ``tolerance``.
_ACCEPTED_TOLERANCE = 1e-6

ScoreFunction = Callable[[np.ndarray], np.ndarray]


#: The former result class of the classical Stein discrepancy: now :class:`~tallmcmc.stein.SteinResult`
#: (``kind="classical"``), with the same attributes (``value``, ``function_values``, ``derivatives``,
#: ``points``, ``weights``, ``scores``, ``status``, ``iterations``, ``relative_gap``, ``timings``,
#: ``operator_values()``) and more; ``status`` is now ``"optimal"`` where it was Clarabel's ``"Solved"``.
ClassicalSteinResult = SteinResult


class _Rows:
    """Rows of ``A x + s = b`` for one cone family, collected as COO triplets."""

    def __init__(self):
        self.rows, self.cols, self.vals, self.rhs = [], [], [], []
        self.count = 0

    def add(self, entries, rhs) -> np.ndarray:
        """Add ``m`` rows; ``entries`` is a list of ``(columns, values)`` arrays of length m (one nonzero per row each).

        Returns the local row indices. Row ``k`` reads ``s_k = rhs_k - sum(values * x[columns])``.
        """
        rhs = np.asarray(rhs, dtype=float)
        m = rhs.size
        rows = self.count + np.arange(m)
        for columns, values in entries:
            self.rows.append(rows)
            self.cols.append(np.broadcast_to(np.asarray(columns, dtype=np.int64), (m,)))
            self.vals.append(np.broadcast_to(np.asarray(values, dtype=float), (m,)))
        self.rhs.append(rhs)
        self.count += m
        return rows

    def triplets(self, offset: int):
        if not self.count:
            empty = np.zeros(0)
            return empty.astype(np.int64), empty.astype(np.int64), empty, empty
        return (
            np.concatenate(self.rows) + offset,
            np.concatenate(self.cols),
            np.concatenate(self.vals),
            np.concatenate(self.rhs),
        )


class _Cones:
    """Second-order cones of one dimension, each a block of consecutive rows."""

    def __init__(self, dim: int):
        self.dim = dim
        self.count = 0
        self.parts = []

    def add(self, components, rhs_components):
        """Add ``m`` cones; ``components[k]`` lists ``(columns, values)`` pairs of component ``k`` (length-m arrays)."""
        m = np.asarray(rhs_components[0]).size
        self.parts.append((self.count, m, components, rhs_components))
        self.count += m

    def triplets(self, offset: int):
        rows, cols, vals, rhs = [], [], [], np.zeros(self.count * self.dim)
        for start, m, components, rhs_components in self.parts:
            base = offset + (start + np.arange(m)) * self.dim
            for k, (entries, component_rhs) in enumerate(zip(components, rhs_components)):
                rhs[(start + np.arange(m)) * self.dim + k] = component_rhs
                for columns, values in entries:
                    rows.append(base + k)
                    cols.append(np.broadcast_to(np.asarray(columns, dtype=np.int64), (m,)))
                    vals.append(np.broadcast_to(np.asarray(values, dtype=float), (m,)))
        if not rows:
            empty = np.zeros(0)
            return empty.astype(np.int64), empty.astype(np.int64), empty, rhs
        return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), rhs


def _prepare(points, scores, weights, lower, upper, stein_factors):
    """Check the inputs; return sorted distinct points, their weights and scores, the ends and the factors."""
    raw = as_points(points)
    if raw.shape[1] != 1:
        raise ValueError(
            f"points must be univariate, shape (n,) or (n, 1); got {np.shape(points)}. "
            "The classical program is exact only in one dimension: use graph_stein_discrepancy for d >= 2"
        )
    raw_weights = normalised_weights(weights, raw.shape[0])
    factors = _as_stein_factors(stein_factors)
    alpha = float(_as_bounds(lower, 1, "lower", -np.inf)[0])
    beta = float(_as_bounds(upper, 1, "upper", np.inf)[0])
    if not alpha < beta:
        raise ValueError(f"lower must be strictly less than upper; got lower={alpha}, upper={beta}")
    x = raw[:, 0]
    if np.any(x < alpha) or np.any(x > beta):
        raise ValueError(f"points must lie inside the domain [lower, upper] = [{alpha}, {beta}]")
    unique, first, inverse = np.unique(x, return_index=True, return_inverse=True)
    unique_weights = np.bincount(inverse.reshape(-1), weights=raw_weights, minlength=unique.size)
    keep = unique_weights > 0
    unique, first, unique_weights = unique[keep], first[keep], unique_weights[keep]
    unique_weights = unique_weights / unique_weights.sum()
    if callable(scores):
        score_values = as_scores(scores, unique[:, None])[:, 0]
    else:
        score_values = as_scores(scores, raw)[first, 0]
    return unique, unique_weights, score_values, alpha, beta, factors


def _build_program(x, weights, score_values, alpha, beta, factors):
    """The cone program ``min q.z  s.t.  A z + s = b, s in K``.

    Returns ``(q, A, b, cones, n_variables, g_columns, h_columns)``. Variables
    are laid out point by point (``g_i, h_i``, then the variables of the gap
    to the right of ``x_i``, then, at the first and last point, those of the
    end), so the constraint matrix is banded.
    """
    c1, c2, c3 = factors
    n = x.size
    gap = np.diff(x)
    # largest |h| the energy constraint and the bound c2 allow
    h_max = min(c2, np.sqrt(2.0 * c1 * c3))

    # constraints that can bind (the others are implied by |h| <= h_max and |g| <= c1):
    # a gap's pair of cones while L < 4 c2/c3 + 2 c1/c2; its slacks while c3 L/2 > c2 - h_max;
    # an end's pair while s < 2 c2/c3 + c1/c2 (a point on an end only has g = 0)
    gap_kept = gap < 4.0 * c2 / c3 + 2.0 * c1 / c2
    gap_slacks = gap_kept & (c3 * gap / 2.0 > c2 - h_max)
    end_cutoff = 2.0 * c2 / c3 + c1 / c2
    s_left, s_right = x[0] - alpha, beta - x[-1]  # inf on an unbounded side
    left_end = bool(0.0 < s_left < end_cutoff)
    right_end = bool(0.0 < s_right < end_cutoff)

    # ---- variable layout, point by point --------------------------------
    # per point: g, h; e, d for the gap to its right, and the slacks t+, t- where they can bind;
    # e, rho+, rho- for an end next to the first / last point
    count = np.full(n, 2)
    count[:-1] += 2 * gap_kept + 2 * gap_slacks
    count[0] += 3 * left_end
    count[-1] += 3 * right_end
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    n_variables = int(count.sum())
    g, h = start, start + 1
    excess, slope, t_plus, t_minus = start + 2, start + 3, start + 4, start + 5  # valid where used
    left_columns = start[0] + count[0] - 3 * right_end * (n == 1) - 3 + np.arange(3) if left_end else None
    right_columns = start[-1] + count[-1] - 3 + np.arange(3) if right_end else None

    objective = np.zeros(n_variables)
    objective[g] = -weights * score_values
    objective[h] = -weights

    zero, nonneg, soc3, soc4 = _Rows(), _Rows(), _Cones(3), _Cones(4)

    # ---- |h_i| <= c2 (implied by the energy constraint when c2^2 >= 2 c1 c3) ----
    if c2 * c2 < 2.0 * c1 * c3:
        nonneg.add([(h, 1.0)], np.full(n, c2))
        nonneg.add([(h, -1.0)], np.full(n, c2))

    # ---- energy: |g_i| + h_i^2/(2 c3) <= c1 --------------------------------
    # for eps = +1, -1 the rotated cone h^2 <= 2 c3 (c1 - eps g), i.e. with x = h / sqrt(2 c1 c3)
    # and y = (c1 - eps g)/c1, x^2 <= y, as the second-order cone (y + 1, 2 x, y - 1)
    root = np.sqrt(2.0 * c1 * c3)
    for eps in (1.0, -1.0):
        soc3.add([[(g, eps / c1)], [(h, -2.0 / root)], [(g, eps / c1)]], [np.full(n, 2.0), np.zeros(n), np.zeros(n)])

    # ---- consecutive points --------------------------------------------
    # Gap (a, b) = (i, i+1) of length L. In units natural to the gap,
    #   e = (g_b - g_a - L (h_a + h_b)/2) / (c3 L^2/4),   d = (h_b - h_a) / (c3 L)
    # (two equality rows), and for sign = +1 (upper) and -1 (lower), with a slack t,
    #   d^2 + t^2 <= 1 - sign e,   (c3 L/2) t >= sign (h_a + h_b)/2 + c3 L/2 - c2,
    # the cone being (2 - sign e, 2 d, 2 t, -sign e); without the slack (where it cannot
    # bind) the cone (2 - sign e, 2 d, -sign e). Every coefficient is O(1) or smaller,
    # however close the points are.
    k = np.flatnonzero(gap_kept)
    length = gap[k]
    ga, gb, ha, hb, e, d = g[k], g[k + 1], h[k], h[k + 1], excess[k], slope[k]
    zero.add(
        [(gb, 1.0), (ga, -1.0), (ha, -length / 2.0), (hb, -length / 2.0), (e, -c3 * length**2 / 4.0)], np.zeros(k.size)
    )
    zero.add([(hb, 1.0), (ha, -1.0), (d, -c3 * length)], np.zeros(k.size))
    with_slack = gap_slacks[k]
    i, j = np.flatnonzero(with_slack), np.flatnonzero(~with_slack)
    for sign, slack in ((1.0, t_plus[k]), (-1.0, t_minus[k])):
        soc4.add(
            [[(e[i], sign)], [(d[i], -2.0)], [(slack[i], -2.0)], [(e[i], sign)]],
            [np.full(i.size, 2.0), np.zeros(i.size), np.zeros(i.size), np.zeros(i.size)],
        )
        nonneg.add(
            [(slack[i], -c3 * length[i] / 2.0), (ha[i], sign / 2.0), (hb[i], sign / 2.0)], c2 - c3 * length[i] / 2.0
        )
        soc3.add(
            [[(e[j], sign)], [(d[j], -2.0)], [(e[j], sign)]], [np.full(j.size, 2.0), np.zeros(j.size), np.zeros(j.size)]
        )

    # ---- finite ends -----------------------------------------------------
    # At distance s > 0 from the end, with kappa = +1 at the lower end and -1 at the upper end,
    #   e = (kappa g - s h) / (c3 s^2/2)   (an equality row), and for sgn = +1, -1,
    #   rho^2 <= 1 - sgn e,   (c3 s) rho >= sgn h + c3 s - c2,
    # the cone being (2 - sgn e, 2 rho, -sgn e). A point on the end has g = 0.
    for point, distance, kappa, kept, columns in (
        (0, float(s_left), 1.0, left_end, left_columns),
        (n - 1, float(s_right), -1.0, right_end, right_columns),
    ):
        gp, hp = np.array([g[point]]), np.array([h[point]])
        if distance == 0.0:
            zero.add([(gp, 1.0)], np.zeros(1))
        if not kept:
            continue
        e_end = np.array([columns[0]])
        zero.add([(gp, kappa), (hp, -distance), (e_end, -c3 * distance**2 / 2.0)], np.zeros(1))
        for rho, sgn in zip(columns[1:], (1.0, -1.0)):
            rho = np.array([rho])
            soc3.add([[(e_end, sgn)], [(rho, -2.0)], [(e_end, sgn)]], [np.full(1, 2.0), np.zeros(1), np.zeros(1)])
            nonneg.add([(rho, -c3 * distance), (hp, sgn)], np.full(1, c2 - c3 * distance))

    # ---- assemble ---------------------------------------------------------
    parts, cones, offset = [], [], 0
    for family, cone in ((zero, clarabel.ZeroConeT), (nonneg, clarabel.NonnegativeConeT)):
        if family.count:
            parts.append(family.triplets(offset))
            cones.append(cone(family.count))
            offset += family.count
    for family in (soc3, soc4):
        if family.count:
            parts.append(family.triplets(offset))
            cones.extend([clarabel.SecondOrderConeT(family.dim)] * family.count)
            offset += family.count * family.dim
    rows, cols, vals, rhs = (np.concatenate([p[m] for p in parts]) for m in range(4))
    matrix = sparse.csc_matrix((vals, (rows, cols)), shape=(offset, n_variables))
    matrix.sum_duplicates()
    matrix.eliminate_zeros()
    return objective, matrix, rhs, cones, n_variables, g, h


def _solve(x, w, b, alpha, beta, factors, *, tolerance, max_iter, verbose):
    """Build and solve the program; return ``(g, h, status, iterations, relative gap, timings)``.

    ``status`` is that of a :class:`~tallmcmc.stein.SteinResult`; a status
    short of ``"optimal"`` is warned about, a Clarabel status without a
    usable point raises a ``RuntimeError``.
    """
    start = time.perf_counter()
    objective, matrix, rhs, cones, n_variables, g_index, h_index = _build_program(x, w, b, alpha, beta, factors)
    # the costs are O(1/n): scale them to max |cost| = 1 so the gap tolerances are relative to O(1) numbers
    cost_scale = float(np.abs(objective).max()) or 1.0
    settings = clarabel.DefaultSettings()
    settings.verbose = bool(verbose)
    settings.max_iter = int(max_iter)
    settings.tol_gap_abs = tolerance
    settings.tol_gap_rel = tolerance
    settings.tol_feas = tolerance
    # where rounding stops the interior point method short of `tolerance` (seen from n ~ 10^4 on),
    # accept a point within _ACCEPTED_TOLERANCE as "AlmostSolved" (Clarabel's default there is 5e-5)
    accepted = max(tolerance, _ACCEPTED_TOLERANCE)
    settings.reduced_tol_gap_abs = accepted
    settings.reduced_tol_gap_rel = accepted
    settings.reduced_tol_feas = accepted
    settings.presolve_enable = False  # no infinite right-hand sides; keep the rows as written
    setup_seconds = time.perf_counter() - start

    start = time.perf_counter()
    quadratic = sparse.csc_matrix((n_variables, n_variables))
    solver = clarabel.DefaultSolver(quadratic, objective / cost_scale, matrix, rhs, cones, settings)
    solution = solver.solve()
    solve_seconds = time.perf_counter() - start

    clarabel_status = str(solution.status)
    z = np.asarray(solution.x)
    status = CLARABEL_STATUSES.get(clarabel_status)
    if status is None or not np.all(np.isfinite(z)):
        raise RuntimeError(
            f"classical Stein program failed: Clarabel status {clarabel_status} after {solution.iterations} "
            "iterations. The program is always feasible and bounded, so this is a numerical failure: try a "
            "looser tolerance (e.g. 1e-6) or fewer (thinned) points"
        )
    info = solver.get_info()
    gap = float(info.gap_rel)
    if status != "optimal":
        if status == "almost solved":
            advice = (
                f"Rounding stops Clarabel short of tolerance={tolerance:.0e} on large samples (from n ~ 10^3); "
                f"the value then met the reduced tolerance {accepted:.0e}: pass tolerance={accepted:.0e} to "
                "accept that accuracy without this warning, or use fewer (thinned) points"
            )
        elif status == "iteration limit":
            advice = f"Raise max_iter (now {max_iter}) or loosen tolerance (now {tolerance:.0e})"
        else:
            advice = f"Loosen tolerance (now {tolerance:.0e}) or use fewer (thinned) points"
        warn_non_optimal(
            "classical",
            status,
            f"Clarabel stopped with status {clarabel_status} after {solution.iterations} iterations (relative gap "
            f"{gap:.1e}, primal residual {float(info.res_primal):.1e})",
            advice,
        )
    timings = {"setup": setup_seconds, "solve": solve_seconds}
    return z[g_index], z[h_index], status, int(solution.iterations), gap, timings


def classical_stein_discrepancy(
    points: np.ndarray,
    scores: np.ndarray | ScoreFunction,
    weights: np.ndarray | None = None,
    lower: float | None = None,
    upper: float | None = None,
    stein_factors: Sequence[float] = (1.0, 1.0, 1.0),
    *,
    tolerance: float = 1e-8,
    max_iter: int = 200,
    verbose: bool = False,
) -> SteinResult:
    r"""Classical (Langevin) Stein discrepancy of a univariate weighted sample.

    Solves exactly, as a second-order cone program over the values
    :math:`g_i` and derivatives :math:`h_i` of :math:`g` at the sorted
    distinct points, the supremum of
    :math:`\sum_i q_i (b(x_i) g(x_i) + g'(x_i))` over the non-uniform classical
    Stein set (:math:`|g| \le c_1`, :math:`|g'| \le c_2`, :math:`g'`
    :math:`c_3`-Lipschitz, :math:`g = 0` at finite ends of the domain). The
    constraints are listed in the module docstring and derived in
    ``docs/stein.md``. It is never larger than the (complete-)graph Stein
    discrepancy with the same factors, which imposes only some of these
    constraints.

    Parameters
    ----------
    points : ndarray, shape (n,) or (n, 1)
        Sample points; duplicates are collapsed and their weights added.
    scores : ndarray, shape (n,) or (n, 1), or callable
        Target score :math:`b = (\log p)'` at the points, or a function of an
        ``(m, 1)`` array of points.
    weights : ndarray, shape (n,), optional
        Non-negative sample weights, normalised to sum to one (default equal).
    lower, upper : float, optional
        Ends of the target's support (``None`` or infinite: unbounded). Points
        must lie in ``[lower, upper]``.
    stein_factors : (float, float, float), default (1, 1, 1)
        ``(c1, c2, c3)``: bounds on ``|g|``, ``|g'|`` and the Lipschitz
        constant of ``g'``. ``(1, 4, 2)`` for N(0, 1) and ``(0.5, 0.5, 1)``
        for Unif(0, 1) make the discrepancy an upper bound on the
        1-Wasserstein distance (equal to it for Unif(0, 1)).
    tolerance : float, default 1e-8
        Clarabel's absolute and relative duality-gap and feasibility tolerances.
    max_iter : int, default 200
        Interior point iteration limit.
    verbose : bool, default False
        Print Clarabel's log.

    Returns
    -------
    SteinResult
        ``kind="classical"``, ``method="clarabel"``: the ``value`` (also
        ``float(result)``; ``per_coordinate`` is ``[value]``), the solver
        ``status`` (``"optimal"``, or ``"almost solved"`` etc., warned
        about) and ``seconds``; the optimal ``function_values`` and
        ``derivatives`` at the sorted distinct ``points`` (shape (n,)), their
        ``weights`` and ``scores``, ``iterations``, ``relative_gap`` and
        ``timings``. ``operator_values()`` is the optimal ``T g`` at the points.

    Raises
    ------
    ValueError
        On malformed inputs: ``points`` not univariate or not finite,
        ``scores`` of the wrong shape, bad ``weights``, ``lower >= upper``,
        points outside ``[lower, upper]``, non-positive ``stein_factors``,
        non-positive ``tolerance`` or ``max_iter``.
    RuntimeError
        If Clarabel fails without a usable point (an infeasibility or
        numerical-error status: the program itself is always feasible and
        bounded).

    Warns
    -----
    SteinSolverWarning
        (a ``RuntimeWarning``) If Clarabel stops short of ``tolerance`` but
        with a usable point: ``AlmostSolved`` (rounding stopped it within
        1e-6, common from n ~ 10^3 at the default ``tolerance``; pass
        ``tolerance=1e-6`` to accept that), ``MaxIterations``, ``MaxTime``
        or ``InsufficientProgress``. The result's ``status`` records it.

    References
    ----------
    .. [1] J. Gorham and L. Mackey (2015). Measuring sample quality with
       Stein's method. NeurIPS 28, Section 5.2 and Theorem 14.

    Examples
    --------
    A point mass at the mode of N(0, 1): the best ``g`` has ``g(0) = 0`` and
    ``g'(0) = min(c2, sqrt(2 c1 c3))``.

    >>> result = classical_stein_discrepancy([0.0], [0.0], stein_factors=(1, 4, 2))
    >>> round(float(result), 6), result.status
    (2.0, 'optimal')
    """
    start_total = time.perf_counter()
    if not tolerance > 0:
        raise ValueError(f"tolerance must be positive, got {tolerance}")
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be at least 1, got {max_iter}")
    x, w, b, alpha, beta, factors = _prepare(points, scores, weights, lower, upper, stein_factors)

    setup_seconds = time.perf_counter() - start_total
    g_values, h_values, status, iterations, relative_gap, timings = _solve(
        x, w, b, alpha, beta, factors, tolerance=tolerance, max_iter=max_iter, verbose=verbose
    )
    timings["setup"] += setup_seconds
    value = float(np.sum(w * (b * g_values + h_values)))
    total_seconds = time.perf_counter() - start_total
    return SteinResult(
        value=value,
        kind="classical",
        method="clarabel",
        status=status,
        seconds=total_seconds,
        n=int(x.size),
        d=1,
        per_coordinate=np.array([value]),
        points=x,
        weights=w,
        scores=b,
        function_values=g_values,
        derivatives=h_values,
        iterations=iterations,
        relative_gap=relative_gap,
        timings={**timings, "total": total_seconds},
    )
