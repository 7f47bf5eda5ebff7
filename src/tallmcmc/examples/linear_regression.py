r"""Gaussian linear regression with unknown noise scale, sampled on (β, log σ).

.. math:: y_i \mid x_i, β, σ \sim N(x_i^⊤β, σ^2),

positions ``{"beta": (d,), "log_sigma": ()}``. Two priors:

* ``prior_scale=None``: flat on β and on σ > 0 (Stan's default for an
  unconstrained ``real`` and a ``real<lower=0>`` with no prior statement),
  so on the sampling scale log σ the prior carries the log-Jacobian
  log σ. The posterior is then known in closed form (:func:`posterior`):
  σ² ~ Inv-Gamma((N − d − 1)/2, S/2) with S the least-squares residual sum of
  squares, and β | σ² ~ N(β̂, σ²(XᵀX)⁻¹), so β is multivariate t with
  N − d − 1 degrees of freedom and log σ has mean ½(log(S/2) − ψ(α)) and
  standard deviation ½√ψ′(α), α = (N − d − 1)/2.
* ``prior_scale=s``: β ~ N(0, s² I) and log σ ~ N(0, s²) (weakly informative).

The flat-prior posterior is a reference target for the automatic tall-data
path and its warm-up (``tests/test_sample_tall.py``), with an exact answer.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

from tallmcmc.model import Model

__all__ = ["log_likelihood", "model", "posterior", "simulate"]

_HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)


def log_likelihood(position: dict, datum: dict) -> jax.Array:
    """log N(y; xᵀβ, σ²) of one datum ``{"covariates": x (d,), "response": y}``."""
    log_sigma = position["log_sigma"]
    residual = (datum["response"] - jnp.dot(datum["covariates"], position["beta"])) * jnp.exp(-log_sigma)
    return -0.5 * residual**2 - log_sigma - _HALF_LOG_TWO_PI


def model(covariates: np.ndarray, response: np.ndarray, prior_scale: float | None = None) -> Model:
    """The posterior of (β, log σ) given ``covariates`` (N, d) and ``response`` (N,).

    Parameters
    ----------
    covariates
        Design matrix, one row per datum (an intercept is not added).
    response
        Real outcomes.
    prior_scale
        ``None`` (default): flat priors on β and σ (the log-Jacobian log σ on
        the sampling scale); a number s: N(0, s²) on every coordinate of β
        and on log σ.

    Returns
    -------
    Model
        Positions ``{"beta": (d,), "log_sigma": ()}``; data
        ``{"covariates", "response"}`` in float32.
    """
    covariates = np.asarray(covariates, np.float32)
    response = np.asarray(response, np.float32)
    if covariates.ndim != 2:
        raise ValueError(f"covariates must have shape (N, d); got {covariates.shape}")
    if response.shape != covariates.shape[:1]:
        raise ValueError(f"response must have shape ({covariates.shape[0]},); got {response.shape}")
    if prior_scale is None:

        def log_prior(position):
            return position["log_sigma"]  # flat on σ: the Jacobian dσ/dlog σ = σ
    else:
        scale = float(prior_scale)
        if not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"prior_scale must be finite and > 0, or None for flat priors; got {prior_scale!r}")

        def log_prior(position):
            return -0.5 * (jnp.sum(position["beta"] ** 2) + position["log_sigma"] ** 2) / scale**2

    dimension = covariates.shape[1]
    data = {"covariates": covariates, "response": response}
    return Model(log_likelihood, log_prior, data, position_shape={"beta": (dimension,), "log_sigma": ()})


def simulate(
    num_data: int, dimension: int, seed: int = 0, *, noise: float = 1.5, coefficients: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """xᵢ ~ N(0, I_d) in float32, yᵢ = xᵢᵀβ* + noise·N(0, 1); β* = ``coefficients`` or N(0, 1) draws, from ``seed``."""
    rng = np.random.default_rng(seed)
    covariates = rng.standard_normal((num_data, dimension), dtype=np.float32)
    truth = rng.standard_normal(dimension) if coefficients is None else np.asarray(coefficients, np.float64)
    response = covariates.astype(np.float64) @ truth + noise * rng.standard_normal(num_data)
    return covariates, response.astype(np.float32)


def posterior(covariates: np.ndarray, response: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The exact flat-prior posterior's means and standard deviations, float64: ``{"beta": (mean, sd), "log_sigma": …}``."""
    x = np.asarray(covariates, np.float64)
    y = np.asarray(response, np.float64)
    num_data, dimension = x.shape
    gram = x.T @ x
    estimate = np.linalg.solve(gram, x.T @ y)
    residual_sum = float(np.sum((y - x @ estimate) ** 2))
    shape = 0.5 * (num_data - dimension - 1)  # σ² ~ Inv-Gamma(shape, residual_sum/2)
    if shape <= 1:
        raise ValueError(
            f"the flat-prior posterior needs N > d + 3 for finite variances; got N = {num_data}, d = {dimension}"
        )
    degrees = 2 * shape
    beta_sd = np.sqrt(residual_sum / (degrees - 2) * np.diag(np.linalg.inv(gram)))
    log_sigma_mean = 0.5 * (math.log(residual_sum / 2) - scipy.special.digamma(shape))
    log_sigma_sd = 0.5 * math.sqrt(scipy.special.polygamma(1, shape))
    return {"beta": (estimate, beta_sd), "log_sigma": (np.float64(log_sigma_mean), np.float64(log_sigma_sd))}
