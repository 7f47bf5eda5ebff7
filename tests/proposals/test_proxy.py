"""Proxy proposals: their data-free proxy ratio, the integration time warm-up keeps, the half-period warning, and
the mode's passes counted however the mode reaches a run."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc.examples import logistic_regression
from tallmcmc.proposals.proxy import MAX_TUNED_STEPS, proxy_oscillation_time
from tallmcmc.testing import check_posterior_moments


@pytest.fixture(scope="module")
def setup():
    covariates, response = logistic_regression.simulate(5000, 3, seed=2)
    model = logistic_regression.model(covariates, response)
    mode = tallmcmc.find_mode(model, jnp.zeros(3))
    return model, mode, tallmcmc.taylor_control_variate(model, mode.position), tallmcmc.laplace_covariance(mode)


def _log_proxy(model, cv):
    """log π̃ = log p₀ + (1/K)Σqᵢ, the proxy posterior the Hamiltonian moves follow."""
    return lambda position: model.log_prior(position) + cv.proxy_log_likelihood(position)


def test_proxy_ratio_is_minus_the_energy_error_on_the_proxy(setup):
    model, mode, cv, covariance = setup
    proposal = tallmcmc.proxy_hamiltonian(cv, 0.3, 5, preconditioner=covariance)
    proposed = proposal.propose(jax.random.key(0), mode.position + 0.01, model)
    log_proxy = _log_proxy(model, cv)

    expected = log_proxy(proposed.position) - log_proxy(mode.position + 0.01) + proposed.log_proposal_ratio
    np.testing.assert_allclose(proposed.proxy_log_ratio, expected, rtol=1e-5, atol=1e-6)
    assert abs(float(proposed.proxy_log_ratio)) < 0.1  # small steps follow the proxy closely


def test_a_tuned_step_keeps_the_integration_time(setup):
    model, mode, cv, covariance = setup
    proposal = tallmcmc.proxy_hamiltonian(cv, 0.5, 3, preconditioner=covariance)

    def steps_taken(factor):  # count the leapfrog steps through the proxy gradient calls' effect: compare positions
        tuned = proposal.tune(jnp.float32(factor))
        return tuned.propose(jax.random.key(1), mode.position, model).position

    # halving the step doubles the steps (ε·L = 1.5 kept): the move matches 6 untuned steps of 0.25
    halved = steps_taken(0.5)
    reference = (
        tallmcmc.proxy_hamiltonian(cv, 0.25, 6, preconditioner=covariance)
        .propose(jax.random.key(1), mode.position, model)
        .position
    )
    np.testing.assert_allclose(halved, reference, rtol=1e-5, atol=1e-6)
    # a step factor beyond the integration time is capped at one step of ε·L
    capped = steps_taken(10.0)
    one_step = (
        tallmcmc.proxy_hamiltonian(cv, 1.5, 1, preconditioner=covariance)
        .propose(jax.random.key(1), mode.position, model)
        .position
    )
    np.testing.assert_allclose(capped, one_step, rtol=1e-5, atol=1e-6)
    assert MAX_TUNED_STEPS >= 100


def test_half_an_oscillation_is_warned_about_and_a_bad_jitter_refused(setup):
    _, _, cv, covariance = setup
    half = proxy_oscillation_time(cv, covariance)
    assert half >= np.pi * 0.999  # with the Laplace covariance as inverse mass, ω_max ≤ 1
    with pytest.warns(UserWarning, match="reaches half an oscillation of the proxy"):
        tallmcmc.proxy_hamiltonian(cv, 1.01 * half / 3, 3, preconditioner=covariance)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tallmcmc.proxy_hamiltonian(cv, 0.5, 3, preconditioner=covariance, step_size_jitter=0.5)
    with pytest.raises(ValueError, match="step_size_jitter must lie in"):
        tallmcmc.proxy_hamiltonian(cv, 0.5, 3, preconditioner=covariance, step_size_jitter=1.0)


@pytest.mark.parametrize("route", ["proxy preconditioner", "random walk covariance", "derived matrix"])
def test_the_mode_is_counted_however_it_reaches_the_run(setup, route):
    model, mode, cv, covariance = setup
    if route == "proxy preconditioner":
        proposal = tallmcmc.proxy_hamiltonian(cv, 0.5, 3, preconditioner=covariance)
    elif route == "random walk covariance":
        proposal = tallmcmc.random_walk(covariance=covariance)
    else:
        proposal = tallmcmc.laplace_random_walk(covariance=0.5 * covariance)
    result = tallmcmc.sample(
        model, proposal, tallmcmc.exact_barker(), initial_position=mode.position, num_samples=2, progress=False
    )
    assert result.setup_data_used["find_mode"] == mode.data_used
    plain = tallmcmc.random_walk(covariance=np.asarray(covariance))  # a plain array carries no mode
    assert (
        "find_mode"
        not in tallmcmc.sample(
            model, plain, tallmcmc.exact_barker(), initial_position=mode.position, num_samples=2, progress=False
        ).setup_data_used
    )


def test_a_target_the_barker_test_cannot_reach_is_refused(setup):
    model, mode, _, covariance = setup
    walk = tallmcmc.laplace_random_walk(mode)
    with pytest.raises(ValueError, match="target_acceptance=0.6 cannot be reached under exact_barker"):
        tallmcmc.sample(
            model,
            walk,
            tallmcmc.exact_barker(),
            initial_position=mode.position,
            num_samples=2,
            num_warmup=10,
            target_acceptance=0.6,
            progress=False,
        )
    with pytest.warns(UserWarning, match="close to the most exact_barker accepts"):
        tallmcmc.sample(
            model,
            walk,
            tallmcmc.exact_barker(),
            initial_position=mode.position,
            num_samples=2,
            num_warmup=10,
            target_acceptance=0.45,
            progress=False,
        )


@pytest.mark.parametrize("build", ["hamiltonian", "langevin"])
def test_a_first_order_control_variate_is_warned_about(setup, build):
    model, mode, cv, covariance = setup
    first = tallmcmc.taylor_control_variate(model, mode.position, order=1)

    def make(control_variate):
        if build == "hamiltonian":
            return tallmcmc.proxy_hamiltonian(control_variate, 0.5, 3, preconditioner=covariance)
        return tallmcmc.proxy_langevin(control_variate, 0.5, preconditioner=covariance)

    with pytest.warns(UserWarning, match=r"first order \(order=1\).*Build the control variate with order=2") as caught:
        make(first)
    assert caught[0].filename == __file__  # the warning points at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make(cv)  # second order (the default): no warning


def test_the_split_move_is_exact_on_a_gaussian_proxy_where_leapfrog_is_not(setup):
    """A Gaussian prior and M = the Laplace covariance at the centre: the proxy is the Gaussian the split move solves
    exactly, so one step of the whole quarter period conserves the proxy energy; one leapfrog step of it does not."""
    model, mode, cv, covariance = setup
    start = mode.position + 0.01
    log_proxy = _log_proxy(model, cv)

    for key in range(5):
        split = tallmcmc.proxy_hamiltonian(cv, np.pi / 2, 1, preconditioner=covariance, integrator="split")
        proposed = split.propose(jax.random.key(key), start, model)
        expected = log_proxy(proposed.position) - log_proxy(start) + proposed.log_proposal_ratio
        np.testing.assert_allclose(proposed.proxy_log_ratio, expected, rtol=1e-4, atol=1e-4)
        assert abs(float(proposed.proxy_log_ratio)) < 1e-3
        assert float(jnp.max(jnp.abs(proposed.position - start))) > 1e-3  # it moved
    leapfrog = tallmcmc.proxy_hamiltonian(cv, np.pi / 2, 1, preconditioner=covariance)
    errors = [abs(float(leapfrog.propose(jax.random.key(key), start, model).proxy_log_ratio)) for key in range(5)]
    assert max(errors) > 0.05


def test_the_split_move_is_exact_with_a_control_variate_centred_off_the_mode(setup):
    """``fast_setup`` centres the control variate a step from the mode; the Gaussian part is then centred at π̃'s
    own mode (a Newton step from the centre), else the linear rest it leaves is integrated only to O(ε³)."""
    model, mode, _, covariance = setup
    sd = np.sqrt(np.diag(np.asarray(covariance)))
    center = mode.position + jnp.asarray(sd, mode.position.dtype)  # one posterior sd off in every coordinate
    cv = tallmcmc.taylor_control_variate(model, center)
    precision = -cv.hessian_matrix() / cv.temperature + np.eye(3)  # π̃'s: the likelihood's and the N(0, I) prior's
    split = tallmcmc.proxy_hamiltonian(cv, np.pi / 2, 1, preconditioner=np.linalg.inv(precision), integrator="split")
    errors = [abs(float(split.propose(jax.random.key(key), mode.position, model).proxy_log_ratio)) for key in range(5)]
    assert max(errors) < 1e-3, errors


def test_the_split_move_is_refused_with_an_unknown_integrator(setup):
    _, _, cv, covariance = setup
    with pytest.raises(ValueError, match="integrator must be one of 'leapfrog', 'split'"):
        tallmcmc.proxy_hamiltonian(cv, 0.5, 3, preconditioner=covariance, integrator="verlet")


def test_warmup_holds_the_factor_where_the_step_reaches_the_integration_time(setup):
    """Every split step is accurate on a Gaussian proxy: dual averaging would raise the factor without bound; it stops
    at ``max_step_factor`` (the step equal to the integration time), the same in every chain."""
    model, mode, cv, covariance = setup
    proposal = tallmcmc.proxy_hamiltonian(
        cv, np.pi / 6, 3, preconditioner=covariance, integrator="split", step_size_jitter=0.2
    )
    assert proposal.max_step_factor == 3.0 and proposal.tune(jnp.float32(2.0)).max_step_factor == 3.0
    starts = jax.tree_util.tree_map(lambda leaf: jnp.stack([leaf] * 4), mode.position)
    warmed = tallmcmc.warmup(
        model,
        proposal,
        tallmcmc.exact_metropolis(),
        initial_positions=starts,
        num_chains=4,
        num_warmup=100,
        seed=0,
        progress=False,
    )
    np.testing.assert_allclose(np.asarray(warmed.step_size_factor), 3.0, rtol=1e-5)
    assert float(np.mean(warmed.info["proxy_acceptance"])) > 0.99


@pytest.fixture(scope="module")
def hierarchical():
    """Random intercepts at small N: the hierarchical prior makes the proxy far from Gaussian (U₁ is not linear)."""
    from tallmcmc.examples import random_intercepts

    groups, response = random_intercepts.simulate(400, 5, seed=1)
    model = random_intercepts.model(groups, response, 5)
    exact = random_intercepts.posterior(groups, response, 5)
    mean = np.concatenate([[exact["log_tau"][0]], exact["u"][0]])
    sd = np.concatenate([[exact["log_tau"][1]], exact["u"][1]])
    mode = tallmcmc.find_mode(model, {"log_tau": jnp.zeros(()), "u": jnp.zeros(5)})
    return model, mode, mean, sd


def _symmetric(proposal):
    """The same move with its proposal ratio taken as 0, tuned as the move is (deliberately wrong)."""

    def propose(*arguments):
        return proposal.propose(*arguments)._replace(log_proposal_ratio=jnp.zeros(()))

    return proposal._replace(propose=propose, tune=lambda factor: _symmetric(proposal.tune(factor)))


def _exact_check(model, mode, mean, sd, proposal):
    """4 × 2,000 draws of ``proposal`` under the exact Metropolis test after 200 warm-up steps, from the mode, checked
    against the posterior's means and variances (4 MCSE)."""
    from jax.flatten_util import ravel_pytree

    result = tallmcmc.sample(
        model,
        proposal,
        tallmcmc.exact_metropolis(),
        initial_position=mode.position,
        num_chains=4,
        num_samples=2000,
        num_warmup=200,
        seed=3,
        progress=False,
    )
    flat = np.asarray(jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(result.positions), np.float64)
    return check_posterior_moments(flat, mean, sd**2)


