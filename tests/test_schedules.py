"""Temperature and step-size schedules in ``sample``: per-step targets and steps, as data."""

import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc.examples import gaussian_mean
from tallmcmc.testing import check_posterior_moments


@pytest.fixture(scope="module")
def model():
    data = np.random.default_rng(0).normal(0.5, 1.0, 2000).astype(np.float32)
    return data, gaussian_mean.model(data, prior_variance=None, temperature=1.0)


def test_temperature_schedule_anneals_to_the_untempered_posterior(model):
    data, base = model
    hot, cold = 400.0, 1.0
    schedule = np.r_[np.full(1000, hot), np.full(3000, cold)]
    steps = np.r_[np.full(1000, 1.0), np.full(3000, 0.05)]
    result = tallmcmc.sample(
        base,
        tallmcmc.random_walk(1.0),
        tallmcmc.exact_metropolis(),
        initial_position=jnp.float32(5.0),
        num_samples=4000,
        num_chains=4,
        progress=False,
        temperature_schedule=schedule,
        step_size_schedule=steps,
    )
    draws = np.asarray(result.positions)
    hot_mean, hot_variance = gaussian_mean.posterior(data, None, hot)
    cold_mean, cold_variance = gaussian_mean.posterior(data, None, cold)
    # the hot phase is 20x wider than the cold posterior; the cold phase matches the K = 1 posterior
    assert np.std(draws[:, 200:1000]) > 10 * np.sqrt(cold_variance)
    check_posterior_moments(draws[:, 1500:], cold_mean, cold_variance)
    # the step-size schedule shrank the cold steps (2.2 posterior sds): without it, steps of 45 sds accept ~2%
    assert result.accepted[:, 1500:].mean() > 0.3


def test_schedules_are_the_same_as_constant_models(model):
    data, base = model
    common = dict(initial_position=jnp.float32(0.5), num_samples=300, progress=False, seed=4)
    fixed = tallmcmc.sample(
        gaussian_mean.model(data, None, 3.0), tallmcmc.random_walk(0.06), tallmcmc.exact_barker(), **common
    )
    scheduled = tallmcmc.sample(
        base,
        tallmcmc.random_walk(0.03),
        tallmcmc.exact_barker(),
        **common,
        temperature_schedule=np.full(300, 3.0),
        step_size_schedule=np.full(300, 2.0),
    )
    np.testing.assert_allclose(np.asarray(fixed.positions), np.asarray(scheduled.positions), rtol=1e-6)


def test_bad_schedules_are_refused(model):
    _, base = model
    common = dict(initial_position=jnp.float32(0.5), num_samples=10, progress=False)
    with pytest.raises(ValueError, match=r"temperature_schedule must have one value per kept step, shape \(10,\)"):
        tallmcmc.sample(
            base, tallmcmc.random_walk(0.1), tallmcmc.exact_barker(), temperature_schedule=[1.0] * 9, **common
        )
    with pytest.raises(ValueError, match="step_size_schedule must hold finite step-size factors > 0; step 3"):
        tallmcmc.sample(
            base,
            tallmcmc.random_walk(0.1),
            tallmcmc.exact_barker(),
            step_size_schedule=[1, 1, 1, 0, 1, 1, 1, 1, 1, 1],
            **common,
        )
    cv = tallmcmc.taylor_control_variate(base, jnp.float32(0.5))
    with pytest.raises(ValueError, match="control-variate test"):
        tallmcmc.sample(
            base,
            tallmcmc.random_walk(0.1),
            tallmcmc.minibatch_barker(50, control_variate=cv),
            temperature_schedule=np.ones(10),
            **common,
        )
