"""Langevin proposals: the score, SGLD's stationary law, pytrees, bad input.

The target is the shared conjugate Gaussian-mean model ``analytic_models.SMALL_2D``
(N = 100, d = 2, σ₀² = 100), posterior N(μ, 1/λ) per coordinate with
precision λ = N/K + 1/σ₀². MALA (the full-data Langevin proposal under the
exact test) and its deliberately wrong twin without the proposal ratio are
entries of the posterior registry in ``tests/test_posterior.py``.

SGLD is not checked against the posterior but against its own stationary law,
known exactly because for a Gaussian target the recursion is linear: with
batch b drawn without replacement, ĝ(θ) = −λθ + (N/b)Σ_B xᵢ has noise
independent of θ with variance V = N²S²(1 − b/N)/b (S² the data's variance,
denominator N − 1), so the stationary variance is
(ε + ε²V/4)/(1 − (1 − ελ/2)²) and the mean is exactly μ. At ελ = 0.1 that
variance is about 1.2 times the posterior's; with 4 chains × 6000 steps
(ESS ≈ 650 per coordinate) the check resolves the variance only to about
± 22 % (4 standard errors), so it confirms SGLD's mean and the formula's
variance but cannot by itself tell that variance from the posterior's.

The tolerances are Monte Carlo standard errors from the effective sample size
(:func:`tallmcmc.testing.check_posterior_moments`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from analytic_models import SMALL_2D

import tallmcmc
from tallmcmc.examples import gaussian_mean
from tallmcmc.proposals.langevin import full_data_score
from tallmcmc.testing import run_and_check

NUM_DATA = SMALL_2D.num_data
PRIOR_VARIANCE = SMALL_2D.prior_variance


@pytest.fixture(scope="module")
def data():
    return SMALL_2D.data


def _precision() -> float:
    return NUM_DATA / SMALL_2D.temperature + 1.0 / PRIOR_VARIANCE


def test_score_is_the_gradient_of_the_log_posterior(data):
    model = SMALL_2D.model
    theta = jnp.asarray([0.3, -0.2], jnp.float32)
    expected = np.sum(data - np.asarray(theta), axis=0) - np.asarray(theta) / PRIOR_VARIANCE
    np.testing.assert_allclose(np.asarray(full_data_score(model, theta)), expected, rtol=1e-4)


def test_sgld_small_step_matches_posterior_mean_and_its_own_stationary_variance(data):
    model, mean = SMALL_2D.model, SMALL_2D.mean
    precision, batch = _precision(), 10
    step = 0.1 / precision  # ελ = 0.1
    spread = np.var(np.asarray(data, float), axis=0, ddof=1)
    gradient_noise = NUM_DATA**2 * spread * (1 - batch / NUM_DATA) / batch
    stationary_variance = (step + step**2 * gradient_noise / 4) / (1 - (1 - step * precision / 2) ** 2)
    # mean: unbiased for a Gaussian target; variance: the exact SGLD stationary value (O(ε) above the posterior's)
    result, check = run_and_check(
        model,
        tallmcmc.stochastic_gradient_langevin(step, batch),
        tallmcmc.always_accept(),
        mean,
        stationary_variance,
        initial_positions=SMALL_2D.starts("mean", 4),
        num_samples=6000,
        seed=3,
    )
    assert check.passed, str(check)
    assert result.acceptance_rate == 1.0
    assert np.all(result.data_used == batch)
    assert not result.info["non_finite"].any()
    assert np.all(result.info["statistic"] == 0)


def test_sgld_under_a_real_test_never_moves_and_warns(data):
    model = SMALL_2D.model
    start = jnp.zeros(2, jnp.float32)
    with pytest.warns(RuntimeWarning, match="always_accept"):
        result = tallmcmc.sample(
            model,
            tallmcmc.stochastic_gradient_langevin(1e-3, 5),
            tallmcmc.exact_metropolis(),
            initial_position=start,
            num_samples=50,
            seed=0,
            progress=False,
        )
    assert result.acceptance_rate == 0.0
    assert result.info["non_finite"].all()
    np.testing.assert_array_equal(result.positions, 0.0)


def test_langevin_on_pytree_positions(data):
    def log_likelihood(position, x):
        return gaussian_mean.log_likelihood(jnp.stack([position["a"], position["b"]]), x)

    def log_prior(position):
        return -0.5 * (position["a"] ** 2 + position["b"] ** 2) / PRIOR_VARIANCE

    model = tallmcmc.Model(log_likelihood, log_prior, jnp.asarray(data))
    start = {"a": jnp.asarray(1.0), "b": jnp.asarray(1.0)}
    for proposal, test in [
        (tallmcmc.langevin(5e-3), tallmcmc.exact_metropolis()),
        (tallmcmc.stochastic_gradient_langevin(1e-3, 7), tallmcmc.always_accept()),
    ]:
        result = tallmcmc.sample(model, proposal, test, initial_position=start, num_samples=100, seed=0, progress=False)
        assert set(result.positions) == {"a", "b"}
        assert result.positions["a"].shape == (1, 100)
        assert np.all(np.isfinite(result.positions["a"]))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_bad_step_sizes(bad):
    with pytest.raises(ValueError, match="step_size"):
        tallmcmc.langevin(bad)
    with pytest.raises(ValueError, match="step_size"):
        tallmcmc.stochastic_gradient_langevin(bad, 5)
    with pytest.raises(ValueError, match="batch_size"):
        tallmcmc.stochastic_gradient_langevin(1e-3, 0)
