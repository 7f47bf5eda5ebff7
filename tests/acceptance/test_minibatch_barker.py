"""The minibatch Barker test: its acceptance probability and its posterior.

Every statistical assertion has a tolerance derived from a standard error,
fixed seeds, and a deliberately wrong variant that must fail the same check.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from suite_xla import RUN_HEAVY

import tallmcmc
from tallmcmc.examples import gaussian_mean

NUM_DATA = 100_000
TEMPERATURE = 10_000.0
REPETITIONS = 20_000


@pytest.fixture(scope="module")
def location_model():
    rng = np.random.default_rng(20170811)
    data = rng.normal(0.0, 1.0, NUM_DATA).astype(np.float32)
    return data, gaussian_mean.model(data, prior_variance=None, temperature=TEMPERATURE)


def exact_delta(data, theta, proposed):
    """Δ in float64 with NumPy (flat prior, symmetric proposal): an independent reference."""
    x = data.astype(np.float64)
    return float(np.sum(-0.5 * (x - proposed) ** 2 + 0.5 * (x - theta) ** 2) / TEMPERATURE)


# (θ, θ′) pairs: Δ from about −4.3 to +4.6, including near 0
PAIRS = [(0.3, 0.3 + 1.0), (0.3, 0.3 + 0.5), (0.3, 0.3 - 0.2), (0.3, 0.3 - 0.05), (1.0, 0.35), (1.0, 0.1)]


def acceptance_frequencies(model, test, pairs):
    keys = jax.random.split(jax.random.key(7), REPETITIONS)
    frequencies, infos = [], []
    decide = jax.jit(
        jax.vmap(
            lambda key, theta, proposed: test.decide(key, model, theta, proposed, jnp.float32(0.0), ()), (0, None, None)
        ),
        compiler_options=RUN_HEAVY,  # many minibatch decisions run by one program: XLA's defaults (suite_xla)
    )
    for theta, proposed in pairs:
        decision = decide(keys, jnp.float32(theta), jnp.float32(proposed))
        frequencies.append(float(jnp.mean(decision.accepted)))
        infos.append(decision.info)
    return np.array(frequencies), infos


def barker_mismatch(frequencies, deltas):
    """Largest |frequency − 1/(1+e^−Δ)| in binomial standard errors."""
    probabilities = 1.0 / (1.0 + np.exp(-np.asarray(deltas)))
    standard_errors = np.sqrt(probabilities * (1 - probabilities) / REPETITIONS)
    return np.abs(frequencies - probabilities) / standard_errors


def test_acceptance_probability_matches_barker(location_model):
    data, model = location_model
    deltas = [exact_delta(data, t, p) for t, p in PAIRS]
    assert min(deltas) < -3 and max(deltas) > 3 and min(abs(d) for d in deltas) < 0.2
    frequencies, infos = acceptance_frequencies(model, tallmcmc.minibatch_barker(50), PAIRS)
    z = barker_mismatch(frequencies, deltas)
    assert np.all(z < 4), (deltas, frequencies, z)
    for info in infos:  # the test really subsampled: minibatches far below N
        assert float(jnp.mean(info.data_used)) < NUM_DATA / 20
        assert not bool(jnp.any(info.used_full_data))


class _ZeroCorrection:
    sigma = 1.0

    def sample(self, key, shape=(), dtype=jnp.float32):
        return jnp.zeros(shape, dtype)


class _LogisticCorrection:
    sigma = 1.0

    def sample(self, key, shape=(), dtype=jnp.float32):
        return jax.random.logistic(key, shape, dtype)


@pytest.mark.parametrize(
    "wrong", [_ZeroCorrection(), _LogisticCorrection()], ids=["no-correction", "logistic-correction"]
)
def test_wrong_correction_fails_the_same_check(location_model, wrong):
    data, model = location_model
    deltas = [exact_delta(data, t, p) for t, p in PAIRS]
    frequencies, _ = acceptance_frequencies(model, tallmcmc.minibatch_barker(50, correction=wrong), PAIRS)
    assert np.max(barker_mismatch(frequencies, deltas)) > 4


def test_info_fields_are_consistent(location_model):
    _, model = location_model
    test = tallmcmc.minibatch_barker(50)
    keys = jax.random.split(jax.random.key(1), 2000)
    decision = jax.jit(
        jax.vmap(lambda k: test.decide(k, model, jnp.float32(0.3), jnp.float32(0.6), jnp.float32(0.0), ()))
    )(keys)
    info = decision.info
    used = np.asarray(info.data_used)
    assert np.all(used % 50 == 0) and np.all(used >= 50)
    assert np.all(np.asarray(info.variance) < 1.0)
    assert np.all(np.asarray(info.error_bound) > 0)
    assert np.array_equal(used, np.asarray(info.data_used_by_test))


def test_delta_bound_makes_the_minibatch_grow(location_model):
    _, model = location_model
    keys = jax.random.split(jax.random.key(2), 500)

    def mean_size(test):
        decision = jax.jit(
            jax.vmap(lambda k: test.decide(k, model, jnp.float32(0.3), jnp.float32(0.6), jnp.float32(0.0), ()))
        )(keys)
        return float(jnp.mean(decision.info.data_used)), np.asarray(decision.info.error_bound)

    plain, plain_errors = mean_size(tallmcmc.minibatch_barker(50))
    # s² ≈ 0.18 here: Novak's bound (6.4 E|Z|³ + 2 E|Z|)/√b ≈ 1.6 is vacuous, the smoothing bound ≈ 0.04 is not
    assert np.median(plain_errors) < 0.1
    bounded, errors = mean_size(tallmcmc.minibatch_barker(50, delta=0.02))
    assert bounded > 2 * plain
    assert np.all(errors <= 0.02)


def test_falls_back_to_exact_barker_when_variance_never_drops():
    rng = np.random.default_rng(3)
    data = rng.normal(0.0, 1.0, 200).astype(np.float32)
    model = gaussian_mean.model(data, prior_variance=None, temperature=0.01)  # enormous per-datum spread
    test = tallmcmc.minibatch_barker(20)
    theta = float(data.mean()) - 0.005
    proposed = theta + 0.0101  # per-datum Λᵢ spread ~200: s² < 1 only at b = N
    x = data.astype(np.float64)
    delta = float(np.sum(-0.5 * (x - proposed) ** 2 + 0.5 * (x - theta) ** 2) / 0.01)
    keys = jax.random.split(jax.random.key(4), REPETITIONS)
    decision = jax.jit(
        jax.vmap(lambda k: test.decide(k, model, jnp.float32(theta), jnp.float32(proposed), jnp.float32(0.0), ()))
    )(keys)
    assert bool(jnp.all(decision.info.used_full_data))
    assert bool(jnp.all(decision.info.data_used == 200))
    np.testing.assert_allclose(np.asarray(decision.info.statistic), delta, rtol=1e-3, atol=1e-3)
    z = barker_mismatch(np.array([float(jnp.mean(decision.accepted))]), [delta])
    assert z[0] < 4


def test_non_finite_delta_rejects_and_is_counted():
    data = np.linspace(-1, 1, 1000).astype(np.float32)

    def log_likelihood(theta, x):
        return jnp.where(theta > 0.5, jnp.nan, -0.5 * (x - theta) ** 2)

    model = tallmcmc.Model(log_likelihood, lambda t: -0.5 * t**2, jnp.asarray(data), 100.0)
    with pytest.warns(RuntimeWarning, match="non-finite"):
        result = tallmcmc.sample(
            model,
            tallmcmc.random_walk(0.3),
            tallmcmc.minibatch_barker(10),
            initial_position=jnp.float32(0.4),
            num_samples=300,
            progress=False,
        )
    assert result.info["non_finite"].sum() > 0
    assert np.all(result.positions <= 0.5)
    assert np.all(result.data_used[result.info["non_finite"]] < 1000)  # stopped at the first bad chunk
