r"""The correction distribution :math:`C_\sigma` of the minibatch Barker test.

The minibatch Metropolis-Hastings test of Seita et al. (2017) accepts a
proposal iff :math:`\Delta^* + X_{nc} + X_{corr} > 0`, where the Gaussian part
:math:`\Delta^* + X_{nc}` has (approximately) the law :math:`N(\Delta,
\sigma^2)` and :math:`X_{corr} \sim C_\sigma` is drawn independently. The test
is the Barker test exactly when

.. math::

    N(0, \sigma^2) * C_\sigma = \text{Logistic}(0, 1),
    \qquad S(x) = \frac{1}{1 + e^{-x}} .

Here :math:`C_\sigma` is a *discrete* law with atoms :math:`y_j` and
probabilities :math:`u_j \ge 0`, :math:`\sum_j u_j = 1`, so the CDF of the
convolution is :math:`F_\sigma(x) = \sum_j u_j \Phi((x - y_j)/\sigma)` and the
quality of the construction is :math:`\varepsilon_\sigma = \sup_x |F_\sigma(x)
- S(x)|`; by Section 5 of the paper the acceptance test then errs by at most
:math:`\varepsilon_\sigma` per step.

Why no exact :math:`C_\sigma` exists
------------------------------------
The characteristic function of the standard logistic law is
:math:`\pi t / \sinh(\pi t)`, that of :math:`N(0, \sigma^2)` is
:math:`e^{-\sigma^2 t^2 / 2}`. An exact correction would have characteristic
function :math:`\pi t\, e^{\sigma^2 t^2/2} / \sinh(\pi t) \approx 2\pi t\,
e^{\sigma^2 t^2/2 - \pi |t|}`, which is unbounded as :math:`|t| \to \infty`
for every :math:`\sigma > 0`; the characteristic function of a probability
measure is bounded by 1, so no probability law (discrete or not) solves the
equation exactly. For any admissible :math:`C_\sigma`, :math:`|\hat
C_\sigma(t)| \le 1`, so the convolution's characteristic function is at most
:math:`e^{-\sigma^2 t^2/2}` and must fall below the logistic one,
:math:`\pi t / \sinh(\pi t)`, beyond the crossing frequency
:math:`t^*(\sigma)` where :math:`\sigma^2 t^2 / 2 \approx \pi t - \log(2\pi t)`
(:math:`t^* \approx 2\pi/\sigma^2` to first order). The mismatch there is of
the order of the logistic characteristic function at :math:`t^*`, roughly
:math:`2\pi t^* e^{-\pi t^*}`: the error floor grows very quickly with
:math:`\sigma` (this crude estimate gives about :math:`10^{-7}` at
:math:`\sigma = 1`, :math:`3 \cdot 10^{-5}` at :math:`\sigma = 1.2`,
:math:`10^{-3}` at :math:`\sigma = 1.4`; the L-infinity optimum found by the
linear program is about half of it: :math:`5.3 \cdot 10^{-8}`, :math:`1.6
\cdot 10^{-5}`, :math:`4.9 \cdot 10^{-4}`),
and :math:`\sigma` must stay below the logistic standard deviation
:math:`\pi/\sqrt 3 \approx 1.814` because :math:`\mathrm{Var}(X_{corr}) =
\pi^2/3 - \sigma^2 > 0`. The optimal values achieved by the non-negative
solver (:func:`solve_correction`) track these estimates (see the table in
:func:`correction_distribution`).

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
(:func:`scipy.optimize.nnls`) is available as ``method="nnls"``; it is within
a factor 1.4 of the L-infinity optimum, and better than the LP only at
:math:`\sigma \le 0.8`, where the LP stalls at its solver tolerance
(:math:`8 \cdot 10^{-11}`); the default ``method="best"`` runs both and keeps
the smaller measured error. The paper's own construction, ridge
regression followed by clipping of the negative values, is
:func:`ridge_correction`; it is kept to reproduce the paper's Table 3 only.

References
----------
.. [1] D. Seita, X. Pan, H. Chen, J. Canny. "An Efficient Minibatch Acceptance
   Test for Metropolis-Hastings". UAI 2017 (Section 4, Appendix C.1 and
   Table 3).
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy import linalg, optimize
from scipy.special import expit, ndtr

__all__ = [
    "CorrectionDistribution",
    "RidgeCorrection",
    "SHIPPED_SIGMAS",
    "SIGMA_MAX",
    "cdf_error_curve",
    "correction_distribution",
    "max_cdf_error",
    "ridge_correction",
    "solve_correction",
]

#: Upper end of the allowed range of ``sigma``: the logistic standard deviation.
SIGMA_MAX: float = math.pi / math.sqrt(3.0)

#: The values of ``sigma`` whose tables ship with the package.
SHIPPED_SIGMAS: tuple[float, ...] = (0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4)

#: Package-data file with the shipped tables (rebuild: scripts/build_correction_tables.py).
DATA_FILE: str = "correction_tables.npz"

#: Half-width of the grid on which :func:`max_cdf_error` evaluates the error.
ERROR_GRID_HALF_WIDTH: float = 40.0

#: Spacing of that grid (it is further refined for small ``sigma``).
ERROR_GRID_STEP: float = 1e-3


# --------------------------------------------------------------------------- helpers


def _check_sigma(sigma: float) -> float:
    try:
        value = float(sigma)
    except (TypeError, ValueError):
        raise ValueError(f"sigma must be a real number in (0, pi/sqrt(3)), got {sigma!r}") from None
    if not (math.isfinite(value) and 0.0 < value < SIGMA_MAX):
        raise ValueError(
            f"sigma must lie in the open interval (0, pi/sqrt(3) = {SIGMA_MAX:.6f}), got {sigma!r}: "
            "the correction X_corr has variance Var(logistic) - sigma**2 = pi**2/3 - sigma**2, "
            "which must be positive"
        )
    return value


def _error_grid_step(sigma: float) -> float:
    return min(ERROR_GRID_STEP, sigma / 100.0)


def _convolved_cdf(x: np.ndarray, support: np.ndarray, probabilities: np.ndarray, sigma: float) -> np.ndarray:
    """``sum_j u_j Phi((x - y_j) / sigma)`` in float64, chunked over ``x``."""
    x = np.asarray(x, dtype=np.float64)
    flat = x.ravel()
    out = np.empty_like(flat)
    keep = probabilities > 0
    y, u = support[keep], probabilities[keep]
    chunk = max(1, 2_000_000 // max(1, y.size))
    for start in range(0, flat.size, chunk):
        xs = flat[start : start + chunk]
        out[start : start + chunk] = ndtr((xs[:, None] - y[None, :]) / sigma) @ u
    return out.reshape(x.shape)


def cdf_error_curve(
    support: np.ndarray,
    probabilities: np.ndarray,
    sigma: float,
    half_width: float = ERROR_GRID_HALF_WIDTH,
    step: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""The signed CDF error :math:`F_\sigma(x) - S(x)` on a uniform grid.

    Parameters
    ----------
    support, probabilities : numpy.ndarray
        Atoms :math:`y_j` and probabilities :math:`u_j` of the correction.
    sigma : float
        Standard deviation of the Gaussian part.
    half_width : float, optional
        The grid covers ``[-half_width, half_width]`` (default 40).
    step : float, optional
        Grid spacing (default ``min(1e-3, sigma / 100)``).

    Returns
    -------
    x, error : numpy.ndarray
        Grid and signed error.
    """
    step = _error_grid_step(sigma) if step is None else float(step)
    n = int(round(half_width / step))
    x = np.linspace(-n * step, n * step, 2 * n + 1)
    return x, _convolved_cdf(x, np.asarray(support, float), np.asarray(probabilities, float), sigma) - expit(x)


