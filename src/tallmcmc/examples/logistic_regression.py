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

from tallmcmc import automatic
from tallmcmc.acceptance.tuna import TunaBound
from tallmcmc.acceptance.tuna import tuna_bound as bound_from_constants
from tallmcmc.examples._bounds import flat, host_rows, norms
from tallmcmc.model import Model
from tallmcmc.precision import unwrapped

__all__ = [
    "laplace_reference",
    "log_likelihood",
    "model",
    "sample_tall",
    "simulate",
    "simulate_rare_levels",
    "simulate_separated",
    "tuna_bound",
]

#: ``third derivative`` bound of log σ(z): max |σ(1 − σ)(1 − 2σ)| = 1/(6√3), at σ = (3 − √3)/6.
_LOG_SIGMOID_THIRD = 1.0 / (6.0 * math.sqrt(3.0))


@jax.custom_jvp
def log_sigmoid(z: jax.Array) -> jax.Array:
    """log σ(z), the values and derivatives (of every order) of ``jax.nn.log_sigmoid``, faster on the CPU.

    ``min(z, 0) − log1p(exp(−|z|))`` is the expression ``jax.nn.log_sigmoid``
    evaluates, without its NaN guard (a ``select`` that NaN already passes
    through); that guard keeps XLA:CPU from fusing the function into a sum
    (YNNPACK's vectorised reduction), so Σᵢ log σ(zᵢ) is faster (measured in
    ``benchmarks/RESULTS.md``, "log-sigmoid"). The derivative rule is ``jnp.logaddexp``'s, so
    gradients and Hessians are the same bits as ``jax.nn.log_sigmoid``'s
    (tests/test_logistic_example.py); the values differ only in the sign of
    a zero (``+0`` here, ``−0`` there) where exp(−|z|) underflows, z ≳ 87.
    """
    return jnp.minimum(z, 0) - jnp.log1p(jnp.exp(-jnp.abs(z)))


@log_sigmoid.defjvp
def _log_sigmoid_jvp(primals, tangents):
    (z,), (tangent,) = primals, tangents
    value = log_sigmoid(z)

    def finite(v):  # jnp.logaddexp's rule maps +inf to 0 before subtracting
        return jnp.where(v == jnp.inf, jnp.zeros_like(v), v)

    # log σ(z) = −logaddexp(−z, 0): that function's tangent, at its value −log σ(z)
    zero = jnp.zeros_like(z)
    softplus = -value
    inner = (-tangent) * jnp.exp(finite(-z) - finite(softplus)) + zero * jnp.exp(finite(zero) - finite(softplus))
    return value, -inner


def log_likelihood(coefficients: jax.Array, datum: dict) -> jax.Array:
    """log p(y | x, β) of one datum ``{"covariates": x (d,), "response": y}`` with y 0 or 1, in log-space.

    ``log σ(±xᵀβ)``, the sign from the response: one log-sigmoid per datum
    (the same values as ``y log σ(xᵀβ) + (1 − y) log σ(−xᵀβ)`` for y ∈ {0, 1},
    which evaluates two).
    """
    logit = jnp.dot(datum["covariates"], coefficients)
    return log_sigmoid((2.0 * datum["response"] - 1.0) * logit)


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
        return -0.5 * jnp.sum(coefficients**2) / prior_variance - 0.5 * dimension * math.log(
            2 * math.pi * prior_variance
        )

    # device_put transfers the arrays as they are; jnp.asarray would compile a program for each (docs/compilation.md)
    data = {"covariates": jax.device_put(covariates), "response": jax.device_put(response)}
    return Model(log_likelihood, log_prior, data, 1.0, position_shape=(dimension,))


