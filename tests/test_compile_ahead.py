"""Compiling the chain program ahead while ``sample_tall``'s setup runs (``tallmcmc.sampling.ahead``).

The thread compiles from placeholders of the setup's values, and the warm-up takes its executable only under the
same program key, so a run draws bit for bit what it draws without the thread — with the executable taken, with
one offered for another step (never taken), and with a thread that failed.
"""

from __future__ import annotations

import collections

import jax
import numpy as np
import pytest
from forced_devices import SCRIPTS
from test_compilation_cache import run as run_script

import tallmcmc
import tallmcmc.automatic
from tallmcmc import program_cache
from tallmcmc.examples import logistic_regression
from tallmcmc.sampling import ahead
from tallmcmc.setup_fast import fast_setup, placeholder_control_variate

NUM_DATA = 60_000  # setup="fast" settles without falling back to find_mode (at 20,000 and 40,000 it does not)


@pytest.fixture(scope="module")
def model():
    return logistic_regression.model(*logistic_regression.simulate(NUM_DATA, 3, seed=4))


def run(model, monkeypatch=None, programs=None, setup="fast"):
    """A short ``sample_tall``; with ``programs``, its chain programs kept in that folder (a new one: a first run)."""
    if programs is not None:
        monkeypatch.setattr(program_cache, "folder", lambda: programs)
    return tallmcmc.sample_tall(model, num_samples=40, num_chains=2, num_warmup=40, progress=False, setup=setup)


@pytest.fixture(autouse=True)
def no_offers_left_by_earlier_tests(monkeypatch):
    """An empty offer list for each test: a run of an earlier test in the same worker whose step changed after its
    thread started (a fallback, another test chosen) leaves its executable on offer (at most ``ahead.MAX_OFFERS``),
    which ``ahead.offered()`` then reports; found when ``tests/test_sample_tall.py`` ran before this module."""
    monkeypatch.setattr(ahead, "_offers", collections.OrderedDict())


@pytest.fixture
def threads(monkeypatch):
    """The compile-ahead threads ``sample_tall`` starts."""
    started = []
    original = ahead.compile_ahead

    def recorded(function, *arguments):
        started.append(original(function, *arguments))
        return started[-1]

    monkeypatch.setattr(tallmcmc.automatic, "compile_ahead", recorded)
    return started


def same_draws(a, b):
    np.testing.assert_array_equal(np.asarray(a.positions), np.asarray(b.positions))
    np.testing.assert_array_equal(np.asarray(a.info["accepted"]), np.asarray(b.info["accepted"]))


@pytest.fixture
def taken(monkeypatch):
    """What the warm-up found on offer, call by call (``None``: nothing under its key)."""
    found = []
    original = ahead.take

    def spy(key):
        found.append(original(key))
        return found[-1]

    monkeypatch.setattr(ahead, "take", spy)
    return found


# fast_setup's control variate (the default), or find_mode's and Taylor's (with --runslow only: the same program
# offered and taken, 7 s of the default suite's ten minutes)
@pytest.mark.parametrize("setup", ["fast", pytest.param("exact", marks=pytest.mark.slow)])
def test_the_warmup_takes_the_program_compiled_ahead_and_draws_what_it_draws_without(
    model, taken, threads, monkeypatch, tmp_path, setup
):
    monkeypatch.setenv(ahead.ENVIRONMENT_VARIABLE, "0")
    without = run(model, monkeypatch, tmp_path / "without", setup)
    assert taken and not any(taken) and threads == [None]  # no thread, nothing on offer under its key
    taken.clear()
    monkeypatch.setenv(ahead.ENVIRONMENT_VARIABLE, "1")
    first = run(model, monkeypatch, tmp_path / "with", setup)  # a first run: nothing kept yet
    assert threads[1].join().compiled
    assert taken[0] is not None  # the warm-up's: the placeholder's step traced to the real step's program
    assert not ahead.offered()
    same_draws(first, without)
    taken.clear()
    second = run(model, setup=setup)  # a second run of the script: the first thread's mark stops another thread
    assert threads[2] is None and not any(taken)
    same_draws(second, without)
    for mark in (tmp_path / "with" / ahead.MARKS).iterdir():  # without its mark: a thread that finds it kept
        mark.unlink()
    third = run(model, setup=setup)
    assert not threads[3].join().compiled and threads[3].error is None
    assert not any(taken)
    same_draws(third, without)


def test_a_program_offered_for_another_step_is_not_taken(model, taken, threads, monkeypatch, tmp_path):
    monkeypatch.setenv(ahead.ENVIRONMENT_VARIABLE, "0")
    without = run(model, monkeypatch, tmp_path / "without")
    taken.clear()
    original = tallmcmc.tall_warmup.compile_warmup_ahead

    # another minibatch size: another step, another key (another number of warm-up steps would not do: the loop is
    # compiled for a power of two of steps, program.compiled_length, and serves both)
    def other_step(model, start, batch_size, test, chains, num_warmup, seed):
        return original(model, start, batch_size + 1, test, chains, num_warmup, seed)

    monkeypatch.setattr(tallmcmc.tall_warmup, "compile_warmup_ahead", other_step)
    monkeypatch.setenv(ahead.ENVIRONMENT_VARIABLE, "1")
    mismatched = run(model, monkeypatch, tmp_path / "with")
    assert threads[-1].join().compiled
    assert taken and not any(taken)  # the warm-up's key found nothing
    assert ahead.offered()  # the other program is still on offer (MAX_OFFERS bounds what is held)
    same_draws(mismatched, without)
    for key in list(ahead._offers):  # leave no offer to the other tests
        ahead.take(key)


