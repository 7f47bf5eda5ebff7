"""Langevin proposals: MALA is exact, its uncorrected twin and SGLD are biased as theory says.

The target is the conjugate Gaussian-mean model (``tallmcmc.examples.gaussian_mean``),
posterior N(μ, 1/λ) per coordinate with precision λ = N/K + 1/σ₀². For a
Gaussian target the Langevin recursions are linear, so their stationary laws
are known exactly:

* the full-data Langevin proposal under the exact test but with its proposal
  ratio dropped targets a wrong law: at ελ = 1.5 its variance comes out at
  about 0.6 of the posterior's (detected at many standard errors);
* SGLD with batch b drawn without replacement: ĝ(θ) = −λθ + (N/b)Σ_B xᵢ has
  noise independent of θ with variance V = N²S²(1 − b/N)/b (S² the data's
  variance, denominator N − 1), so the stationary variance is
  (ε + ε²V/4)/(1 − (1 − ελ/2)²) and the mean is exactly μ.

The tolerances are Monte Carlo standard errors from the effective sample size
(:func:`tallmcmc.testing.check_posterior_moments`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc.examples import gaussian_mean
from tallmcmc.proposals.langevin import full_data_score
from tallmcmc.proposals.base import Proposal, Proposed
from tallmcmc.testing import check_posterior_moments

NUM_DATA = 100
PRIOR_VARIANCE = 100.0


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    return (1.0 + rng.standard_normal((NUM_DATA, 2))).astype(np.float32)


def _precision() -> float:
    return NUM_DATA + 1.0 / PRIOR_VARIANCE


def _without_ratio(proposal: Proposal) -> Proposal:
    """The same proposal with its log proposal ratio replaced by 0 (a wrong MH correction)."""

    def propose(rng_key, position, model):
        proposed = proposal.propose(rng_key, position, model)
        return Proposed(proposed.position, jnp.zeros_like(proposed.log_proposal_ratio), proposed.data_used)

    return Proposal(propose, "langevin_without_ratio")


def test_score_is_the_gradient_of_the_log_posterior(data):
    model = gaussian_mean.model(data, PRIOR_VARIANCE)
    theta = jnp.asarray([0.3, -0.2], jnp.float32)
    expected = np.sum(data - np.asarray(theta), axis=0) - np.asarray(theta) / PRIOR_VARIANCE
    np.testing.assert_allclose(np.asarray(full_data_score(model, theta)), expected, rtol=1e-4)


def test_mala_matches_posterior_and_dropping_the_ratio_does_not(data):
    model = gaussian_mean.model(data, PRIOR_VARIANCE)
    mean, variance = gaussian_mean.posterior(data, PRIOR_VARIANCE)
    step = 1.5 / _precision()  # ελ = 1.5
    start = jnp.asarray(mean, jnp.float32)
    exact = tallmcmc.sample(model, tallmcmc.langevin(step), tallmcmc.exact_metropolis(),
                            initial_position=start, num_samples=2000, num_chains=4, seed=1, progress=False)
    check = check_posterior_moments(exact.positions, mean, variance)
    assert check.passed, str(check)
    assert 0.3 < exact.acceptance_rate < 1.0
    # cost: the exact test evaluates θ′ on all N points; the proposal takes two full gradients
    assert np.all(exact.data_used == 3 * NUM_DATA)

    biased = tallmcmc.sample(model, _without_ratio(tallmcmc.langevin(step)), tallmcmc.exact_metropolis(),
                             initial_position=start, num_samples=2000, num_chains=4, seed=1, progress=False)
    check = check_posterior_moments(biased.positions, mean, variance)
    assert not check.passed, str(check)
    assert np.all(np.abs(check.variance_z) > 4), str(check)  # measured: variance ~0.6 of the posterior's


def test_sgld_small_step_matches_posterior_mean_and_its_own_stationary_variance(data):
    model = gaussian_mean.model(data, PRIOR_VARIANCE)
    mean, posterior_variance = gaussian_mean.posterior(data, PRIOR_VARIANCE)
    precision, batch = _precision(), 10
    step = 0.1 / precision  # ελ = 0.1
    spread = np.var(np.asarray(data, float), axis=0, ddof=1)
    gradient_noise = NUM_DATA**2 * spread * (1 - batch / NUM_DATA) / batch
    stationary_variance = (step + step**2 * gradient_noise / 4) / (1 - (1 - step * precision / 2) ** 2)
    result = tallmcmc.sample(model, tallmcmc.stochastic_gradient_langevin(step, batch), tallmcmc.always_accept(),
                             initial_position=jnp.asarray(mean, jnp.float32), num_samples=6000, num_chains=4,
                             seed=3, progress=False)
    assert result.acceptance_rate == 1.0
    assert np.all(result.data_used == batch)
    assert not result.info["non_finite"].any()
    assert np.all(result.info["statistic"] == 0)
    # mean: unbiased for a Gaussian target; variance: the exact SGLD stationary value (O(ε) above the posterior's)
    check = check_posterior_moments(result.positions, mean, stationary_variance)
    assert check.passed, str(check)
    assert np.all(stationary_variance > 1.1 * posterior_variance)


def test_sgld_under_a_real_test_never_moves_and_warns(data):
    model = gaussian_mean.model(data, PRIOR_VARIANCE)
    start = jnp.zeros(2, jnp.float32)
    with pytest.warns(RuntimeWarning, match="always_accept"):
        result = tallmcmc.sample(model, tallmcmc.stochastic_gradient_langevin(1e-3, 5), tallmcmc.exact_metropolis(),
                                 initial_position=start, num_samples=50, seed=0, progress=False)
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
    for proposal, test in [(tallmcmc.langevin(5e-3), tallmcmc.exact_metropolis()),
                           (tallmcmc.stochastic_gradient_langevin(1e-3, 7), tallmcmc.always_accept())]:
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
