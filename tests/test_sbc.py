"""Simulation-based calibration of the acceptance tests (Talts et al. 2018).

On the conjugate Gaussian-mean model at N = 10⁴, K = 100
(:func:`tallmcmc.examples.gaussian_mean.calibration_problem`: the tempered model is the
exact posterior of its data simulator, and the subsampling tests subsample),
every exact or approximately exact test must give uniform ranks of the prior
draw among its thinned draws: Pearson's chi-square on 10 bins at level 0.01.
A deliberately wrong sampler, the minibatch Barker test with its correction
X_corr removed (accept iff Δ* + N(0, 1) > 0: a probit acceptance, whose
stationary variance is about 0.58 times the posterior's), must fail the same
test with the same seed. The seed was fixed before any run of these
settings (1804, for arXiv:1804.06788). Power of each configuration against
named alternatives is reported by the result and asserted here, so that a
pass means something.

Default suite: L = 500 replications × 19 kept draws (thin 10, warm-up 50).
Slow suite (--runslow): L = 1000 × 99 kept draws (thin 10, warm-up 100), every
test of the package.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import tallmcmc
from tallmcmc.examples.gaussian_mean import calibration_problem as gaussian_mean_problem
from tallmcmc.testing import (
    CalibrationResult,
    calibration_power,
    simulation_based_calibration,
)

SEED = 1804
LEVEL = 0.01
PROBLEM = gaussian_mean_problem(num_data=10_000, dimension=1, temperature=100.0, prior_variance=0.1)
POSTERIOR_SD = PROBLEM.posterior_sd
SMALL = dict(num_replications=500, num_draws=19, thin=10, num_warmup=50, num_bins=10)
FULL = dict(num_replications=1000, num_draws=99, thin=10, num_warmup=100, num_bins=10)


class _ZeroCorrection:
    """X_corr ≡ 0: the minibatch Barker test without its correction (deliberately wrong)."""

    sigma = 1.0

    def sample(self, key, shape=(), dtype=jnp.float32):
        return jnp.zeros(shape, dtype)


def calibrate(test, settings, problem=PROBLEM):
    return simulation_based_calibration(
        **problem.arguments(),
        proposal=tallmcmc.random_walk(2.0 * problem.posterior_sd),
        test=test,
        level=LEVEL,
        seed=SEED,
        **settings,
    )


def tuna_for(problem, chi=0.05, scale=1.0):
    """TunaMH with the Gaussian-mean bound, as a function of the model (its centre x̄ differs per data set).

    The bound of :func:`tallmcmc.examples.gaussian_mean.tuna_bound`, c̃ᵢ = ‖xᵢ − x̄‖ + s and
    M = ‖δ‖ max(1, ‖θ̄ − x̄‖/s), with the residuals xᵢ − x̄ fixed across data sets (``residual_seed``),
    so the constants and their alias table are built once and only x̄ is traced.
    """
    import dataclasses

    from tallmcmc.acceptance import tuna as tuna_module

    constants = np.linalg.norm(problem.residuals.astype(np.float64), axis=1) + scale
    template = tuna_module.tuna_bound(constants, lambda a, b: jnp.zeros(()), name="tuna bound (gaussian mean)")

    def test_for(model):
        center = jnp.mean(model.data, axis=0)

        def distance(a, b):
            a, b = jnp.ravel(a), jnp.ravel(b)
            return jnp.linalg.norm(b - a) * jnp.maximum(1.0, jnp.linalg.norm(0.5 * (a + b) - center) / scale)

        return tallmcmc.tuna(chi, dataclasses.replace(template, distance=distance))

    return test_for


def assert_calibrated(result: CalibrationResult):
    assert result.passed, str(result)
    assert np.all(result.autocorrelation < 0.2), str(result)  # thinned to near-independence


# --- default suite --------------------------------------------------------------------


def test_small_configuration_has_power():
    """The default-suite settings see the wrong sampler's error (variance ≈ 0.6×) and a 0.25 sd shift."""
    args = (SMALL["num_replications"], SMALL["num_draws"], SMALL["num_bins"], LEVEL)
    assert calibration_power(*args, variance_factor=0.6) > 0.95
    assert calibration_power(*args, shift=0.25) > 0.9
    assert calibration_power(*args) < 0.02  # the size is the level


def test_exact_metropolis_is_calibrated():
    result = calibrate(tallmcmc.exact_metropolis(), SMALL)
    assert_calibrated(result)
    assert result.data_used_per_step == 10_000


# slow (16 s each): the decisions are checked against the Barker probability in the default suite
# (tests/acceptance/test_minibatch_barker.py, with the wrong corrections failing there)
@pytest.mark.slow
def test_minibatch_barker_is_calibrated():
    result = calibrate(tallmcmc.minibatch_barker(50), SMALL)
    assert_calibrated(result)
    assert result.data_used_per_step < 0.1 * 10_000  # it really subsampled