@pytest.mark.parametrize("wrong", [False, True])
def test_the_split_move_samples_a_non_gaussian_posterior_exactly(hierarchical, wrong):
    """Under the exact Metropolis test, with warm-up, against the quadrature posterior (4 MCSE); the same move
    with its proposal ratio taken as 0 (as if it were symmetric) fails the same check."""
    model, mode, mean, sd = hierarchical
    cv = tallmcmc.taylor_control_variate(model, mode.position)
    proposal = tallmcmc.proxy_hamiltonian(
        cv, np.pi / 6, 3, preconditioner=tallmcmc.laplace_covariance(mode), integrator="split", step_size_jitter=0.2
    )
    if wrong:
        proposal = _symmetric(proposal)
    check = _exact_check(model, mode, mean, sd, proposal)
    assert check.passed != wrong, str(check)


def _untempered_ratio(proposal, temperature):
    """The same tempered move with the kinetic ratio of the untempered momentum (the ratio times λ): the momentum
    drawn from N(0, λM⁻¹) but its density taken as N(0, M⁻¹)'s (deliberately wrong)."""

    def propose(*arguments):
        proposed = proposal.propose(*arguments)
        return proposed._replace(log_proposal_ratio=proposed.log_proposal_ratio * temperature)

    return proposal._replace(propose=propose, tune=lambda factor: _untempered_ratio(proposal.tune(factor), temperature))


