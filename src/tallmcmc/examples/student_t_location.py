r"""A Student-t location model with known per-datum scales and gross outliers.

Each datum is a pair (xᵢ, sᵢ): a measurement of one constant θ with known
scale sᵢ and Student-t errors with ν degrees of freedom,

.. math:: x_i = θ + s_i\,ε_i,\qquad ε_i \sim t_ν,\qquad θ \sim N(0, τ^2),

the robust way to pool measurements of unequal precision when some of them
are gross errors. :func:`simulate` makes most sᵢ = 1, a few precise ones
(sᵢ = ``precise_scale``) and a fraction of gross outliers (shifted by
``outlier_shift`` sᵢ). The per-datum log ratio of a move θ → θ′ is

.. math:: l_i = -\frac{ν + 1}{2K}\Bigl[\log\bigl(1 + \tfrac{(x_i - θ')^2}{ν s_i^2}\bigr)
              - \log\bigl(1 + \tfrac{(x_i - θ)^2}{ν s_i^2}\bigr)\Bigr],

bounded for each point (the t likelihood caps an outlier's influence) but
about 1/sᵢ times larger for the precise points: with 1% of the points at
sᵢ = 0.1 those points carry about half of the Fisher information and the lᵢ
have kurtosis in the tens, the heavy tail that the normal approximation of
the minibatch tests handles worst. The posterior is one-dimensional, so it is
known to quadrature accuracy (:func:`log_posterior_grid`). Positions are
arrays of shape (1,).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc.model import Model

__all__ = ["log_likelihood", "log_posterior_grid", "model", "simulate"]

DEGREES_OF_FREEDOM = 4.0
PRIOR_VARIANCE = 100.0


def simulate(
    num_data: int = 10_000,
    *,
    precise_fraction: float = 0.01,
    precise_scale: float = 0.1,
    outlier_fraction: float = 0.02,
    outlier_shift: float = 10.0,
    theta: float = 1.0,
    degrees_of_freedom: float = DEGREES_OF_FREEDOM,
    seed: int = 0,
) -> np.ndarray:
    """Data of shape (N, 2), float32: column 0 the xᵢ, column 1 the known scales sᵢ.

    A point is precise (sᵢ = ``precise_scale``) with probability
    ``precise_fraction``, else sᵢ = 1; xᵢ = θ + sᵢ εᵢ with εᵢ ~ t_ν, and a
    fraction ``outlier_fraction`` of the points (of either kind) is moved by
    ``outlier_shift`` · sᵢ (a one-sided contamination, which a Gaussian model
    would follow and the t model largely ignores).
    """
    if not (num_data >= 2 and 0 <= precise_fraction <= 1 and 0 <= outlier_fraction <= 1 and precise_scale > 0):
        raise ValueError("need num_data >= 2, fractions in [0, 1] and precise_scale > 0")
    rng = np.random.default_rng(seed)
    scales = np.where(rng.random(num_data) < precise_fraction, precise_scale, 1.0)
    errors = rng.standard_t(degrees_of_freedom, num_data)
    outliers = rng.random(num_data) < outlier_fraction
    values = theta + scales * (errors + outlier_shift * outliers)
    return np.stack([values, scales], axis=1).astype(np.float32)


def log_likelihood(theta: jax.Array, datum: jax.Array, degrees_of_freedom: float = DEGREES_OF_FREEDOM) -> jax.Array:
    """log t_ν(x; θ, s) of one datum (x, s), up to a constant that does not depend on θ."""
    residual = (datum[0] - theta[0]) / datum[1]
    return -0.5 * (degrees_of_freedom + 1.0) * jnp.log1p(residual**2 / degrees_of_freedom)


def model(data: np.ndarray, temperature: float = 1.0, prior_variance: float = PRIOR_VARIANCE) -> Model:
    """The model over ``data`` from :func:`simulate`: ν = 4, prior θ ~ N(0, ``prior_variance``), positions (1,)."""
    prior_variance = float(prior_variance)
    if not (math.isfinite(prior_variance) and prior_variance > 0):
        raise ValueError(f"prior_variance must be finite and > 0; got {prior_variance!r}")

    def log_prior(theta: jax.Array) -> jax.Array:
        return -0.5 * jnp.sum(theta**2) / prior_variance

    return Model(log_likelihood, log_prior, jax.device_put(np.asarray(data)), temperature, position_shape=(1,))


def log_posterior_grid(
    data: np.ndarray,
    grid: np.ndarray,
    temperature: float = 1.0,
    prior_variance: float = PRIOR_VARIANCE,
    chunk_size: int = 256,
) -> np.ndarray:
    """The unnormalised log posterior of :func:`model` at the points ``grid``, in float64 (NumPy).

    An independent reference for the samplers: the same density written again
    in NumPy and summed over all N points in double precision.
    """
    x, s = np.asarray(data, np.float64).T
    grid = np.asarray(grid, np.float64).ravel()
    nu = DEGREES_OF_FREEDOM
    values = np.empty(grid.size)
    for start in range(0, grid.size, chunk_size):
        theta = grid[start : start + chunk_size, None]
        residual = (x[None, :] - theta) / s[None, :]
        values[start : start + chunk_size] = -0.5 * (nu + 1.0) * np.log1p(residual**2 / nu).sum(axis=1)
    return values / temperature - 0.5 * grid**2 / prior_variance
