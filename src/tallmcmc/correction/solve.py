r"""Offline construction of the correction distribution :math:`C_\sigma` (run once, shipped as tables).

How the shipped tables are built
--------------------------------
:func:`solve_correction` minimises the L-infinity CDF error directly with a
linear program (HiGHS): minimise :math:`t` subject to :math:`-t \le M u - v
\le t`, :math:`u \ge 0`, :math:`\sum u = 1`, with :math:`M_{ij} = \Phi((x_i -
y_j)/\sigma)` and :math:`v_i = S(x_i)`. Symmetry (:math:`u` even, so
:math:`F_\sigma - 1/2` is odd) halves both the unknowns and the constraints.
The constraint points are refined by an exchange step (add the local maxima
of the error found on a grid 20 times finer, solve again) so the bound holds
between grid points too. A non-negative least-squares solve
(:func:`scipy.optimize.nnls`) is available as ``method="nnls"``; the default
``method="best"`` runs both and keeps the one with the smaller error measured
by :func:`~tallmcmc.correction.base.max_cdf_error`. The derivations
(symmetry, lattice spacing, range) are in ``docs/correction.md``. The paper's
own construction, ridge regression followed by clipping of the negative
values, is used only to reproduce the paper's Table 3
(:mod:`tallmcmc.reproduce.correction_table`).

References
----------
.. [1] D. Seita, X. Pan, H. Chen, J. Canny. "An Efficient Minibatch Acceptance
   Test for Metropolis-Hastings". UAI 2017 (Section 4, Appendix C.1).
"""

from __future__ import annotations

import math
import time

import numpy as np

from tallmcmc.correction.base import (
    ERROR_GRID_HALF_WIDTH,
    CorrectionDistribution,
    check_sigma,
    error_grid_step,
    max_cdf_error,
)

__all__ = ["solve_correction"]


def _symmetric_design(x: np.ndarray, y: np.ndarray, sigma: float) -> np.ndarray:
    """Columns ``F_j(x) - 1/2`` for the atom pair ``{-y_j, +y_j}`` (``y_0 = 0`` alone)."""
    from scipy.special import ndtr  # on first use, not at `import tallmcmc` (docs/compilation.md, "The import")

    design = ndtr((x[:, None] - y[None, :]) / sigma) + ndtr((x[:, None] + y[None, :]) / sigma) - 1.0
    if y[0] == 0.0:
        design[:, 0] *= 0.5
    return design


def _local_maxima(values: np.ndarray) -> np.ndarray:
    inner = (values[1:-1] >= values[:-2]) & (values[1:-1] >= values[2:])
    return np.flatnonzero(inner) + 1