@pytest.mark.parametrize(
    "integrator, wrong",
    [("split", False), ("split", True), pytest.param("leapfrog", False, marks=pytest.mark.slow)],
)
def test_a_tempered_momentum_samples_a_non_gaussian_posterior_exactly(hierarchical, integrator, wrong):
    """``momentum_temperature=2``: the momentum drawn from N(0, 2M⁻¹) and its kinetic energy halved in the ratio.
    Against the quadrature posterior (4 MCSE) under the exact Metropolis test; the same move with the untempered
    kinetic ratio fails the same check. Its acceptance is lower than the plain move's (it proposes from a proxy √2
    wider)."""
    model, mode, mean, sd = hierarchical
    cv = tallmcmc.taylor_control_variate(model, mode.position)
    proposal = tallmcmc.proxy_hamiltonian(
        cv,
        np.pi / 6,
        3,
        preconditioner=tallmcmc.laplace_covariance(mode),
        integrator=integrator,
        step_size_jitter=0.2,
        momentum_temperature=2.0,
    )
    if wrong:
        proposal = _untempered_ratio(proposal, 2.0)
    check = _exact_check(model, mode, mean, sd, proposal)
    assert check.passed != wrong, str(check)


def test_a_bad_momentum_temperature_is_refused(setup):
    _, _, cv, covariance = setup
    with pytest.raises(ValueError, match="momentum_temperature"):
        tallmcmc.proxy_hamiltonian(cv, 0.3, 5, preconditioner=covariance, momentum_temperature=0.0)


