r"""Univariate helpers for Stein discrepancies: Wasserstein distance, Stein factors.

Wasserstein distance to a target with known CDF
-----------------------------------------------
For a weighted sample :math:`Q = \sum_i q_i \delta_{x_i}` on the line and a
target CDF :math:`F`, the 1-Wasserstein distance is
:math:`d_W(Q, P) = \int_{-\infty}^{\infty} |F_Q(x) - F(x)|\,dx`
(Vallender, 1974), with :math:`F_Q` the empirical step CDF.
:func:`wasserstein_1d` evaluates it as follows.

* Sort the distinct points :math:`x_{(1)} < \dots < x_{(m)}`; on each gap
  :math:`[x_{(k)}, x_{(k+1)})` the empirical CDF is the constant
  :math:`S_k` (the cumulative weight), so no approximation of the step
  function is involved.
* On a gap, :math:`F` is non-decreasing, so :math:`S_k - F` changes sign at
  most once, at :math:`F^{-1}(S_k)`. That crossing is found with the target
  quantile function when given, otherwise by vectorised bisection (60 halvings,
  to machine precision), and the gap is split there. Optional
  ``breakpoints`` (kinks of :math:`F`, e.g. the ends of a bounded support)
  split the gaps further.
* Each piece then has a smooth, single-signed integrand; its integral
  :math:`\pm\int (S_k - F)` is computed with Gauss-Legendre quadrature
  (``quadrature_nodes`` nodes, default 32; pieces longer than
  ``max_piece_length`` are subdivided), or exactly when the antiderivative of
  the CDF is supplied.
* The tails :math:`\int_{-\infty}^{x_{(1)}} F` and
  :math:`\int_{x_{(m)}}^{\infty} (1 - F)` are computed with
  :func:`scipy.integrate.quad` (or the antiderivative).

Stein factors
-------------
Gorham and Mackey (2015, Section 5.2) use the non-uniform Stein sets with
factors :math:`(c_1, c_2, c_3) = (1, 4, 2)` for :math:`N(0, 1)` and
:math:`(0.5, 0.5, 1)` for :math:`\mathrm{Unif}(0, 1)`; with these factors the
Stein discrepancy is bounded below by the Wasserstein distance (Chen,
Goldstein and Shao, 2010; Dobler, 2014), and for :math:`\mathrm{Unif}(0, 1)`
the classical Stein discrepancy equals it.

References
----------
.. [1] J. Gorham and L. Mackey (2015). Measuring sample quality with Stein's
   method. *Advances in Neural Information Processing Systems 28*.
.. [2] S. S. Vallender (1974). Calculation of the Wasserstein distance between
   probability distributions on the line. *Theory of Probability and Its
   Applications*, 18(4), 784-786.
.. [3] L. H. Y. Chen, L. Goldstein and Q.-M. Shao (2010). *Normal
   Approximation by Stein's Method*. Springer.
.. [4] C. Dobler (2014). Stein's method of exchangeable pairs for the Beta
   distribution and generalizations. arXiv:1411.4477.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import clarabel
import numba
import numpy as np
import scipy.sparse as sparse
from scipy import integrate, special

from tallmcmc.stein.graph_program import (
    _as_bounds,
    _as_stein_factors,
    highs_graph_stein_discrepancy,
)
from tallmcmc.stein.result import CLARABEL_STATUSES, SteinResult, warn_non_optimal
from tallmcmc.stein.scores import as_points, as_scores, normalised_weights

__all__ = [
    "univariate_graph_stein_discrepancy",
    "UNIVARIATE_SOLVERS",
    "GAUSSIAN_STEIN_FACTORS",
    "UNIFORM_STEIN_FACTORS",
    "CLASSICAL_STEIN_FACTORS",
    "stein_factors",
    "wasserstein_1d",
    "standard_normal_cdf",
    "standard_normal_cdf_integral",
    "uniform_cdf",
    "uniform_cdf_integral",
]

#: Stein factors (c1, c2, c3) of the classical Stein set.
CLASSICAL_STEIN_FACTORS: tuple[float, float, float] = (1.0, 1.0, 1.0)
#: Stein factors (c1, c2, c3) for the standard normal target N(0, 1)
#: (Gorham and Mackey 2015, Section 5.2).
GAUSSIAN_STEIN_FACTORS: tuple[float, float, float] = (1.0, 4.0, 2.0)
#: Stein factors (c1, c2, c3) for the uniform target Unif(0, 1)
#: (Gorham and Mackey 2015, Section 5.2).
UNIFORM_STEIN_FACTORS: tuple[float, float, float] = (0.5, 0.5, 1.0)

_FACTORS = {
    "classical": CLASSICAL_STEIN_FACTORS,
    "gaussian": GAUSSIAN_STEIN_FACTORS,
    "normal": GAUSSIAN_STEIN_FACTORS,
    "uniform": UNIFORM_STEIN_FACTORS,
}


def stein_factors(target: str) -> tuple[float, float, float]:
    """Non-uniform Stein factors ``(c1, c2, c3)`` used by Gorham and Mackey.

    Parameters
    ----------
    target : {"gaussian", "normal", "uniform", "classical"}
        ``"gaussian"``/``"normal"``: N(0, 1), (1, 4, 2); ``"uniform"``:
        Unif(0, 1), (0.5, 0.5, 1); ``"classical"``: (1, 1, 1).

    Returns
    -------
    tuple of float
        ``(c1, c2, c3)``: bounds on ``|g|``, ``|g'|`` and the Lipschitz
        constant of ``g'``.

    References
    ----------
    .. [1] J. Gorham and L. Mackey (2015). Measuring sample quality with
       Stein's method. NeurIPS 28, Section 5.2.
    """
    try:
        return _FACTORS[target.lower()]
    except KeyError:
        raise ValueError(f"unknown target {target!r}; choose from {sorted(_FACTORS)}") from None


# ---------------------------------------------------------------------------
# target CDFs and their antiderivatives
# ---------------------------------------------------------------------------
def standard_normal_cdf(x):
    """CDF of N(0, 1)."""
    return special.ndtr(x)


def standard_normal_cdf_integral(x):
    r"""Antiderivative :math:`\int_{-\infty}^x \Phi = x\Phi(x) + \varphi(x)` of the N(0, 1) CDF."""
    x = np.asarray(x, dtype=float)
    return x * special.ndtr(x) + np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)


def uniform_cdf(x):
    """CDF of Unif(0, 1)."""
    return np.clip(np.asarray(x, dtype=float), 0.0, 1.0)


def uniform_cdf_integral(x):
    r"""Antiderivative :math:`\int_{-\infty}^x F` of the Unif(0, 1) CDF."""
    x = np.asarray(x, dtype=float)
    return np.where(x <= 0, 0.0, np.where(x >= 1, x - 0.5, 0.5 * x * x))


# ---------------------------------------------------------------------------
# Wasserstein distance
# ---------------------------------------------------------------------------
def _gap_crossings(cdf, quantile, lower, upper, level):
    """Where F crosses the step level inside each gap [lower, upper] (by the quantile if given), clipped to the gap."""
    if quantile is not None:
        with np.errstate(all="ignore"):
            crossing = np.asarray(quantile(level), dtype=float)
        crossing = np.where(np.isfinite(crossing), crossing, lower)
    else:
        crossing = _bisect_crossing(cdf, lower, upper, level)
    return np.clip(crossing, lower, upper)


def _bisect_crossing(cdf, lower, upper, level, iterations=60):
    """Vectorised bisection for F(t) = level on [lower, upper] (F non-decreasing)."""
    lower = lower.copy()
    upper = upper.copy()
    for _ in range(iterations):
        middle = 0.5 * (lower + upper)
        below = np.asarray(cdf(middle)) < level
        lower = np.where(below, middle, lower)
        upper = np.where(below, upper, middle)
    return 0.5 * (lower + upper)


def wasserstein_1d(
    sample,
    target_cdf: Callable[[np.ndarray], np.ndarray],
    weights=None,
    *,
    target_quantile: Callable[[np.ndarray], np.ndarray] | None = None,
    target_cdf_integral: Callable[[np.ndarray], np.ndarray] | None = None,
    breakpoints: Sequence[float] = (),
    quadrature_nodes: int = 32,
    max_piece_length: float = 0.25,
) -> float:
    r"""1-Wasserstein distance between a weighted sample and a univariate target.

    Computes :math:`\int_{-\infty}^{\infty} |F_Q(x) - F(x)|\,dx` exactly for
    the empirical step CDF :math:`F_Q`: the line is cut at the sample points
    (where :math:`F_Q` jumps) and where :math:`F` crosses each step level,
    and each resulting piece, whose integrand is smooth and of one sign, is
    integrated by Gauss-Legendre quadrature (or exactly, given
    ``target_cdf_integral``); the two tails use :func:`scipy.integrate.quad`.
    See the module docstring for details.

    Parameters
    ----------
    sample : array_like, shape (n,) or (n, 1)
        Sample points (duplicates allowed).
    target_cdf : callable
        Vectorised CDF :math:`F` of the target.
    weights : array_like, shape (n,), optional
        Non-negative sample weights, normalised to sum to one (default equal).
    target_quantile : callable, optional
        Vectorised inverse CDF; used to locate the crossings (else bisection).
    target_cdf_integral : callable, optional
        Antiderivative :math:`G(x) = \int_{-\infty}^x F(t)\,dt`; when given
        every integral is exact in closed form (no quadrature).
    breakpoints : sequence of float
        Points where :math:`F` is not smooth (e.g. ``(0, 1)`` for Unif(0, 1));
        the quadrature pieces are split there.
    quadrature_nodes : int
        Gauss-Legendre nodes per piece.
    max_piece_length : float
        Pieces longer than this are split into equal parts before quadrature.

    Returns
    -------
    float
        The Wasserstein distance :math:`d_W(Q, P)`.

    References
    ----------
    .. [1] S. S. Vallender (1974). Calculation of the Wasserstein distance
       between probability distributions on the line. *Theory of Probability
       and Its Applications*, 18(4), 784-786.
    .. [2] J. Gorham and L. Mackey (2015). Measuring sample quality with
       Stein's method. NeurIPS 28, Section 5.2.

    Examples
    --------
    >>> import numpy as np
    >>> round(wasserstein_1d(np.array([0.5]), uniform_cdf), 12)  # int_0^1 |1{x >= 0.5} - x| dx
    0.25
    """
    points = np.asarray(sample, dtype=float)
    if points.ndim == 2 and points.shape[1] == 1:
        points = points[:, 0]
    if points.ndim != 1 or points.size == 0:
        raise ValueError(f"sample must have shape (n,) or (n, 1) with n >= 1; got {np.shape(sample)}")
    if not np.all(np.isfinite(points)):
        raise ValueError("sample contains non-finite values")
    if weights is None:
        w = np.full(points.size, 1.0 / points.size)
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != points.shape:
            raise ValueError(f"weights must have shape {points.shape}; got {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError("weights must be finite, non-negative and have a positive sum")
        w = w / w.sum()
    if quadrature_nodes < 1 or not max_piece_length > 0:
        raise ValueError("quadrature_nodes must be >= 1 and max_piece_length > 0")

    order = np.argsort(points, kind="stable")
    sorted_points = points[order]
    distinct, first = np.unique(sorted_points, return_index=True)
    cumulative = np.cumsum(w[order])
    last = np.append(first[1:], sorted_points.size) - 1
    levels = np.minimum(cumulative[last], 1.0)  # F_Q on [distinct[k], distinct[k+1])

    if target_cdf_integral is not None:
        return _wasserstein_by_antiderivative(distinct, levels, target_cdf, target_cdf_integral, target_quantile)

    cdf = target_cdf
    # tails
    left_tail, _ = integrate.quad(lambda t: float(cdf(np.array(t))), -np.inf, distinct[0], limit=200)
    right_tail, _ = integrate.quad(lambda t: 1.0 - float(cdf(np.array(t))), distinct[-1], np.inf, limit=200)
    total = left_tail + right_tail
    if distinct.size == 1:
        return float(total)

    lower = distinct[:-1]
    upper = distinct[1:]
    level = levels[:-1]
    # crossing of F with the step level inside each gap (clipped to the gap)
    crossing = _gap_crossings(cdf, target_quantile, lower, upper, level)
    cuts = [lower, crossing, upper]
    ends = np.column_stack(cuts)
    # pieces: (gap index, start, end), further split at breakpoints and by length
    starts = ends[:, :-1].ravel()
    stops = ends[:, 1:].ravel()
    piece_level = np.repeat(level, 2)
    for point in breakpoints:
        inside = (starts < point) & (point < stops)
        if np.any(inside):
            starts = np.concatenate([starts, np.full(inside.sum(), float(point))])
            stops = np.concatenate([stops, stops[inside]])
            piece_level = np.concatenate([piece_level, piece_level[inside]])
            stops[np.flatnonzero(inside)] = point
    keep = stops > starts
    starts, stops, piece_level = starts[keep], stops[keep], piece_level[keep]
    parts = np.maximum(1, np.ceil((stops - starts) / max_piece_length)).astype(int)
    if np.any(parts > 1):
        index = np.repeat(np.arange(starts.size), parts)
        offset = np.arange(index.size) - np.repeat(np.cumsum(parts) - parts, parts)
        width = (stops - starts)[index] / parts[index]
        starts, stops = starts[index] + offset * width, starts[index] + (offset + 1) * width
        piece_level = piece_level[index]
    nodes, node_weights = np.polynomial.legendre.leggauss(quadrature_nodes)
    half = 0.5 * (stops - starts)
    middle = 0.5 * (stops + starts)
    abscissae = middle[:, None] + half[:, None] * nodes[None, :]
    values = piece_level[:, None] - np.asarray(cdf(abscissae), dtype=float)
    signed = half * (values @ node_weights)
    total += float(np.sum(np.abs(signed)))
    return float(total)


def _wasserstein_by_antiderivative(distinct, levels, cdf, antiderivative, quantile):
    r"""Closed form given :math:`G = \int F`: the tails are :math:`G(x_{(1)})` and
    :math:`\lim_{t\to\infty}(t - G(t)) - (x_{(m)} - G(x_{(m)}))`; inside a gap,
    :math:`\int |S - F|` splits at the crossing."""
    G = antiderivative
    total = float(G(distinct[0]))
    # right tail: int_{x_m}^inf (1 - F) = lim_{T} [T - G(T)] - [x_m - G(x_m)]
    far = max(abs(distinct[-1]), 1.0) * 1e3
    total += float((far - G(far)) - (distinct[-1] - G(distinct[-1])))
    if distinct.size == 1:
        return total
    lower, upper, level = distinct[:-1], distinct[1:], levels[:-1]
    crossing = _gap_crossings(cdf, quantile, lower, upper, level)
    # on [lower, crossing] F <= S; on [crossing, upper] F >= S
    first = level * (crossing - lower) - (G(crossing) - G(lower))
    second = (G(upper) - G(crossing)) - level * (upper - crossing)
    return float(total + np.sum(np.abs(first)) + np.sum(np.abs(second)))


# ---------------------------------------------------------------------------
# the univariate graph Stein discrepancy in near-linear time
# ---------------------------------------------------------------------------
#: Solvers accepted by :func:`univariate_graph_stein_discrepancy`.
UNIVARIATE_SOLVERS = ("ipm", "clarabel", "highs")

# within-point order of the unknowns and equations of the banded program
# (variables and rows of point i and gap i come before those of point i + 1): phi, Gamma,
# [r_k, E4_k per finite end k], then w, v, u, E3, E2, E1 -- a band of half-width 6 (8, 10 with one
# or two finite ends). Orders of smaller bandwidth that put equations before the gap's variables
# (e.g. Gamma, phi, E3, v, E1, E2, u, w: half-width 4) broke down near the optimum (overflow at a
# relative gap of 1e-6, n = 3e4), and so did the normal equations A S A^T (half-width 5): at
# n = 2e5 their primal residual stalled near 1e-10 and the objective was off by 2e-7.
_KEY_PHI, _KEY_GAMMA, _KEY_R, _KEY_E4 = 0, 1, 2, 3  # r and E4 of end k: 2 + 2k and 3 + 2k
_GAP_KEYS = dict(w=6, v=7, u=8, E3=9, E2=10, E1=11)


@dataclass
class _BandedProgram:
    """``min c.z  s.t.  A z = 0,  -h <= z <= h`` with the keys that order ``(z, rows)`` into a band."""

    matrix: sparse.csr_matrix
    cost: np.ndarray
    half_width: np.ndarray
    var_key: np.ndarray
    row_key: np.ndarray
    sigma: np.ndarray
    n: int


def _banded_program(x, q, b, lower, upper, factors) -> _BandedProgram:
    r"""The univariate program on sorted distinct points, written so that its KKT system is banded.

    Unknowns (see docs/stein.md): :math:`\phi_i = \psi_i / \sigma_i` with
    :math:`\sigma_i = \min(c_1, c_2 |x_i - t|)` over the finite ends ``t``;
    :math:`\Gamma_i`; per gap :math:`D_i = x_{i+1} - x_i` the slope
    :math:`u_i = (\psi_{i+1} - \psi_i) / D_i` and the Taylor defects
    :math:`v_i = (\Gamma_i - u_i)/D_i`, :math:`w_i = (\Gamma_{i+1} - u_i)/D_i`;
    per finite end and point with :math:`s = x_i - t \neq 0`,
    :math:`r_i = (\psi_i - s\Gamma_i)/s^2`. All are boxed:
    :math:`|\phi| \le 1`, :math:`|\Gamma|, |u| \le c_2`, :math:`|v|, |w|, |r| \le c_3/2`.
    """
    c1, c2, c3 = factors
    n = x.size
    m = n - 1
    gaps = np.diff(x)
    ends = [float(t) for t in (lower, upper) if np.isfinite(t)]
    sigma = np.full(n, c1)
    for t in ends:
        sigma = np.minimum(sigma, c2 * np.abs(x - t))
    point = np.arange(n)
    edge = np.arange(m)
    phi, gamma = point, n + point
    u = 2 * n + edge
    v = u + m
    w = v + m
    n_columns = 2 * n + 3 * m
    half_width = [np.full(n, 1.0), np.full(n, c2), np.full(m, c2), np.full(m, 0.5 * c3), np.full(m, 0.5 * c3)]
    key = _GAP_KEYS
    var_key = [
        np.c_[point, np.full(n, _KEY_PHI)],
        np.c_[point, np.full(n, _KEY_GAMMA)],
        np.c_[edge, np.full(m, key["u"])],
        np.c_[edge, np.full(m, key["v"])],
        np.c_[edge, np.full(m, key["w"])],
    ]
    ones = np.ones(m)
    # E1: Gamma_{i+1} - Gamma_i + D v - D w = 0;  E2: psi_{i+1} - psi_i - D u = 0;  E3: Gamma_i - u - D v = 0
    rows = [np.repeat(edge, 4), m + np.repeat(edge, 3), 2 * m + np.repeat(edge, 3)]
    columns = [
        np.stack([gamma[1:], gamma[:-1], v, w], axis=1).ravel(),
        np.stack([phi[1:], phi[:-1], u], axis=1).ravel(),
        np.stack([gamma[:-1], u, v], axis=1).ravel(),
    ]
    values = [
        np.stack([ones, -ones, gaps, -gaps], axis=1).ravel(),
        np.stack([sigma[1:], -sigma[:-1], -gaps], axis=1).ravel(),
        np.stack([ones, -ones, -gaps], axis=1).ravel(),
    ]
    row_key = [
        np.c_[edge, np.full(m, key["E1"])],
        np.c_[edge, np.full(m, key["E2"])],
        np.c_[edge, np.full(m, key["E3"])],
    ]
    n_rows = 3 * m
    # boundary (Neumann) rows: psi - s Gamma - s^2 r = 0, divided by |s|
    for k, t in enumerate(ends):
        offset = x - t
        at = np.flatnonzero(offset != 0)  # where s = 0, sigma = 0 already forces psi = 0
        size = np.abs(offset[at])
        r = n_columns + np.arange(at.size)
        n_columns += at.size
        new_rows = n_rows + np.arange(at.size)
        n_rows += at.size
        rows.append(np.repeat(new_rows, 3))
        columns.append(np.stack([phi[at], gamma[at], r], axis=1).ravel())
        values.append(np.stack([sigma[at] / size, -np.sign(offset[at]), -size], axis=1).ravel())
        half_width.append(np.full(at.size, 0.5 * c3))
        var_key.append(np.c_[at, np.full(at.size, _KEY_R + 2 * k)])
        row_key.append(np.c_[at, np.full(at.size, _KEY_E4 + 2 * k)])
    matrix = sparse.csr_matrix(
        (np.concatenate(values), (np.concatenate(rows), np.concatenate(columns))), shape=(n_rows, n_columns)
    )
    cost = np.zeros(n_columns)
    cost[phi] = -q * b * sigma
    cost[gamma] = -q
    return _BandedProgram(
        matrix=matrix,
        cost=cost,
        half_width=np.concatenate(half_width),
        var_key=np.concatenate(var_key).astype(np.int64),
        row_key=np.concatenate(row_key).astype(np.int64),
        sigma=sigma,
        n=n,
    )


@numba.njit(cache=True)
def _banded_ldl(band, signs, tiny):  # pragma: no cover - compiled
    """In place LDL^T of a banded quasidefinite matrix, ``band[j, k] = K[j + k, j]``.

    No pivoting (a quasidefinite matrix has a stable LDL^T in any order,
    Vanderbei 1995); a pivot of the wrong sign or below ``tiny`` in
    magnitude is replaced by ``signs[j] * tiny``. On return ``band[:, 0]``
    holds D and ``band[j, k]`` (k >= 1) the unit lower factor.
    """
    n, width = band.shape
    bandwidth = width - 1
    for j in range(n):
        d = band[j, 0]
        if signs[j] * d < tiny:
            d = signs[j] * tiny
        band[j, 0] = d
        inverse = 1.0 / d
        last = min(bandwidth, n - 1 - j)
        for a in range(1, last + 1):
            entry = band[j, a]
            if entry != 0.0:
                factor = entry * inverse
                for c in range(a, last + 1):
                    band[j + a, c - a] -= band[j, c] * factor
        for a in range(1, last + 1):
            band[j, a] *= inverse


@numba.njit(cache=True)
def _banded_ldl_solve(band, x):  # pragma: no cover - compiled
    """Solve ``L D L^T y = x`` in place with the factor from :func:`_banded_ldl`."""
    n, width = band.shape
    bandwidth = width - 1
    for j in range(n):
        value = x[j]
        if value != 0.0:
            for a in range(1, min(bandwidth, n - 1 - j) + 1):
                x[j + a] -= band[j, a] * value
    for j in range(n):
        x[j] /= band[j, 0]
    for j in range(n - 1, -1, -1):
        total = x[j]
        for a in range(1, min(bandwidth, n - 1 - j) + 1):
            total -= band[j, a] * x[j + a]
        x[j] = total


def _band_template(matrix, var_key, row_key):
    """The augmented system's off-diagonal part ``[[0, A^T], [A, 0]]`` as a band in the keys' order.

    Returns ``(template, is_variable)``: ``template[j, k] = K[j + k, j]`` (``k >= 1``; column 0 is
    zero) and whether band position ``j`` holds an unknown (else an equation), plus the band
    positions of the unknowns and of the equations.
    """
    n_rows, n_columns = matrix.shape
    keys = np.concatenate([var_key, row_key])
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    position = np.empty(order.size, dtype=np.int64)
    position[order] = np.arange(order.size)
    var_position, row_position = position[:n_columns], position[n_columns:]
    coo = matrix.tocoo()
    row_at = row_position[coo.row]
    column_at = var_position[coo.col]
    low = np.minimum(row_at, column_at)
    distance = np.abs(row_at - column_at)
    bandwidth = int(distance.max()) if distance.size else 0
    template = np.zeros((order.size, bandwidth + 1))
    template[low, distance] = coo.data
    is_variable = np.zeros(order.size, dtype=np.bool_)
    is_variable[var_position] = True
    return template, is_variable, var_position, row_position


@numba.njit(cache=True)
def _band_matvec(template, x, out):  # pragma: no cover - compiled
    """``out = K x`` for the symmetric band ``template`` (``template[j, k] = K[j + k, j]``)."""
    n, width = template.shape
    out[:] = 0.0
    for j in range(n):
        xj = x[j]
        total = out[j] + template[j, 0] * xj
        for k in range(1, min(width - 1, n - 1 - j) + 1):
            a = template[j, k]
            if a != 0.0:
                out[j + k] += a * xj
                total += a * x[j + k]
        out[j] = total


@numba.njit(cache=True)
def _newton_direction(
    band,
    template,
    is_variable,
    inverse_theta,
    s1,
    s2,
    l1,
    l2,
    residual,
    r1,
    r2,
    with_residual,
    refine_tol,
    d,
    dl1,
    dl2,
    rhs,
    work,
    max_refine,
):  # pragma: no cover - compiled
    """Solve one Newton system with the factor in ``band``; fills ``(d, dl1, dl2)``.

    Unknown positions: ``-theta^-1 dz + A^T dy = rho`` with ``rho = rd - r1/s1 + r2/s2``;
    equation positions: ``A dz = rp`` (``rd``, ``rp`` from ``residual`` when ``with_residual``,
    else zero). Then ``dl1 = (r1 - l1 dz)/s1``, ``dl2 = (r2 + l2 dz)/s2``. Up to ``max_refine``
    steps of iterative refinement against the unregularised system, until the residual is below
    ``refine_tol * (1 + max|rhs|)``.
    """
    n = d.size
    largest = 0.0
    largest_rows = 0.0
    for j in range(n):
        value = residual[j] if with_residual else 0.0
        if is_variable[j]:
            value += r2[j] / s2[j] - r1[j] / s1[j]
            largest = max(largest, abs(value))
        else:
            largest_rows = max(largest_rows, abs(value))
        rhs[j] = value
        d[j] = value
    _banded_ldl_solve(band, d)
    # the equations A dz = rp are held 100 times tighter: their residual shifts the primal objective
    # (a residual r in psi_{i+1} - psi_i - D u = 0 moves u by r / D); at 1e-10 relative it kept the
    # gap near 5e-9 for 200 iterations at n = 2e5
    scale = refine_tol * (1.0 + max(largest, largest_rows))
    scale_rows = 1e-2 * refine_tol * (1.0 + largest_rows)
    for _ in range(max_refine):
        _band_matvec(template, d, work)
        worst = 0.0
        worst_rows = 0.0
        for j in range(n):
            t = rhs[j] - work[j]
            if is_variable[j]:
                t += inverse_theta[j] * d[j]
                worst = max(worst, abs(t))
            else:
                worst_rows = max(worst_rows, abs(t))
            work[j] = t
        if worst <= scale and worst_rows <= scale_rows:
            break
        _banded_ldl_solve(band, work)
        for j in range(n):
            d[j] += work[j]
    for j in range(n):
        if is_variable[j]:
            dl1[j] = (r1[j] - l1[j] * d[j]) / s1[j]
            dl2[j] = (r2[j] + l2[j] * d[j]) / s2[j]


@numba.njit(cache=True)
def _step_lengths(is_variable, s1, s2, l1, l2, d, dl1, dl2):  # pragma: no cover - compiled
    """Largest primal and dual steps in (0, 1] keeping ``s1, s2, l1, l2`` non-negative."""
    primal = 1.0
    dual = 1.0
    for j in range(d.size):
        if is_variable[j]:
            dz = d[j]
            if dz < 0.0:
                primal = min(primal, -s1[j] / dz)
            elif dz > 0.0:
                primal = min(primal, s2[j] / dz)
            if dl1[j] < 0.0:
                dual = min(dual, -l1[j] / dl1[j])
            if dl2[j] < 0.0:
                dual = min(dual, -l2[j] / dl2[j])
    return primal, dual


@numba.njit(cache=True)
def _ipm_loop(
    template, is_variable, h, c, signs, tol, max_iter, correctors, delta, refine_tol, verbose
):  # pragma: no cover - compiled
    """The interior point iterations of :func:`_interior_point`, all in band order.

    Returns ``(x, l1, l2, stats)`` with ``x`` holding ``z`` at unknown positions and ``y`` at
    equation positions, and ``stats = [iterations, relative gap, primal residual, dual residual,
    converged, primal objective, dual bound]``.
    """
    n = template.shape[0]
    x = np.zeros(n)
    s1 = np.ones(n)
    s2 = np.ones(n)
    l1 = np.zeros(n)
    l2 = np.zeros(n)
    n_var = 0
    cost_norm = 1.0
    for j in range(n):
        if is_variable[j]:
            n_var += 1
            s1[j] = h[j]
            s2[j] = h[j]
            l1[j] = max(c[j], 0.0) + 1.0
            l2[j] = max(-c[j], 0.0) + 1.0
            cost_norm = max(cost_norm, 1.0 + abs(c[j]))
    band = np.empty_like(template)
    kx = np.empty(n)
    residual = np.empty(n)
    inverse_theta = np.zeros(n)
    d, dl1, dl2 = np.zeros(n), np.zeros(n), np.zeros(n)
    e, el1, el2 = np.zeros(n), np.zeros(n), np.zeros(n)
    r1, r2 = np.zeros(n), np.zeros(n)
    rhs, work = np.empty(n), np.empty(n)
    stats = np.zeros(7)
    stats[1:4] = np.inf
    for iteration in range(max_iter + 1):
        _band_matvec(template, x, kx)
        primal = 0.0
        dual_bound = 0.0
        complementarity = 0.0
        primal_worst = 0.0
        dual_worst = 0.0
        z_largest = 0.0
        for j in range(n):
            if is_variable[j]:
                reduced = c[j] - kx[j]  # c - A^T y
                residual[j] = reduced - l1[j] + l2[j]
                primal += c[j] * x[j]
                dual_bound -= h[j] * abs(reduced)  # min of (c - A^T y).z over the box: a bound for any y
                complementarity += s1[j] * l1[j] + s2[j] * l2[j]
                dual_worst = max(dual_worst, abs(residual[j]))
                z_largest = max(z_largest, abs(x[j]))
            else:
                residual[j] = -kx[j]  # -A z
                primal_worst = max(primal_worst, abs(kx[j]))
        mu = complementarity / (2 * n_var)
        stats[0] = iteration
        stats[1] = (primal - dual_bound) / (1.0 + abs(primal))
        stats[2] = primal_worst / (1.0 + z_largest)
        stats[3] = dual_worst / cost_norm
        stats[5] = primal
        stats[6] = dual_bound
        if abs(stats[1]) < tol and stats[2] < tol:
            stats[4] = 1.0
            break
        if iteration == max_iter or not mu > 1e-300:
            break
        # factorise the regularised augmented system
        for j in range(n):
            for k in range(template.shape[1]):
                band[j, k] = template[j, k]
            if is_variable[j]:
                inverse_theta[j] = l1[j] / s1[j] + l2[j] / s2[j]
                band[j, 0] = -(inverse_theta[j] + delta)
            else:
                band[j, 0] = delta
        _banded_ldl(band, signs, 1e-3 * delta)
        # predictor
        for j in range(n):
            r1[j] = -s1[j] * l1[j]
            r2[j] = -s2[j] * l2[j]
        # the affine direction only sets the centring sigma: one refinement step is enough (3 steps
        # here and in the correctors cost ~30% more time at n = 2e5 for the same value; RESULTS.md)
        _newton_direction(
            band,
            template,
            is_variable,
            inverse_theta,
            s1,
            s2,
            l1,
            l2,
            residual,
            r1,
            r2,
            True,
            refine_tol,
            d,
            dl1,
            dl2,
            rhs,
            work,
            1,
        )
        ap, ad = _step_lengths(is_variable, s1, s2, l1, l2, d, dl1, dl2)
        affine = 0.0
        for j in range(n):
            if is_variable[j]:
                affine += (s1[j] + ap * d[j]) * (l1[j] + ad * dl1[j]) + (s2[j] - ap * d[j]) * (l2[j] + ad * dl2[j])
        sigma = (affine / (2 * n_var) / mu) ** 3
        target = sigma * mu
        # Mehrotra's corrector
        for j in range(n):
            if is_variable[j]:
                r1[j] = target - s1[j] * l1[j] - d[j] * dl1[j]
                r2[j] = target - s2[j] * l2[j] + d[j] * dl2[j]
        _newton_direction(
            band,
            template,
            is_variable,
            inverse_theta,
            s1,
            s2,
            l1,
            l2,
            residual,
            r1,
            r2,
            True,
            refine_tol,
            d,
            dl1,
            dl2,
            rhs,
            work,
            3,
        )
        ap, ad = _step_lengths(is_variable, s1, s2, l1, l2, d, dl1, dl2)
        # Gondzio's centrality correctors
        for _ in range(correctors):
            trial_p = min(1.0, 1.5 * ap + 0.1)
            trial_d = min(1.0, 1.5 * ad + 0.1)
            for j in range(n):
                if is_variable[j]:
                    p1 = (s1[j] + trial_p * d[j]) * (l1[j] + trial_d * dl1[j])
                    p2 = (s2[j] - trial_p * d[j]) * (l2[j] + trial_d * dl2[j])
                    r1[j] = max(min(max(p1, 0.1 * target), 10 * target) - p1, -10 * target)
                    r2[j] = max(min(max(p2, 0.1 * target), 10 * target) - p2, -10 * target)
            _newton_direction(
                band,
                template,
                is_variable,
                inverse_theta,
                s1,
                s2,
                l1,
                l2,
                residual,
                r1,
                r2,
                False,
                refine_tol,
                e,
                el1,
                el2,
                rhs,
                work,
                0,
            )
            for j in range(n):
                e[j] += d[j]
                el1[j] += dl1[j]
                el2[j] += dl2[j]
            new_ap, new_ad = _step_lengths(is_variable, s1, s2, l1, l2, e, el1, el2)
            if new_ap + new_ad < 1.01 * (ap + ad) + 0.02:
                break
            d, e = e, d
            dl1, el1 = el1, dl1
            dl2, el2 = el2, dl2
            ap, ad = new_ap, new_ad
        finite = np.isfinite(ap) and np.isfinite(ad)
        for j in range(n):
            if not np.isfinite(d[j]):
                finite = False
        if not finite:
            break  # numerical breakdown: keep the last finite iterate (stats say it did not converge)
        if verbose:
            print(iteration, mu, stats[1], stats[2], stats[3], ap, ad, sigma)
        step_p = 0.995 * ap
        step_d = 0.995 * ad
        positive = True
        for j in range(n):
            if is_variable[j] and (s1[j] + step_p * d[j] <= 0.0 or s2[j] - step_p * d[j] <= 0.0):
                positive = False
        if not positive:
            break
        for j in range(n):
            if is_variable[j]:
                s1[j] += step_p * d[j]
                s2[j] -= step_p * d[j]
                x[j] = 0.5 * (s1[j] - s2[j])
                l1[j] += step_d * dl1[j]
                l2[j] += step_d * dl2[j]
            else:
                x[j] += step_d * d[j]
    return x, l1, l2, stats


@dataclass
class _IPMInfo:
    iterations: int
    relative_gap: float
    primal_residual: float
    dual_residual: float
    converged: bool
    max_iter: int

    @property
    def status(self) -> str:
        """The :class:`~tallmcmc.stein.SteinResult` status: converged, at the iteration limit, or stalled."""
        if self.converged:
            return "optimal"
        return "iteration limit" if self.iterations >= self.max_iter else "insufficient progress"


def _interior_point(
    program: _BandedProgram, cost, tol=1e-9, max_iter=300, correctors=2, delta=1e-10, refine_tol=1e-10, verbose=False
):
    r"""Primal-dual interior point method for ``min c.z s.t. A z = 0, |z| <= h``.

    Mehrotra's predictor-corrector with up to ``correctors`` Gondzio
    centrality correctors per iteration. The start ``z = 0`` is strictly
    feasible (every box is symmetric) and so is the dual start
    ``y = 0``, ``lambda1 - lambda2 = c``. Each Newton system is the
    augmented (quasidefinite) system, regularised by ``delta``, factorised
    as a band by :func:`_banded_ldl` and solved with iterative refinement
    against the unregularised system (until the residual is below
    ``refine_tol`` relative to the right-hand side): up to three steps for
    Mehrotra's direction, which carries the residuals; one for the affine
    predictor, which only sets the centring; none for Gondzio's correctors,
    which are kept only when they lengthen the steps (any error they leave
    in ``A z = 0`` is in the next iteration's residual).
    Every vector operation of an iteration runs in compiled loops in band
    order (:func:`_ipm_loop`).

    Stopping rule: the relative gap between the primal objective and the
    dual bound :math:`-\sum_j h_j |c_j - (A^T y)_j|` (a lower bound on the
    optimum for *any* ``y``, since ``z`` ranges over the box; unlike
    :math:`-h\cdot(\lambda_1 + \lambda_2)` it does not carry the rounding
    error of the dual residual, which can keep that gap above ``tol`` for
    many iterations: docs/stein.md) below ``tol``, and the primal residual
    ``|A z|`` below ``tol`` relative to ``1 + max|z|``.
    Returns ``(z, y, info)``.
    """
    template, is_variable, var_position, row_position = _band_template(program.matrix, program.var_key, program.row_key)
    n_band = template.shape[0]
    h = np.zeros(n_band)
    h[var_position] = program.half_width
    c = np.zeros(n_band)
    c[var_position] = cost
    signs = np.where(is_variable, -1.0, 1.0)
    x, _, _, stats = _ipm_loop(
        template,
        is_variable,
        h,
        c,
        signs,
        float(tol),
        int(max_iter),
        int(correctors),
        float(delta),
        float(refine_tol),
        bool(verbose),
    )
    info = _IPMInfo(int(stats[0]), float(stats[1]), float(stats[2]), float(stats[3]), bool(stats[4]), int(max_iter))
    return x[var_position], x[row_position], info


def _dot(a, b) -> float:
    """Inner product without BLAS (a threaded BLAS ``ddot`` busy-waits on a loaded machine; benchmarks/RESULTS.md)."""
    return float(np.multiply(a, b).sum())


def _clarabel_solve(program: _BandedProgram, cost, tol=1e-9, max_iter=200):
    """The same banded program through Clarabel (equalities: zero cone; boxes: two nonnegative rows each).

    Returns ``(z, iterations, status, relative gap)``, ``status`` that of a
    :class:`~tallmcmc.stein.SteinResult` (warned about when not optimal); a
    Clarabel status without a usable point raises a ``RuntimeError``.
    """
    A = program.matrix.tocsc()
    n_rows, n_columns = A.shape
    identity = sparse.identity(n_columns, format="csc")
    stacked = sparse.vstack([A, identity, -identity], format="csc")
    rhs = np.concatenate([np.zeros(n_rows), program.half_width, program.half_width])
    cones = (
        [clarabel.ZeroConeT(n_rows), clarabel.NonnegativeConeT(2 * n_columns)]
        if n_rows
        else [clarabel.NonnegativeConeT(2 * n_columns)]
    )
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = tol
    settings.max_iter = int(max_iter)
    solver = clarabel.DefaultSolver(sparse.csc_matrix((n_columns, n_columns)), cost, stacked, rhs, cones, settings)
    solution = solver.solve()
    clarabel_status = str(solution.status)
    z = np.asarray(solution.x)
    status = CLARABEL_STATUSES.get(clarabel_status)
    if status is None or not np.all(np.isfinite(z)):
        raise RuntimeError(
            f"univariate graph Stein discrepancy: Clarabel failed on the banded program (status {clarabel_status} "
            f"after {solution.iterations} iterations); the program is always feasible and bounded, so this is a "
            "numerical failure: use solver='ipm' (the default) or solver='highs'"
        )
    info = solver.get_info()
    gap = float(info.gap_rel)
    if status != "optimal":
        warn_non_optimal(
            "univariate graph",
            status,
            f"Clarabel stopped with status {clarabel_status} after {solution.iterations} iterations (relative gap "
            f"{gap:.1e}, primal residual {float(info.res_primal):.1e}; tolerance {tol:.0e})",
            "Compare with solver='ipm' (the default) or solver='highs'"
            + (f", or raise max_iter (now {max_iter})" if status == "iteration limit" else ""),
        )
    return z, int(solution.iterations), status, gap


def univariate_graph_stein_discrepancy(
    points,
    scores,
    weights=None,
    lower: float | None = None,
    upper: float | None = None,
    stein_factors: Sequence[float] = (1.0, 1.0, 1.0),
    solver: str = "ipm",
    tol: float = 1e-9,
    max_iter: int | None = None,
) -> SteinResult:
    r"""Graph Stein discrepancy of a univariate sample in near-linear time.

    The same value as :func:`~tallmcmc.stein.graph_stein_discrepancy` for
    ``d = 1`` (the sorted path carries the complete graph's value), computed
    from an equivalent linear program whose constraint matrix couples only
    neighbouring points (docs/stein.md, "Univariate solver"): its interior
    point Newton systems are banded and cost O(n) each. It is what
    :func:`~tallmcmc.stein.graph_stein_discrepancy` runs for one-dimensional
    points by default.

    Parameters
    ----------
    points : array_like, shape (n,) or (n, 1)
        Sample points; duplicates are merged and their weights added.
    scores : array_like, shape (n,) or (n, 1), or callable
        Target score ``b(x) = (log p)'(x)`` at the points, or a function of
        an ``(m, 1)`` array of points.
    weights : array_like, shape (n,), optional
        Non-negative sample weights (uniform by default), normalised to one.
    lower, upper : float, optional
        Ends of the target's support (``None`` or infinite: unbounded);
        finite ends add the Neumann boundary constraints.
    stein_factors : (float, float, float), default (1, 1, 1)
        ``(c1, c2, c3)`` bounding ``|g|``, ``|g'|`` and the Lipschitz
        constant of ``g'``.
    solver : {"ipm", "clarabel", "highs"}, default "ipm"
        ``"ipm"``: the banded primal-dual interior point method of this
        module (O(n) per iteration); ``"clarabel"``: the same banded program
        through Clarabel's sparse LDL^T (slower, for cross-checks);
        ``"highs"``: the original path-graph program
        (:func:`~tallmcmc.stein.graph_program.highs_graph_stein_discrepancy`,
        what ``graph_stein_discrepancy(..., method="highs-ds")`` runs) through
        HiGHS dual simplex (roughly quadratic in n; the reference the others
        are tested against).
    tol : float, default 1e-9
        Relative duality gap and residual tolerance of ``"ipm"`` (and of
        ``"clarabel"``, which is given at least its default 1e-8).
    max_iter : int, optional
        Iteration limit of ``"ipm"`` (default 300) or ``"clarabel"``
        (default 200); not used by ``"highs"``.

    Returns
    -------
    SteinResult
        As from :func:`graph_stein_discrepancy` (``kind="graph"``,
        ``method`` the solver: ``"ipm"``, ``"clarabel"`` or ``"highs-ds"``):
        ``value``, ``per_coordinate`` (``[value]``), ``status``,
        ``seconds``, the optimal ``function_values`` (g at the merged points,
        shape (n, 1)) and ``gradients`` (g', shape (n, 1, 1)), the merged
        ``points`` (sorted) with their ``weights`` and ``scores``,
        ``num_edges``, ``iterations``, ``relative_gap`` and ``timings``.

    Raises
    ------
    ValueError
        On malformed inputs (naming the argument) or an unknown ``solver``.
    RuntimeError
        If the chosen solver fails without a usable point (a HiGHS status
        other than optimal, a Clarabel failure status).

    Warns
    -----
    SteinSolverWarning
        (a ``RuntimeWarning``) If the solver stops short of its tolerance:
        the interior point method at ``max_iter`` or stalled, Clarabel
        ``AlmostSolved``, ``MaxIterations`` etc.; the value may then be
        inexact, and the result's ``status`` says how (try
        ``solver="highs"``).

    References
    ----------
    .. [1] J. Gorham and L. Mackey (2015). Measuring sample quality with
       Stein's method. NeurIPS 28, Section 4 and Algorithm 2.
    .. [2] S. Mehrotra (1992). On the implementation of a primal-dual
       interior point method. *SIAM J. Optim.* 2(4), 575-601.
    .. [3] J. Gondzio (1996). Multiple centrality corrections in a
       primal-dual method for linear programming. *Comput. Optim. Appl.*
       6, 137-156.
    .. [4] R. J. Vanderbei (1995). Symmetric quasidefinite matrices.
       *SIAM J. Optim.* 5(1), 100-113.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal(500)
    >>> fast = univariate_graph_stein_discrepancy(x, -x)
    >>> reference = univariate_graph_stein_discrepancy(x, -x, solver="highs")
    >>> bool(abs(fast.value - reference.value) <= 1e-6 * reference.value)
    True
    """
    start_total = time.perf_counter()
    if solver not in UNIVARIATE_SOLVERS:
        raise ValueError(f"solver must be one of {UNIVARIATE_SOLVERS}, got {solver!r}")
    raw_points = as_points(points)
    if raw_points.shape[1] != 1:
        raise ValueError(f"points must be univariate, shape (n,) or (n, 1); got {np.shape(points)}")
    if not float(tol) > 0:
        raise ValueError(f"tol must be positive, got {tol}")
    if max_iter is not None and int(max_iter) < 1:
        raise ValueError(f"max_iter must be at least 1, got {max_iter}")
    if solver == "highs":
        return highs_graph_stein_discrepancy(
            raw_points,
            scores,
            weights=weights,
            lower=lower,
            upper=upper,
            stein_factors=stein_factors,
            method="highs-ds",
        )
    factors = _as_stein_factors(stein_factors)
    low = float(_as_bounds(lower, 1, "lower", -np.inf)[0])
    high = float(_as_bounds(upper, 1, "upper", np.inf)[0])
    if not low < high:
        raise ValueError("lower must be strictly less than upper")
    x_raw = raw_points[:, 0]
    if np.any(x_raw < low) or np.any(x_raw > high):
        raise ValueError("points must lie inside [lower, upper]")
    raw_weights = normalised_weights(
        None if weights is None else np.asarray(weights, dtype=float).reshape(-1), x_raw.size
    )

    # merge duplicates (np.unique sorts), drop zero weights
    start = time.perf_counter()
    unique, first_index, inverse = np.unique(x_raw, return_index=True, return_inverse=True)
    unique_weights = np.bincount(inverse.reshape(-1), weights=raw_weights, minlength=unique.size)
    keep = unique_weights > 0
    x = unique[keep]
    q = unique_weights[keep] / unique_weights[keep].sum()
    if callable(scores):
        b = as_scores(scores, x[:, None])[:, 0]
    else:
        b = as_scores(scores, raw_points)[first_index[keep], 0]
    sort_seconds = time.perf_counter() - start

    start = time.perf_counter()
    program = _banded_program(x, q, b, low, high, factors)
    cost_scale = float(np.abs(program.cost).max())
    cost_scale = cost_scale if cost_scale > 0 else 1.0
    cost = program.cost / cost_scale
    setup_seconds = time.perf_counter() - start

    start = time.perf_counter()
    status, iterations, relative_gap = "optimal", 0, 0.0
    if program.matrix.shape[0] == 0:  # one point, no boundary rows: the boxes alone
        z = -np.sign(cost) * program.half_width
    elif solver == "clarabel":
        z, iterations, status, relative_gap = _clarabel_solve(
            program, cost, tol=max(tol, 1e-8), max_iter=200 if max_iter is None else int(max_iter)
        )
    else:
        limits = {} if max_iter is None else {"max_iter": int(max_iter)}
        z, _, info = _interior_point(program, cost, tol=tol, **limits)
        status, iterations, relative_gap = info.status, info.iterations, info.relative_gap
        if status != "optimal":
            warn_non_optimal(
                "univariate graph",
                status,
                f"the interior point method stopped after {info.iterations} iterations "
                f"({'its limit' if status == 'iteration limit' else 'no further progress'}) with relative gap "
                f"{info.relative_gap:.1e}, primal residual {info.primal_residual:.1e}, dual residual "
                f"{info.dual_residual:.1e} (tolerance {tol:.0e})",
                "Compare with solver='highs'"
                + (", or raise max_iter" if status == "iteration limit" else ", or thin the sample"),
            )
    solve_seconds = time.perf_counter() - start

    n = program.n
    value = -_dot(program.cost, z)
    psi = program.sigma * z[:n]
    gamma = z[n : 2 * n]
    total_seconds = time.perf_counter() - start_total
    return SteinResult(
        value=value,
        kind="graph",
        method=solver,
        status=status,
        seconds=total_seconds,
        n=n,
        d=1,
        per_coordinate=np.array([value]),
        points=x[:, None],
        weights=q,
        scores=b[:, None],
        function_values=psi[:, None],
        gradients=gamma[:, None, None],
        num_edges=max(n - 1, 0),
        iterations=int(iterations),
        relative_gap=float(relative_gap),
        timings={
            "spanner": sort_seconds,
            "setup": setup_seconds,
            "linear_programs": [solve_seconds],
            "solve": solve_seconds,
            "total": total_seconds,
        },
    )
