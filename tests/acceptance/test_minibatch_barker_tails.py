"""The minibatch Barker test where its normal approximation is weakest: heavy-tailed log ratios.

On :mod:`tallmcmc.examples.weighted_mean` (1% of the points carry about half of
Δ and most of its variance) Algorithm 1 as printed stops on minibatches that
missed the heavy points, so its decisions drift towards ½; the tail guard
(``variance_rse``) must bring them within 4 binomial standard errors of the
Barker probability, and the printed algorithm must fail the same check.
"""

import argparse
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from suite_xla import RUN_HEAVY

import tallmcmc
from tallmcmc.examples import gaussian_mean, weighted_mean
from tallmcmc.testing import repeated_decisions

REPETITIONS = 20_000
TEMPERATURE = 20.0
STEP = 0.01
TARGET_DELTAS = (-4.0, -1.0, 1.0, 4.0)
WARMUP_DECISIONS = 300


@pytest.fixture(scope="module")
def heavy():
    data = weighted_mean.simulate()
    mean, _ = weighted_mean.posterior(data, TEMPERATURE)
    total_weight = float(np.sum(data[:, 1], dtype=np.float64))
    pairs = []
    for target in TARGET_DELTAS:  # Δ ≈ W·δ·(x̄_w − θ̄)/K, so θ̄ = x̄_w − Δ K/(W δ)
        midpoint = mean - target * TEMPERATURE / (total_weight * STEP)
        theta, proposed = np.float32(midpoint - STEP / 2), np.float32(midpoint + STEP / 2)
        pairs.append((theta, proposed, weighted_mean.log_ratio(data, float(theta), float(proposed), TEMPERATURE)))
    return weighted_mean.model(data, TEMPERATURE), pairs


def decisions(model, test, theta, proposed, repetitions=REPETITIONS):
    """``repetitions`` decisions at (θ, θ′), from the cache a chain would have after 300 steps there."""
    return repeated_decisions(
        model,
        test,
        jnp.float32(theta),
        jnp.float32(proposed),
        repetitions,
        warmup_decisions=WARMUP_DECISIONS,
        compiler_options=RUN_HEAVY,
    )


def mismatch(model, test, pairs, repetitions=REPETITIONS):
    z, used = [], []
    for theta, proposed, delta in pairs:
        decision = decisions(model, test, theta, proposed, repetitions)
        probability = 1.0 / (1.0 + np.exp(-delta))
        frequency = float(jnp.mean(decision.accepted))
        z.append((frequency - probability) / np.sqrt(probability * (1 - probability) / repetitions))
        used.append(float(jnp.mean(decision.info.data_used)))
    return np.array(z), np.array(used)


def test_the_heavy_model_is_heavy(heavy):
    model, pairs = heavy
    assert [round(delta) for *_, delta in pairs] == [-4, -1, 1, 4]
    data = np.asarray(model.data, np.float64)
    theta, proposed, _ = pairs[-1]
    x, w = data.T
    terms = w * (-0.5 * (x - proposed) ** 2 + 0.5 * (x - theta) ** 2)
    centred = terms - terms.mean()
    assert np.mean(centred**4) / np.var(terms) ** 2 > 50  # kurtosis
    assert (w > 1).mean() < 0.012


def test_algorithm_1_as_printed_drifts_towards_one_half(heavy):
    model, pairs = heavy
    # 5,000 decisions a pair, not 20,000 (suite time): the printed algorithm misses by +38, +14, -11, -39 binomial
    # standard errors at 20,000 (docs/minibatch_error.md), so about half of that here, still far past 4
    z, used = mismatch(model, tallmcmc.minibatch_barker(100, variance_rse=None), pairs, repetitions=5_000)
    assert np.max(np.abs(z)) > 4, z
    assert z[0] > 4 and z[-1] < -4  # too many acceptances where Δ < 0, too few where Δ > 0
    assert np.all(used < 1000)


def test_tail_guard_restores_the_barker_probability(heavy):
    model, pairs = heavy
    z, used = mismatch(model, tallmcmc.minibatch_barker(100), pairs)
    assert np.all(np.abs(z) < 4), z
    assert np.all(used < model.num_data / 10)  # it still subsamples: ~400-1,000 of 20,000 points


def test_tail_guard_changes_nothing_on_light_tails():
    data = np.random.default_rng(5).normal(0.0, 1.0, 50_000).astype(np.float32)
    model = gaussian_mean.model(data, prior_variance=None, temperature=1000.0)
    runs = [
        tallmcmc.sample(
            model,
            tallmcmc.random_walk(0.05),
            tallmcmc.minibatch_barker(50, variance_rse=rse),
            initial_position=jnp.float32(0.0),
            num_samples=300,
            progress=False,
            seed=2,
        )
        for rse in (None, 0.35)
    ]
    np.testing.assert_array_equal(runs[0].positions, runs[1].positions)
    kurtosis = runs[1].final_state.cache.fourth / runs[1].final_state.cache.count
    assert 2.0 < float(kurtosis[0]) < 4.5  # Gaussian lᵢ: the pooled estimate is near 3