def _step_key(proposal, position, model):
    """The program key of one proposal's trace (:func:`tallmcmc.program_cache.program_key`, its constants an
    argument as in a chain program)."""
    step = jax.make_jaxpr(lambda key, theta: proposal.propose(key, theta, model))(jax.random.key(0), position)
    constants = [jax.device_put(constant) for constant in step.consts]
    return tallmcmc.program_cache.program_key(step, (position, constants), (100,))


@pytest.mark.parametrize("integrator", ["leapfrog", "split"])
@pytest.mark.parametrize("literal", [False, True])
def test_the_plain_and_the_tempered_moves_are_one_program(setup, integrator, literal, monkeypatch):
    """λ reaches the trace as one of its constants, not as a literal: the plain move (λ = 1) and the tempered ones
    (λ = 2, 3) have one program key, so a ``sample_tall`` run drawn again tempered loads the chain program it
    compiled for the plain move (the N = 1,000 mixture at seed 4, λ 1 → 2 → 3: 16.6 → 10.9 s on a 2-core CPU,
    benchmarks/RESULTS.md). And √1 and 1 change no bit: the plain move's proposal equals, bit for bit, the one with
    λ written in as the literal 1 (which XLA drops, as the code before did with its ``if``). The deliberately wrong
    twin, λ as Python scalars (literals), gives each λ a program of its own."""
    model, mode, cv, covariance = setup
    proxy = tallmcmc.proposals.proxy
    if literal:
        monkeypatch.setattr(proxy, "_temperature_of", lambda temperature, dtype: (temperature**0.5, temperature))
    keys = {
        temperature: _step_key(
            tallmcmc.proxy_hamiltonian(
                cv, 0.3, 5, preconditioner=covariance, integrator=integrator, momentum_temperature=temperature
            ),
            mode.position,
            model,
        )
        for temperature in (1.0, 2.0, 3.0)
    }
    assert (len(set(keys.values())) == 1) != literal, keys
    if literal:
        return
    plain = tallmcmc.proxy_hamiltonian(cv, 0.3, 5, preconditioner=covariance, integrator=integrator)
    start = mode.position + 0.01
    proposed = jax.jit(lambda key: plain.propose(key, start, model))(jax.random.key(3))
    monkeypatch.setattr(proxy, "_temperature_of", lambda temperature, dtype: (1.0, 1.0))
    written_in = jax.jit(lambda key: plain.propose(key, start, model))(jax.random.key(3))
    for ours, theirs in zip(jax.tree_util.tree_leaves(proposed), jax.tree_util.tree_leaves(written_in)):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