def max_cdf_error(
    support: np.ndarray,
    probabilities: np.ndarray,
    sigma: float,
    half_width: float = ERROR_GRID_HALF_WIDTH,
    step: float | None = None,
) -> float:
    r"""Sup-norm distance between the convolved CDF and the logistic CDF.

    The supremum of :math:`|\sum_j u_j \Phi((x - y_j)/\sigma) - S(x)|` is
    taken over a uniform grid on ``[-half_width, half_width]`` (default
    :math:`[-40, 40]`) with spacing ``min(1e-3, sigma/100)``: 80 001 points,
    at least 100 points per Gaussian standard deviation and far finer than
    the atom spacing (0.1 or less). The error is a smooth function varying on
    the scale :math:`\sigma`, so between grid points it exceeds the grid
    maximum by a relative :math:`O((\text{step}/\sigma)^2) \le 10^{-4}`.
    Outside the grid both CDFs are within :math:`e^{-40} \approx 4 \cdot
    10^{-18}` of 0 or 1 (the atoms lie in :math:`[-25, 25]`), so the tails
    cannot carry a larger error.

    Parameters
    ----------
    support, probabilities : numpy.ndarray
        Atoms and their probabilities.
    sigma : float
        Standard deviation of the Gaussian part.
    half_width, step : float, optional
        Grid, as in :func:`cdf_error_curve`.

    Returns
    -------
    float
        The maximal absolute error on the grid.
    """
    _, err = cdf_error_curve(support, probabilities, sigma, half_width, step)
    return float(np.max(np.abs(err)))