def test_a_failing_thread_leaves_the_run_as_it_was(model, threads, monkeypatch, tmp_path):
    monkeypatch.setenv(ahead.ENVIRONMENT_VARIABLE, "0")
    without = run(model, monkeypatch, tmp_path / "without")

    def failing(*_):
        raise RuntimeError("planted")

    monkeypatch.setattr(tallmcmc.tall_warmup, "compile_warmup_ahead", failing)
    monkeypatch.setenv(ahead.ENVIRONMENT_VARIABLE, "1")
    failed = run(model, monkeypatch, tmp_path / "with")
    assert isinstance(threads[-1].join().error, RuntimeError) and not threads[-1].compiled
    same_draws(failed, without)
    assert not (tmp_path / "with" / ahead.MARKS).exists()  # unmarked: the next run compiles ahead again


def test_a_second_run_loads_what_the_first_runs_thread_compiled(tmp_path):
    # the thread's program must be the one a later process looks up in JAX's persistent cache: compiled for arguments
    # placed as the run's are (compiled for abstract ones, a second run compiled it again: 2.1 of its 3.0 s)
    first, second = (
        run_script([str(SCRIPTS / "compiled_ahead_run.py")], TALLMCMC_COMPILATION_CACHE=str(tmp_path / "cache"))
        for _ in range(2)
    )
    assert first["misses"] > 0 and second["misses"] == 0, (first, second)
    assert second["first_draw"] == first["first_draw"]
    # and no eager operation compiled a program of its own on the way (each a program, 0.01-0.6 s of a first run):
    # jnp.sum, a multiply and a divide of the start check's log-prior and jnp.exp of the step-size factors did, until
    # 2026-12-02 (so did indexing a resumed state and jnp.asarray of its factors, JAX's "stage", which only a run of
    # several chunks of kept draws reaches). Allowed: the float32-rounding diagnosis's conversions, which this short
    # run (40 draws: its diagnosis has problems) reaches and a run with none does not
    diagnosis = {"reshape", "split", "subtract", "convert_element_type"}
    eager = [name for name in first["programs"] if hasattr(jax.numpy, name) or hasattr(jax.lax, name)]
    eager += [name for name in first["programs"] if name.startswith("_reduce") or name == "stage"]  # jnp.asarray
    assert set(eager) <= diagnosis, first["programs"]


def test_a_signature_follows_the_code_and_shapes_not_the_values(model):
    def scaled(scale):
        def log_prior(theta):
            return -0.5 * (theta / scale) ** 2

        return log_prior

    def other(theta):
        return -0.5 * theta**2

    assert ahead.code_digest(scaled(1.0)) == ahead.code_digest(scaled(2.0))  # a closed-over value: the same
    assert ahead.code_digest(scaled(1.0)) != ahead.code_digest(other)
    assert ahead.signature((3,), "auto") == ahead.signature((3,), "auto") != ahead.signature((4,), "auto")


def test_the_switch_and_the_offers_bound(monkeypatch):
    monkeypatch.setenv(ahead.ENVIRONMENT_VARIABLE, "0")
    assert ahead.compile_ahead(lambda: True) is None
    monkeypatch.setenv(ahead.ENVIRONMENT_VARIABLE, "1")
    started = ahead.compile_ahead(lambda: True)
    assert started.join().compiled and started.error is None
    for index in range(ahead.MAX_OFFERS + 1):
        ahead.offer(f"key {index}", index)
    assert ahead.take("key 0") is None  # the oldest was dropped
    assert [ahead.take(f"key {index}") for index in range(1, ahead.MAX_OFFERS + 1)] == list(
        range(1, ahead.MAX_OFFERS + 1)
    )
    assert not ahead.offered()


def test_the_placeholder_is_fast_setups_control_variate_but_for_its_values(model):
    start = np.zeros(3, np.float32)
    built = fast_setup(model, start)
    assert built.fallback is None  # fast_setup's own control variate, not find_mode's and taylor_control_variate's
    real = built.control_variate
    placeholder = placeholder_control_variate(model, start)
    arrays = ("center", "gradient_sum", "hessian_sum", "hessian_diagonal", "hessian_basis", "hessian_eigenvalues")
    for name in arrays:
        a, b = getattr(real, name), getattr(placeholder, name)
        assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b), name
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
            assert (x.shape, x.dtype, type(x)) == (y.shape, y.dtype, type(y)), name
    for name in ("order", "num_data", "temperature", "curvature", "hessian_scale"):
        assert getattr(real, name) == getattr(placeholder, name), name
    assert placeholder.log_likelihood is real.log_likelihood
