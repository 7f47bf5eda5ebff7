"""The minibatch penalty test: detailed balance of its decisions, where its normal approximation is weakest too.

The test's acceptance probability a(θ → θ′) has no closed form (it depends on
the noise of Δ* where the minibatch stops), but detailed balance does:
a(θ → θ′) = e^Δ a(θ′ → θ) for the exact Δ. Each check measures both
directions (independent decisions, fixed seeds) and compares
e^{−Δ/2} a(θ → θ′) with e^{Δ/2} a(θ′ → θ) in binomial standard errors. The same
check must fail for the naive test that drops the penalty (min(1, e^{Δ*})), and,
on heavy-tailed log ratios, for the test without its tail guard.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from suite_xla import RUN_HEAVY

import tallmcmc
from tallmcmc.acceptance import penalty as penalty_module
from tallmcmc.examples import gaussian_mean, weighted_mean
from tallmcmc.testing import repeated_decisions

NUM_DATA = 100_000
TEMPERATURE = 10_000.0
REPETITIONS = 20_000
# (θ, θ′): Δ from about −2.8 to +0.4 (and reversed), Var(Δ*) where the minibatch stops 0.01 to 0.5
PAIRS = [(0.3, 0.8), (0.3, 0.1), (0.3, 0.25), (1.0, 0.35)]


@pytest.fixture(scope="module")
def location_model():
    rng = np.random.default_rng(20170811)
    data = rng.normal(0.0, 1.0, NUM_DATA).astype(np.float32)
    return data, gaussian_mean.model(data, prior_variance=None, temperature=TEMPERATURE)


def exact_delta(data, theta, proposed):
    """Δ in float64 with NumPy (flat prior, symmetric proposal): an independent reference."""
    x = data.astype(np.float64)
    return float(np.sum(-0.5 * (x - proposed) ** 2 + 0.5 * (x - theta) ** 2) / TEMPERATURE)


def frequencies(model, test, theta, proposed, seed):
    """The acceptance frequency of ``REPETITIONS`` independent decisions at (θ, θ′), and their infos."""
    decision = _decider(model, test)(jax.random.split(jax.random.key(seed), REPETITIONS), theta, proposed)
    return float(jnp.mean(decision.accepted)), decision.info


_DECIDERS = {}


def _decider(model, test):
    """One compiled program per (model, test): the pair is an argument, not a constant."""
    if (id(model), id(test)) not in _DECIDERS:
        decide = lambda key, theta, proposed: test.decide(key, model, theta, proposed, jnp.float32(0.0), ())  # noqa: E731
        # many minibatch decisions run by one program: XLA's defaults (suite_xla)
        vectorised = jax.jit(jax.vmap(decide, (0, None, None)), compiler_options=RUN_HEAVY)
        _DECIDERS[id(model), id(test)] = lambda keys, theta, proposed: vectorised(
            keys, jnp.float32(theta), jnp.float32(proposed)
        )
    return _DECIDERS[id(model), id(test)]


def balance_z(forward, reverse, delta, repetitions=REPETITIONS):
    """(e^{−Δ/2} a_fwd − e^{Δ/2} a_rev) in standard errors: 0 under detailed balance."""
    gap = forward * np.exp(-delta / 2) - reverse * np.exp(delta / 2)
    variance = forward * (1 - forward) * np.exp(-delta) + reverse * (1 - reverse) * np.exp(delta)
    return gap / np.sqrt(variance / repetitions)


def location_balance(data, model, test):
    z, variances = [], []
    for theta, proposed in PAIRS:
        forward, info = frequencies(model, test, theta, proposed, seed=1)
        reverse, _ = frequencies(model, test, proposed, theta, seed=2)
        z.append(balance_z(forward, reverse, exact_delta(data, theta, proposed)))
        variances.append(float(jnp.mean(info.variance)))
    return np.array(z), np.array(variances)


def test_detailed_balance_on_noisy_estimates(location_model):
    data, model = location_model
    z, variances = location_balance(data, model, tallmcmc.minibatch_penalty(50))
    assert variances.max() > 0.3, variances  # the noise is not negligible: the penalty has work to do
    assert np.all(np.abs(z) < 4), z


def test_without_the_penalty_detailed_balance_fails(location_model, monkeypatch):
    data, model = location_model
    monkeypatch.setattr(penalty_module, "penalty", lambda variance, kurtosis, batch_size: 0.0 * variance)
    z, _ = location_balance(data, model, tallmcmc.minibatch_penalty(50))
    assert np.max(np.abs(z)) > 4, z


def test_acceptance_is_at_least_the_barker_probability():
    """E min(1, e^{Δ + sZ − s²/2}) ≥ 1/(1 + e^{−Δ}) for s ≤ 1.2 (Gauss–Hermite, 120 nodes): the Peskun claim."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(120)
    weights = weights / weights.sum()
    deltas = np.linspace(-12, 12, 961)
    for s in (0.05, 0.3, 0.6, 1.0, 1.2):
        penalty = np.sum(weights * np.minimum(1, np.exp(deltas[:, None] + s * nodes - s * s / 2)), axis=1)
        assert np.all(penalty >= 1 / (1 + np.exp(-deltas)) - 1e-9), s
        assert abs(penalty[480] - 2 * (1 - 0.5 * (1 + math.erf(s / 2 / math.sqrt(2))))) < 2e-3  # 2Φ(−s/2) at Δ = 0


