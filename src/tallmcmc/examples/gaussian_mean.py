"""The Gaussian-mean model: xᵢ ~ N(θ, I), a conjugate Gaussian (or flat) prior.

Its tempered posterior is Gaussian and known in closed form, which makes it
the reference target of the statistical tests, and with a flat prior and
proposal N(θ, 1/N) it is the worst case of Seita et al. (2017, Lemma 1).

References
----------
.. [1] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
   minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 2.2.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc._checks import integer_at_least, positive_finite
from tallmcmc.acceptance.tuna import TunaBound
from tallmcmc.acceptance.tuna import tuna_bound as bound_from_constants
from tallmcmc.examples._bounds import centred_distance, host_rows, norms
from tallmcmc.model import Model
from tallmcmc.precision import unwrapped
from tallmcmc.testing import CalibrationProblem


def log_likelihood(theta: jax.Array, x: jax.Array) -> jax.Array:
    """log N(x; θ, I) of one datum (θ and x of the same shape, scalar or vector)."""
    return -0.5 * jnp.sum((x - theta) ** 2) - 0.5 * jnp.size(x) * math.log(2 * math.pi)


def model(data: np.ndarray, prior_variance: float | None = 100.0, temperature: float = 1.0) -> Model:
    """The model over ``data`` (shape (N,) or (N, d)); ``prior_variance=None`` is a flat prior."""
    if prior_variance is None:

        def log_prior(theta):
            return jnp.zeros((), jnp.asarray(theta).dtype)
    else:

        def log_prior(theta):
            return -0.5 * jnp.sum(theta**2) / prior_variance

    data = jnp.asarray(data)
    return Model(log_likelihood, log_prior, data, temperature, position_shape=tuple(data.shape[1:]))


def posterior(
    data: np.ndarray, prior_variance: float | None = 100.0, temperature: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Exact mean and variance (per coordinate) of the tempered posterior, in float64."""
    data = np.asarray(data, dtype=np.float64)
    num = data.shape[0]
    precision = num / temperature + (0.0 if prior_variance is None else 1.0 / prior_variance)
    mean = data.sum(axis=0) / temperature / precision
    return np.asarray(mean), np.broadcast_to(1.0 / precision, np.shape(mean)).copy()


def tuna_bound(model: Model, scale: float = 1.0) -> TunaBound:
    r"""The TunaMH bound (:func:`tallmcmc.tuna`) for a :func:`model` of this module (xᵢ ~ N(θ, I); one pass).

    :math:`\log p(x_i|θ') - \log p(x_i|θ) = δ^⊤(x_i - \bar θ)`, δ = θ′ − θ,
    θ̄ = ½(θ + θ′), so with x₀ the data mean and s = ``scale``,
    :math:`|\cdot| \le \|δ\|(\|x_i - x_0\| + \|\bar θ - x_0\|) \le \tilde c_i M`,
    :math:`\tilde c_i = \|x_i - x_0\| + s`, :math:`M = \|δ\| \max(1, \|\bar θ - x_0\|/s)`.

    Formerly ``tallmcmc.acceptance.tuna.gaussian_mean_bound`` (removed after
    0.1.0).
    """
    if unwrapped(model.log_likelihood) is not log_likelihood:
        raise ValueError(
            "tallmcmc.examples.gaussian_mean.tuna_bound is for tallmcmc.examples.gaussian_mean.model(...) only"
        )
    scale = positive_finite(scale, "scale", "s in c_i = ‖x_i − x₀‖ + s")
    rows = host_rows(model, model.data, "gaussian_mean.tuna_bound")

    def flat(block):
        return np.asarray(block, np.float64).reshape(block.shape[0], -1)

    center = rows.sum(lambda block: flat(block).sum(axis=0)) / model.num_data
    return bound_from_constants(
        rows.map(lambda block: norms(flat(block) - center) + scale),
        centred_distance(center, scale),
        name="tuna bound (gaussian mean)",
    )


def calibration_problem(
    num_data: int = 10_000,
    dimension: int = 1,
    temperature: float = 100.0,
    prior_variance: float = 0.1,
    overdispersion: float = 2.0,
    residual_seed: int | None = None,
) -> CalibrationProblem:
    """The conjugate Gaussian-mean model as an SBC problem whose tempered model is an exact posterior.

    Prior θ ~ N(0, ``prior_variance`` I_d). The model is
    :func:`tallmcmc.examples.gaussian_mean.model` at temperature K: target
    p₀(θ) ∏ N(xᵢ; θ, I)^{1/K}, which depends on the data only through their
    mean x̄ and is the exact posterior of the generative model

        xᵢ = θ + √(K/N) ξ + (zᵢ − z̄),   ξ ~ N(0, I_d),  zᵢ ~ N(0, I_d) i.i.d.,

    in which x̄ ~ N(θ, K/N · I) and the residuals xᵢ − x̄ have the spread of
    N(0, I) data, independent of θ. So a subsampling test meets per-datum
    terms of the usual size (unit-variance data at K = 100: the minibatch
    tests of ``tests/analytic_models.py``), and SBC of the tempered model is
    exact. (Simulating xᵢ ~ N(θ, I) instead would make an exact sampler of
    the tempered model fail SBC: its posterior is K times too wide for those
    data.)

    The chain starts at the posterior mean plus ``overdispersion`` posterior
    sd times N(0, I): it depends on the data, not on θ.

    With ``residual_seed`` the residuals zᵢ − z̄ are drawn once, from
    ``numpy.random.default_rng(residual_seed)``, and shared by every data set
    (a fixed residual pattern is as valid a generative model: the posterior
    depends on x̄ alone). A test whose settings depend on the data's spread,
    such as TunaMH's per-datum bound constants ‖xᵢ − x̄‖ + s, then has the
    same constants for every replication (``residuals`` in the result).

    Returns
    -------
    CalibrationProblem
        ``simulation_based_calibration(**problem.arguments(), proposal=…,
        test=…)`` runs SBC on it.
    """
    num_data = integer_at_least(num_data, "num_data", 2)
    dimension = integer_at_least(dimension, "dimension")
    precision = num_data / temperature + 1.0 / prior_variance
    posterior_sd = 1.0 / math.sqrt(precision)

    def prior_sample(key):
        return math.sqrt(prior_variance) * jax.random.normal(key, (dimension,), jnp.float32)

    fixed = None
    if residual_seed is not None:
        fixed = np.random.default_rng(residual_seed).standard_normal((num_data, dimension))
        fixed = (fixed - fixed.mean(axis=0)).astype(np.float32)

    def simulate_data(key, theta):
        mean_key, residual_key = jax.random.split(key)
        if fixed is None:
            residuals = jax.random.normal(residual_key, (num_data, dimension), jnp.float32)
            residuals = residuals - residuals.mean(axis=0)
        else:
            residuals = jnp.asarray(fixed)
        mean = theta + math.sqrt(temperature / num_data) * jax.random.normal(mean_key, (dimension,), jnp.float32)
        return mean + residuals

    def build_model(data):
        return model(data, prior_variance, temperature)

    def initial_position(key, data):
        mean = data.mean(axis=0) * (num_data / temperature) / precision
        return mean + overdispersion * posterior_sd * jax.random.normal(key, (dimension,), jnp.float32)

    return CalibrationProblem(prior_sample, simulate_data, build_model, initial_position, posterior_sd, fixed)
