"""Warm-up: dual averaging moves the step size towards the target rate; its draws are kept apart and counted."""

import jax.numpy as jnp
import numpy as np
import pytest
from analytic_models import TEMPERED_2D

import tallmcmc


def run(proposal, test, **kwargs):
    return tallmcmc.sample(TEMPERED_2D.model, proposal, test, initial_position=jnp.asarray(TEMPERED_2D.mean, jnp.float32),
                           num_samples=1500, num_chains=4, progress=False, seed=2, **kwargs)


@pytest.mark.parametrize("test, target", [(tallmcmc.exact_metropolis(), 0.234), (tallmcmc.exact_barker(), 0.158)])
def test_a_badly_scaled_random_walk_is_tuned_to_the_target_rate(test, target):
    untuned = run(tallmcmc.random_walk(0.005), test)  # 1/20 of the posterior sd: accepts far too often
    tuned = run(tallmcmc.random_walk(0.005), test, num_warmup=1000)
    assert untuned.acceptance_rate > 0.4
    assert abs(tuned.acceptance_rate - target) < 0.06, tuned.acceptance_rate
    assert np.all(tuned.step_size_factor > 5)
    assert tuned.warmup_positions.shape == (4, 1000, 2) and tuned.positions.shape == (4, 1500, 2)
    assert tuned.total_data_used == sum(tuned.setup_data_used.values()) + (1000 + 1500) * 4 * TEMPERED_2D.num_data
    idata = tuned.to_inference_data()
    assert "warmup_posterior" in idata.groups() and idata.warmup_posterior.theta.shape == (4, 1000, 2)


def test_warmup_without_a_tunable_step_is_a_burn_in():
    proposal = tallmcmc.laplace_independence(mean=TEMPERED_2D.mean, covariance=np.diag(TEMPERED_2D.variance))
    result = run(proposal, tallmcmc.exact_metropolis(), num_warmup=100)
    assert result.step_size_factor is None and result.warmup_info["accepted"].shape == (4, 100)


def test_bad_warmup_settings():
    with pytest.raises(ValueError, match="num_warmup"):
        run(tallmcmc.random_walk(0.1), tallmcmc.exact_metropolis(), num_warmup=-1)
    with pytest.raises(ValueError, match="target_acceptance"):
        run(tallmcmc.random_walk(0.1), tallmcmc.exact_metropolis(), num_warmup=10, target_acceptance=1.5)
