r"""A two-component normal mixture with unknown locations, scales and weight.

.. math:: y_i \sim θ\, N(μ_1, σ_1^2) + (1 − θ)\, N(μ_2, σ_2^2), \qquad μ_1 < μ_2,

with μ ~ N(0, 2²) (ordered), σₖ ~ HalfNormal(2), θ ~ Beta(5, 5): the model
of posteriordb's ``low_dim_gauss_mix`` (Magnusson et al. 2024), translated
to the unconstrained scale by hand. Positions are flat arrays of five
coordinates ``(μ₁, log(μ₂ − μ₁), log σ₁, log σ₂, logit θ)``; the prior
carries the log-Jacobians of the three transforms, so the density is the
same posterior as the constrained model's. :func:`constrained` maps a
position back to ``{"mu", "sigma", "theta"}``.

Its posterior has no closed form; the reference in
``tests/data/reference_posteriors.json`` is a long NumPyro NUTS run on the
same data (``scripts/reference_posteriors.py``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc.model import Model

__all__ = ["COORDINATES", "TRUTH", "constrained", "log_likelihood", "log_prior", "model", "simulate"]

#: The sampling scale's coordinates, in order.
COORDINATES = ("mu_1", "log_mu_gap", "log_sigma_1", "log_sigma_2", "logit_theta")
#: The generating values of :func:`simulate`.
TRUTH = {"mu": (-1.0, 1.5), "sigma": (1.0, 0.7), "theta": 0.4}
_HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)


def constrained(position: jax.Array) -> dict[str, jax.Array]:
    """``{"mu": (2,), "sigma": (2,), "theta": ()}`` of a position on the sampling scale."""
    mu_1, log_gap, log_sigma_1, log_sigma_2, logit_theta = (position[k] for k in range(5))
    return {
        "mu": jnp.stack([mu_1, mu_1 + jnp.exp(log_gap)]),
        "sigma": jnp.exp(jnp.stack([log_sigma_1, log_sigma_2])),
        "theta": jax.nn.sigmoid(logit_theta),
    }


def log_likelihood(position: jax.Array, y: jax.Array) -> jax.Array:
    """log[θ N(y; μ₁, σ₁²) + (1 − θ) N(y; μ₂, σ₂²)] of one datum, in log-space."""
    mu_1, log_gap, log_sigma_1, log_sigma_2, logit_theta = (position[k] for k in range(5))
    mu_2 = mu_1 + jnp.exp(log_gap)
    first = jax.nn.log_sigmoid(logit_theta) - 0.5 * ((y - mu_1) * jnp.exp(-log_sigma_1)) ** 2 - log_sigma_1
    second = jax.nn.log_sigmoid(-logit_theta) - 0.5 * ((y - mu_2) * jnp.exp(-log_sigma_2)) ** 2 - log_sigma_2
    return jnp.logaddexp(first, second) - _HALF_LOG_TWO_PI


def log_prior(position: jax.Array) -> jax.Array:
    """log p₀ on the sampling scale, up to a constant: the priors and the three log-Jacobians."""
    mu_1, log_gap, log_sigma_1, log_sigma_2, logit_theta = (position[k] for k in range(5))
    mu_2 = mu_1 + jnp.exp(log_gap)
    # μ ~ N(0, 2²) each (ordered: the density on the ordered pair is twice that, a constant); Jacobian e^{log gap}
    value = -0.5 * (mu_1**2 + mu_2**2) / 4.0 + log_gap
    # σ ~ HalfNormal(2): Jacobian σ
    for log_sigma in (log_sigma_1, log_sigma_2):
        value = value - 0.5 * jnp.exp(2 * log_sigma) / 4.0 + log_sigma
    # θ ~ Beta(5, 5): θ⁴(1 − θ)⁴, Jacobian θ(1 − θ)
    value = value + 5.0 * (jax.nn.log_sigmoid(logit_theta) + jax.nn.log_sigmoid(-logit_theta))
    return value


def simulate(num_data: int = 1000, seed: int = 0) -> np.ndarray:
    """``num_data`` draws from the mixture at :data:`TRUTH`, float32, from ``seed``."""
    rng = np.random.default_rng(seed)
    first = rng.random(num_data) < TRUTH["theta"]
    locations = np.where(first, TRUTH["mu"][0], TRUTH["mu"][1])
    scales = np.where(first, TRUTH["sigma"][0], TRUTH["sigma"][1])
    return (locations + scales * rng.standard_normal(num_data)).astype(np.float32)


def model(y: np.ndarray) -> Model:
    """The posterior of the five sampling-scale coordinates given ``y`` (N,) (``constrain=constrained`` not set)."""
    y = np.asarray(y, np.float32)
    if y.ndim != 1:
        raise ValueError(f"y must have shape (N,); got {y.shape}")
    return Model(log_likelihood, log_prior, y, position_shape=(5,))
