"""Every acceptance test reproduces a known posterior (the shared check).

Target: the tempered conjugate Gaussian-mean model, whose posterior is
known exactly. Tolerances are 4 Monte Carlo standard errors from ArviZ's
ESS across 8 chains (:func:`tallmcmc.testing.check_posterior_moments`); a
sampler with a deliberately wrong proposal ratio must fail the same check.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc.examples import gaussian_mean
from tallmcmc.proposals.base import Proposal, Proposed
from tallmcmc.testing import check_posterior_moments

NUM_DATA = 10_000
TEMPERATURE = 100.0
NUM_CHAINS = 8
NUM_SAMPLES = 3000


@pytest.fixture(scope="module")
def conjugate():
    rng = np.random.default_rng(1953)
    data = rng.normal([0.5, -1.0], 1.0, (NUM_DATA, 2)).astype(np.float32)
    model = gaussian_mean.model(data, prior_variance=10.0, temperature=TEMPERATURE)
    mean, variance = gaussian_mean.posterior(data, prior_variance=10.0, temperature=TEMPERATURE)
    # start every chain at an exact posterior draw: no burn-in to discard
    starts = (mean + np.sqrt(variance) * rng.standard_normal((NUM_CHAINS, 2))).astype(np.float32)
    return model, mean, variance, starts


def run(model, starts, test, proposal=None, seed=0):
    proposal = proposal or tallmcmc.random_walk(0.1)
    return tallmcmc.sample(
        model, proposal, test, initial_positions=jnp.asarray(starts), num_samples=NUM_SAMPLES,
        num_chains=NUM_CHAINS, seed=seed, progress=False,
    )


TESTS = {
    "exact_metropolis": tallmcmc.exact_metropolis,
    "exact_barker": tallmcmc.exact_barker,
    "minibatch_barker": lambda: tallmcmc.minibatch_barker(50),
    "minibatch_barker_geometric": lambda: tallmcmc.minibatch_barker(50, growth="geometric", growth_factor=1.5),
}


@pytest.mark.parametrize("name", list(TESTS))
def test_reproduces_the_posterior(conjugate, name):
    model, mean, variance, starts = conjugate
    result = run(model, starts, TESTS[name]())
    check = check_posterior_moments(result.positions, mean, variance)
    assert check.passed, str(check)
    assert 0.2 < result.acceptance_rate < 0.9
    if name.startswith("minibatch"):
        assert result.data_used.mean() < NUM_DATA / 10
    else:
        assert np.all(result.data_used == NUM_DATA)


def drifting_walk(scale, drift):
    """A random walk with a drift that wrongly claims to be symmetric."""

    def propose(key, position, model):
        step = drift + scale * jax.random.normal(key, position.shape, position.dtype)
        return Proposed(position + step, jnp.zeros((), position.dtype), jnp.zeros((), jnp.int32))

    return Proposal(propose, "drifting_walk")


@pytest.mark.parametrize("name", ["exact_metropolis", "minibatch_barker"])
def test_wrong_sampler_fails_the_same_check(conjugate, name):
    model, mean, variance, starts = conjugate
    result = run(model, starts, TESTS[name](), proposal=drifting_walk(0.1, 0.02))
    check = check_posterior_moments(result.positions, mean, variance)
    assert not check.passed, str(check)


def test_same_seed_same_draws(conjugate):
    model, _, _, starts = conjugate
    first = tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.minibatch_barker(50),
                            initial_positions=jnp.asarray(starts), num_samples=40, num_chains=NUM_CHAINS, progress=False, num_chunks=1)
    second = tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.minibatch_barker(50),
                             initial_positions=jnp.asarray(starts), num_samples=40, num_chains=NUM_CHAINS, progress=False, num_chunks=1)
    np.testing.assert_array_equal(first.positions, second.positions)
