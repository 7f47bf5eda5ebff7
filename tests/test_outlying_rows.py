"""Outlying rows (tallmcmc.outlying_rows): residuals a minibatch cannot estimate, summed exactly at every step.

The estimator stays exact where it must (the zeroed minibatch plus the exact sum is every residual; a full minibatch
gives Δ itself and counts the m rows), the choice finds planted outliers and none in a Gaussian bulk, and on the
default path a logistic regression with rare categories — which took the exact test before — keeps the minibatch test
and matches an independent reference (quadrature for the rare levels). A sampler that holds the rows but drops their
exact sum samples their Laplace approximation instead, and fails the same comparison."""

from __future__ import annotations

import collections
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import log_expit

import tallmcmc
from tallmcmc import control_variate as control_variate_module
from tallmcmc.examples import logistic_regression, zero_inflated_poisson
from tallmcmc.outlying_rows import (
    PROXY_MISFIT,
    choose_outlying_rows,
    choose_rows_for_the_proxy,
    find_outlying_rows,
    row_residuals,
    with_outlying_rows,
)

LEVELS, ROWS_PER_LEVEL = 6, 20


def _rare_categories(num_data: int = 300_000, seed: int = 1):
    """Logistic regression: an intercept, two Gaussian covariates and six indicators of 20 rows each whose effects
    (2 to 3) make nearly every one of their outcomes 1, so their posteriors are skewed and wide."""
    return logistic_regression.simulate_rare_levels(num_data, ROWS_PER_LEVEL, LEVELS, (2.0, 3.0), seed)


def _reference(covariates, response, rare):
    """Posterior means and sds: the bulk coefficients from the float64 Laplace approximation with its first-order
    mean correction (300,000 rows); each rare level's effect by quadrature of its 20 rows' likelihood and its N(0, 1)
    prior on a grid, mixed over 64 Laplace draws of the bulk coefficients."""
    theta, covariance, mean = logistic_regression.laplace_reference(covariates, response)
    sd = np.sqrt(np.diag(covariance))
    z, y = covariates.astype(np.float64), response.astype(np.float64)
    grid = np.linspace(-4.0, 9.0, 6001)
    bulk = np.random.default_rng(0).multivariate_normal(theta[:3], covariance[:3, :3], size=64)
    for level, rows in enumerate(rare):
        density = np.zeros_like(grid)
        for coefficients in bulk:
            logits = (z[rows, :3] @ coefficients)[:, None] + grid[None, :]
            log_density = -0.5 * grid**2 + np.sum(
                np.where(y[rows, None] == 1, log_expit(logits), log_expit(-logits)), 0
            )
            weights = np.exp(log_density - log_density.max())
            density += weights / weights.sum()
        density /= density.sum()
        mean[3 + level] = np.sum(density * grid)
        sd[3 + level] = np.sqrt(np.sum(density * (grid - mean[3 + level]) ** 2))
    return mean, sd


def _small_model(num_data=2000):
    covariates, response, rare = _rare_categories(num_data, seed=3)
    model = logistic_regression.model(covariates, response)
    center = jnp.zeros(covariates.shape[1])
    return model, tallmcmc.taylor_control_variate(model, center), rare


