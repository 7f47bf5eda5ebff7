r"""The paper's own construction of :math:`C_\sigma`: ridge regression, then clipping.

Seita et al. (2017, Appendix C.1, Eq. (15)) fit the correction by ridge regression on a grid and clip
the negative weights; the library ships the non-negative solve of :mod:`tallmcmc.correction.solve`
instead. This module exists to reproduce the paper's Table 3 (``tallmcmc reproduce correction-table``).

References
----------
.. [1] D. Seita, X. Pan, H. Chen, J. Canny. "An Efficient Minibatch Acceptance
   Test for Metropolis-Hastings". UAI 2017 (Appendix C.1, Table 3).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.special import expit, ndtr

from tallmcmc.correction.base import check_sigma

__all__ = ["RidgeCorrection", "ridge_correction"]


@dataclass(frozen=True, eq=False)
class RidgeCorrection:
    r"""Result of :func:`ridge_correction` (the paper's Eq. (15)).

    Attributes
    ----------
    sigma, grid_points, regularization, half_width : float or int
        :math:`\sigma`, :math:`N`, :math:`\lambda`, :math:`V`.
    support : numpy.ndarray
        The atoms :math:`Y_j = jV/N`, :math:`|j| \le N`.
    raw : numpy.ndarray
        The ridge solution :math:`u`, with its negative entries.
    linf_raw, linf_clipped, linf_renormalised : float
        :math:`\max_i |(M u)_i - S(X_i)|` over the fit grid for the raw,
        the clipped (the paper's Table 3 number) and the clipped and
        renormalised :math:`u`.
    negative_mass : float
        :math:`-\sum_{u_j < 0} u_j`.
    seconds : float
        Wall-clock time of the solve.
    """

    sigma: float
    grid_points: int
    regularization: float
    half_width: float
    support: np.ndarray
    raw: np.ndarray
    linf_raw: float
    linf_clipped: float
    linf_renormalised: float
    negative_mass: float
    seconds: float

    @property
    def clipped(self) -> np.ndarray:
        """``max(u, 0)`` without renormalisation (what the paper describes)."""
        return np.maximum(self.raw, 0.0)

    @property
    def renormalised(self) -> np.ndarray:
        """``max(u, 0) / sum(max(u, 0))``: a probability vector."""
        clipped = self.clipped
        return clipped / clipped.sum()


def _ridge_gram(g: np.ndarray, n: int) -> np.ndarray:
    r"""``M^T M`` for ``M_ij = g[i - j]``, ``i in [-2n, 2n]``, ``j in [-n, n]``, in :math:`O(n^2)`.

    ``g`` is indexed from ``-3n`` to ``3n``. Entry ``(j, j + d)`` is the sum of
    ``g[m] g[m - d]`` over ``m in [-2n - j, 2n - j]``, a window sum read off
    the prefix sums of ``g[m] g[m - d]`` (``g`` below ``-3n`` is taken as 0:
    it is ``Phi(-3V/sigma) < 1e-100`` there). Rounding of the prefix sums is
    about ``6n * eps``, i.e. 1e-11 absolute at ``n = 4000``.
    """
    size = 2 * n + 1
    gram = np.empty((size, size))
    j = np.arange(-n, n + 1)
    offset = 3 * n
    chunk = 256
    for d0 in range(0, size, chunk):
        ds = np.arange(d0, min(size, d0 + chunk))
        m = np.arange(-3 * n, 3 * n + 1)
        shifted = m[None, :] - ds[:, None]
        gd = np.where(shifted >= -3 * n, g[np.clip(shifted + offset, 0, 6 * n)], 0.0)
        prefix = np.zeros((ds.size, m.size + 1))
        np.cumsum(g[None, :] * gd, axis=1, out=prefix[:, 1:])
        for row, d in enumerate(ds):
            jj = j[: size - d]
            hi = 2 * n - jj + offset + 1
            lo = -2 * n - jj + offset
            values = prefix[row, hi] - prefix[row, lo]
            idx = np.arange(size - d)
            gram[idx, idx + d] = values
            gram[idx + d, idx] = values
    return gram


def ridge_correction(
    sigma: float,
    grid_points: int = 4000,
    regularization: float = 10.0,
    half_width: float = 20.0,
) -> RidgeCorrection:
    r"""The paper's ridge construction of :math:`C_\sigma`, Eq. (15); for Table 3 only.

    Reading of the paper (Section 4 and Appendix C.1): the atoms are
    :math:`Y_j = jV/N`, :math:`j = -N..N` (2N+1 points) and the fit points
    :math:`X_i = iV/N`, :math:`i = -2N..2N` (4N+1 points), with :math:`V = 20`
    ("a range of :math:`X_{corr} \in [-20, 20]`": the correction's support
    is :math:`[-V, V]`, the fit range :math:`[-40, 40]`; this is also what the
    authors' BIDMach script does, ``x = (-N..N) * Xmax/N``, ``xlog =
    (-2N..2N) * Xmax/N`` with ``Xmax = 20``). Then :math:`M_{ij} =
    \Phi((X_i - Y_j)/\sigma)`, :math:`v_i = S(X_i)`, :math:`u = (M^T M +
    \lambda I)^{-1} M^T v`. The paper then removes the negative values
    ("removal of those leads to small error") and does not mention
    renormalising; we report the L-infinity error on the :math:`X_i` grid for
    the raw :math:`u`, the clipped :math:`u` and the clipped-and-renormalised
    :math:`u` (the last is the only one that is a probability law).

    :math:`M^T M` (:math:`(2N+1)^2`) is formed in :math:`O(N^2)` from prefix
    sums, using that :math:`M_{ij}` depends on :math:`i - j` only, instead
    of a :math:`(4N+1)(2N+1)^2` matrix product; :math:`M^T v` and the
    residuals are discrete convolutions (:func:`numpy.convolve`), so the :math:`(4N+1)
    \times (2N+1)` matrix is never stored (1 GB at N = 4000). The system is
    solved by Cholesky (:func:`scipy.linalg.cho_factor`); at N = 4000 the
    factorisation of the 8001 x 8001 system (1.7e11 flops) dominates the cost.
    The Gram matrix and :math:`M^T v` are cached for the last two
    (sigma, N, V), so a sweep over lambda reuses them.

    Parameters
    ----------
    sigma : float
        Standard deviation of the Gaussian part.
    grid_points : int, optional
        :math:`N` (default 4000, the paper's choice).
    regularization : float, optional
        :math:`\lambda` (default 10, the paper's choice).
    half_width : float, optional
        :math:`V` (default 20).

    Returns
    -------
    RidgeCorrection

    Raises
    ------
    ValueError
        If ``sigma`` is not in :math:`(0, \pi/\sqrt 3)`, ``grid_points`` is
        not a positive integer, or ``regularization`` or ``half_width`` is not
        a positive finite number.

    References
    ----------
    .. [1] D. Seita, X. Pan, H. Chen, J. Canny. "An Efficient Minibatch
       Acceptance Test for Metropolis-Hastings". UAI 2017, Eq. (15), Table 3.
    """
    sigma = check_sigma(sigma)
    if isinstance(grid_points, bool) or not isinstance(grid_points, (int, np.integer)) or grid_points < 1:
        raise ValueError(f"grid_points must be a positive integer, got {grid_points!r}")
    for argument, value in (("regularization", regularization), ("half_width", half_width)):
        if not (isinstance(value, (int, float, np.integer, np.floating)) and np.isfinite(value) and value > 0):
            raise ValueError(f"{argument} must be a positive finite number, got {value!r}")
    n = int(grid_points)
    t0 = time.perf_counter()
    gram, mtv, _ = _ridge_system(sigma, n, float(half_width))
    system = gram.copy()
    system[np.diag_indices_from(system)] += regularization
    u = linalg.cho_solve(linalg.cho_factor(system, lower=True, overwrite_a=True, check_finite=False), mtv)
    return _ridge_result(sigma, n, float(regularization), float(half_width), u, time.perf_counter() - t0)


@functools.lru_cache(maxsize=2)
def _ridge_system(sigma: float, n: int, half_width: float) -> tuple[np.ndarray, np.ndarray, float]:
    step = half_width / n
    g = ndtr(np.arange(-3 * n, 3 * n + 1) * step / sigma)
    gram = _ridge_gram(g, n)
    v = expit(np.arange(-2 * n, 2 * n + 1) * step)
    # (M^T v)_j = sum_i g[i - j] v_i is a correlation: read it off np.convolve (direct, O(n^2))
    mtv = np.convolve(g, v[::-1])[4 * n : 6 * n + 1][::-1].copy()
    return gram, mtv, step


def _ridge_residual(g: np.ndarray, n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``M u - v`` on the fit grid: ``(M u)_i = sum_j g[i - j] u_j`` is a convolution."""
    return np.convolve(g, u)[2 * n : 6 * n + 1] - v


def _ridge_result(
    sigma: float, n: int, lam: float, half_width: float, u: np.ndarray, seconds: float
) -> RidgeCorrection:
    step = half_width / n
    g = ndtr(np.arange(-3 * n, 3 * n + 1) * step / sigma)
    v = expit(np.arange(-2 * n, 2 * n + 1) * step)
    clipped = np.maximum(u, 0.0)
    return RidgeCorrection(
        sigma=sigma,
        grid_points=n,
        regularization=lam,
        half_width=half_width,
        support=np.arange(-n, n + 1) * step,
        raw=u,
        linf_raw=float(np.abs(_ridge_residual(g, n, u, v)).max()),
        linf_clipped=float(np.abs(_ridge_residual(g, n, clipped, v)).max()),
        linf_renormalised=float(np.abs(_ridge_residual(g, n, clipped / clipped.sum(), v)).max()),
        negative_mass=float(-u[u < 0].sum()),
        seconds=seconds,
    )
