"""The chain-asynchronous driver gives each chain the draws of the single-chain kernel.

Three checks, each with a deliberately wrong driver that fails it:

* ``step_parts(...).step`` (the step cut at the test's chunks, which the
  driver runs) equals ``build_kernel(...).step`` bit for bit, for every
  subsampling test, with and without a control variate, and the full-data
  tests (through the one-shot machine);
* ``sample(driver="asynchronous")`` gives the same draws and step statistics
  as ``sample(driver="vmap")`` (same per-chain, per-step keys), bit for bit,
  and a chain's draws do not depend on how many chains run beside it; a driver
  that reuses step t's key for step t + 1, or records the proposal on a
  rejection, fails this;
* on a mesh (4 forced host devices, in a subprocess), the driver's draws,
  decisions and data counts equal the run without one bit for bit; leaving
  the data shards' psum out fails this;
* a statistical check that can fail: the asynchronous driver's draws of the
  minibatch Barker test reproduce a known posterior's mean and variance
  within Monte Carlo error, and the driver that records the proposal on a
  rejection fails the same check.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from analytic_models import CONJUGATE_1D, TEMPERED_2D
from forced_devices import SCRIPTS, run_on_host_devices

import tallmcmc
import tallmcmc.sampling.asynchronous as chain_asynchronous
from tallmcmc.acceptance.base import machine_of
from tallmcmc.examples import gaussian_mean
from tallmcmc.kernel import MHState
from tallmcmc.sampling.asynchronous import step_parts
from tallmcmc.testing import check_posterior_moments

TARGET = CONJUGATE_1D  # N = 2000, d = 1


def random_walk():
    return tallmcmc.random_walk(float(2.0 * np.sqrt(TARGET.variance[0])))


@pytest.fixture(scope="module")
def control_variate():
    return tallmcmc.taylor_control_variate(TARGET.model, jnp.asarray(TARGET.mean, jnp.float32))


def subsampling_tests(control_variate):
    """Every growing-minibatch test (each has a machine of its own)."""
    return {
        "minibatch_barker": tallmcmc.minibatch_barker(20),
        "minibatch_barker_geometric_delta": tallmcmc.minibatch_barker(20, growth="geometric", delta=0.1),
        "minibatch_barker_cv": tallmcmc.minibatch_barker(20, control_variate=control_variate),
        "austere": tallmcmc.austere(30, 0.05, chunk_size=16),
        "austere_conservative": tallmcmc.austere_conservative(0.2, num_data=TARGET.num_data),
        "austere_adaptive": tallmcmc.austere_adaptive(0.05),
        "confidence_sampler": tallmcmc.confidence_sampler(30, chunk_size=32),
        "confidence_sampler_bound_cv": tallmcmc.confidence_sampler(
            30, bound=lambda a, b: 50.0 * jnp.sum(jnp.abs(a - b)) + 1.0, control_variate=control_variate
        ),
        "tuna": tallmcmc.tuna(1.0, gaussian_mean.tuna_bound(TARGET.model), chunk_size=16),
    }


def same(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))
    )


def test_every_subsampling_test_has_a_machine_that_decide_runs(control_variate):
    for name, test in subsampling_tests(control_variate).items():
        assert machine_of(test) is test.machine, name
    # full-data tests run through the one-shot machine; a wrapper that replaces decide drops a stale machine
    exact = tallmcmc.exact_metropolis()
    assert exact.machine is None and machine_of(exact) is not None
    barker = tallmcmc.minibatch_barker(20)
    replaced = barker._replace(decide=lambda *args: barker.decide(*args))
    assert machine_of(replaced) is not barker.machine


def test_a_full_pass_at_the_start_is_made_only_for_the_chains_that_start(control_variate, monkeypatch):
    """AustereMH(nc) and the confidence sampler without a bound make a full pass before their minibatch
    loop; the asynchronous driver must then begin each chain's step once (not every chain at every
    iteration where one finishes, as it does for the tests with a cheap start). Counted by a callback
    in ``begin``: ``num_chains × num_samples`` begins exactly. Their draws equal the vmapped driver's
    (``test_asynchronous_draws_equal_vmapped_draws``)."""
    tests = subsampling_tests(control_variate)
    flagged = {name for name, test in tests.items() if test.machine.start_is_full_pass}
    assert flagged == {"austere_adaptive", "confidence_sampler"}
    assert tallmcmc.austere_adaptive(0.05, control_variate=control_variate).machine.start_is_full_pass

    honest = chain_asynchronous.step_parts
    begins = []

    def counting(model, proposal, test):
        right = honest(model, proposal, test)

        def begin(key, state):
            # a batched operand: under vmap the callback then runs once per chain
            jax.debug.callback(lambda position: begins.append(1), state.position)
            return right.begin(key, state)

        return right._replace(begin=begin)

    monkeypatch.setattr(chain_asynchronous, "step_parts", counting)
    for name, expected in (("austere_adaptive", "exact"), ("minibatch_barker", "more")):
        begins.clear()
        result = run(tests[name], "asynchronous", 3)
        jax.effects_barrier()
        steps = result.num_chains * result.num_draws
        assert (len(begins) == steps) if expected == "exact" else (len(begins) > steps), (name, len(begins), steps)


# slow (21 s, suite time): the end-to-end equalities test_asynchronous_draws_equal_vmapped_draws[*] stay in the default suite)
@pytest.mark.slow
def test_step_parts_equal_the_kernel_step_bit_for_bit(control_variate):
    model = TARGET.model
    tests = {**subsampling_tests(control_variate), "exact_barker": tallmcmc.exact_barker()}
    start = jnp.asarray(TARGET.starts(3, 1)[0])
    for name, test in tests.items():
        kernel = tallmcmc.build_kernel(model, random_walk(), test)
        parts = step_parts(model, random_walk(), test)

        @jax.jit
        def both(key, state, kernel=kernel, parts=parts):
            return kernel.step(key, state), parts.step(key, state)

        state = kernel.init(start)
        for t in range(6):
            (expected, expected_info), (got, got_info) = both(jax.random.fold_in(jax.random.key(1), t), state)
            assert same(expected, got) and same(expected_info, got_info), (name, t)
            state = expected


def run(test, driver, num_chains, num_samples=40, **options):
    starts = jnp.asarray(TARGET.starts(5, num_chains))
    return tallmcmc.sample(
        TARGET.model,
        random_walk(),
        test,
        initial_positions=starts,
        num_samples=num_samples,
        num_chains=num_chains,
        seed=2,
        progress=False,
        num_chunks=3,
        driver=driver,
        **options,
    )


#: Reported, not decided on: the Student-t tail that AustereMH reports as its error bound is computed
#: after the loop, where XLA fuses the two drivers' code differently; it may differ in the last ulp.
REPORTED_ONLY = ("error_bound",)


def draws_equal(a, b) -> bool:
    """Positions and every step statistic equal bit for bit (the reported-only ones to float32 rounding)."""
    exact = same(a.positions, b.positions) and all(
        np.array_equal(a.info[k], b.info[k], equal_nan=True) for k in a.info if k not in REPORTED_ONLY
    )
    return exact and all(np.allclose(a.info[k], b.info[k], rtol=1e-5, atol=0) for k in REPORTED_ONLY)


FAST = ("minibatch_barker", "minibatch_barker_cv", "austere", "austere_adaptive", "confidence_sampler", "tuna")


@pytest.mark.parametrize(
    "name",
    [
        *FAST,
        "exact_metropolis",
        *(
            pytest.param(name, marks=pytest.mark.slow)
            for name in (
                "minibatch_barker_geometric_delta",
                "austere_conservative",
                "confidence_sampler_bound_cv",
            )
        ),
    ],
)
def test_asynchronous_draws_equal_vmapped_draws(control_variate, name):
    test = {**subsampling_tests(control_variate), "exact_metropolis": tallmcmc.exact_metropolis()}[name]
    vmapped = run(test, "vmap", 3)
    asynchronous = run(test, "asynchronous", 3)
    assert asynchronous.driver == "asynchronous" and asynchronous.loop_iterations > 0
    assert draws_equal(vmapped, asynchronous)
    # the positions and the tail pool (minibatch Barker's cache) end where the vmapped chains end
    assert same(vmapped.final_state, asynchronous.final_state)
    assert vmapped.acceptance_rate > 0


# slow (12 s, suite time): the asynchronous driver's draws are checked against the vmapped driver's in the default suite)
@pytest.mark.slow
def test_a_chain_draws_the_same_whatever_the_number_of_chains():
    test = tallmcmc.minibatch_barker(20)
    starts = jnp.asarray(TARGET.starts(5, 6))

    def chains(count):
        return tallmcmc.sample(
            TARGET.model,
            random_walk(),
            test,
            initial_positions=starts[:count],
            num_samples=50,
            num_chains=count,
            seed=4,
            progress=False,
            num_chunks=2,
            driver="asynchronous",
        )

    one, three, six = chains(1), chains(3), chains(6)
    assert np.array_equal(one.positions[0], six.positions[0])
    assert np.array_equal(three.positions, six.positions[:3])
    assert np.array_equal(three.info["data_used"], six.info["data_used"][:3])
    # the chains really did run out of step: minibatch sizes differ between chains at the same step
    assert np.any(six.info["data_used"].std(axis=0) > 0)


def warmups_equal(a, b) -> bool:
    """Warm-up draws, their statistics and the adapted step-size factors equal bit for bit."""
    return bool(
        np.array_equal(a.warmup_positions, b.warmup_positions)
        and all(
            np.array_equal(a.warmup_info[k], b.warmup_info[k], equal_nan=True)
            for k in a.warmup_info
            if k not in REPORTED_ONLY
        )
        and np.array_equal(a.step_size_factor, b.step_size_factor)
    )


# slow (17 s and 20 s, suite time): the asynchronous warm-up stays in the default suite through
# tests/test_warmup.py::test_warmup_as_its_own_step_then_sample_equals_the_shorthand[asynchronous-False]
@pytest.mark.slow
@pytest.mark.parametrize("adapt_covariance", [False, True])
def test_warmup_and_step_size_schedule_give_the_vmapped_draws(adapt_covariance):
    """The asynchronous driver warms up asynchronously too (each chain adapts its step size as its
    own steps finish): the same warm-up draws, factors and kept draws as the lockstep warm-up. With the adapted
    covariance as well, the kept steps' proposals (the covariance's factor times the step-size factor times the
    schedule's) are rounded differently in the last place by the two drivers' programs: the same decisions, the
    draws within a few units in the last place and the reported statistics within rounding
    (:func:`assert_same_decisions_up_to_rounding`; measured 2026-11-29: 4 of the 80 Δ* differ, e.g. -1.8323694
    against -1.8323671; it failed the bit-for-bit check on the tree before that day's change
    of the asynchronous driver too)."""
    test = tallmcmc.minibatch_barker(20)
    options = dict(num_warmup=40, step_size_schedule=np.linspace(1.0, 0.5, 40), adapt_covariance=adapt_covariance)
    vmapped, asynchronous = run(test, "vmap", 2, **options), run(test, "asynchronous", 2, **options)
    assert warmups_equal(vmapped, asynchronous)
    if adapt_covariance:
        assert_same_decisions_up_to_rounding(vmapped, asynchronous)
    else:
        assert draws_equal(vmapped, asynchronous)


# slow (8 s, suite time): the wrong variant of the warm-up equality below, slow with it)
@pytest.mark.slow
def test_a_wrong_asynchronous_adaptation_fails_the_warmup_check(monkeypatch):
    """Wrong: each chain's adaptation counts its steps from 1 instead of 0."""
    test = tallmcmc.minibatch_barker(20)
    vmapped = run(test, "vmap", 2, num_warmup=40)
    honest = chain_asynchronous.adaptation_update
    monkeypatch.setattr(chain_asynchronous, "adaptation_update", lambda state, step, *a: honest(state, step + 1, *a))
    assert not warmups_equal(vmapped, run(test, "asynchronous", 2, num_warmup=40))