# --------------------------------------------------------------------------- the distribution


def _default_float_dtype() -> Any:
    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32


@functools.lru_cache(maxsize=64)
def _cumulative_table(key: int, probabilities_bytes: bytes, dtype_name: str) -> np.ndarray:
    probabilities = np.frombuffer(probabilities_bytes, dtype=np.float64)
    cumulative = np.cumsum(probabilities)
    cumulative = cumulative / cumulative[-1]
    cumulative[-1] = np.inf  # every uniform draw lands at or before the last atom
    return cumulative.astype(np.dtype(dtype_name))


@dataclass(frozen=True, eq=False)
class CorrectionDistribution:
    r"""A discrete correction law :math:`C_\sigma` with :math:`N(0,\sigma^2) * C_\sigma \approx` logistic.

    Parameters
    ----------
    sigma : float
        Standard deviation of the Gaussian part :math:`\Delta^* + X_{nc}` the
        correction is paired with.
    support : numpy.ndarray
        The atoms :math:`y_j`, sorted increasingly (only atoms of positive
        probability are kept).
    probabilities : numpy.ndarray
        Their probabilities :math:`u_j \ge 0`, summing to 1.
    max_cdf_error : float
        :math:`\sup_x |\sum_j u_j \Phi((x - y_j)/\sigma) - S(x)|`, evaluated
        by :func:`max_cdf_error` (grid :math:`[-40, 40]`, spacing
        ``min(1e-3, sigma/100)``).
    method : str
        How the table was obtained (``"linprog"``, ``"nnls"`` or ``"ridge"``).

    Notes
    -----
    :meth:`sample` draws one uniform variate per sample and looks it up in the
    cumulative table with :func:`jax.numpy.searchsorted`: a binary search
    (``method="scan"``, :math:`O(\log J)` for :math:`J` atoms) for tables of
    more than 64 atoms, and for smaller ones (all shipped tables but
    :math:`\sigma = 0.8`) one vectorised comparison against the whole table,
    which is faster there. It is a pure JAX function usable inside ``jit``,
    ``vmap`` and ``lax.while_loop``. In float32 the uniform variates have
    resolution :math:`2^{-24}` and the cumulative table a relative rounding
    of :math:`6 \cdot 10^{-8}`, which adds up to about :math:`10^{-7}` to the
    CDF error of the *sampled* law; enable x64 (or pass ``dtype=jnp.float64``
    with x64 on) where that matters, e.g. at :math:`\sigma \le 1`.

    References
    ----------
    .. [1] D. Seita, X. Pan, H. Chen, J. Canny. "An Efficient Minibatch
       Acceptance Test for Metropolis-Hastings". UAI 2017, Section 4.
    """

    sigma: float
    support: np.ndarray
    probabilities: np.ndarray
    max_cdf_error: float
    method: str = field(default="linprog")

    def __post_init__(self) -> None:
        support = np.array(self.support, dtype=np.float64).ravel()
        probabilities = np.array(self.probabilities, dtype=np.float64).ravel()
        if support.shape != probabilities.shape or support.size == 0:
            raise ValueError("support and probabilities must be non-empty and of equal length")
        if np.any(probabilities < 0) or not np.all(np.isfinite(probabilities)):
            raise ValueError("probabilities must be finite and non-negative")
        total = probabilities.sum()
        if not abs(total - 1.0) < 1e-9:
            raise ValueError(f"probabilities must sum to 1, they sum to {total!r}")
        order = np.argsort(support, kind="stable")
        support, probabilities = support[order], probabilities[order] / total
        support.setflags(write=False)
        probabilities.setflags(write=False)
        object.__setattr__(self, "sigma", float(self.sigma))
        object.__setattr__(self, "support", support)
        object.__setattr__(self, "probabilities", probabilities)
        object.__setattr__(self, "max_cdf_error", float(self.max_cdf_error))

    # -- moments and CDF -----------------------------------------------------------------

    @property
    def mean(self) -> float:
        """Mean of the correction (0 for the symmetric tables)."""
        return float(self.probabilities @ self.support)

    @property
    def variance(self) -> float:
        r"""Variance of the correction (close to :math:`\pi^2/3 - \sigma^2`)."""
        return float(self.probabilities @ (self.support - self.mean) ** 2)

    def cdf(self, x: np.ndarray | float) -> np.ndarray:
        r"""CDF of :math:`N(0, \sigma^2) * C_\sigma` (NumPy, float64).

        Parameters
        ----------
        x : array_like
            Points.

        Returns
        -------
        numpy.ndarray
            :math:`\sum_j u_j \Phi((x - y_j)/\sigma)`, same shape as ``x``.
        """
        return _convolved_cdf(np.asarray(x, dtype=np.float64), self.support, self.probabilities, self.sigma)

    def correction_cdf(self, x: np.ndarray | float) -> np.ndarray:
        """CDF of the correction itself (a step function)."""
        cumulative = np.concatenate([[0.0], np.cumsum(self.probabilities)])
        return cumulative[np.searchsorted(self.support, np.asarray(x, dtype=np.float64), side="right")]

    # -- sampling ------------------------------------------------------------------------

    def tables(self, dtype: Any = None) -> tuple[jax.Array, jax.Array]:
        """The atoms and the cumulative probabilities as JAX arrays of ``dtype``.

        The last cumulative entry is ``+inf`` so that every uniform draw maps
        to an atom. Hoist these out of a hot loop if you sample eagerly; inside
        ``jit`` they become compile-time constants.
        """
        dtype = jnp.dtype(_default_float_dtype() if dtype is None else dtype)
        cumulative = _cumulative_table(id(self), self.probabilities.tobytes(), dtype.name)
        return jnp.asarray(self.support, dtype=dtype), jnp.asarray(cumulative, dtype=dtype)

    def sample(self, rng_key: jax.Array, shape: tuple[int, ...] = (), dtype: Any = None) -> jax.Array:
        """Draw corrections :math:`X_{corr} \\sim C_\\sigma`.

        Parameters
        ----------
        rng_key : jax.Array
            A JAX PRNG key.
        shape : tuple of int, optional
            Output shape (default: a scalar).
        dtype : dtype, optional
            Floating dtype of the draws; float64 if x64 is enabled, float32
            otherwise.

        Returns
        -------
        jax.Array
            Samples of the given shape and dtype. Pure and traceable: works
            under ``jax.jit``, ``jax.vmap`` and ``jax.lax.while_loop``.
        """
        atoms, cumulative = self.tables(dtype)
        u = jax.random.uniform(rng_key, shape, dtype=atoms.dtype)
        index = jnp.searchsorted(cumulative, u, side="right", method="compare_all" if atoms.size <= 64 else "scan")
        return atoms[jnp.minimum(index, atoms.size - 1)]

    def __repr__(self) -> str:
        return (
            f"CorrectionDistribution(sigma={self.sigma}, atoms={self.support.size}, "
            f"max_cdf_error={self.max_cdf_error:.3g}, method={self.method!r})"
        )


