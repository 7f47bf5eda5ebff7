"""The Gaussian random-walk proposal θ′ = θ + ε (symmetric: log proposal ratio 0)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from tallmcmc.model import Model, Position
from tallmcmc.proposals.base import Proposal, Proposed, tunable
from tallmcmc.proposals.laplace import laplace_random_walk


def random_walk(scale: Any = None, *, covariance: Any = None) -> Proposal:
    """Gaussian random-walk proposal θ′ = θ + ε.

    Parameters
    ----------
    scale
        Standard deviation of ε per coordinate: a scalar, or an array with one
        entry per coordinate of the flattened position.
    covariance
        Full covariance matrix of ε, shape ``(d, d)`` for a position with
        ``d`` coordinates in total (flattened in pytree order). Give exactly
        one of ``scale`` and ``covariance``.

    Returns
    -------
    Proposal
        Symmetric, so its log proposal ratio is 0.

    Notes
    -----
    The Gaussian-mixture experiment of Seita et al. (2017, Section 6.1) states
    a "covariance diag(0.15, 0.15)"; the published minibatch sizes are
    reproduced with a *standard deviation* of 0.15 per coordinate, i.e.
    ``random_walk(0.15)``.

    References
    ----------
    .. [1] Metropolis, N., Rosenbluth, A. W., Rosenbluth, M. N., Teller, A. H.
       and Teller, E. (1953). Equation of state calculations by fast computing
       machines. J. Chem. Phys. 21(6).
    """
    if (scale is None) == (covariance is None):
        raise ValueError("random_walk needs exactly one of scale (standard deviation per coordinate) or covariance")
    if scale is not None:
        scale_array = np.asarray(scale, dtype=float)
        if scale_array.ndim > 1:
            raise ValueError(
                f"scale must be a scalar or a 1-D array (one per coordinate); got shape {scale_array.shape}"
            )
        if not np.all(np.isfinite(scale_array)) or np.any(scale_array <= 0):
            raise ValueError(f"scale must be finite and > 0; got {scale!r}")
        factor = None
    else:
        matrix = np.asarray(covariance, dtype=float)
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"covariance must be a square (d, d) matrix; got shape {matrix.shape}")
        if not np.allclose(matrix, matrix.T):
            raise ValueError("covariance must be symmetric")
        try:
            factor = np.linalg.cholesky(matrix)
        except np.linalg.LinAlgError as error:
            raise ValueError("covariance must be positive definite (its Cholesky factorisation failed)") from error

    def make(multiplier):
        def propose(rng_key: jax.Array, position: Position, model: Model) -> Proposed:
            flat, unravel = ravel_pytree(position)
            noise = jax.random.normal(rng_key, flat.shape, flat.dtype)
            if factor is None:
                if scale_array.ndim == 1 and scale_array.shape[0] != flat.shape[0]:
                    raise ValueError(
                        f"scale has {scale_array.shape[0]} entries but the position has {flat.shape[0]} coordinates"
                    )
                step = jnp.asarray(scale_array, flat.dtype) * noise
            else:
                if factor.shape[0] != flat.shape[0]:
                    raise ValueError(
                        f"covariance is {factor.shape[0]}x{factor.shape[0]} but the position has {flat.shape[0]} coordinates"
                    )
                step = jnp.asarray(factor, flat.dtype) @ noise
            if multiplier is not None:
                step = step * multiplier
            zero = jnp.zeros((), flat.dtype)
            return Proposed(unravel(flat + step), zero, jnp.zeros((), jnp.int32))

        return propose

    source = getattr(covariance, "source", None)  # a laplace_covariance(mode): the mode's passes are counted
    setup = (source,) if hasattr(source, "data_used") else ()
    return tunable(make, "random_walk", setup=setup, with_covariance=_shaped_random_walk)


def _shaped_random_walk(covariance: np.ndarray) -> Proposal:
    return laplace_random_walk(covariance=covariance)