# slow (11 s, suite time))
@pytest.mark.slow
def test_temperature_schedule_gives_the_vmapped_draws_up_to_rounding():
    """Here a chain's temperature is its own (chains are at different steps), so the tempered
    ratios (new − old)/K are computed batched over chains rather than with one shared K, and XLA
    rounds them differently in the last place: the same decisions, statistics within float32 rounding."""
    test = tallmcmc.minibatch_barker(20)
    options = dict(temperature_schedule=np.linspace(3.0, 1.0, 40))
    vmapped, asynchronous = run(test, "vmap", 2, **options), run(test, "asynchronous", 2, **options)
    assert_same_decisions_up_to_rounding(vmapped, asynchronous)


def assert_same_decisions_up_to_rounding(vmapped, asynchronous) -> None:
    """The same decisions bit for bit; the positions within a few float32 units in the last place (a proposal
    rounded differently in the last place is accepted or rejected alike, and the chain carries the difference on);
    the reported statistics, computed at those positions from differences of nearly equal log-likelihoods, within
    10⁻³ relative. Measured on the 2^k permutation's rows (2026-11-30): positions 1 ulp apart in 39 of 80 entries,
    Δ*, its variance and the error bound up to 1.8·10⁻⁴, 3.5·10⁻⁴ and 4.0·10⁻⁴ relative with the adapted covariance;
    with the temperature schedule the positions equal and the statistics within 3.4·10⁻⁵. (Before, the rows of the
    4^h permutation happened to give equal positions, and 10⁻⁵ was allowed: these tolerances were widened after the
    rows changed, to the measured differences with a margin of 2.5.)"""
    for name in ("accepted", "data_used", "used_full_data", "non_finite"):
        assert np.array_equal(vmapped.info[name], asynchronous.info[name], equal_nan=True), name
    np.testing.assert_allclose(vmapped.positions, asynchronous.positions, rtol=4 * 2.0**-23, atol=0)
    for name in ("statistic", "variance", "error_bound"):
        np.testing.assert_allclose(vmapped.info[name], asynchronous.info[name], rtol=1e-3, atol=1e-6, err_msg=name)


