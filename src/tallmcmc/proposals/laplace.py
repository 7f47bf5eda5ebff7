r"""Proposals shaped by the Laplace approximation N(θ̂, Σ), Σ = (−∇² log π(θ̂))⁻¹.

* :func:`laplace_random_walk`: θ′ = θ + (2.38/√d)·L ξ with Σ = L Lᵀ (symmetric,
  log proposal ratio 0). The 2.38²/d scaling is the optimal random-walk scale
  for Gaussian targets (Roberts, Gelman & Gilks 1997).
* :func:`laplace_independence`: θ′ drawn from N(θ̂, Σ) or a multivariate
  Student-t around θ̂ with scale Σ, whatever θ is. The log proposal ratio
  log q(θ) − log q(θ′) is exact. A Student-t (heavier tails than the
  posterior) keeps the chain geometrically ergodic when the Laplace
  approximation is too narrow somewhere.

``laplace_covariance`` builds Σ from a mode (:func:`tallmcmc.find_mode`) or a
Hessian. Positions are flattened with :func:`jax.flatten_util.ravel_pytree`.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from tallmcmc._checks import positive_finite
from tallmcmc.model import Model, Position
from tallmcmc.proposals.base import Proposal, Proposed, tunable

__all__ = ["LaplaceCovariance", "laplace_covariance", "laplace_independence", "laplace_random_walk"]


class LaplaceCovariance(np.ndarray):
    """A covariance matrix (a NumPy array) that remembers the mode it came from, as ``source``.

    :func:`laplace_covariance` returns one, so that a proposal given it as a
    preconditioner or covariance lists the mode among its setup and
    :func:`tallmcmc.sample` counts the mode's data passes, however the mode
    reaches the run. Arithmetic on it keeps ``source`` (a matrix derived from
    the mode still cost its passes); ``np.asarray`` gives a plain array.
    """

    source: Any = None

    def __new__(cls, matrix: np.ndarray, source: Any = None) -> LaplaceCovariance:
        array = np.asarray(matrix, np.float64).view(cls)
        array.source = source
        return array

    def __array_finalize__(self, obj) -> None:
        self.source = getattr(obj, "source", None)


def laplace_covariance(mode_or_hessian: Any) -> np.ndarray:
    """Σ = H⁻¹ from the Hessian H of the *negative* log target at the mode.

    Parameters
    ----------
    mode_or_hessian
        A :class:`tallmcmc.mode.ModeResult` (its ``hessian``), or the (d, d)
        Hessian of −log π itself.

    Returns
    -------
    LaplaceCovariance
        Symmetric positive definite (d, d), float64: a NumPy array whose
        ``source`` is the mode given (``None`` for a bare Hessian), so that
        the mode's data passes are counted in any run that uses it.

    Raises
    ------
    ValueError
        If the Hessian is not square, not finite or not positive definite
        (the point is not a strict local mode).
    """
    hessian = getattr(mode_or_hessian, "hessian", mode_or_hessian)
    matrix = np.asarray(hessian, np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"the Hessian must be a square (d, d) matrix; got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)):
        raise ValueError("the Hessian contains NaN or inf")
    matrix = 0.5 * (matrix + matrix.T)
    try:
        factor = np.linalg.cholesky(matrix)
    except np.linalg.LinAlgError as error:
        raise ValueError(
            "the Hessian of −log π is not positive definite: the point is not a strict mode, so there is no "
            "Laplace approximation. Run tallmcmc.find_mode to convergence first"
        ) from error
    inverse_factor = np.linalg.solve(factor, np.eye(matrix.shape[0]))
    source = mode_or_hessian if hasattr(mode_or_hessian, "data_used") else None
    return LaplaceCovariance(inverse_factor.T @ inverse_factor, source)


def _mean_and_factor(mode: Any, covariance: Any) -> tuple[Any, np.ndarray]:
    if covariance is None:
        covariance = laplace_covariance(mode)
    matrix = np.asarray(covariance, np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or not np.allclose(matrix, matrix.T, rtol=1e-6, atol=0):
        raise ValueError(f"covariance must be a symmetric (d, d) matrix; got shape {matrix.shape}")
    try:
        factor = np.linalg.cholesky(matrix)
    except np.linalg.LinAlgError as error:
        raise ValueError("covariance must be positive definite (its Cholesky factorisation failed)") from error
    return getattr(mode, "position", mode), factor


def _setup_of(mode: Any, covariance: Any = None) -> tuple:
    """The one-off computations a proposal relies on: the mode, or the mode a covariance came from."""
    sources = [mode, getattr(covariance, "source", None)]
    return tuple(source for source in sources if hasattr(source, "data_used"))


def laplace_random_walk(mode: Any = None, *, covariance: Any = None, scale: float | None = None) -> Proposal:
    """Gaussian random walk with the Laplace covariance: θ′ = θ + s·L ξ, Σ = L Lᵀ.

    Parameters
    ----------
    mode
        A :class:`tallmcmc.mode.ModeResult` (Σ from its Hessian), or ``None``
        when ``covariance`` is given.
    covariance
        Σ directly (d, d), instead of a mode.
    scale
        s; default 2.38/√d.

    Returns
    -------
    Proposal
        Symmetric (log proposal ratio 0), data-free; its ``setup`` holds the
        mode so that the mode's data passes are counted by :func:`tallmcmc.sample`.
    """
    if mode is None and covariance is None:
        raise ValueError("laplace_random_walk needs a mode (tallmcmc.find_mode(...)) or a covariance")
    _, factor = _mean_and_factor(mode, covariance)
    dimension = factor.shape[0]
    step = 2.38 / math.sqrt(dimension) if scale is None else positive_finite(scale, "scale", "the multiple of L ξ")

    def make(multiplier):
        def propose(rng_key: jax.Array, position: Position, model: Model) -> Proposed:
            flat, unravel = ravel_pytree(position)
            _check_dimension(flat, dimension)
            noise = jax.random.normal(rng_key, flat.shape, flat.dtype)
            moved_by = jnp.asarray(step * factor, flat.dtype) @ noise
            moved = flat + (moved_by if multiplier is None else multiplier * moved_by)
            return Proposed(unravel(moved), jnp.zeros((), flat.dtype), jnp.zeros((), jnp.int32))

        return propose

    return tunable(
        make,
        "laplace_random_walk",
        setup=_setup_of(mode, covariance),
        with_covariance=lambda estimate: laplace_random_walk(covariance=estimate, scale=scale),
    )


def laplace_independence(
    mode: Any = None, *, mean: Any = None, covariance: Any = None, degrees_of_freedom: float | None = None
) -> Proposal:
    """Independence proposal θ′ ~ N(θ̂, Σ), or a multivariate Student-t(ν) with location θ̂ and scale Σ.

    Parameters
    ----------
    mode
        A :class:`tallmcmc.mode.ModeResult` (θ̂ its position, Σ from its Hessian).
    mean, covariance
        θ̂ and Σ directly, instead of a mode.
    degrees_of_freedom
        ν > 0 for a Student-t proposal (heavier tails); ``None`` for Gaussian.

    Returns
    -------
    Proposal
        Log proposal ratio log q(θ) − log q(θ′) (exact); data-free.
    """
    if mode is None and (mean is None or covariance is None):
        raise ValueError("laplace_independence needs a mode (tallmcmc.find_mode(...)) or both mean and covariance")
    center, factor = _mean_and_factor(mode if mode is not None else mean, covariance)
    center_flat = np.asarray(ravel_pytree(jax.tree_util.tree_map(jnp.asarray, center))[0], np.float64)
    dimension = factor.shape[0]
    if center_flat.shape != (dimension,):
        raise ValueError(f"mean has {center_flat.size} coordinates but covariance is {dimension}x{dimension}")
    nu = None if degrees_of_freedom is None else positive_finite(degrees_of_freedom, "degrees_of_freedom", "ν of the t")
    inverse_factor = np.linalg.solve(factor, np.eye(dimension))

    def log_q(flat: jax.Array) -> jax.Array:  # up to a constant, which cancels in the ratio
        z = jnp.asarray(inverse_factor, flat.dtype) @ (flat - jnp.asarray(center_flat, flat.dtype))
        squared = jnp.sum(z**2)
        if nu is None:
            return -0.5 * squared
        return -0.5 * (nu + dimension) * jnp.log1p(squared / nu)

    def propose(rng_key: jax.Array, position: Position, model: Model) -> Proposed:
        flat, unravel = ravel_pytree(position)
        _check_dimension(flat, dimension)
        normal_key, chi_key = jax.random.split(rng_key)
        z = jax.random.normal(normal_key, flat.shape, flat.dtype)
        if nu is not None:
            z = z * jnp.sqrt(nu / (2.0 * jax.random.gamma(chi_key, nu / 2.0, dtype=flat.dtype)))
        moved = jnp.asarray(center_flat, flat.dtype) + jnp.asarray(factor, flat.dtype) @ z
        ratio = log_q(flat) - log_q(moved)
        return Proposed(unravel(moved), ratio, jnp.zeros((), jnp.int32))

    return Proposal(propose, "laplace_independence", setup=_setup_of(mode, covariance))


def _check_dimension(flat: jax.Array, dimension: int) -> None:
    if flat.shape[0] != dimension:
        raise ValueError(f"the proposal was built for {dimension} coordinates but the position has {flat.shape[0]}")