def test_smoothing_error_bound_holds_and_shrinks_with_s_over_sigma():
    # skewed lᵢ (exponential data) and small minibatches: a measurable departure from Barker
    data = np.random.default_rng(11).exponential(1.0, 20_000).astype(np.float32)
    x = data.astype(np.float64)
    # N²·Var(lᵢ)/b = 10⁸/(K² b): s² ≈ 0.8 at (2500, 20), 0.2 at (5000, 20), 0.03 at (4000, 200)
    for temperature, batch in ((2500.0, 20), (5000.0, 20), (4000.0, 200)):
        model = gaussian_mean.model(data, prior_variance=None, temperature=temperature)
        test = tallmcmc.minibatch_barker(batch, variance_rse=None)
        theta = float(x.mean()) + 2.0 * temperature / (len(x) * 0.5) - 0.25  # Δ ≈ −2 for a step of 0.5
        proposed = theta + 0.5
        delta = float(np.sum(-0.5 * (x - proposed) ** 2 + 0.5 * (x - theta) ** 2) / temperature)
        keys = jax.random.split(jax.random.key(9), REPETITIONS)
        decision = jax.jit(
            jax.vmap(lambda k: test.decide(k, model, jnp.float32(theta), jnp.float32(proposed), jnp.float32(0.0), ())),
            compiler_options=RUN_HEAVY,  # many minibatch decisions run by one program: XLA's defaults (suite_xla)
        )(keys)
        probability = 1.0 / (1.0 + np.exp(-delta))
        error = abs(float(jnp.mean(decision.accepted)) - probability)
        bound = float(jnp.mean(decision.info.error_bound))
        assert error <= bound + 4 * np.sqrt(probability * (1 - probability) / REPETITIONS), (
            temperature,
            batch,
            error,
            bound,
        )
        if batch == 200:  # s² ≪ σ²: the bound is informative where Novak's is not
            variance = float(jnp.mean(decision.info.variance))
            assert variance < 0.05 and bound < 0.02, (variance, bound)


def test_sample_warns_when_most_error_bounds_are_vacuous():
    data = np.random.default_rng(11).lognormal(0.0, 1.5, 20_000).astype(np.float32)
    model = gaussian_mean.model(data, prior_variance=None, temperature=1000.0)
    options = dict(initial_position=jnp.float32(data.mean()), num_samples=500, progress=False)
    with pytest.warns(RuntimeWarning, match="error bound was >= 0.25 on .* control variate"):
        tallmcmc.sample(model, tallmcmc.random_walk(0.3), tallmcmc.minibatch_barker(10, variance_rse=None), **options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # light-tailed terms: no warning
        light = gaussian_mean.model(np.random.default_rng(1).normal(0, 1, 20_000).astype(np.float32), None, 1000.0)
        tallmcmc.sample(light, tallmcmc.random_walk(0.3), tallmcmc.minibatch_barker(50), **options)


@pytest.mark.slow
def test_pilot_sized_by_the_pool_restores_the_barker_probability(heavy):
    """``pilot=True`` on heavy tails: the pilot grows to what the guard asks of the chain's earlier steps.

    A pilot of ``batch_size`` points that missed the heavy ones would choose a minibatch too small for σ²
    (docs/minibatch_error.md, "Skewed log ratios"); sized from the pool, its decisions must pass where
    the guarded test's do. Slow (18 s): ``pilot=True`` is on no default path, and the default suite checks it on
    the skewed mixture (test_minibatch_barker_skew.py) and on the heavy Student-t (below).
    """
    model, pairs = heavy
    z, used = mismatch(model, tallmcmc.minibatch_barker(100, pilot=True), pairs)
    assert np.all(np.abs(z) < 4), z
    assert np.all(used > 400)  # the pilot alone is the guard's size, several hundred points here
    assert np.all(used < model.num_data / 5)


@pytest.mark.parametrize("margin", [None, 0.0])
def test_the_points_after_the_pilot_rarely_end_above_sigma_squared(margin, monkeypatch):
    """``pilot=True`` on ``reproduce bias``'s heavy-tailed Student-t: X_nc cannot take noise away, so the points
    after the pilot must rarely end with Var(Δ*) > σ².

    The pilot's variance is uncertain by √((κ̂ − 1)/p) of itself; the stop asks its prediction to be below σ² with
    a margin of :data:`~tallmcmc.acceptance.minibatch_barker.PILOT_MARGIN` such errors. Measured over 8 chains ×
    6,000 steps (``benchmarks/bench_pilot_variance.py --target heavy``): 6.7% of the steps end above σ² with it,
    27% with no margin (the wrong sampler, ``margin=0``, which widens the chain by 2%: benchmarks/RESULTS.md). Here
    4 chains × 1,500 steps: the fraction's standard error is below 1% even with steps correlated.
    """
    from tallmcmc.acceptance import minibatch_barker as module
    from tallmcmc.reproduce import bias

    if margin is not None:
        monkeypatch.setattr(module, "PILOT_MARGIN", margin)
    parser = argparse.ArgumentParser()
    bias.add_arguments(parser)
    (target,) = bias.build_targets(parser.parse_args(["--targets", "heavy", "--samples", "1500"]), ["heavy"])
    test = tallmcmc.minibatch_barker(target.settings.batch_size, pilot=True)
    result = bias.sample_target(target, test, 4, seed=0)
    variance = np.asarray(result.info["variance"], np.float64)[:, target.burn_in :]
    variance = variance[~np.asarray(result.info["used_full_data"], bool)[:, target.burn_in :]]
    above = float(np.mean(variance > 1.0))
    if margin is None:
        assert above < 0.12, above
    else:  # the same check fails the pilot with no margin
        assert above > 0.2, above
