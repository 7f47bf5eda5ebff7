"""A run that spends most of N on a subsampling test says so, and names the cause it measured."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc.acceptance.minibatch_barker import TailPool
from tallmcmc.examples import logistic_regression
from tallmcmc.run_warnings import MOST_OF_THE_DATA, DataUseWarning, data_use, warn_if_subsampling_does_not_pay


def _info(num_steps, used, variance):
    return {
        "data_used_by_test": np.full((2, num_steps), used, np.int32),
        "variance": np.full((2, num_steps), variance, np.float32),
        "non_finite": np.zeros((2, num_steps), bool),
    }


def test_spread_is_recovered_from_the_reported_variance_and_minibatch_size():
    # Var(Δ*) = N² Var(l)/b (1 − b/N): with N²Var(l) = 400, b = 200, N = 1000 → 1.6
    use = data_use(_info(10, 200, 1.6), 1000)
    assert use.spread == pytest.approx(400.0, rel=1e-5) and use.cause == "spread"
    assert use.spread_size == pytest.approx(400.0 / 1.4, rel=1e-5) and use.fraction == 0.2
    # no rule asked for more than the first minibatch: N is small against it
    assert data_use(_info(10, 500, 400 / 500 * 0.5), 1000).cause == "small N"
    # steps that used all N say nothing of the spread (the finite-population factor is 0)
    assert np.isnan(data_use(_info(10, 1000, 0.0), 1000).spread)


def test_tail_weight_is_named_when_the_guard_asks_for_more_than_the_spread():
    # kurtosis ≈ 900, as on the 26-parameter regression; typical first-stage Var(Δ*) 1 ≥ 0.1: the guard acts
    pool = TailPool(
        fourth=np.array([9000.0, 9200.0]), count=np.array([10.0, 10.0]), first_variance=np.ones(2), steps=np.ones(2)
    )
    info = _info(10, 800, 0.35 * (1 - 800 / 1000) / 800)  # N²Var(r) = 0.35: tiny spread
    with pytest.warns(RuntimeWarning, match=r"80% of the N = 1,000.*kurtosis of the lᵢ ≈ 910.*heavy-tailed") as caught:
        use = warn_if_subsampling_does_not_pay("minibatch_barker", info, 1000, pool, uses_control_variate=True)
    assert use.cause == "tail weight" and use.guard_size == pytest.approx(909 / 0.35**2, rel=1e-6)
    assert "centre is far from the mode" not in str(caught[0].message)
    # its own class, a RuntimeWarning: sample_tall's watched kept draws drop it by class, not by its text
    assert caught[0].category is DataUseWarning and issubclass(DataUseWarning, RuntimeWarning)


def test_spread_with_a_control_variate_blames_the_centre_the_steps_or_n():
    info = _info(10, 300, 2000 / 300 * 0.7)  # N²Var = 2,000: b ≈ 667 by the variance rule
    with pytest.warns(RuntimeWarning, match=r"N²·Var\(lᵢ\) ≈ 2e\+03.*residuals are widely spread"):
        warn_if_subsampling_does_not_pay("austere", info, 1000, None, uses_control_variate=True)


def test_a_first_minibatch_that_is_most_of_n_is_named_as_such():
    with pytest.warns(RuntimeWarning, match=r"N is small for this test: its first minibatch \(500 points\)"):
        warn_if_subsampling_does_not_pay("minibatch_barker", _info(10, 500, 0.1), 1000, None, False)


def test_a_run_within_a_quarter_of_n_is_quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        use = warn_if_subsampling_does_not_pay("minibatch_barker", _info(5, 200, 0.5), 1000, None, False)
    assert use.fraction == 0.2 <= MOST_OF_THE_DATA


@pytest.fixture(scope="module")
def untempered_logistic():
    covariates, response = logistic_regression.simulate(20_000, 5, seed=0)
    model = logistic_regression.model(covariates, response)
    return model, tallmcmc.find_mode(model, jnp.zeros(5))


def test_the_plain_minibatch_test_on_an_untempered_posterior_points_at_sample_tall(untempered_logistic):
    # the case: no control variate, steps at the posterior's scale; it used ~90% of N without a word
    model, mode = untempered_logistic
    with pytest.warns(RuntimeWarning, match=r"minibatch_barker used [0-9]+% .*widely spread.*sample_tall") as caught:
        result = tallmcmc.sample(
            model,
            tallmcmc.laplace_random_walk(mode),
            tallmcmc.minibatch_barker(100),
            initial_position=mode.position,
            num_samples=200,
            num_chains=2,
            progress=False,
        )
    assert result.data_used_by_test.mean() / model.num_data > MOST_OF_THE_DATA
    assert len([w for w in caught if "used" in str(w.message)]) == 1


def test_the_exact_test_never_warns_about_its_full_passes(untempered_logistic):
    model, mode = untempered_logistic
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        tallmcmc.sample(
            model,
            tallmcmc.laplace_random_walk(mode),
            tallmcmc.exact_metropolis(),
            initial_position=mode.position,
            num_samples=20,
            progress=False,
        )


def test_the_chains_whose_guard_acts_name_the_cause_not_the_median_chain():
    # two chains of four guard (typical first-stage Var(Δ*) ≥ 0.1) with a kurtosis of 8,000; the other two neither
    # guard nor see the tails: their medians (κ ≈ 30, no guard) named "small N" where the guard grew the minibatch
    pool = TailPool(
        fourth=np.array([8000.0, 30.0, 8200.0, 31.0]) * 10,
        count=np.full(4, 10.0),
        first_variance=np.array([5.0, 0.001, 7.0, 0.002]),
        steps=np.ones(4),
    )
    info = {name: np.tile(values, (2, 1)) for name, values in _info(10, 300, 0.01 * (1 - 0.3) / 300).items()}
    use = data_use(info, 1000, pool)
    assert use.cause == "tail weight" and use.kurtosis == pytest.approx(8100.0)
    assert use.guard_size == pytest.approx(8099.0 / 0.35**2)
    # where no chain guards, the kurtosis reported is the chains' median and the guard asks for nothing
    quiet = pool._replace(first_variance=np.full(4, 0.001))
    assert data_use(info, 1000, quiet).guard_size == 0.0
