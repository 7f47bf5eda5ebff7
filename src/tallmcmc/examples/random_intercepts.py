r"""Random intercepts with a learned scale: a hierarchical model whose exact posterior is known by quadrature.

.. math::

    τ \sim \mathrm{HalfNormal}(s), \quad u_g \mid τ \sim N(0, τ^2)\ (g = 1, …, G), \quad
    y_i \mid u \sim N(u_{g_i}, σ^2),

with the noise σ known; positions ``{"log_tau": (), "u": (G,)}`` (the chain moves log τ, so the prior carries the
log-Jacobian log τ). The likelihood informs the G intercepts, more precisely as N grows; τ it informs only through
them, so its posterior stays as wide as G groups make it, however tall the data — the shape of every hierarchical
model's hyperparameters, and a direction in which the posterior stays far from Gaussian.

Exact posterior (:func:`posterior`): ȳ_g | τ ~ N(0, τ² + σ²/n_g), so the posterior of log τ is one-dimensional,

.. math:: p(\log τ \mid y) ∝ \mathrm{HalfNormal}(τ; s)\,τ \prod_g N(ȳ_g; 0, τ^2 + σ^2/n_g),

and u_g | τ, y is Gaussian (precision n_g/σ² + 1/τ², mean (n_g ȳ_g/σ²)/precision); the marginal moments are
integrals over log τ, computed on a fine grid in float64. ``tests/test_setup_fast.py`` uses it as the reference of
``fast_setup`` and of ``sample_tall``'s default path on a hierarchical model.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc.model import Model

__all__ = ["log_likelihood", "model", "posterior", "simulate"]

_HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)


def log_likelihood(position: dict, datum: dict, noise: float = 1.0) -> jax.Array:
    """log N(y; u_g, σ²) of one datum ``{"group": g, "response": y}``."""
    residual = (datum["response"] - position["u"][datum["group"]]) / noise
    return -0.5 * residual**2 - math.log(noise) - _HALF_LOG_TWO_PI


def model(groups: np.ndarray, response: np.ndarray, num_groups: int, noise: float = 1.0, prior_scale: float = 1.0):
    """The posterior of (log τ, u) given each datum's group (integers in [0, G)) and response.

    Parameters
    ----------
    groups
        The group of each datum, shape (N,), integers 0 … ``num_groups`` − 1.
    response
        The outcomes, shape (N,).
    num_groups
        G, the number of intercepts.
    noise
        σ, the known noise sd.
    prior_scale
        s of τ's HalfNormal prior.

    Returns
    -------
    Model
        Positions ``{"log_tau": (), "u": (G,)}``; data ``{"group": int32, "response": float32}``.
    """
    groups = np.asarray(groups)
    response = np.asarray(response, np.float32)
    if groups.ndim != 1 or response.shape != groups.shape:
        raise ValueError(f"groups and response must both have shape (N,); got {groups.shape} and {response.shape}")
    if not np.issubdtype(groups.dtype, np.integer) or groups.min() < 0 or groups.max() >= num_groups:
        raise ValueError(f"groups must hold integers in [0, num_groups = {num_groups}); got {groups.dtype} values")
    for name, value in (("noise", noise), ("prior_scale", prior_scale)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be finite and > 0; got {value!r}")

    def log_prior(position):
        log_tau, u = position["log_tau"], position["u"]
        tau = jnp.exp(log_tau)
        half_normal = -0.5 * (tau / prior_scale) ** 2 + log_tau  # HalfNormal(s) on τ, with the Jacobian dτ/dlog τ
        return half_normal - 0.5 * jnp.sum(u**2) / tau**2 - num_groups * log_tau

    def likelihood(position, datum):
        return log_likelihood(position, datum, noise)

    data = {"group": groups.astype(np.int32), "response": response}
    return Model(likelihood, log_prior, data, position_shape={"log_tau": (), "u": (num_groups,)})


def simulate(
    num_data: int, num_groups: int, seed: int = 0, *, scale: float = 0.7, noise: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Groups uniform over G, intercepts N(0, ``scale``²), yᵢ = u_{gᵢ} + ``noise``·N(0, 1) in float32, from ``seed``."""
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, num_groups, size=num_data).astype(np.int32)
    intercepts = scale * rng.standard_normal(num_groups)
    response = intercepts[groups] + noise * rng.standard_normal(num_data)
    return groups, response.astype(np.float32)


def posterior(
    groups: np.ndarray,
    response: np.ndarray,
    num_groups: int,
    noise: float = 1.0,
    prior_scale: float = 1.0,
    grid_points: int = 200_001,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The exact posterior's means and sds, float64: ``{"log_tau": (mean, sd), "u": (means (G,), sds (G,))}``.

    By quadrature over log τ (the trapezoid rule on ``grid_points`` points over the range where the density exceeds
    e⁻⁶⁰ of its peak, in blocks of grid points so that memory stays small for many groups); each u_g's moments are
    those of its Gaussian conditional, averaged over log τ.
    """
    counts = np.bincount(groups, minlength=num_groups).astype(np.float64)
    sums = np.bincount(groups, weights=np.asarray(response, np.float64), minlength=num_groups)
    means = np.divide(sums, counts, out=np.zeros(num_groups), where=counts > 0)
    observed = counts > 0

    def log_density(log_tau):
        tau2 = np.exp(2 * log_tau)[:, None]
        variance = tau2 + noise**2 / counts[observed]
        marginal = -0.5 * (means[observed] ** 2 / variance + np.log(variance))
        return -0.5 * tau2[:, 0] / prior_scale**2 + log_tau + marginal.sum(axis=1)

    step = max(1, 2**22 // max(1, num_groups))  # grid points at a time: (points, G) arrays stay within 32 MiB
    coarse = np.linspace(-30.0, 10.0, 40_001)
    values = np.concatenate([log_density(coarse[first : first + step]) for first in range(0, coarse.size, step)])
    inside = coarse[values >= values.max() - 60.0]
    grid = np.linspace(inside[0] - 0.01, inside[-1] + 0.01, grid_points)
    log_weights = np.concatenate([log_density(grid[first : first + step]) for first in range(0, grid.size, step)])
    rule = np.full(grid.size, grid[1] - grid[0])  # the trapezoid rule's weights on the uniform grid
    rule[[0, -1]] *= 0.5
    weights = rule * np.exp(log_weights - log_weights.max())
    weights /= weights.sum()
    log_tau_mean = float(weights @ grid)
    log_tau_sd = math.sqrt(float(weights @ (grid - log_tau_mean) ** 2))
    first_moment = np.zeros(num_groups)
    second_moment = np.zeros(num_groups)
    for first in range(0, grid.size, step):  # E[u_g | τ] and E[u_g² | τ], averaged over log τ
        part = grid[first : first + step]
        precision = counts[None, :] / noise**2 + np.exp(-2 * part)[:, None]
        mean = (counts * means)[None, :] / noise**2 / precision
        first_moment += weights[first : first + step] @ mean
        second_moment += weights[first : first + step] @ (1.0 / precision + mean**2)
    u_mean = first_moment
    u_sd = np.sqrt(second_moment - u_mean**2)
    return {"log_tau": (np.float64(log_tau_mean), np.float64(log_tau_sd)), "u": (u_mean, u_sd)}
