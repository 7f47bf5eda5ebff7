"""The two subsampling baselines: AustereMH (Korattikara et al. 2014) and MHSubLhd (Bardenet et al. 2014).

* Decision agreement: on fixed (θ, θ′, u) cases of a Gaussian model with
  N = 10⁴, whose exact Metropolis decision is computed in float64 with NumPy,
  each test agrees with it over 2000 vmapped repetitions (different data
  orders) at least 1 − (its error target) − 4 binomial standard errors of the
  time. For AustereMH the target is the error that the CLT random-walk
  computation predicts for that case — so these tests also check that
  computation, from both sides.
* Forced to use all N points, each always agrees.
* The grid search against a hand-worked single-stage case and a direct
  simulation of the walk.
* Bad input fails with an error naming the argument.

Their posterior checks on the conjugate Gaussian model are entries of the one
registry in ``tests/test_posterior.py``.

The decision's u: every test draws log u from ``jax.random.split(key)[0]``;
the cases below fix ``log u − offset`` (i.e. μ₀) by choosing the offset from
that same draw. The forced-full-data tests would fail if this were not so.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from suite_xla import RUN_HEAVY

import tallmcmc
from tallmcmc.acceptance.austere_design import adaptive_design_table, sequential_test_characteristics

NUM_DATA = 10_000
REPETITIONS = 2000
STEP = 0.01  # θ′ − θ, about 1 posterior sd


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(2014)
    data = rng.normal(0.3, 1.0, NUM_DATA).astype(np.float32)

    def log_likelihood(theta, x):
        return -0.5 * (x - theta) ** 2

    model = tallmcmc.Model(log_likelihood, lambda theta: jnp.zeros(()), jnp.asarray(data))
    theta = float(data.astype(float).mean())
    proposed = theta + STEP
    x = data.astype(np.float64)
    ratios = -0.5 * (x - proposed) ** 2 + 0.5 * (x - theta) ** 2  # float64 reference
    return model, np.float32(theta), np.float32(proposed), ratios


def gap_for(ratios, standardized_gap):
    """N(μ − μ₀) giving the standardized gap μ_std = (μ − μ₀)√(N − 1)/σ_l."""
    return standardized_gap * NUM_DATA * ratios.std() / math.sqrt(NUM_DATA - 1)


def agreement(test, case, gap, repetitions=REPETITIONS, seed=0):
    """Fraction of repetitions whose decision equals the exact one (accept iff gap > 0).

    ``gap`` = Δ_data − (log u − offset) = N(μ − μ₀); float64 exact.
    """
    model, theta, proposed, ratios = case
    threshold = ratios.sum() - gap  # log u − offset
    keys = jax.random.split(jax.random.key(seed), repetitions)

    def one(key):
        log_u = jnp.log(jax.random.uniform(jax.random.split(key)[0], dtype=jnp.float32))
        offset = (log_u - threshold).astype(jnp.float32)
        decision = test.decide(key, model, jnp.asarray(theta), jnp.asarray(proposed), offset, test.init(model, theta))
        return decision.accepted, decision.info

    accepted, info = jax.jit(jax.vmap(one), compiler_options=RUN_HEAVY)(keys)  # run-heavy: XLA's defaults (suite_xla)
    agree = np.asarray(accepted) == (gap > 0)
    return float(agree.mean()), jax.tree_util.tree_map(np.asarray, info)


def binomial_floor(error_target, repetitions=REPETITIONS):
    p = 1.0 - error_target
    return p - 4.0 * math.sqrt(max(p * (1 - p), 1.0 / repetitions) / repetitions)


# --- AustereMH --------------------------------------------------------------


@pytest.mark.parametrize("standardized_gap", [2.0, pytest.param(-2.0, marks=pytest.mark.slow)])
def test_austere_agrees_as_often_as_predicted(case, standardized_gap):
    batch_size, epsilon = 100, 0.05
    error, data = sequential_test_characteristics(NUM_DATA, batch_size, [epsilon], [standardized_gap], look_spacing=0)
    error, data = float(error[0, 0]), float(data[0, 0])
    rate, info = agreement(tallmcmc.austere(batch_size, epsilon), case, gap_for(case[3], standardized_gap))
    # from both sides: the random-walk model predicts the error
    assert rate >= binomial_floor(error), (rate, error)
    assert 1 - rate <= error + 4 * math.sqrt(error * (1 - error) / REPETITIONS) + 0.01, (rate, error)
    assert np.all(info.data_used == info.data_used_by_test)
    assert np.all(info.data_used % batch_size == 0)
    assert abs(info.data_used.mean() / NUM_DATA - data) < 0.05, (info.data_used.mean(), data * NUM_DATA)
    assert np.all(info.used_full_data == (info.data_used == NUM_DATA))


def test_austere_conservative_holds_its_worst_case_bound(case):
    gaps = np.concatenate([[0.0], np.geomspace(1e-2, 5.0, 20)])
    design = tallmcmc.choose_austere_parameters(
        0.1, NUM_DATA, (100, 200, 400), (0.005, 0.01, 0.05), standardized_gaps=gaps
    )
    test = tallmcmc.austere_conservative(
        0.1, (100, 200, 400), (0.005, 0.01, 0.05), num_data=NUM_DATA, standardized_gaps=gaps
    )
    assert f"m={design.batch_size}" in test.name and design.error <= 0.1
    rate, info = agreement(test, case, gap_for(case[3], 0.3))  # near the worst case μ_std → 0
    assert rate >= binomial_floor(design.error), (rate, design)
    assert np.all(info.data_used % design.batch_size == 0)


def test_austere_adaptive_holds_its_bound_and_counts_the_full_pass(case):
    bound = 0.05
    gaps = np.concatenate([[0.0], np.geomspace(1e-2, 100.0, 30)])
    test = tallmcmc.austere_adaptive(bound, batch_sizes=(50, 100, 200), standardized_gaps=gaps)
    rate, info = agreement(test, case, gap_for(case[3], 3.0))
    assert rate >= binomial_floor(bound), rate
    assert np.all(info.data_used == info.data_used_by_test + NUM_DATA)
    assert info.data_used_by_test.mean() < NUM_DATA / 2


@pytest.mark.slow
def test_austere_adaptive_falls_back_to_the_exact_decision(case):
    # near μ_std = 0 no design meets a 0.5 % bound: the step decides exactly from its full pass
    strict = tallmcmc.austere_adaptive(0.005, batch_sizes=(50, 100, 200))
    rate, info = agreement(strict, case, gap_for(case[3], 0.01), repetitions=200)
    assert rate == 1.0 and np.all(info.used_full_data)


# --- MHSubLhd ---------------------------------------------------------------


def test_confidence_sampler_agrees_with_probability_one_minus_delta(case):
    delta = 0.01
    rate, info = agreement(tallmcmc.confidence_sampler(50, delta=delta), case, gap_for(case[3], -60.0))
    assert rate >= binomial_floor(delta), rate
    assert np.all(info.data_used == info.data_used_by_test + NUM_DATA)
    assert info.data_used_by_test.mean() < NUM_DATA / 2  # it does stop early on an easy case


@pytest.mark.slow
def test_confidence_sampler_with_an_analytic_bound(case):
    model, theta, proposed, ratios = case
    largest = float(np.max(np.abs(np.asarray(model.data))))

    def bound(position, proposal):  # |lᵢ| = |θ′ − θ|·|xᵢ − (θ + θ′)/2| ≤ |θ′ − θ|(max|x| + |θ + θ′|/2)
        return jnp.abs(proposal - position) * (largest + jnp.abs(position + proposal) / 2)

    assert bound(theta, proposed) >= np.abs(ratios).max()
    rate, info = agreement(tallmcmc.confidence_sampler(50, bound=bound), case, gap_for(case[3], 60.0))
    assert rate >= binomial_floor(0.01), rate
    assert np.all(info.data_used == info.data_used_by_test)  # no full pass
    assert info.data_used.mean() < NUM_DATA


# --- forced to use all the data: always exact --------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: tallmcmc.austere(NUM_DATA, 0.05),
        lambda: tallmcmc.confidence_sampler(NUM_DATA),
        pytest.param(lambda: tallmcmc.confidence_sampler(50, delta=1e-12), marks=pytest.mark.slow),
        pytest.param(lambda: tallmcmc.austere(50, 1e-12), marks=pytest.mark.slow),
    ],
    ids=["austere_batch_N", "confidence_batch_N", "confidence_tiny_delta", "austere_tiny_epsilon"],
)
@pytest.mark.parametrize("standardized_gap", [0.3, pytest.param(-0.3, marks=pytest.mark.slow)])
def test_all_data_means_always_exact(case, make, standardized_gap):
    rate, info = agreement(make(), case, gap_for(case[3], standardized_gap), repetitions=200)
    assert rate == 1.0
    assert np.all(info.used_full_data)


# --- the grid search ---------------------------------------------------------


def test_single_stage_design_is_closed_form():
    # N = 1000, m = 500: one look at n = 500 (τ = 1), then the exact decision at n = N
    num_data, size = 1000, 500
    epsilons = np.array([0.01, 0.04, 0.2])
    gaps = np.array([0.0, 0.5, 2.0])
    error, data = sequential_test_characteristics(num_data, size, epsilons, gaps)
    quantile = stats.t.isf(epsilons, size - 1)[:, None]
    stop_low = stats.norm.cdf(-quantile - gaps)
    stop_high = stats.norm.sf(quantile - gaps)
    np.testing.assert_allclose(error, stop_low, atol=1e-4)
    np.testing.assert_allclose(data, 0.5 * (stop_low + stop_high) + (1 - stop_low - stop_high), atol=1e-4)
    # worst case over μ_std is at 0: Φ(−q) ≈ ε; with bound 0.05 both 0.01 and 0.04 qualify,
    # and the larger threshold stops more often, so it is chosen
    design = tallmcmc.choose_austere_parameters(0.05, num_data, (size,), tuple(epsilons), standardized_gaps=gaps)
    assert design.epsilon == 0.04 and design.batch_size == size
    assert design.error == pytest.approx(stats.norm.cdf(-stats.t.isf(0.04, size - 1)), abs=1e-4)


def test_walk_computation_matches_a_simulation_of_the_walk():
    num_data, size, epsilon, paths = 5000, 100, 0.02, 20000
    gaps = np.array([0.0, 1.0, 4.0])
    error, data = sequential_test_characteristics(num_data, size, [epsilon], gaps)
    rng = np.random.default_rng(0)
    sizes = np.arange(size, num_data, size, dtype=float)
    tau = sizes / (num_data - sizes)
    quantile = stats.t.isf(epsilon, sizes - 1)
    for k, gap in enumerate(gaps):
        walk = np.cumsum(np.sqrt(np.diff(tau, prepend=0.0)) * rng.standard_normal((paths, tau.size)), axis=1)
        t = (walk + gap * tau) / np.sqrt(tau)
        crossed = np.abs(t) >= quantile
        first = np.where(crossed.any(axis=1), crossed.argmax(axis=1), -1)
        stopped = first >= 0
        wrong = stopped & (t[np.arange(paths), np.maximum(first, 0)] < 0)
        used = np.where(stopped, sizes[np.maximum(first, 0)], num_data) / num_data
        assert abs(wrong.mean() - error[0, k]) < 4 * math.sqrt(error[0, k] * (1 - error[0, k]) / paths) + 2e-3
        assert abs(used.mean() - data[0, k]) < 0.01


def test_adaptive_table_falls_back_to_all_data_near_zero():
    gaps, sizes, thresholds = adaptive_design_table(
        0.05, NUM_DATA, (50, 100, 200), (0.01, 0.05, 0.2), standardized_gaps=np.geomspace(1e-2, 500.0, 20)
    )
    assert gaps[0] == 0.0 and sizes[0] == NUM_DATA  # μ_std → 0: no sequential design meets 5 %
    assert sizes[-1] == 50  # large μ_std: every design stops at its first stage; the smallest is cheapest
    assert np.all((sizes == NUM_DATA) | np.isin(sizes, (50, 100, 200)))


# --- bad input -----------------------------------------------------------------


@pytest.mark.parametrize(
    "make, word",
    [
        (lambda: tallmcmc.austere(1, 0.05), "batch_size"),
        (lambda: tallmcmc.austere(50, 0.0), "epsilon"),
        (lambda: tallmcmc.austere(50, 1.5), "epsilon"),
        (lambda: tallmcmc.austere(2.5, 0.05), "batch_size"),
        (lambda: tallmcmc.austere_conservative(0.0), "error_bound"),
        (lambda: tallmcmc.austere_conservative(0.1, batch_sizes=(1, 50)), "batch_sizes"),
        (lambda: tallmcmc.austere_adaptive(0.1, epsilons=(0.0,)), "epsilons"),
        (lambda: tallmcmc.choose_austere_parameters(0.1, 1), "num_data"),
        (lambda: tallmcmc.choose_austere_parameters(1e-6, 1000, (100,), (0.2,)), "error_bound"),
        (lambda: tallmcmc.confidence_sampler(1), "batch_size"),
        (lambda: tallmcmc.confidence_sampler(50, gamma=1.0), "gamma"),
        (lambda: tallmcmc.confidence_sampler(50, p=1.0), "p must"),
        (lambda: tallmcmc.confidence_sampler(50, delta=0.0), "delta"),
        (lambda: tallmcmc.confidence_sampler(50, delta=1.0), "delta"),
        (lambda: tallmcmc.confidence_sampler(50, bound="analytic"), "bound"),
    ],
)
def test_bad_settings_fail_with_the_argument_named(make, word):
    with pytest.raises(ValueError, match=word):
        make()


@pytest.mark.parametrize(
    "test",
    [lambda: tallmcmc.austere(NUM_DATA + 1, 0.05), lambda: tallmcmc.confidence_sampler(NUM_DATA + 1)],
    ids=["austere", "confidence_sampler"],
)
def test_batch_larger_than_the_data_fails_at_init(case, test):
    model, theta, _, _ = case
    with pytest.raises(ValueError, match="batch_size"):
        test().init(model, theta)


@pytest.mark.parametrize("degrees_of_freedom", [2.0, 49.0, 200.0, 201.0, 999.0, 1e4, 1e5, 1e6])
def test_student_t_tail_matches_scipy_in_float32(degrees_of_freedom):
    from scipy import stats

    from tallmcmc.acceptance.austere import student_t_tail

    for t in (0.0, 0.5, 2.0, -3.0):
        ours = float(student_t_tail(jnp.float32(t), jnp.float32(degrees_of_freedom)))
        assert ours == pytest.approx(stats.t.sf(abs(t), degrees_of_freedom), rel=2e-4), t