@pytest.mark.slow
def test_minibatch_barker_without_correction_fails():
    result = calibrate(tallmcmc.minibatch_barker(50, correction=_ZeroCorrection()), SMALL)
    assert not result.passed, str(result)
    # too narrow: the true value's rank falls in the outer bins too often (a ∪ shape; 1.58 times as
    # often in expectation at variance 0.58, 1.25 is 2.8 standard errors below that)
    counts = result.bin_counts[0]
    assert counts[0] + counts[-1] > 1.25 * 2 * result.expected_counts[0], str(result)


def test_power_by_simulation_matches_the_noncentral_chi_square():
    """calibration_power against the textbook approximation λ = L Σ (p_b − p⁰_b)²/p⁰_b."""
    from tallmcmc._sbc import rank_probabilities

    num_draws, num_bins, replications = 99, 10, 300
    which = np.arange(num_draws + 1) * num_bins // (num_draws + 1)
    null = np.bincount(which, minlength=num_bins) / (num_draws + 1)
    for shift, factor in [(0.25, 1.0), (0.0, 0.7)]:
        alternative = np.bincount(which, rank_probabilities(num_draws, shift, factor), minlength=num_bins)
        noncentrality = replications * np.sum((alternative - null) ** 2 / null)
        analytic = stats.ncx2.sf(stats.chi2.ppf(1 - LEVEL, num_bins - 1), num_bins - 1, noncentrality)
        simulated = calibration_power(replications, num_draws, num_bins, LEVEL, shift=shift, variance_factor=factor)
        assert abs(simulated - analytic) < 0.03, (shift, factor, simulated, analytic)


def test_rank_probabilities_are_uniform_without_error_and_exact_by_simulation():
    from tallmcmc._sbc import rank_probabilities

    np.testing.assert_allclose(rank_probabilities(19), np.full(20, 1 / 20), atol=1e-6)
    rng = np.random.default_rng(0)
    z = rng.standard_normal(200_000)
    draws = 0.3 + math.sqrt(1.5) * rng.standard_normal((200_000, 9))
    empirical = np.bincount(np.sum(draws < z[:, None], axis=1), minlength=10) / z.size
    np.testing.assert_allclose(rank_probabilities(9, 0.3, 1.5), empirical, atol=4 * math.sqrt(0.1 / z.size))


def test_gaussian_mean_problem_simulates_what_the_tempered_model_assumes():
    """x̄ ~ N(θ, K/N), residual spread 1: the tempered posterior is then exact (docs/calibration.md)."""
    problem = gaussian_mean_problem(num_data=1000, dimension=2, temperature=50.0, prior_variance=1.0)
    theta = jnp.array([0.5, -1.0], jnp.float32)
    keys = jax.random.split(jax.random.key(0), 400)

    @jax.jit
    def summaries(keys):
        data = jax.vmap(problem.simulate_data, (0, None))(keys, theta)
        return data.mean(axis=1), data.std(axis=1)

    means, residual_sd = (np.asarray(value, np.float64) for value in summaries(keys))
    z = (means - np.asarray(theta)) / math.sqrt(50.0 / 1000)
    assert abs(z.mean()) < 4 / math.sqrt(z.size) and abs(z.var() - 1) < 4 * math.sqrt(2 / z.size)
    np.testing.assert_allclose(residual_sd, 1.0, atol=0.1)
    precision = 1000 / 50.0 + 1.0
    assert problem.posterior_sd == pytest.approx(1 / math.sqrt(precision))


def test_bad_settings_name_the_argument():
    common = dict(**PROBLEM.arguments(), proposal=tallmcmc.random_walk(0.1), test=tallmcmc.exact_metropolis())
    with pytest.raises(ValueError, match="num_bins"):
        simulation_based_calibration(**common, num_draws=5, num_bins=10, num_replications=100)
    with pytest.raises(ValueError, match="num_replications"):
        simulation_based_calibration(**common, num_replications=20, num_bins=10)
    with pytest.raises(ValueError, match="level"):
        simulation_based_calibration(**common, level=1.5)
    with pytest.raises(ValueError, match="thin"):
        simulation_based_calibration(**common, thin=0)
    with pytest.raises(ValueError, match="initial_position"):
        simulation_based_calibration(
            **{**common, "initial_position": lambda key, data: jnp.zeros(3)}, num_replications=100
        )


