"""TunaMH (``tallmcmc.tuna``): exactness, its bound checks and its data count.

* Posterior moments on the conjugate Gaussian-mean model (exact posterior)
  within 4 Monte Carlo standard errors; a deliberately wrong variant (the
  kept ratio without λ, i.e. log φ′ᵢ/φᵢ) fails the same check.
* Detailed balance at one pair: with a flat prior and a symmetric proposal,
  an exact test accepts θ → θ′ and θ′ → θ with probabilities whose ratio is
  exactly e^Δ. The frequencies of many vmapped decisions must show it within
  4 standard errors (delta method); a variant that keeps every drawn index
  fails it. The same check on logistic regression with a control variate
  checks the composition with ``control_variate``.
* The batch is Poisson: mean data per decision λ + CM within 4 standard
  errors; the full-data switch uses N points and decides like Metropolis.
* The alias table gives each index exactly its probability; the example
  bounds hold on random pairs (their old names in ``acceptance.tuna`` warn);
  a violated bound is flagged per step and makes ``sample`` raise; bad
  input fails with errors naming the argument.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc.acceptance import tuna as tuna_module
from tallmcmc.examples import gaussian_mean, gaussian_mixture, logistic_regression, weighted_mean
from tallmcmc.testing import check_posterior_moments

NUM_DATA = 300
CHI = 0.05


@pytest.fixture(scope="module")
def gaussian():
    data = np.random.default_rng(0).normal(0.5, 1.0, (NUM_DATA, 1)).astype(np.float32)
    model = gaussian_mean.model(data, 100.0)
    mean, variance = gaussian_mean.posterior(data, 100.0)
    return data, model, mean, variance, gaussian_mean.tuna_bound(model)


def ratio_without_lambda(log_ratios, c, cm, lam, total):
    """Deliberately wrong: the kept term log(φ′ᵢ/φᵢ) instead of log[(λcᵢ + Cφ′ᵢ)/(λcᵢ + Cφᵢ)]."""
    keep, _ = tuna_module.step_terms(log_ratios, c, cm, lam, total)
    return keep, jnp.log(0.5 * (cm + log_ratios)) - jnp.log(0.5 * (cm - log_ratios))


def keep_everything(log_ratios, c, cm, lam, total):
    """Deliberately wrong: every drawn index is kept (no thinning)."""
    keep, term = tuna_module.step_terms(log_ratios, c, cm, lam, total)
    return jnp.ones_like(keep), term


def built(bound, terms=tuna_module.step_terms, chi=CHI, max_expected_batch=None, control_variate=None):
    return tuna_module._build(
        chi, bound, chunk_size=128, max_expected_batch=max_expected_batch, control_variate=control_variate, terms=terms
    )


def run_gaussian(gaussian, test, num_samples=2000):
    data, model, mean, variance, _ = gaussian
    sd = math.sqrt(variance[0])
    starts = mean + sd * np.random.default_rng(1).standard_normal((4, 1))
    result = tallmcmc.sample(
        model,
        tallmcmc.random_walk(2.4 * sd),
        test,
        initial_positions=jnp.asarray(starts, jnp.float32),
        num_samples=num_samples,
        num_chains=4,
        seed=1,
        progress=False,
    )
    return result, check_posterior_moments(result.positions, mean, variance)


# --------------------------------------------------------------------------------------- exactness


def test_posterior_moments_match_the_exact_posterior(gaussian):
    # max_expected_batch 10 N: TunaMH decides almost every step (the switch is tested below)
    result, check = run_gaussian(gaussian, built(gaussian[4], max_expected_batch=10 * NUM_DATA))
    assert check.passed, str(check)
    assert result.info["used_full_data"].mean() < 0.01
    assert 0.05 < result.acceptance_rate < 0.6


def test_ratio_without_lambda_fails_the_same_check(gaussian):
    _, check = run_gaussian(gaussian, built(gaussian[4], ratio_without_lambda, max_expected_batch=10 * NUM_DATA))
    assert not check.passed, str(check)


@pytest.mark.slow
def test_posterior_moments_with_the_full_data_switch(gaussian):
    """Default max_expected_batch (N): about a third of the steps switch to full-data Metropolis at N = 300."""
    result, check = run_gaussian(gaussian, tallmcmc.tuna(CHI, gaussian[4]), num_samples=4000)
    assert check.passed, str(check)
    assert 0.05 < result.info["used_full_data"].mean() < 0.95


def both_ways(model, test, theta, proposed, repetitions):
    """``repetitions`` vmapped decisions θ → θ′ and as many θ′ → θ, in one compiled call (flat prior, symmetric proposal)."""
    zero = jnp.zeros((), jnp.float32)

    @jax.jit
    def run(starts, ends):
        def one(key, start, end):
            return test.decide(key, model, start, end, zero, test.init(model, start))

        keys = jax.random.split(jax.random.key(7), (2, repetitions))
        return jax.vmap(lambda k, a, b: jax.vmap(one, in_axes=(0, None, None))(k, a, b))(keys, starts, ends)

    decisions = run(jnp.stack([theta, proposed]), jnp.stack([proposed, theta]))
    return jax.tree_util.tree_map(lambda leaf: np.asarray(leaf[0]), decisions), jax.tree_util.tree_map(
        lambda leaf: np.asarray(leaf[1]), decisions
    )


def balance(model, test, theta, proposed, delta, repetitions=8000):
    """z-score of log(P(accept θ→θ′)/P(accept θ′→θ)) − Δ (delta method), and the forward decisions."""
    forward, backward = both_ways(model, test, theta, proposed, repetitions)
    p, q = float(np.mean(forward.accepted)), float(np.mean(backward.accepted))
    assert p > 0 and q > 0, (p, q)
    # an uphill move may be accepted every time (exact Metropolis does): floor the binomial variance at 1/n
    variance = sum(max(r * (1 - r), 1 / repetitions) / (repetitions * r**2) for r in (p, q))
    return (math.log(p / q) - delta) / math.sqrt(variance), forward


def gaussian_pair(gaussian):
    data, model, mean, variance, _ = gaussian
    theta, proposed = np.float32(mean[0]), np.float32(mean[0] + 1.5 * math.sqrt(variance[0]))
    x = data[:, 0].astype(np.float64)
    delta = float(np.sum(-0.5 * (x - proposed) ** 2 + 0.5 * (x - theta) ** 2))
    return jnp.asarray([theta]), jnp.asarray([proposed]), delta


def test_detailed_balance_at_a_pair(gaussian):
    theta, proposed, delta = gaussian_pair(gaussian)
    assert -2 < delta < -0.5
    z, forward = balance(gaussian[1], built(gaussian[4], max_expected_batch=10 * NUM_DATA), theta, proposed, delta)
    assert abs(z) < 4, z
    assert not np.any(forward.info.non_finite) and not np.any(forward.info.used_full_data)


def test_keeping_every_draw_breaks_detailed_balance(gaussian):
    theta, proposed, delta = gaussian_pair(gaussian)
    z, _ = balance(
        gaussian[1], built(gaussian[4], keep_everything, max_expected_batch=10 * NUM_DATA), theta, proposed, delta
    )
    assert abs(z) > 4, z


def test_detailed_balance_on_control_variate_residuals():
    covariates, response = logistic_regression.simulate(2000, 3, seed=3)
    model = logistic_regression.model(covariates, response)
    mode = tallmcmc.find_mode(model, jnp.zeros(3, jnp.float32))
    cv = tallmcmc.taylor_control_variate(model, mode.position)
    bound = logistic_regression.tuna_bound(model, control_variate=cv)
    test = tallmcmc.tuna(1.0, bound, control_variate=cv)
    sd = np.sqrt(np.diag(np.asarray(tallmcmc.laplace_covariance(mode))))
    theta = np.asarray(mode.position) + 0.5 * sd * np.array([1.0, -1.0, 0.5])
    proposed = theta + 1.5 * sd * np.array([0.5, 1.0, -1.0])
    x, y = covariates.astype(np.float64), response.astype(np.float64)

    def log_likelihood(beta):
        z = x @ beta
        return np.sum(y * -np.logaddexp(0, -z) + (1 - y) * -np.logaddexp(0, z))

    delta = log_likelihood(proposed.astype(np.float64)) - log_likelihood(theta.astype(np.float64))
    assert abs(delta) < 3
    z, forward = balance(model, test, jnp.asarray(theta, jnp.float32), jnp.asarray(proposed, jnp.float32), delta)
    assert abs(z) < 4, z
    assert float(np.mean(forward.info.data_used)) < 50  # the residual bound is tight: a handful of points


# --------------------------------------------------------------------------------------- data count, switch


def test_data_used_is_the_poisson_batch(gaussian):
    data, model, _, _, bound = gaussian
    theta, proposed, _ = gaussian_pair(gaussian)
    repetitions = 4000
    decisions, _ = both_ways(model, built(bound, max_expected_batch=10 * NUM_DATA), theta, proposed, repetitions)
    distance = float(bound.distance(theta, proposed))
    span = bound.total * distance
    expected = CHI * span**2 + span
    used = np.asarray(decisions.info.data_used, np.float64)
    assert abs(used.mean() - expected) < 4 * math.sqrt(expected / repetitions), (used.mean(), expected)
    assert abs(used.var() / expected - 1) < 0.1  # Poisson: variance = mean
    assert np.all(decisions.info.data_used == decisions.info.data_used_by_test)
    result, _ = run_gaussian(gaussian, built(bound), num_samples=20)
    assert result.setup_data_used[bound.name] == NUM_DATA  # the one pass that computed the c_i


def test_full_data_switch_is_metropolis(gaussian):
    data, model, _, _, bound = gaussian
    theta, proposed, delta = gaussian_pair(gaussian)
    repetitions = 4000
    decisions, _ = both_ways(model, built(bound, max_expected_batch=1.0), theta, proposed, repetitions)
    assert np.all(decisions.info.used_full_data) and np.all(decisions.info.data_used == NUM_DATA)
    np.testing.assert_allclose(np.asarray(decisions.info.statistic), delta, rtol=1e-3)
    rate, exact = float(np.mean(decisions.accepted)), math.exp(min(delta, 0.0))
    assert abs(rate - exact) < 4 * math.sqrt(exact * (1 - exact) / repetitions), (rate, exact)


def test_alias_table_gives_each_index_its_probability():
    weights = np.random.default_rng(4).gamma(0.3, size=1000) + 1e-6
    probability, alias = tuna_module._alias_table(weights)
    implied = probability.copy()
    np.add.at(implied, alias, 1.0 - probability)
    np.testing.assert_allclose(implied / weights.size, weights / weights.sum(), rtol=1e-9, atol=1e-15)


def test_zero_constants_are_never_drawn(gaussian):
    _, model, _, _, bound = gaussian
    constants = bound.constants.copy()
    constants[::2] = 0.0
    sparse = tuna_module.tuna_bound(constants, bound.distance)
    probability = np.asarray(sparse.alias_probability, np.float64)
    implied = probability.copy()
    np.add.at(implied, np.asarray(sparse.alias_index), 1.0 - probability)
    assert np.all(implied[constants == 0] == 0)
    np.testing.assert_allclose(implied / NUM_DATA, constants / constants.sum(), rtol=1e-5, atol=1e-7)
    assert abs(sparse.total - constants.sum()) < 1e-9


# --------------------------------------------------------------------------------------- bounds


def pairs(rng, center, scale, count=20):
    center = np.asarray(center, np.float64)
    return [
        (
            center + scale * rng.standard_normal(center.shape) * rng.choice([0.1, 1, 10]),
            center + scale * rng.standard_normal(center.shape) * rng.choice([0.1, 1, 10]),
        )
        for _ in range(count)
    ]


def assert_bound_holds(model, bound, rng, center, scale, residuals=None):
    for a, b in pairs(rng, center, scale):
        a32, b32 = jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)
        if residuals is None:
            ratios = np.asarray(model.log_likelihood_ratios(a32, b32, model.data), np.float64)
        else:
            ratios = np.asarray(residuals.log_likelihood_ratios(a32, b32, model.data), np.float64)
        limit = bound.constants * float(bound.distance(a32, b32))
        assert np.all(np.abs(ratios) <= limit * (1 + tuna_module.BOUND_SLACK) + 1e-5), np.max(np.abs(ratios) / limit)


def test_example_bounds_hold_on_random_pairs():
    rng = np.random.default_rng(5)
    covariates, response = logistic_regression.simulate(500, 4, seed=1)
    model = logistic_regression.model(covariates, response)
    assert_bound_holds(model, logistic_regression.tuna_bound(model), rng, np.zeros(4), 1.0)
    mode = tallmcmc.find_mode(model, jnp.zeros(4, jnp.float32))
    for order in (1, 2):
        cv = tallmcmc.taylor_control_variate(model, mode.position, order=order)
        bound = logistic_regression.tuna_bound(model, control_variate=cv)
        assert_bound_holds(model, bound, rng, np.asarray(mode.position), 0.3, residuals=cv.residual_model(model))
    mixture = gaussian_mixture.model(500, temperature=1.0)
    assert_bound_holds(mixture, gaussian_mixture.tuna_bound(mixture), rng, np.array([0.0, 1.0]), 1.0)
    data = np.random.default_rng(2).normal(0.5, 1.0, (300, 2)).astype(np.float32)
    normal = gaussian_mean.model(data)
    assert_bound_holds(normal, gaussian_mean.tuna_bound(normal), rng, np.array([0.5, 0.5]), 1.0)
    weighted = weighted_mean.model(weighted_mean.simulate(500))
    assert_bound_holds(weighted, weighted_mean.tuna_bound(weighted), rng, np.array(0.0), 0.5)


def test_a_violated_bound_is_flagged_and_sample_raises(gaussian):
    data, model, _, _, bound = gaussian
    loose = tuna_module.tuna_bound(bound.constants * 1e-3, bound.distance, name="too small")
    theta, proposed, _ = gaussian_pair(gaussian)
    decisions, _ = both_ways(model, built(loose, chi=1e3, max_expected_batch=10 * NUM_DATA), theta, proposed, 50)
    drew = np.asarray(decisions.info.data_used) > 0
    assert drew.any()
    assert np.all(np.asarray(decisions.info.non_finite)[drew]) and not np.any(np.asarray(decisions.accepted)[drew])
    assert np.all(np.asarray(decisions.info.error_bound)[drew] > 1)
    with pytest.raises(ValueError, match="bound.*too small|too small.*bound") as raised:
        run_gaussian(gaussian, tallmcmc.tuna(1e3, loose, max_expected_batch=10 * NUM_DATA), num_samples=20)
    assert raised.value.result.positions.shape[1] == 20  # the run is not lost


# --------------------------------------------------------------------------------------- bad input


def test_bad_input_names_the_argument(gaussian):
    _, model, _, _, bound = gaussian
    for chi in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="chi"):
            tallmcmc.tuna(chi, bound)
    with pytest.raises(TypeError, match="bound"):
        tallmcmc.tuna(0.1, np.ones(NUM_DATA))
    with pytest.raises(ValueError, match="max_expected_batch"):
        tallmcmc.tuna(0.1, bound, max_expected_batch=0)
    with pytest.raises(ValueError, match="constants"):
        tuna_module.tuna_bound(-np.ones(3), bound.distance)
    with pytest.raises(ValueError, match="N = 3"):
        tallmcmc.tuna(0.1, tuna_module.tuna_bound(np.ones(3), bound.distance)).init(model, jnp.zeros(1))
    with pytest.raises(ValueError, match="logistic_regression"):
        logistic_regression.tuna_bound(model)
    covariates, response = logistic_regression.simulate(200, 2, seed=1)
    logistic = logistic_regression.model(covariates, response)
    cv = tallmcmc.taylor_control_variate(logistic, jnp.zeros(2, jnp.float32))
    with pytest.raises(ValueError, match="control_variate"):
        tallmcmc.tuna(0.1, logistic_regression.tuna_bound(logistic), control_variate=cv)
    with pytest.raises(ValueError, match="curvature"):
        logistic_regression.tuna_bound(
            logistic,
            control_variate=tallmcmc.taylor_control_variate(logistic, jnp.zeros(2, jnp.float32), curvature="shared"),
        )


@pytest.mark.parametrize(
    "old, example",
    [
        ("logistic_regression_bound", logistic_regression),
        ("gaussian_mixture_bound", gaussian_mixture),
        ("gaussian_mean_bound", gaussian_mean),
        ("weighted_mean_bound", weighted_mean),
    ],
)
def test_the_old_names_of_the_example_bounds_name_where_they_moved(old, example):
    """``tallmcmc.acceptance.tuna.<example>_bound`` (removed after 0.1.0) raises an AttributeError naming the new home."""
    new = f"tallmcmc.examples.{example.__name__.rsplit('.', 1)[-1]}.tuna_bound"
    with pytest.raises(AttributeError, match=new.replace(".", r"\.")):
        getattr(tuna_module, old)
    with pytest.raises(ImportError, match=old):  # Python's own message: AttributeError's is not passed on
        exec(f"from tallmcmc.acceptance.tuna import {old}", {})
    with pytest.raises(AttributeError, match="no attribute 'no_such_bound'"):
        tuna_module.no_such_bound  # noqa: B018
    assert old not in tuna_module.__all__