def test_auto_driver_runs_chunk_by_chunk_tests_of_many_chains_asynchronously():
    barker = tallmcmc.minibatch_barker(20)
    assert tallmcmc.sampling.choose_driver(barker, 1) == "vmap"
    assert tallmcmc.sampling.choose_driver(barker, 8) == "asynchronous"
    assert tallmcmc.sampling.choose_driver(barker, 8, chain_shards=2) == "vmap"  # 4 chains per device
    assert tallmcmc.sampling.choose_driver(tallmcmc.exact_barker(), 64) == "vmap"  # full data: one iteration a step
    auto, asynchronous = run(barker, "auto", 8, num_samples=20), run(barker, "asynchronous", 8, num_samples=20)
    assert auto.driver == "asynchronous" and draws_equal(auto, asynchronous)
    assert run(barker, "auto", 2, num_samples=20).driver == "vmap"


def test_bad_driver_is_refused():
    with pytest.raises(ValueError, match="driver"):
        run(tallmcmc.minibatch_barker(20), "async", 1)


# --- deliberately wrong drivers ---------------------------------------------------------


def reusing_keys(monkeypatch):
    """Wrong: a chain's odd steps reuse the key of the step before (step t + 1 gets step t's key)."""
    honest = chain_asynchronous.step_key
    monkeypatch.setattr(chain_asynchronous, "step_key", lambda key, step: honest(key, step - step % 2))


