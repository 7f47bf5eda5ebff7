r"""A Gaussian mean with known per-datum precisions: heavy-tailed log ratios on purpose.

Each datum is a pair (xᵢ, wᵢ) with xᵢ ~ N(θ, 1/wᵢ), wᵢ known, so the
per-datum log ratio of a move θ → θ′ is

.. math:: l_i = \frac{w_i}{K}\,(θ' - θ)\,\bigl(x_i - \tfrac12(θ + θ')\bigr).

With most wᵢ = 1 and a few large ones (:func:`simulate`: 1% of the points
with wᵢ = 100), those few points carry a large share of both Δ = Σ lᵢ and
its variance, as the misfitted, high-leverage points of a real logistic
regression do: the lᵢ have kurtosis from about 20 to 110 (larger as |Δ| grows), and a minibatch of 100 misses all
of the heavy points about a third of the time. This is the target on which the
minibatch tests' normal approximation is weakest. The tempered posterior is
Gaussian and known exactly (:func:`posterior`), and Δ is exact in float64
(:func:`log_ratio`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc._checks import positive_finite
from tallmcmc.acceptance.tuna import TunaBound
from tallmcmc.acceptance.tuna import tuna_bound as bound_from_constants
from tallmcmc.examples._bounds import centred_distance, host_rows
from tallmcmc.model import Model
from tallmcmc.precision import unwrapped


def simulate(
    num_data: int = 20_000, heavy_fraction: float = 0.01, heavy_weight: float = 100.0, seed: int = 1
) -> np.ndarray:
    """Data of shape (N, 2), float32: column 0 the xᵢ ~ N(0, 1/wᵢ), column 1 the precisions wᵢ.

    A point is heavy (wᵢ = ``heavy_weight``) with probability ``heavy_fraction``, else wᵢ = 1.
    """
    rng = np.random.default_rng(seed)
    weights = np.where(rng.random(num_data) < heavy_fraction, heavy_weight, 1.0)
    values = rng.normal(0.0, 1.0 / np.sqrt(weights))
    return np.stack([values, weights], axis=1).astype(np.float32)


def log_likelihood(theta: jax.Array, datum: jax.Array) -> jax.Array:
    """log N(x; θ, 1/w) of one datum (x, w), up to a constant that does not depend on θ."""
    return -0.5 * datum[1] * (datum[0] - theta) ** 2


def model(data: np.ndarray, temperature: float = 1.0) -> Model:
    """The model over ``data`` from :func:`simulate`, with a flat prior on the scalar θ."""
    return Model(
        log_likelihood,
        lambda theta: jnp.zeros((), jnp.asarray(theta).dtype),
        jax.device_put(np.asarray(data)),
        temperature,
    )


def log_ratio(data: np.ndarray, theta: float, proposed: float, temperature: float = 1.0) -> float:
    """Δ = Σᵢ lᵢ for the move θ → θ′, exact in float64 (flat prior, symmetric proposal)."""
    x, w = np.asarray(data, np.float64).T
    return float(np.sum(w * (-0.5 * (x - proposed) ** 2 + 0.5 * (x - theta) ** 2)) / temperature)


def posterior(data: np.ndarray, temperature: float = 1.0) -> tuple[float, float]:
    """Exact mean and variance of the tempered posterior (flat prior), in float64."""
    x, w = np.asarray(data, np.float64).T
    return float(np.sum(w * x) / np.sum(w)), float(temperature / np.sum(w))


def tuna_bound(model: Model, scale: float = 1.0) -> TunaBound:
    r"""The TunaMH bound (:func:`tallmcmc.tuna`) for a :func:`model` of this module (xᵢ ~ N(θ, 1/wᵢ); one pass).

    :math:`\log p(x_i|θ') - \log p(x_i|θ) = w_i δ (x_i - \bar θ)`, so
    :math:`\tilde c_i = w_i(|x_i - x_0| + s)`, :math:`M = |δ| \max(1, |\bar θ - x_0|/s)`,
    x₀ the weighted data mean.

    Formerly ``tallmcmc.acceptance.tuna.weighted_mean_bound`` (removed after
    0.1.0).
    """
    if unwrapped(model.log_likelihood) is not log_likelihood:
        raise ValueError(
            "tallmcmc.examples.weighted_mean.tuna_bound is for tallmcmc.examples.weighted_mean.model(...) only"
        )
    scale = positive_finite(scale, "scale", "s in c_i = w_i(|x_i − x₀| + s)")
    rows = host_rows(model, model.data, "weighted_mean.tuna_bound")

    def sums(block):
        values, weights = np.asarray(block, np.float64).T
        return np.array([np.sum(weights * values), np.sum(weights)])

    weighted, total = rows.sum(sums)
    center = np.array([weighted / total])

    def constants(block):
        values, weights = np.asarray(block, np.float64).T
        return weights * (np.abs(values - center[0]) + scale)

    return bound_from_constants(rows.map(constants), centred_distance(center, scale), name="tuna bound (weighted mean)")
