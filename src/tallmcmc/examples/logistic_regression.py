"""Bayesian logistic regression with a Gaussian prior.

Data are pairs (xᵢ, yᵢ) with covariates xᵢ ∈ ℝᵈ (include a column of ones
for an intercept) and responses yᵢ ∈ {0, 1};

.. math:: p(y_i \\mid x_i, β) = σ(x_i^⊤β)^{y_i} σ(−x_i^⊤β)^{1 − y_i},
   \\qquad β \\sim N(0, s² I).

This is the target of the prostate-cancer experiment of Gorham & Mackey
(2015, Section 5.4) on :func:`tallmcmc.datasets.load_nodal`.

References
----------
.. [1] Gorham, J. and Mackey, L. (2015). Measuring sample quality with
   Stein's method. NeurIPS 28, Section 5.4.
.. [2] Gelman, A., Carlin, J. B., Stern, H. S., Dunson, D. B., Vehtari, A.
   and Rubin, D. B. (2013). Bayesian Data Analysis, 3rd ed., Chapter 16.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc.model import Model

__all__ = ["log_likelihood", "model"]


def log_likelihood(coefficients: jax.Array, datum: dict) -> jax.Array:
    """log p(y | x, β) of one datum ``{"covariates": x (d,), "response": y}``, in log-space."""
    logit = jnp.dot(datum["covariates"], coefficients)
    response = datum["response"]
    return response * jax.nn.log_sigmoid(logit) + (1.0 - response) * jax.nn.log_sigmoid(-logit)


def model(covariates: np.ndarray, response: np.ndarray, prior_variance: float = 1.0) -> Model:
    """The posterior of β given ``covariates`` (N, d) and 0/1 ``response`` (N,).

    Parameters
    ----------
    covariates
        Design matrix, one row per datum (an intercept is not added).
    response
        0/1 outcomes.
    prior_variance
        s² of the N(0, s² I) prior on β.

    Returns
    -------
    Model
        Positions are arrays β of shape (d,); the data are the dict
        ``{"covariates", "response"}``.
    """
    covariates = np.asarray(covariates, dtype=np.float32)
    response = np.asarray(response, dtype=np.float32)
    if covariates.ndim != 2:
        raise ValueError(f"covariates must have shape (N, d); got {covariates.shape}")
    if response.shape != covariates.shape[:1]:
        raise ValueError(f"response must have shape ({covariates.shape[0]},); got {response.shape}")
    if not np.all((response == 0) | (response == 1)):
        raise ValueError("response must hold 0/1 outcomes")
    prior_variance = float(prior_variance)
    if not math.isfinite(prior_variance) or prior_variance <= 0:
        raise ValueError(f"prior_variance must be finite and > 0; got {prior_variance!r}")
    dimension = covariates.shape[1]

    def log_prior(coefficients: jax.Array) -> jax.Array:
        return -0.5 * jnp.sum(coefficients**2) / prior_variance - 0.5 * dimension * math.log(2 * math.pi * prior_variance)

    data = {"covariates": jnp.asarray(covariates), "response": jnp.asarray(response)}
    return Model(log_likelihood, log_prior, data, 1.0, position_shape=(dimension,))