def recording_proposals(monkeypatch):
    """Wrong: a rejected step records (and moves to) the proposal instead of the current position."""
    honest = chain_asynchronous.step_parts

    def parts(model, proposal, test):
        right = honest(model, proposal, test)

        def end(flight, state):
            new_state, info = right.end(flight, state)
            return MHState(flight.proposed.position, new_state.log_prior, new_state.cache), info

        return right._replace(end=end)

    monkeypatch.setattr(chain_asynchronous, "step_parts", parts)


@pytest.mark.parametrize("wrong", [reusing_keys, recording_proposals])
def test_a_wrong_driver_fails_the_equality_check(monkeypatch, wrong):
    test = tallmcmc.minibatch_barker(20)
    vmapped = run(test, "vmap", 3)
    wrong(monkeypatch)
    assert not draws_equal(vmapped, run(test, "asynchronous", 3))


def moments_check(num_chains=8, num_samples=1500):
    """Asynchronous minibatch Barker on the tempered 2-D Gaussian-mean target (N = 10⁴)."""
    result = tallmcmc.sample(
        TEMPERED_2D.model,
        tallmcmc.random_walk(0.1),
        tallmcmc.minibatch_barker(50),
        initial_positions=jnp.asarray(TEMPERED_2D.starts(None, num_chains)),
        num_samples=num_samples,
        num_chains=num_chains,
        seed=0,
        progress=False,
        driver="asynchronous",
    )
    return check_posterior_moments(result.positions, TEMPERED_2D.mean, TEMPERED_2D.variance)


def test_asynchronous_draws_reproduce_the_posterior():
    check = moments_check()
    assert check.passed, str(check)


def test_recording_proposals_fails_the_posterior_check(monkeypatch):
    recording_proposals(monkeypatch)
    check = moments_check()
    assert not check.passed, str(check)


MESH_SCRIPT = SCRIPTS / "asynchronous_mesh.py"


# slow (31 s, a subprocess on forced host devices): the asynchronous driver on a mesh stays in the default suite
# through tests/test_continuation.py::test_continued_runs_on_a_mesh_equal_one_longer_run
@pytest.mark.slow
@pytest.mark.parametrize("every", [False, True])
def test_asynchronous_driver_on_a_mesh_equals_the_run_without_one(every):
    """A 2 × 2 mesh (4 forced host devices; with ``every``, also data and chains meshes, exact Barker and
    AustereMH(nc)): the same draws, decisions and data counts bit for bit, with and without warm-up; the psum
    left out fails the same comparison."""
    results = run_on_host_devices(MESH_SCRIPT, *(["all"] if every else []))
    wrong = results.pop("wrong")
    assert all(results.values()), results
    assert not wrong
