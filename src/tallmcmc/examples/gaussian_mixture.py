"""The two-component Gaussian mixture of Welling & Teh (2011), at tall scale.

Data xᵢ ~ ½ N(θ₁, σₓ²) + ½ N(θ₁ + θ₂, σₓ²) with θ = (0, 1), σₓ² = 2; prior
θ ~ N(0, diag(10, 1)). Seita et al. (2017, Section 6.1) draw N = 1,000,000
points and temper with K = 10,000 so that the posterior resembles the
original 100-point one: two narrow modes, near (0, 1) and (1, −1).

References
----------
.. [1] Welling, M. and Teh, Y. W. (2011). Bayesian learning via stochastic
   gradient Langevin dynamics. ICML 2011, Section 5.1.
.. [2] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
   minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 6.1.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc._checks import positive_finite
from tallmcmc.acceptance.tuna import TunaBound
from tallmcmc.acceptance.tuna import tuna_bound as bound_from_constants
from tallmcmc.examples._bounds import host_rows
from tallmcmc.model import Model
from tallmcmc.precision import unwrapped

TRUE_THETA = (0.0, 1.0)
DATA_VARIANCE = 2.0
PRIOR_VARIANCES = (10.0, 1.0)
PAPER_NUM_DATA = 1_000_000
PAPER_TEMPERATURE = 10_000.0


def simulate_data(num_data: int, seed: int = 0, theta: tuple[float, float] = TRUE_THETA) -> np.ndarray:
    """Draw ``num_data`` points from ½N(θ₁, 2) + ½N(θ₁+θ₂, 2) (float32, NumPy)."""
    rng = np.random.default_rng(seed)
    second = rng.random(num_data) < 0.5
    means = theta[0] + second * theta[1]
    return (means + math.sqrt(DATA_VARIANCE) * rng.standard_normal(num_data)).astype(np.float32)


def log_likelihood(theta: jax.Array, x: jax.Array) -> jax.Array:
    """log p(x | θ) of one datum."""
    scale = 1.0 / (2.0 * DATA_VARIANCE)
    normaliser = -0.5 * math.log(2 * math.pi * DATA_VARIANCE) + math.log(0.5)
    first = -((x - theta[0]) ** 2) * scale
    second = -((x - theta[0] - theta[1]) ** 2) * scale
    return normaliser + jnp.logaddexp(first, second)


def log_prior(theta: jax.Array) -> jax.Array:
    variances = jnp.asarray(PRIOR_VARIANCES, theta.dtype)
    return -0.5 * jnp.sum(theta**2 / variances) - 0.5 * jnp.sum(jnp.log(2 * jnp.pi * variances))


def model(num_data: int = PAPER_NUM_DATA, temperature: float = PAPER_TEMPERATURE, seed: int = 0) -> Model:
    """The Section 6.1 model (data simulated with ``seed``)."""
    return Model(
        log_likelihood, log_prior, jax.device_put(simulate_data(num_data, seed)), temperature, position_shape=(2,)
    )


def log_posterior_grid(
    data: np.ndarray, temperature: float, theta1: np.ndarray, theta2: np.ndarray, data_bin_width: float = 1e-3
) -> np.ndarray:
    """Tempered log posterior (unnormalised) on the grid ``theta1 × theta2``, shape (len(theta1), len(theta2)).

    An independent reference for the samplers. The data are first
    histogrammed into bins of width ``data_bin_width`` and each bin's
    log-likelihood is taken at its midpoint, weighted by its count: the
    midpoint rule errs by about ``width² · |∂²ₓ log p| / 24 ≈ 2·10⁻⁸`` per datum
    (times N/K in the log posterior: 2·10⁻⁶ at paper scale), while the cost
    falls from N to about 10⁴ terms per grid point.
    """
    data = np.asarray(data, dtype=np.float64)
    low = math.floor(data.min() / data_bin_width) * data_bin_width
    edges = np.arange(low, data.max() + 2 * data_bin_width, data_bin_width)
    counts, edges = np.histogram(data, bins=edges)
    keep = counts > 0
    centers = jnp.asarray(0.5 * (edges[:-1] + edges[1:])[keep], jnp.float32)
    weights = jnp.asarray(counts[keep], jnp.float32)
    t1, t2 = np.meshgrid(np.asarray(theta1, float), np.asarray(theta2, float), indexing="ij")

    @jax.jit
    def row(theta_pair):
        values = jax.vmap(log_likelihood, in_axes=(None, 0))(theta_pair, centers)
        return jnp.sum(weights * values)

    pairs = jnp.asarray(np.stack([t1.ravel(), t2.ravel()], axis=1), jnp.float32)
    total = np.asarray(jax.lax.map(row, pairs, batch_size=256), dtype=np.float64)
    prior = -0.5 * (t1.ravel() ** 2 / PRIOR_VARIANCES[0] + t2.ravel() ** 2 / PRIOR_VARIANCES[1])
    return (prior + total / temperature).reshape(t1.shape)


def tuna_bound(model: Model, scale: float = 1.0) -> TunaBound:
    r"""The TunaMH bound (:func:`tallmcmc.tuna`) for a :func:`model` of this module (one pass).

    With a = x − θ₁, b = x − θ₁ − θ₂, σ² = 2 and responsibilities w₁ + w₂ = 1,
    :math:`\nabla \log p = (w_1 a + w_2 b,\; w_2 b)/σ^2`, so
    :math:`\|\nabla \log p\|_2 \le 2\max(|a|, |b|)/σ^2`. Along the segment from
    θ to θ′, |a| and |b| are at most :math:`|x - x_0| + R`,
    R = max(|θ₁ − x₀|, |θ′₁ − x₀|, |θ₁ + θ₂ − x₀|, |θ′₁ + θ′₂ − x₀|) (x₀ the data
    mean), hence :math:`\tilde c_i = (2/σ^2)(|x_i - x_0| + s)` and
    :math:`M = \|θ' - θ\| \max(1, R/s)`.

    Formerly ``tallmcmc.acceptance.tuna.gaussian_mixture_bound`` (removed after
    0.1.0).
    """
    if unwrapped(model.log_likelihood) is not log_likelihood:
        raise ValueError(
            "tallmcmc.examples.gaussian_mixture.tuna_bound is for tallmcmc.examples.gaussian_mixture.model(...) only"
        )
    scale = positive_finite(scale, "scale", "s in c_i = (2/σ²)(|x_i − x₀| + s)")
    rows = host_rows(model, model.data, "gaussian_mixture.tuna_bound")
    center = float(rows.sum(lambda block: np.asarray(block, np.float64).sum()) / model.num_data)

    def distance(a, b):
        reach = jnp.max(jnp.abs(jnp.stack([a[0], b[0], a[0] + a[1], b[0] + b[1]]) - center))
        return jnp.linalg.norm(b - a) * jnp.maximum(1.0, reach / scale)

    slope = 2.0 / DATA_VARIANCE
    constants = rows.map(lambda block: slope * (np.abs(np.asarray(block, np.float64) - center) + scale))
    return bound_from_constants(constants, distance, name="tuna bound (gaussian mixture)")
