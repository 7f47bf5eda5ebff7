"""SGHMC (:func:`tallmcmc.sghmc`) and the proposal state the kernel carries for it.

Its posterior checks (plain SGHMC passes at a small step; under a minibatch
test, as Chen et al. 2016 ran it, the variance is halved) are in the registry,
``tests/test_posterior.py``. Here: bad input, the opt-in, the clipping warning,
and that a persistent proposal state (SGHMC's velocity, the generalised HMC
momentum) survives a resume bit for bit on both drivers.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from analytic_models import TEMPERED_2D

import tallmcmc
from tallmcmc.examples import gaussian_mean
from tallmcmc.proposals.sghmc import SGHMCState

TARGET = TEMPERED_2D
STEP = 0.05 * float(np.min(TARGET.variance))  # η·λ = 0.05


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (dict(step_size=0.0), "step_size"),
        (dict(step_size=STEP, friction=0.0), "friction"),
        (dict(step_size=STEP, friction=1.5), "friction"),
        (dict(step_size=STEP, batch_size=0), "batch_size"),
        (dict(step_size=STEP, rescale="rmsprop"), "rescale"),
        (dict(step_size=STEP, on_reject="reverse"), "on_reject"),
    ],
)
def test_bad_settings_are_refused_by_name(arguments, named):
    with pytest.raises(ValueError, match=named):
        tallmcmc.sghmc(**arguments)


def test_bad_persistence_is_refused_by_name():
    for value in (1.0, -0.1, "half"):
        with pytest.raises(ValueError, match="momentum_persistence"):
            tallmcmc.minibatch_hamiltonian(0.1, 2, 10, momentum_persistence=value)


def test_a_batch_above_n_and_a_vector_likelihood_are_refused():
    model = TARGET.model
    proposal = tallmcmc.sghmc(STEP, batch_size=model.num_data + 1)
    with pytest.raises(ValueError, match="batch_size"):
        tallmcmc.sample(model, proposal, tallmcmc.always_accept(), TARGET.mean, num_samples=2, progress=False)
    vector = tallmcmc.Model(
        lambda theta: -0.5 * jnp.sum(theta**2),
        lambda theta, x: -0.5 * (x - theta) ** 2,  # (b, d): one vector per datum
        model.data,
    )
    with pytest.raises(ValueError, match="log_likelihood"):
        tallmcmc.sample(
            vector, tallmcmc.sghmc(STEP), tallmcmc.always_accept(), TARGET.mean, num_samples=2, progress=False
        )


def test_a_real_test_needs_the_opt_in_and_the_result_records_it():
    model = TARGET.model
    with pytest.raises(ValueError, match="allow_inexact_proposal"):
        tallmcmc.sample(
            model, tallmcmc.sghmc(STEP), tallmcmc.minibatch_barker(50), TARGET.mean, num_samples=2, progress=False
        )
    with pytest.warns(tallmcmc.InexactProposalWarning, match="not the posterior"):
        result = tallmcmc.sample(
            model,
            tallmcmc.sghmc(STEP),
            tallmcmc.minibatch_barker(50),
            TARGET.mean,
            num_samples=20,
            progress=False,
            allow_inexact_proposal=True,
        )
    assert result.inexact_proposal
    plain = tallmcmc.sample(
        model, tallmcmc.sghmc(STEP), tallmcmc.always_accept(), TARGET.mean, num_samples=20, progress=False
    )
    assert not plain.inexact_proposal
    assert np.all(plain.info["data_used"] == 200)
    assert isinstance(plain.final_state.proposal_state, SGHMCState)


def test_a_negative_noise_variance_is_clipped_with_a_warning_naming_friction():
    model = TARGET.model
    # β̂ = ½ηV̂ with V̂ ≈ (N/K)²/b = 10⁴/b: at b = 2 and η = 2·10⁻³, β̂ ≈ 5 > α = 0.1
    proposal = tallmcmc.sghmc(2e-3, 0.1, 2)
    with pytest.warns(RuntimeWarning, match="friction"):
        result = tallmcmc.sample(model, proposal, tallmcmc.always_accept(), TARGET.mean, num_samples=20, progress=False)
    assert int(np.max(result.final_state.proposal_state.noise_clipped)) > 0


def test_adagrad_rescaling_accumulates_squared_gradients():
    model = gaussian_mean.model(TARGET.data, TARGET.prior_variance, TARGET.temperature)
    result = tallmcmc.sample(
        model,
        tallmcmc.sghmc(1e-3, rescale="adagrad", fisher=False),
        tallmcmc.always_accept(),
        TARGET.mean,
        num_samples=10,
        progress=False,
    )
    squared = np.asarray(result.final_state.proposal_state.squared_gradients)
    assert squared.shape == (1, 2) and np.all(squared > 0)
    assert np.all(np.isfinite(np.asarray(result.positions)))


@pytest.mark.parametrize(
    ("which", "driver"),
    [
        ("persistent", "asynchronous"),
        *(
            pytest.param(*case, marks=pytest.mark.slow)
            for case in (("persistent", "vmap"), ("sghmc", "vmap"), ("sghmc", "asynchronous"))
        ),
    ],
)
def test_the_proposal_state_survives_a_resume_bit_for_bit(driver, which):
    """100 + 100 steps equal 200: the velocity / momentum is carried in ``last_state``; a restarted one differs."""
    model = TARGET.model
    if which == "sghmc":
        proposal = tallmcmc.sghmc(STEP, 0.1, 100)
        test, options = tallmcmc.minibatch_barker(50), {"allow_inexact_proposal": True}
    else:
        proposal = tallmcmc.minibatch_hamiltonian(0.5, 2, 100, preconditioner=TARGET.variance, momentum_persistence=0.8)
        test, options = tallmcmc.minibatch_barker(50), {}
    run = dict(num_chains=2, seed=5, progress=False, driver=driver, num_chunks=2, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = tallmcmc.sample(model, proposal, test, TARGET.mean, num_samples=200, **run)
        first = tallmcmc.sample(model, proposal, test, TARGET.mean, num_samples=100, **run)
        continued = tallmcmc.sample(model, proposal, test, num_samples=100, resume=first, **run)
        # the deliberately wrong continuation: same key counter, proposal state restarted at zero
        state = first.last_state
        zeroed = state.states._replace(
            proposal_state=jax.tree_util.tree_map(jnp.zeros_like, state.states.proposal_state)
        )
        restarted = tallmcmc.sample(model, proposal, test, num_samples=100, resume=state._replace(states=zeroed), **run)
    np.testing.assert_array_equal(np.asarray(continued.positions), np.asarray(whole.positions))
    assert not np.array_equal(np.asarray(restarted.positions), np.asarray(whole.positions)[:, 100:])