def test_the_minibatch_sees_zeros_and_the_held_rows_are_summed_exactly():
    model, control_variate, rare = _small_model()
    held = with_outlying_rows(control_variate, model, rare.ravel())
    assert held.num_outlying == rare.size and control_variate.num_outlying == 0
    position, proposed = jnp.full(9, 0.1), jnp.linspace(-0.2, 0.4, 9)
    every = np.asarray(
        control_variate.residual_model(model).log_likelihood_ratios_at(position, proposed, jnp.arange(2000))
    )
    residuals = held.residual_model(model)
    zeroed = np.asarray(residuals.log_likelihood_ratios_at(position, proposed, jnp.arange(2000)))
    others = np.setdiff1d(np.arange(2000), rare.ravel())
    assert np.all(zeroed[rare.ravel()] == 0) and np.array_equal(zeroed[others], every[others])
    exact = float(residuals.outlying_log_ratio(position, proposed))
    np.testing.assert_allclose(zeroed.sum() + exact, every.sum(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(exact, every[rare.ravel()].sum(), rtol=1e-5, atol=1e-6)


def test_a_minibatch_of_every_row_gives_delta_and_counts_the_held_rows():
    model, control_variate, rare = _small_model()
    held = with_outlying_rows(control_variate, model, rare.ravel())
    test = tallmcmc.minibatch_barker(2000, control_variate=held)
    position, proposed = jnp.full(9, 0.1), jnp.linspace(-0.2, 0.4, 9)
    decision = test.decide(jax.random.key(0), model, position, proposed, jnp.float32(0.0), test.init(model, position))
    delta = float(jnp.sum(model.log_likelihood_ratios(position, proposed, model.data)))
    assert float(decision.info.statistic) == pytest.approx(delta, rel=1e-4, abs=1e-3)
    assert int(decision.info.data_used) == 2000 + rare.size and int(decision.info.data_used_by_test) == 2000


def test_the_choice_finds_planted_outliers_and_none_in_a_gaussian_bulk():
    rng = np.random.default_rng(0)
    residuals = rng.standard_normal((4, 200_000)) * 1e-4
    assert choose_outlying_rows(residuals).indices.size == 0
    planted = rng.choice(200_000, 300, replace=False)
    residuals[:, planted] += rng.standard_normal((4, 300)) * 0.05
    found = choose_outlying_rows(residuals)
    assert set(found.indices) == set(planted), found.describe()
    assert found.kurtosis < 5 < 1000 < found.kurtosis_without and found.size < found.size_without / 10


def test_the_prediction_out_of_sample_tells_rows_outlying_at_every_pair_from_spread_tails():
    """Rows outlying at every pair (a rare category's) are predicted alike in and out of sample; rows outlying at one
    pair each (heavy tails spread over many rows, as the seventh audit's 5-row Poisson groups) are held in sample,
    and out of sample the rows held at the other pairs leave each pair's own outliers in: a prediction far higher."""
    rng = np.random.default_rng(1)
    bulk = rng.standard_normal((4, 200_000)) * 1e-4
    fixed = bulk.copy()
    fixed[:, rng.choice(200_000, 300, replace=False)] += rng.standard_normal((4, 300)) * 0.05
    held = choose_outlying_rows(fixed)
    assert held.indices.size == 300 and held.size_out_of_sample < 2 * held.size, held
    spread = bulk.copy()
    for pair in range(4):  # 300 other rows far out at each pair
        spread[pair, rng.choice(200_000, 300, replace=False)] += rng.standard_normal(300) * 0.05
    held = choose_outlying_rows(spread)
    assert held.indices.size >= 1000 and held.size_out_of_sample > 20 * held.size, held
    assert np.isnan(choose_outlying_rows(spread[:1]).size_out_of_sample)  # one pair: nothing to test it on


def test_the_rows_for_the_proxy_bring_its_misfit_down_out_of_sample():
    """Rows whose residuals are large at every pair (a small group's, whose Taylor proxy misfits wherever the chain
    is) are found: as many as bring the others' summed residual to 0.5 in root mean square, none of the bulk. Rows
    large at one pair each cannot be told from the next pair's: out of sample no set brings the misfit down, which the
    choice reports rather than holding the rows that happened to be large here."""
    rng = np.random.default_rng(2)
    bulk = rng.standard_normal((8, 100_000)) * 1e-4
    assert choose_rows_for_the_proxy(bulk).indices.size == 0
    planted = rng.choice(100_000, 400, replace=False)
    every = bulk.copy()
    every[:, planted] += rng.standard_normal((8, 400)) * 0.1  # summed: sd 2 between pairs
    found = choose_rows_for_the_proxy(every)
    assert set(found.indices) <= set(planted) and 350 <= found.indices.size <= 400, found.describe()
    assert found.misfit <= PROXY_MISFIT < 1.5 < found.misfit_without
    spread = bulk.copy()
    for pair in range(8):  # 400 other rows far out at each pair
        spread[pair, rng.choice(100_000, 400, replace=False)] += rng.standard_normal(400) * 0.1
    found = choose_rows_for_the_proxy(spread)
    assert found.misfit > 3 * PROXY_MISFIT, found.describe()
    with pytest.raises(ValueError, match="residuals"):
        choose_rows_for_the_proxy(np.full((2, 10), np.nan))


def test_bad_input_is_refused_with_the_fix():
    model, control_variate, rare = _small_model()
    with pytest.raises(ValueError, match="indices: distinct integers"):
        with_outlying_rows(control_variate, model, [5, 5])
    with pytest.raises(ValueError, match="indices: distinct integers"):
        with_outlying_rows(control_variate, model, [2000])
    with pytest.raises(ValueError, match="residuals: a finite"):
        choose_outlying_rows(np.array([[0.0, np.nan]]))
    held = with_outlying_rows(control_variate, model, rare.ravel())
    with pytest.raises(ValueError, match="count the control variate's outlying rows twice"):
        tallmcmc.confidence_sampler(100, control_variate=held)
    assert with_outlying_rows(control_variate, model, []).num_outlying == 0
    pairs = jnp.stack([jnp.zeros(9), jnp.zeros(9)]), jnp.stack([jnp.zeros(9), jnp.full(9, jnp.inf)])
    with pytest.raises(ValueError, match="not finite at these pairs"):
        find_outlying_rows(model, control_variate, *pairs)


def test_the_residual_pass_takes_the_centre_as_an_argument_and_computes_the_residuals():
    """row_residuals evaluates every row's residual at each pair (checked against the residual model on all rows at
    once) in a program that takes the control variate's centre and sums as arguments: on other data of the same
    shapes, at another centre, it misses JAX's persistent cache not once. With them embedded (before 2026-12-02) each
    data set's look compiled its two passes again: 0.26 s of XLA each on the zero-inflated Poisson's next data set."""
    if not jax.config.jax_compilation_cache_dir:
        pytest.skip("JAX's persistent cache is off (TALLMCMC_COMPILATION_CACHE=0)")
    model, control_variate, _ = _small_model()
    rng = np.random.default_rng(5)
    pairs = [jnp.asarray(rng.normal(0.0, 0.3, (4, 9)), jnp.float32) for _ in range(2)]
    residuals = row_residuals(model, control_variate, *pairs)
    ratios = control_variate.residual_model(model).log_likelihood_ratios
    expected = jax.vmap(lambda a, b: ratios(a, b, model.data))(*pairs)
    np.testing.assert_allclose(residuals, np.asarray(expected), rtol=1e-5, atol=1e-5)
    covariates, response, _ = _rare_categories(2000, seed=4)
    other = logistic_regression.model(covariates, response)
    at_another_centre = tallmcmc.taylor_control_variate(
        other, jnp.asarray(np.full(covariates.shape[1], 0.1, np.float32))
    )
    misses = collections.Counter()

    def listener(event, **_):
        misses[event] += event.endswith("cache_misses")

    jax.monitoring.register_event_listener(listener)
    try:
        row_residuals(other, at_another_centre, *pairs)
    finally:
        jax.monitoring.unregister_event_listener(listener)
    assert sum(misses.values()) == 0, misses


def _default_run(num_data=300_000, monkeypatch=None, drop_exact_sum=False):
    covariates, response, rare = _rare_categories(num_data)
    model = logistic_regression.model(covariates, response)
    if drop_exact_sum:  # deliberately wrong: the rows held are left out of the minibatch and their sum is never added
        monkeypatch.setattr(
            control_variate_module.ResidualModel, "outlying_log_ratio", lambda self, position, proposed: jnp.zeros(())
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = tallmcmc.sample_tall(model, num_samples=1000, progress=False)
    result.caught_warnings = [str(w.message) for w in caught]
    return result, _reference(covariates, response, rare)


def _mean_z_and_sd_se(result, reference):
    import arviz as az

    mean, sd = reference
    draws = np.asarray(result.positions, np.float64)
    z, sd_se = [], []
    for j in range(draws.shape[-1]):
        coordinate = draws[..., j]
        ess = float(np.ravel(az.ess(coordinate))[0])
        z.append((coordinate.mean() - mean[j]) / float(np.ravel(az.mcse(coordinate))[0]))
        sd_se.append((coordinate.std(ddof=1) / sd[j] - 1) * np.sqrt(2 * ess))
    return np.array(z), np.array(sd_se)


@pytest.mark.parametrize(("num_data", "look"), [(300_000, "early"), (150_000, "after warm-up")])
def test_the_default_path_holds_rare_categories_and_keeps_the_minibatch_test_exactly(num_data, look):
    """Before the look this model took the exact test (N per step). Now: the 120 rare rows held, the minibatch test
    kept, and every coordinate within 4 MCSE of the reference in mean and 4 se in sd (9 coordinates). At N = 300,000
    fast_setup does not settle and the look comes before warm-up; at 150,000 (find_mode) after it."""
    result, reference = _default_run(num_data)
    diagnosis = result.diagnosis
    _, _, rare = _rare_categories(num_data)
    np.testing.assert_array_equal(np.asarray(diagnosis.control_variate.outlying_indices), np.sort(rare.ravel()))
    assert diagnosis.decision == "minibatch", diagnosis.reason
    assert "120 outlying rows are summed exactly" in diagnosis.reason
    assert diagnosis.setup_passes[f"outlying rows (look, {look})"] == 4.0
    assert diagnosis.seconds["look for outlying rows"] > 0  # its time, and the second warm-up's, apart
    if look == "after warm-up":  # the first warm-up's points are counted
        assert diagnosis.setup_passes["warm-up before the outlying rows were held"] > 10
    else:  # fast_setup fell back for want of these rows: with them held, that is said, not warned
        assert "did not settle" in diagnosis.setup_fallback
        assert not [w for w in result.caught_warnings if w.startswith("fast_setup:")], result.caught_warnings
    assert diagnosis.data_fraction < 0.01
    z, sd_se = _mean_z_and_sd_se(result, reference)
    assert np.max(np.abs(z)) < 4 and np.max(np.abs(sd_se)) < 4, (z, sd_se)


def test_holding_the_rows_without_their_exact_sum_fails_the_same_comparison(monkeypatch):
    result, reference = _default_run(monkeypatch=monkeypatch, drop_exact_sum=True)
    z, _ = _mean_z_and_sd_se(result, reference)
    assert np.max(np.abs(z[3:])) > 4, z


def test_the_look_after_warm_up_is_only_for_heavy_tails_on_a_costly_minibatch():
    from tallmcmc.run_warnings import DataUse
    from tallmcmc.tall_outlying_looks import outlying_rows_may_pay
    from tallmcmc.tall_warmup import RunShape

    def choice(cause, kurtosis, minibatch=False, fraction=0.3, chosen_cause=None):
        use = DataUse(fraction, 800.0, kurtosis, 0.0, 0.0, 100.0, cause)
        return tallmcmc.automatic.TestChoice(minibatch, chosen_cause or cause, use, 0.5, 0.5, 1.0, 1.0)

    run = RunShape(1000, 200, 0, {}, print, True)
    assert outlying_rows_may_pay(choice("tail weight", 5000.0), run)
    assert outlying_rows_may_pay(choice("spread", float("nan")), run)  # unmeasured kurtosis: look
    assert not outlying_rows_may_pay(choice("spread", 4.8), run)  # spread over every row: nothing to hold
    assert not outlying_rows_may_pay(choice("spread", 5000.0, chosen_cause="rejected"), run)
    assert outlying_rows_may_pay(choice("small N", 5000.0), run)  # one chain guarding from its first step
    assert not outlying_rows_may_pay(choice("small N", 3.0), run)
    assert not outlying_rows_may_pay(choice("tail weight", 5000.0, minibatch=True, fraction=0.005), run)
    assert outlying_rows_may_pay(choice("tail weight", 5000.0, minibatch=True, fraction=0.05), run)


def test_the_look_for_a_misfitting_proxy_is_for_heavy_tails_and_rejected_moves():
    """Where the moves are rejected (Metropolis acceptance under 0.6) and the residuals heavy-tailed, the look runs
    whatever the minibatch cost, proposals almost never accepted included; not where the proxy fits, nor where the
    residuals are spread over every row."""
    from tallmcmc.run_warnings import DataUse
    from tallmcmc.tall_outlying_looks import proxy_may_misfit
    from tallmcmc.tall_warmup import RunShape

    def choice(kurtosis, metropolis, fraction=0.9, cause="spread"):
        use = DataUse(fraction, 800.0, kurtosis, 0.0, 0.0, 100.0, cause)
        return tallmcmc.automatic.TestChoice(False, cause, use, 0.01, metropolis, 1.0, 1.0)

    run = RunShape(1000, 200, 0, {}, print, True)
    assert proxy_may_misfit(choice(3600.0, 0.01, cause="rejected"), run)
    assert proxy_may_misfit(choice(900.0, 0.5, fraction=0.001), run)
    assert proxy_may_misfit(choice(float("nan"), 0.3), run)
    assert not proxy_may_misfit(choice(900.0, 0.85), run)  # the proxy fits
    assert not proxy_may_misfit(choice(4.8, 0.01), run)  # nothing a few rows could explain
    assert not proxy_may_misfit(choice(900.0, 0.3), run._replace(num_warmup=4))


def _poisson_intercepts(num_data=20_000, num_groups=100, seed=0):
    """The seventh audit's Poisson random intercepts (a NumPyro model as a user writes it): an intercept, three
    slopes, u_g ~ N(0, 0.5²) for groups of 5 rows (most of them) to N/4 (sizes 5·R^(t^p) over t ∈ [0, 1])."""
    import numpyro
    import numpyro.distributions as dist

    largest = num_data / 4
    t = np.linspace(0, 1, num_groups)
    low, high = 0.01, 200.0
    for _ in range(200):  # p such that the sizes add up to N
        p = np.sqrt(low * high)
        low, high = (p, high) if (5 * (largest / 5) ** (t**p)).sum() > num_data else (low, p)
    sizes = np.floor(5 * (largest / 5) ** (t**p)).astype(np.int64)
    sizes[np.argsort(-sizes)[: num_data - sizes.sum()]] += 1
    rng = np.random.default_rng(seed)
    groups = rng.permutation(np.repeat(np.arange(num_groups), sizes)).astype(np.int32)
    covariates = rng.standard_normal((num_data, 3)).astype(np.float32)
    rate = np.exp(0.3 + covariates @ np.array([0.3, -0.2, 0.1]) + rng.normal(0, 0.5, num_groups)[groups])
    counts = rng.poisson(rate).astype(np.int32)

    def model(covariates, groups, counts):
        a = numpyro.sample("a", dist.Normal(0.0, 5.0))
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([3]))
        with numpyro.plate("groups", num_groups):
            u = numpyro.sample("u", dist.Normal(0.0, 0.5))
        with numpyro.plate("data", num_data):
            numpyro.sample("y", dist.Poisson(jnp.exp(a + covariates @ beta + u[groups])), obs=counts)

    return tallmcmc.from_numpyro(model, covariates, groups, counts)


def test_heavy_tails_spread_over_many_small_groups_take_no_second_warm_up(monkeypatch):
    """Residuals heavy-tailed (kurtosis ≈ 900) not because a few rows are far out but because hundreds of 5-row
    groups are: the look would hold 631 rows and predicts 1,499 residuals per step, which at the window's residual
    price and acceptance could not beat the exact test. Before: a second warm-up of 490 passes, thrown away; now
    the look's 4 passes and nothing more, and the exact test as before. (The gate of the second warm-up that holds
    the rows in the test only, where the proxy fits; here it does not, so the misfit's own path is turned off.)"""
    monkeypatch.setattr(tallmcmc.tall_outlying_looks, "PROXY_MISFIT_ACCEPTANCE", 0.0)
    model = _poisson_intercepts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # r̂ and the sd's ESS at 200 draws: only the path is looked at here
        result = tallmcmc.sample_tall(model, num_samples=200, seed=0, progress=False)
    passes = result.diagnosis.setup_passes
    assert passes["outlying rows (look, after warm-up)"] == 4.0, passes
    assert not [name for name in passes if name.startswith("warm-up")], passes
    assert sum(passes.values()) < 40 and result.diagnosis.decision == "exact", str(result.diagnosis)


def test_a_proxy_that_misfits_small_groups_follows_their_rows_exactly():
    """The same model on the default path: warm-up's Metropolis acceptance was ≈ 51% (the kept draws' 41%, bulk ESS
    405 of 8,000 before): the proxy misfits the 5-row groups' skewed intercepts. The warm-up again with the proxy
    following the rows found at pairs of a warm-up state and a Laplace draw is kept, and its moves are accepted as a
    fitting proxy's are (measured at 4 × 2,000 draws: 647 rows, 86%, r̂ 1.003, bulk ESS 3,710, every mean within 2.3
    MCSE of NUTS's)."""
    model = _poisson_intercepts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tallmcmc.sample_tall(model, num_samples=200, seed=0, progress=False)
    diagnosis = result.diagnosis
    assert diagnosis.control_variate.outlying_in_proxy, diagnosis.reason
    assert "followed exactly by the proxy and summed exactly by the test" in diagnosis.reason
    assert diagnosis.setup_passes["warm-up before the outlying rows were held"] > 10
    rows = diagnosis.control_variate.num_outlying
    # the rows' Taylor pass, in the control variate's own cost (find_mode's last pass made the rest of it), once
    assert diagnosis.setup_passes["taylor control variate (order 2)"] == rows / model.num_data
    assert diagnosis.setup_passes["rows for the proxy (look, after warm-up)"] == 8.0
    assert diagnosis.choice.metropolis_acceptance > 0.8 and diagnosis.choice.proposal_points >= 2 * rows
    assert float(np.mean(result.info["accepted"])) > 0.8


def test_the_proxy_with_rows_follows_their_own_log_likelihoods():
    """Its differences are the Taylor proxy's plus the held rows' residuals (what the test sums exactly), so with
    every row held it is the log-likelihood itself; a trajectory reads the rows at each of its L + 1 evaluations."""
    model, control_variate, rare = _small_model()
    held = with_outlying_rows(control_variate, model, rare.ravel(), in_proxy=True)
    assert held.outlying_in_proxy and held.proposal_rows == rare.size
    assert held.data_used == control_variate.data_used + rare.size
    position, proposed = jnp.full(9, 0.1), jnp.linspace(-0.2, 0.4, 9)
    followed = float(held.proposal_log_likelihood(proposed) - held.proposal_log_likelihood(position))
    taylor = float(control_variate.proxy_log_ratio(position, proposed))
    exact = float(held.residual_model(model).outlying_log_ratio(position, proposed))
    assert followed == pytest.approx(taylor + exact, rel=1e-4, abs=1e-4)
    plain = with_outlying_rows(control_variate, model, rare.ravel())
    assert not plain.outlying_in_proxy and plain.proposal_rows == 0
    assert float(plain.proposal_log_likelihood(proposed)) == float(control_variate.proxy_log_likelihood(proposed))
    every = with_outlying_rows(control_variate, model, np.arange(model.num_data), in_proxy=True)
    whole = float(every.proposal_log_likelihood(proposed) - every.proposal_log_likelihood(position))
    delta = float(jnp.sum(model.log_likelihood_ratios(position, proposed, model.data)))
    assert whole == pytest.approx(delta, rel=1e-4, abs=1e-3)
    proposal = tallmcmc.proxy_hamiltonian(held, 0.01, 5)
    moved = proposal.propose(jax.random.key(0), position, model)
    assert int(moved.data_used) == 6 * rare.size


def _small_groups(num_data=20_000, small=150, seed=0, alpha=2.0, beta=1.0):
    """Poisson counts in 150 groups of 5 rows and two large ones, each group's log-rate θ_g with the log of a
    Gamma(2, 1) rate as prior: the posterior of each θ_g is the log of a Gamma(α + Σy, β + n_g), exactly, so its
    mean is ψ(α + Σy) − log(β + n_g) and its variance ψ'(α + Σy); for 5 rows it is skewed, far from its Laplace
    approximation."""
    from scipy.special import digamma, polygamma

    rng = np.random.default_rng(seed)
    big = (num_data - 5 * small) // 2
    sizes = np.array([5] * small + [big, num_data - 5 * small - big])
    num_groups = sizes.size
    groups = rng.permutation(np.repeat(np.arange(num_groups), sizes)).astype(np.int32)
    counts = rng.poisson(rng.gamma(alpha, 1 / beta, num_groups)[groups]).astype(np.float32)

    def log_likelihood(theta, datum):
        group, count = datum
        return count * theta[group] - jnp.exp(theta[group])

    def log_prior(theta):
        return jnp.sum(alpha * theta - beta * jnp.exp(theta))

    model = tallmcmc.Model(log_likelihood, log_prior, (groups, counts), position_shape=(num_groups,))
    shape = alpha + np.bincount(groups, counts, num_groups)
    return model, (digamma(shape) - np.log(beta + sizes), np.sqrt(polygamma(1, shape)))


def _small_groups_run(monkeypatch=None, drop_exact_sum=False):
    model, reference = _small_groups()
    if drop_exact_sum:  # deliberately wrong: the proxy follows the rows, but the test never adds their exact sum
        monkeypatch.setattr(
            control_variate_module.ResidualModel, "outlying_log_ratio", lambda self, position, proposed: jnp.zeros(())
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tallmcmc.sample_tall(model, seed=0, progress=False)
    return result, reference


def test_the_default_path_on_small_groups_follows_their_rows_and_matches_the_exact_posterior():
    """Before: the proxy's moves accepted 19% in warm-up (Metropolis, estimated). Now the small groups' rows are
    followed by the proxy, the moves are accepted ≈ 90% of the time, and all 152 coordinates are within 4.5 MCSE of
    the exact posterior mean and 4.5 se of its sd."""
    result, reference = _small_groups_run()
    diagnosis = result.diagnosis
    assert diagnosis.control_variate.outlying_in_proxy, diagnosis.reason
    assert diagnosis.r_hat_max < 1.01 and diagnosis.ess_bulk_min > 1000, str(diagnosis)
    z, sd_se = _mean_z_and_sd_se(result, reference)
    assert np.max(np.abs(z)) < 4.5 and np.max(np.abs(sd_se)) < 4.5, (np.max(np.abs(z)), np.max(np.abs(sd_se)))
    assert abs(_small_groups_sd_z(sd_se)) < 4, _small_groups_sd_z(sd_se)  # measured: 2.3


def _small_groups_sd_z(sd_se):
    """The 150 small groups' sd errors in standard errors, summed and scaled by √150: one z for their spread, which a
    sampler that widens or narrows all of them a little moves far (each alone within its 4.5 se)."""
    return float(np.sum(sd_se[:150]) / np.sqrt(150))


def test_following_the_rows_without_their_exact_sum_fails_the_same_comparison(monkeypatch):
    """Without their exact sum the test targets the small groups' Taylor likelihoods, lighter-tailed than theirs:
    every small group's sd a little narrow (measured: the summed z −6.5; each mean within 3.6 MCSE)."""
    result, reference = _small_groups_run(monkeypatch, drop_exact_sum=True)
    _, sd_se = _mean_z_and_sd_se(result, reference)
    assert _small_groups_sd_z(sd_se) < -4, _small_groups_sd_z(sd_se)


def _zero_inflation_on_poisson_data(num_data=20_000, seed=7):
    """The 2026-11-30 audit's zero-inflated Poisson fitted to pure Poisson data
    (:mod:`tallmcmc.examples.zero_inflated_poisson`): the gate's intercept has a long left tail the Laplace
    approximation misses, the proxy misfits, and the rows the proxy would have to follow (≈ 1,000) make its
    trajectories read several times N a step."""
    return zero_inflated_poisson.model(*zero_inflated_poisson.simulate(num_data, seed))


def _zero_inflation_run(num_samples=200):
    """``sample_tall`` on it, the tempered momentum's gate off (the warm-up again that it would run is not what these
    tests look at: ``tests/test_sample_tall.py`` tests it on this model)."""
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
        patch.setattr(tallmcmc.tall_tempering, "TEMPER_BELOW", 0.0)
        warnings.simplefilter("ignore")  # r̂ at 200 draws: only the path and its cost are looked at here
        return tallmcmc.sample_tall(_zero_inflation_on_poisson_data(), num_samples=num_samples, seed=0, progress=False)


@pytest.mark.slow
def test_a_second_warm_up_that_cannot_pay_stops_early():
    """The audit's run read 9,669 passes over N in a second warm-up (the rows followed by the proxy; 14 s of a 20 s
    call) and threw it away: its trajectories read ≈ 240,000 rows a step, 5× the exact test's cost per effective
    draw even at a fitting proxy's acceptance. It now stops after SECOND_WARMUP_LOOK steps (measured: 1,609 passes),
    and the exact test runs as before. Slow: the default suite asserts the same stop on the same data in
    ``tests/test_sample_tall.py``'s default zero-inflation run (the gate on; the look comes before it)."""
    result = _zero_inflation_run()
    diagnosis = result.diagnosis
    passes = diagnosis.setup_passes
    thrown = passes["warm-up with outlying rows in the proxy (not kept)"]
    assert 0 < thrown < 3_000, passes
    assert "its warm-up stopped after 20 of 200 steps" in diagnosis.reason, diagnosis.reason
    assert diagnosis.decision == "exact" and not diagnosis.control_variate.outlying_in_proxy


@pytest.mark.slow
def test_stopping_a_second_warm_up_changes_no_kept_draw(monkeypatch):
    """The same run with the stop turned off (the warm-up runs its 200 steps, ≈ 9,700 passes, and is thrown away
    as before) draws the same kept draws, bit for bit: the stop saves data, it decides nothing."""
    stopped = _zero_inflation_run()
    monkeypatch.setattr(tallmcmc.tall_outlying_looks, "SECOND_WARMUP_STOP", np.inf)
    whole = _zero_inflation_run()
    assert whole.diagnosis.setup_passes["warm-up with outlying rows in the proxy (not kept)"] > 5_000
    assert "did not pay (warm-up's Metropolis acceptance" in whole.diagnosis.reason
    for name in stopped.positions:
        np.testing.assert_array_equal(stopped.positions[name], whole.positions[name])