def simulate(num_data: int, dimension: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic data: xᵢ ~ N(0, I_d) in float32, β* ~ N(0, I/4), yᵢ ~ Bernoulli(σ(xᵢᵀβ*)), from ``seed``."""
    rng = np.random.default_rng(seed)
    covariates = rng.standard_normal((num_data, dimension), dtype=np.float32)
    truth = rng.standard_normal(dimension) / 2
    response = (rng.random(num_data) < 1 / (1 + np.exp(-(covariates @ truth)))).astype(np.float32)
    return covariates, response


def simulate_rare_levels(
    num_data: int, rows_per_level: int, levels: int, effects: tuple[float, float] = (0.5, 1.0), seed: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Synthetic data with rare categories, the case of ``docs/sample_tall.md``'s "Rows the minibatch cannot estimate":
    columns an intercept, two N(0, 1) covariates and ``levels`` indicators, each 1 on ``rows_per_level`` rows of its
    own (disjoint); coefficients −0.5, 0.5, −0.3 and the level effects evenly from ``effects[0]`` to ``effects[1]``.

    Returns
    -------
    (covariates, response, rare)
        float32 (N, 3 + levels) and (N,), and the rare rows' indices, (levels, rows_per_level).
    """
    rng = np.random.default_rng(seed)
    covariates = np.zeros((num_data, 3 + levels), np.float32)
    covariates[:, 0] = 1.0
    covariates[:, 1:3] = rng.standard_normal((num_data, 2))
    rare = rng.choice(num_data, rows_per_level * levels, replace=False).reshape(levels, rows_per_level)
    for level, rows in enumerate(rare):
        covariates[rows, 3 + level] = 1.0
    logits = covariates @ np.r_[-0.5, 0.5, -0.3, np.linspace(effects[0], effects[1], levels)]
    response = (rng.random(num_data) < 1 / (1 + np.exp(-logits))).astype(np.float32)
    return covariates, response, rare


def simulate_separated(
    num_data: int = 20_000, separated_rows: int = 30, seed: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic data with quasi-complete separation: columns an intercept, two N(0, 1) covariates and an indicator
    that is 1 on the first ``separated_rows`` rows, whose responses are all 1; the other responses from coefficients
    (−0.5, 0.8, −0.4). The indicator's coefficient then has no finite maximum-likelihood estimate, and under a
    N(0, s²) prior (``model(..., prior_variance=25.0)``: the posterior of ``docs/sample_tall.md``'s "Drawn again,
    tempered") a right tail bounded only by the prior, which the Laplace approximation at the mode misses.

    Returns
    -------
    (covariates, response)
        float32 (N, 4) and (N,).
    """
    rng = np.random.default_rng(seed)
    covariates = np.column_stack([np.ones(num_data), rng.standard_normal((num_data, 2)), np.zeros(num_data)])
    covariates = covariates.astype(np.float32)
    covariates[:separated_rows, 3] = 1.0
    logits = covariates @ np.array([-0.5, 0.8, -0.4, 0.0])
    response = (rng.random(num_data) < 1 / (1 + np.exp(-logits))).astype(np.float32)
    response[:separated_rows] = 1.0
    return covariates, response


def laplace_reference(
    covariates: np.ndarray, response: np.ndarray, prior_variance: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A float64 reference for :func:`model`'s posterior, on the host (NumPy, no JAX): Newton's method to the mode,
    the Laplace covariance (the inverse Hessian of −log π there), and the mean to first order beyond Laplace,
    mode + ½ Σ Xᵀ(ℓ‴ ⊙ h), with ℓ‴ᵢ the third derivative of log σ at xᵢᵀβ̂ and hᵢ = xᵢᵀΣxᵢ (the skewness correction
    of Kass, Tierney & Kadane 1990 for a GLM with a Gaussian prior).

    Accurate where every direction of the posterior is informed by many rows; along a direction few rows inform (a
    rare category) its sd is off by O(1/rows), so tests there need their own reference.

    Returns
    -------
    (mode, covariance, mean)
    """
    x, y = np.asarray(covariates, np.float64), np.asarray(response, np.float64)
    precision = np.eye(x.shape[1]) / float(prior_variance)
    theta = np.zeros(x.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-(x @ theta)))
        gradient = x.T @ (y - p) - precision @ theta
        hessian = (x * (p * (1 - p))[:, None]).T @ x + precision
        step = np.linalg.solve(hessian, gradient)
        theta = theta + step
        if gradient @ step < 1e-16:
            break
    p = 1 / (1 + np.exp(-(x @ theta)))
    hessian = (x * (p * (1 - p))[:, None]).T @ x + precision
    covariance = np.linalg.inv(hessian)
    third = -p * (1 - p) * (1 - 2 * p)
    leverage = ((x @ covariance) * x).sum(1)
    return theta, covariance, theta + 0.5 * covariance @ (x.T @ (third * leverage))


def tuna_bound(model: Model, control_variate=None) -> TunaBound:
    r"""The TunaMH bound (:func:`tallmcmc.tuna`) for a :func:`model` of this module (one pass over the covariates).

    Without a control variate: log σ is 1-Lipschitz, so
    :math:`|\log p(y_i|x_i,β') - \log p(y_i|x_i,β)| \le |x_i^⊤(β'-β)| \le \|x_i\|_2 \|β'-β\|_2`:
    :math:`\tilde c_i = \|x_i\|_2`, :math:`M = \|β' - β\|_2` (the authors' choice).

    With a :func:`tallmcmc.taylor_control_variate` at β̂ (``order=2``,
    ``curvature="per_datum"``) the residual rᵢ has gradient
    :math:`[f'(z) - f'(\hat z) - f''(\hat z)(z - \hat z)]\,x_i`, z = xᵢᵀβ,
    whose size is at most :math:`\tfrac12 \sup|f'''|\,(x_i^⊤u)^2 \|x_i\|` with
    :math:`\sup|f'''| = 1/(6\sqrt3)` for f = log σ(±·) and u = β − β̂; along
    the segment from β to β′, :math:`\|u\| \le \max(\|u\|, \|u'\|)`, so
    :math:`\tilde c_i = \|x_i\|^3/(12\sqrt3)`,
    :math:`M = \|β'-β\| \max(\|u\|, \|u'\|)^2`. First order (``order=1``):
    :math:`|f'(z) - f'(\hat z)| \le |z - \hat z|/4`, so
    :math:`\tilde c_i = \|x_i\|^2/4`, :math:`M = \|β'-β\| \max(\|u\|, \|u'\|)`.

    Formerly ``tallmcmc.acceptance.tuna.logistic_regression_bound`` (removed after
    0.1.0).
    """
    if unwrapped(model.log_likelihood) is not log_likelihood:
        raise ValueError(
            "tallmcmc.examples.logistic_regression.tuna_bound is for tallmcmc.examples.logistic_regression.model(...) "
            "only"
        )
    row_norms = host_rows(model, model.data["covariates"], "logistic_regression.tuna_bound").map(norms)
    if control_variate is None:
        return bound_from_constants(
            row_norms, lambda a, b: jnp.linalg.norm(flat(b) - flat(a)), name="tuna bound (logistic regression)"
        )
    control_variate.check_model(model)
    if control_variate.order == 2 and control_variate.curvature != "per_datum":
        raise ValueError(
            "tallmcmc.examples.logistic_regression.tuna_bound needs a control variate with curvature='per_datum' (or "
            f"order=1): a shared curvature ({control_variate.curvature!r}) adds a datum-free term the per-datum bound "
            "does not cover"
        )
    center = flat(control_variate.center)
    power = 2 if control_variate.order == 2 else 1
    constants = row_norms**3 * (0.5 * _LOG_SIGMOID_THIRD) if power == 2 else row_norms**2 / 4.0

    def distance(a, b):
        a, b = flat(a), flat(b)
        reach = jnp.maximum(jnp.linalg.norm(a - center.astype(a.dtype)), jnp.linalg.norm(b - center.astype(a.dtype)))
        return jnp.linalg.norm(b - a) * reach**power

    return bound_from_constants(
        constants,
        distance,
        name=f"tuna bound (logistic regression, order-{control_variate.order} control-variate residuals)",
        control_variate=control_variate,
    )


def sample_tall(
    covariates: np.ndarray,
    response: np.ndarray,
    *,
    num_samples: int = 2000,
    num_chains: int = 4,
    batch_size: int = 100,
    prior_variance: float = 1.0,
    seed: int = 0,
    progress: bool = True,
    **options,
):
    """:func:`tallmcmc.sample_tall` on this model: the automatic tall-data path, started at β = 0.

    Returns
    -------
    (SamplingResult, ModeResult, ControlVariate)
        The run (``result.diagnosis`` says what was decided and measured;
        ``result.setup_data_used`` counts every one-off pass) and, for
        convenience, the mode and the control variate it built (``None`` where
        the path did not build one).
    """
    target = model(covariates, response, prior_variance)
    result = automatic.sample_tall(
        target,
        jnp.zeros(target.position_shape[0], jnp.float32),
        num_samples=num_samples,
        num_chains=num_chains,
        batch_size=batch_size,
        seed=seed,
        progress=progress,
        **options,
    )
    return result, result.diagnosis.mode, result.diagnosis.control_variate