# --------------------------------------------------------------------------- solvers


def _symmetric_design(x: np.ndarray, y: np.ndarray, sigma: float) -> np.ndarray:
    """Columns ``F_j(x) - 1/2`` for the atom pair ``{-y_j, +y_j}`` (``y_0 = 0`` alone)."""
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
        (default) runs both and keeps the smaller measured error: the LP wins
        for sigma >= 0.9; at sigma = 0.8 the LP stalls at its solver
        tolerance (8e-11) and NNLS reaches 2.4e-12.
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
    Measured on the shipped values (2 shared CPU cores): the LP reaches
    5.3e-8 / 1.6e-5 / 4.9e-4 at sigma = 1.0 / 1.2 / 1.4 in about 2 s;
    NNLS 7.3e-8 / 2.2e-5 / 6.3e-4 in under 0.4 s. Iteratively reweighted NNLS
    (30 rounds, weights multiplied by the relative residual) approaches the
    LP (5.4e-8 / 1.64e-5 / 4.88e-4) in 1-5 s and was not kept. The LP optimum
    is sparse (5 to 50 atom pairs), as vertices of the feasible polytope are,
    and its error equioscillates (a Chebyshev alternation).

    References
    ----------
    .. [1] D. Seita, X. Pan, H. Chen, J. Canny. "An Efficient Minibatch
       Acceptance Test for Metropolis-Hastings". UAI 2017, Section 4, Eq. (14).
    """
    sigma = _check_sigma(sigma)
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
    fine_step = _error_grid_step(sigma)
    fine_x = np.arange(1, int(round(ERROR_GRID_HALF_WIDTH / fine_step)) + 1) * fine_step
    fine_v = expit(fine_x) - 0.5

    def fine_error(w: np.ndarray) -> np.ndarray:
        keep = w > 0
        return _symmetric_design(fine_x, y[keep], sigma) @ w[keep] - fine_v if keep.any() else -fine_v

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


# --------------------------------------------------------------------------- loading


_CACHE: dict[float, CorrectionDistribution] = {}


@functools.lru_cache(maxsize=1)
def _shipped_tables() -> dict[float, CorrectionDistribution]:
    path = resources.files("tallmcmc").joinpath("data", DATA_FILE)
    found: dict[float, CorrectionDistribution] = {}
    with resources.as_file(path) as file, np.load(file) as data:
        for sigma in data["sigmas"]:
            tag = f"{float(sigma):.4f}"
            found[float(sigma)] = CorrectionDistribution(
                float(sigma),
                data[f"support_{tag}"],
                data[f"probabilities_{tag}"],
                float(data[f"max_cdf_error_{tag}"]),
                str(data[f"method_{tag}"]) if f"method_{tag}" in data.files else str(data["method"]),
            )
    return found


def correction_distribution(sigma: float = 1.0) -> CorrectionDistribution:
    r"""The correction :math:`C_\sigma` for a Gaussian part of standard deviation ``sigma``.

    Tables for ``sigma`` in {0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4} ship with
    the package (``tallmcmc/data/correction_tables.npz``, built by
    ``scripts/build_correction_tables.py`` with :func:`solve_correction`);
    other values are solved on demand (a few seconds, with a warning) and
    cached for the session. Shipped errors :math:`\sup_x |F_\sigma - S|`:

    ======  ========  ======  ========
    sigma   error     sigma   error
    ======  ========  ======  ========
    0.8     2.4e-12   1.2     1.6e-5
    0.9     6.9e-10   1.3     1.1e-4
    1.0     5.3e-8    1.4     4.9e-4
    1.1     1.4e-6
    ======  ========  ======  ========

    (sigma = 0.8 comes from NNLS, the others from the L-infinity LP; at 0.8
    and 0.9 the solvers' tolerances, not the mathematics, set the error.)

    Parameters
    ----------
    sigma : float, optional
        In the open interval :math:`(0, \pi/\sqrt 3)`, default 1.

    Returns
    -------
    CorrectionDistribution

    Raises
    ------
    ValueError
        If ``sigma`` is not finite or outside :math:`(0, \pi/\sqrt 3)`: the
        correction's variance :math:`\pi^2/3 - \sigma^2` must be positive.

    References
    ----------
    .. [1] D. Seita, X. Pan, H. Chen, J. Canny. "An Efficient Minibatch
       Acceptance Test for Metropolis-Hastings". UAI 2017.
    """
    sigma = _check_sigma(sigma)
    for shipped, table in _shipped_tables().items():
        if abs(shipped - sigma) < 1e-9:
            return table
    key = round(sigma, 12)
    if key not in _CACHE:
        warnings.warn(
            f"no shipped correction table for sigma={sigma}; solving one (this takes a few seconds, "
            f"longer for small sigma); shipped values: {SHIPPED_SIGMAS}",
            stacklevel=2,
        )
        _CACHE[key] = solve_correction(sigma)
    return _CACHE[key]


# --------------------------------------------------------------------------- the paper's ridge method


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
    solved by Cholesky (:func:`scipy.linalg.cho_factor`). At N = 4000 on the
    2 shared cores of the development machine this takes about 15-40 s per
    (sigma, lambda) cell, dominated by the Cholesky factorisation of the
    8001 x 8001 system (1.7e11 flops); the Gram matrix is cached per sigma.

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

    References
    ----------
    .. [1] D. Seita, X. Pan, H. Chen, J. Canny. "An Efficient Minibatch
       Acceptance Test for Metropolis-Hastings". UAI 2017, Eq. (15), Table 3.
    """
    sigma = _check_sigma(sigma)
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


def _ridge_result(sigma: float, n: int, lam: float, half_width: float, u: np.ndarray, seconds: float) -> RidgeCorrection:
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