def solve_correction(
    sigma: float,
    *,
    method: str = "best",
    atom_step: float | None = None,
    atom_range: float = 25.0,
    constraint_step: float | None = None,
    constraint_range: float = 40.0,
    exchange_rounds: int = 4,
    verbose: bool = False,
) -> CorrectionDistribution:
    r"""Derive :math:`C_\sigma` by a non-negative solve.

    The atoms form the symmetric lattice :math:`\{0, \pm h, \pm 2h, \dots,
    \pm R\}`; the unknowns are the pair weights :math:`w_k = u_{\pm kh}`
    (:math:`w_0 = u_0`), constrained by :math:`w \ge 0` and :math:`w_0 + 2
    \sum_{k \ge 1} w_k = 1`, which makes the law symmetric with mean 0 and
    :math:`F_\sigma - 1/2` odd, so constraints for :math:`x \ge 0` suffice.

    Parameters
    ----------
    sigma : float
        Standard deviation of the Gaussian part, in :math:`(0, \pi/\sqrt 3)`.
    method : {"best", "linprog", "nnls"}
        ``"linprog"`` minimises the L-infinity error exactly as a linear
        program with HiGHS (``scipy.optimize.linprog``): minimise :math:`t`
        s.t. :math:`-t \le (M w - v)_i \le t`. ``"nnls"`` minimises the L2
        error with :func:`scipy.optimize.nnls` (the sum-to-one constraint
        appended as a heavily weighted row, then renormalised). ``"best"``
        (default) runs both and keeps the one with the smaller error.
    atom_step : float, optional
        Lattice spacing :math:`h` (default ``min(0.1, sigma/3)``; the
        aliasing error of a lattice, :math:`e^{-\sigma^2 (2\pi/h)^2/2}`, is
        then below :math:`10^{-70}`).
    atom_range : float, optional
        Largest atom :math:`R` (default 25; the logistic tail mass beyond is
        :math:`1.4 \cdot 10^{-11}`).
    constraint_step, constraint_range : float, optional
        Initial constraint grid :math:`\{s, 2s, \dots\} \subset (0,
        \text{range}]` (defaults ``min(0.02, sigma/5)`` and 40).
    exchange_rounds : int, optional
        ``"linprog"`` only: rounds of adding the local maxima of the error on
        the fine grid of :func:`max_cdf_error` to the constraints.
    verbose : bool, optional
        Print progress.

    Returns
    -------
    CorrectionDistribution
        With ``max_cdf_error`` measured by :func:`max_cdf_error`.

    Notes
    -----
    The LP optimum is a vertex of the feasible polytope, so few atom pairs
    carry positive weight, and its error equioscillates (a Chebyshev
    alternation); see ``docs/correction.md``.

    References
    ----------
    .. [1] D. Seita, X. Pan, H. Chen, J. Canny. "An Efficient Minibatch
       Acceptance Test for Metropolis-Hastings". UAI 2017, Section 4, Eq. (14).
    """
    from scipy.special import expit  # on first use, not at `import tallmcmc` (docs/compilation.md, "The import")

    sigma = check_sigma(sigma)
    if method == "best":
        kwargs = dict(
            atom_step=atom_step,
            atom_range=atom_range,
            constraint_step=constraint_step,
            constraint_range=constraint_range,
            verbose=verbose,
        )
        candidates = [
            solve_correction(sigma, method="linprog", exchange_rounds=exchange_rounds, **kwargs),
            solve_correction(sigma, method="nnls", **kwargs),
        ]
        return min(candidates, key=lambda dist: dist.max_cdf_error)
    h = min(0.1, sigma / 3.0) if atom_step is None else float(atom_step)
    ds = min(0.02, sigma / 5.0) if constraint_step is None else float(constraint_step)
    y = np.arange(0, int(round(atom_range / h)) + 1) * h
    x = np.arange(1, int(round(constraint_range / ds)) + 1) * ds
    row_sum = np.full(y.size, 2.0)
    row_sum[0] = 1.0
    fine_step = error_grid_step(sigma)
    fine_x = np.arange(1, int(round(ERROR_GRID_HALF_WIDTH / fine_step)) + 1) * fine_step
    fine_v = expit(fine_x) - 0.5

    def fine_error(w: np.ndarray) -> np.ndarray:
        keep = w > 0
        return _symmetric_design(fine_x, y[keep], sigma) @ w[keep] - fine_v if keep.any() else -fine_v

    from scipy import optimize  # on first use, not at `import tallmcmc` (docs/compilation.md, "The import")

    t0 = time.perf_counter()
    if method == "nnls":
        weight = 1e3
        design = np.vstack([_symmetric_design(x, y, sigma), weight * row_sum])
        target = np.concatenate([expit(x) - 0.5, [weight]])
        w, _ = optimize.nnls(design, target, maxiter=50 * y.size)
    elif method == "linprog":
        w, best = None, math.inf
        for round_ in range(exchange_rounds + 1):
            design = _symmetric_design(x, y, sigma)
            v = expit(x) - 0.5
            m, n = design.shape
            ones = np.ones((m, 1))
            a_ub = np.block([[design, -ones], [-design, -ones]])
            b_ub = np.concatenate([v, -v])
            c = np.zeros(n + 1)
            c[-1] = 1.0
            res = optimize.linprog(
                c,
                A_ub=a_ub,
                b_ub=b_ub,
                A_eq=np.concatenate([row_sum, [0.0]])[None, :],
                b_eq=[1.0],
                bounds=[(0, None)] * (n + 1),
                method="highs",
                options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
            )
            if res.status != 0:
                if w is None:
                    raise RuntimeError(f"linprog failed for sigma={sigma}: {res.message}")
                if verbose:
                    print(f"  round {round_}: {res.message}; keeping round {round_ - 1}")
                break  # numerical trouble at the 1e-11 level: keep the best earlier round
            candidate = np.maximum(res.x[:n], 0.0)
            candidate /= row_sum @ candidate
            err = np.abs(fine_error(candidate))
            worst = float(err.max())
            if verbose:
                print(f"  round {round_}: LP bound {res.x[-1]:.3e}, fine-grid error {worst:.3e}, {m} constraints")
            if w is None or worst < best:
                w, best = candidate, worst
            if worst <= res.x[-1] * (1 + 1e-3) + 1e-15 or round_ == exchange_rounds:
                break
            peaks = _local_maxima(err)
            peaks = peaks[err[peaks] > res.x[-1]]
            x = np.union1d(x, fine_x[peaks])
    else:
        raise ValueError(f"method must be 'best', 'linprog' or 'nnls', got {method!r}")
    w = np.maximum(w, 0.0)
    w /= row_sum @ w
    keep = w > 0
    pos = y[keep]
    wk = w[keep]
    if pos[0] == 0.0:
        support = np.concatenate([-pos[:0:-1], pos])
        probabilities = np.concatenate([wk[:0:-1], wk])
    else:
        support = np.concatenate([-pos[::-1], pos])
        probabilities = np.concatenate([wk[::-1], wk])
    elapsed = time.perf_counter() - t0
    error = max_cdf_error(support, probabilities, sigma)
    if verbose:
        print(f"  sigma={sigma}: {method} error {error:.3e} in {elapsed:.2f} s, {support.size} atoms")
    return CorrectionDistribution(sigma, support, probabilities / probabilities.sum(), error, method)