def test_info_and_the_exact_fallback(location_model):
    data, model = location_model
    _, info = frequencies(model, tallmcmc.minibatch_penalty(50), 0.3, 0.8, seed=3)
    used = np.asarray(info.data_used)
    assert np.all(used % 50 == 0) and np.all(used >= 50) and used.mean() < NUM_DATA / 20
    assert np.all(np.asarray(info.variance) < 1.0) and np.all(np.asarray(info.error_bound) > 0)
    # σ so small that the minibatch reaches N: Δ* is exact and the step is the Metropolis test
    small = gaussian_mean.model(data[:400], prior_variance=None, temperature=1.0)
    forward, info = frequencies(small, tallmcmc.minibatch_penalty(50, sigma=1e-6), 0.0, 0.05, seed=4)
    delta = exact_delta(data[:400], 0.0, 0.05) * TEMPERATURE
    assert bool(jnp.all(info.used_full_data)) and float(jnp.max(info.variance)) == 0.0
    probability = min(1.0, np.exp(delta))
    assert abs(forward - probability) < 4 * np.sqrt(probability * (1 - probability) / REPETITIONS) + 1e-6


@pytest.mark.parametrize(
    ("argument", "value"), [("sigma", 0.0), ("sigma", float("inf")), ("delta", -1.0), ("variance_rse", 0.0)]
)
def test_bad_arguments_name_themselves(argument, value):
    with pytest.raises(ValueError, match=argument):
        tallmcmc.minibatch_penalty(50, **{argument: value})


# heavy tails: 1% of the points carry about half of Δ (tallmcmc.examples.weighted_mean)
HEAVY_TEMPERATURE, HEAVY_STEP = 20.0, 0.01


@pytest.fixture(scope="module")
def heavy():
    data = weighted_mean.simulate()
    mean, _ = weighted_mean.posterior(data, HEAVY_TEMPERATURE)
    total_weight = float(np.sum(data[:, 1], dtype=np.float64))
    pairs = []
    for target in (-4.0, -1.0):  # Δ ≈ W·δ·(x̄_w − θ̄)/K
        midpoint = mean - target * HEAVY_TEMPERATURE / (total_weight * HEAVY_STEP)
        theta, proposed = np.float32(midpoint - HEAVY_STEP / 2), np.float32(midpoint + HEAVY_STEP / 2)
        pairs.append((theta, proposed, weighted_mean.log_ratio(data, float(theta), float(proposed), HEAVY_TEMPERATURE)))
    return weighted_mean.model(data, HEAVY_TEMPERATURE), pairs


def heavy_balance(model, test, pairs):
    def acceptance(start, end, seed):
        # from the cache a chain would have after 300 steps there (the tail guard's pooled kurtosis)
        decisions = repeated_decisions(
            model,
            test,
            jnp.float32(start),
            jnp.float32(end),
            REPETITIONS,
            warmup_decisions=300,
            seed=seed,
            compiler_options=RUN_HEAVY,
        )
        return float(jnp.mean(decisions.accepted))

    return np.array(
        [
            balance_z(acceptance(theta, proposed, 7), acceptance(proposed, theta, 8), delta)
            for theta, proposed, delta in pairs
        ]
    )


@pytest.mark.slow
def test_heavy_tails_keep_detailed_balance_with_the_tail_guard(heavy):
    model, pairs = heavy
    assert np.all(np.abs(heavy_balance(model, tallmcmc.minibatch_penalty(50), pairs)) < 4)


@pytest.mark.slow
def test_heavy_tails_break_detailed_balance_without_the_tail_guard(heavy):
    model, pairs = heavy
    assert np.max(np.abs(heavy_balance(model, tallmcmc.minibatch_penalty(50, variance_rse=None), pairs))) > 4
