r"""The type of a correction law :math:`C_\sigma` and its CDF error, shared by the runtime and the solver.

:class:`CorrectionDistribution` (the law, its CDF and a JAX sampler),
:func:`max_cdf_error` and :func:`cdf_error_curve` (how far
:math:`N(0, \sigma^2) * C_\sigma` is from the logistic law) and
:func:`check_sigma`. :mod:`tallmcmc.correction.distribution` (the shipped
tables, what sampling uses) and :mod:`tallmcmc.correction.solve` (which builds
them offline) both import this module, and neither imports the other back.
The background is in :mod:`tallmcmc.correction.distribution` and
``docs/correction.md``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "CorrectionDistribution",
    "ERROR_GRID_HALF_WIDTH",
    "ERROR_GRID_STEP",
    "SIGMA_MAX",
    "cdf_error_curve",
    "check_sigma",
    "error_grid_step",
    "max_cdf_error",
]

#: Upper end of the allowed range of ``sigma``: the logistic standard deviation.
SIGMA_MAX: float = math.pi / math.sqrt(3.0)

#: Half-width of the grid on which :func:`max_cdf_error` evaluates the error.
ERROR_GRID_HALF_WIDTH: float = 40.0

#: Spacing of that grid (it is further refined for small ``sigma``).
ERROR_GRID_STEP: float = 1e-3


# --------------------------------------------------------------------------- helpers


def check_sigma(sigma: float) -> float:
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


def error_grid_step(sigma: float) -> float:
    return min(ERROR_GRID_STEP, sigma / 100.0)


def _convolved_cdf(x: np.ndarray, support: np.ndarray, probabilities: np.ndarray, sigma: float) -> np.ndarray:
    """``sum_j u_j Phi((x - y_j) / sigma)`` in float64, chunked over ``x``."""
    from scipy.special import ndtr  # on first use, not at `import tallmcmc` (docs/compilation.md, "The import")

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
    from scipy.special import expit  # on first use, not at `import tallmcmc` (docs/compilation.md, "The import")

    step = error_grid_step(sigma) if step is None else float(step)
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