@pytest.mark.parametrize("rho, low, high", [(0.0, -0.05, 0.05), (0.3, 0.22, 0.34), (0.8, 0.6, 0.85)])
def test_lag_one_autocorrelation_of_short_chains(rho, low, high):
    """AR(1) draws, 20 per replication, each with its own mean and scale: ρ̂₁ near ρ (a little low at 20 draws)."""
    from tallmcmc._sbc import lag_one_autocorrelation

    rng = np.random.default_rng(0)
    noise = rng.standard_normal((500, 20, 1))
    draws = np.empty_like(noise)
    draws[:, 0] = noise[:, 0]
    for t in range(1, 20):
        draws[:, t] = rho * draws[:, t - 1] + math.sqrt(1 - rho**2) * noise[:, t]
    draws = rng.uniform(0.5, 2.0, (500, 1, 1)) * draws + 5.0 * rng.standard_normal((500, 1, 1))
    assert low < lag_one_autocorrelation(draws)[0] < high


@pytest.mark.slow
def test_autocorrelated_draws_warn():
    """Unthinned draws of a slow chain: the result warns, since such ranks are over-dispersed."""
    problem = gaussian_mean_problem(num_data=100, temperature=1.0)
    sd = problem.posterior_sd
    with pytest.warns(RuntimeWarning, match="autocorrelated"):
        result = simulation_based_calibration(
            **problem.arguments(),
            proposal=tallmcmc.random_walk(0.2 * sd),
            test=tallmcmc.exact_metropolis(),
            num_replications=50,
            num_draws=19,
            thin=1,
            num_warmup=10,
            num_bins=5,
            seed=SEED,
        )
    assert result.autocorrelation[0] > 0.5


def test_plot_draws_the_ecdf_difference(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    rng = np.random.default_rng(0)
    ranks = rng.integers(0, 20, (200, 1))
    ranks.setflags(write=False)  # as the device's arrays come back
    result = CalibrationResult(
        ranks=ranks,
        num_draws=19,
        num_bins=10,
        level=0.01,
        bin_counts=np.zeros((1, 10)),
        expected_counts=np.full(10, 20.0),
        statistics=np.zeros(1),
        p_values=np.ones(1),
        power={},
        autocorrelation=np.zeros(1),
        acceptance_rate=0.5,
        data_used_per_step=1.0,
        true_values=np.zeros((200, 1)),
        draws=np.zeros((200, 19, 1)),
        names=["theta[0]"],
        compile_seconds=0.0,
        sampling_seconds=0.0,
    )
    ax = result.plot()
    ax.figure.savefig(tmp_path / "sbc.png")
    assert "rank" in ax.get_xlabel()


# --- slow suite: every test, L = 1000 × 99 draws ------------------------------------------

EVERY_TEST = {
    "exact_metropolis": tallmcmc.exact_metropolis,
    "exact_barker": tallmcmc.exact_barker,
    "minibatch_barker": lambda: tallmcmc.minibatch_barker(50),
    "austere": lambda: tallmcmc.austere(100, 0.001),
    "austere_conservative": lambda: tallmcmc.austere_conservative(0.1, (100, 200, 400), (0.005, 0.01, 0.05)),
    "austere_adaptive": lambda: tallmcmc.austere_adaptive(0.002, batch_sizes=(50, 100, 200)),
    "confidence_sampler": lambda: tallmcmc.confidence_sampler(50),
}
if hasattr(tallmcmc, "tuna"):
    TUNA_PROBLEM = gaussian_mean_problem(
        num_data=10_000, dimension=1, temperature=100.0, prior_variance=0.1, residual_seed=SEED
    )


@pytest.mark.slow
def test_full_configuration_has_power():
    args = (FULL["num_replications"], FULL["num_draws"], FULL["num_bins"], LEVEL)
    assert calibration_power(*args, shift=0.25) > 0.99
    assert calibration_power(*args, variance_factor=0.8) > 0.6


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EVERY_TEST))
def test_every_test_is_calibrated(name):
    assert_calibrated(calibrate(EVERY_TEST[name](), FULL))


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(tallmcmc, "tuna"), reason="tallmcmc.tuna not present")
def test_tuna_is_calibrated():
    result = calibrate(tuna_for(TUNA_PROBLEM), FULL, TUNA_PROBLEM)
    assert_calibrated(result)
    assert result.data_used_per_step < 0.1 * 10_000


@pytest.mark.slow
def test_minibatch_barker_without_correction_fails_the_full_check():
    result = calibrate(tallmcmc.minibatch_barker(50, correction=_ZeroCorrection()), FULL)
    assert not result.passed, str(result)


def test_the_old_name_of_the_calibration_problem_names_where_it_moved():
    """``tallmcmc.testing.gaussian_mean_problem`` (removed after 0.1.0) raises an AttributeError naming the new home."""
    import tallmcmc.testing

    with pytest.raises(AttributeError, match=r"tallmcmc\.examples\.gaussian_mean\.calibration_problem"):
        tallmcmc.testing.gaussian_mean_problem  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'no_such_problem'"):
        tallmcmc.testing.no_such_problem  # noqa: B018
