"""The lowered chain program kept between processes (``tallmcmc.program_cache``): a run through a kept
program (written, loaded, or exported again over a damaged entry, or kept by a run on other data of the same shapes)
draws what a directly compiled run draws, and the key changes with everything that shapes the program and with
nothing else."""

from __future__ import annotations

import collections
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc import program_cache
from tallmcmc.examples import gaussian_mean
from tallmcmc.sampling import asynchronous, plan
from tallmcmc.sampling.program import compiled_length
from tallmcmc.setup_fast import fast_setup

DATA = np.random.default_rng(3).normal(1.0, 1.0, size=(3000, 2)).astype(np.float32)
OTHER_DATA = np.random.default_rng(4).normal(-0.5, 2.0, size=(3000, 2)).astype(np.float32)


def control_variate(data, centre):
    """The control variate of ``sample``'s runs, its passes not kept (their own test is below), so that the folder
    counts chain programs only."""
    with mock.patch.object(program_cache, "folder", lambda: None):
        return tallmcmc.taylor_control_variate(gaussian_mean.model(data), jnp.asarray(centre))


def sample(scale=0.03, data=DATA, centre=(1.0, 1.0), driver="vmap", num_warmup=40, num_samples=60, num_chunks=20):
    cv = control_variate(data, centre)
    return tallmcmc.sample(
        gaussian_mean.model(data),
        tallmcmc.random_walk(scale),
        tallmcmc.minibatch_barker(50, control_variate=cv),
        jnp.zeros(2),
        num_samples=num_samples,
        num_chains=2,
        num_warmup=num_warmup,
        progress=False,
        driver=driver,
        num_chunks=num_chunks,
    )


def entries(folder):
    return sorted(folder.glob("*.jaxexport"))


def chain_keys_compiled_before():
    """Compile the two-chain runs' chain keys (a kept program, compiled once per process) before a test counts the
    entries of its own folder, so that the folder counts chain programs only, whichever test ran first."""
    keys = plan._kept_chain_keys(2)(np.int32(0), np.bool_(False), np.int32(0))
    np.testing.assert_array_equal(jax.random.key_data(keys), jax.random.key_data(plan._chain_keys(0, False, 0, 2)))


def test_a_kept_program_draws_what_a_direct_compilation_draws_and_a_damaged_one_is_replaced(tmp_path, monkeypatch):
    chain_keys_compiled_before()
    folder = tmp_path / "programs"
    monkeypatch.setattr(program_cache, "folder", lambda: folder)
    first = sample()  # exported, written, compiled from the export
    assert len(entries(folder)) == 1
    again = sample()  # loaded: neither traced nor lowered
    assert len(entries(folder)) == 1
    (entry,) = entries(folder)
    entry.write_bytes(b"half a file")  # a process killed while writing, or another flatbuffers: exported again
    damaged = sample()
    assert jax.export.deserialize(bytearray(entry.read_bytes())) is not None  # written whole again
    monkeypatch.setattr(program_cache, "folder", lambda: None)
    direct = sample()  # compiled directly, as with the cache off
    for other in (again, damaged, direct):
        assert_same_draws(other, first)
    # the same shapes with another proposal scale (a constant of the step): another program, whose draws are its
    # own, not the kept one's
    moved = sample(scale=0.05)
    other = sample(data=OTHER_DATA)  # directly compiled too
    assert not np.array_equal(np.asarray(moved.positions), np.asarray(first.positions))
    monkeypatch.setattr(program_cache, "folder", lambda: folder)
    np.testing.assert_array_equal(np.asarray(sample(scale=0.05).positions), np.asarray(moved.positions))
    assert len(entries(folder)) == 2
    # other data of the same shapes: another control variate (the step's constants, an argument of the loop), the
    # same kept program, and the draws of the direct compilation on those data
    np.testing.assert_array_equal(np.asarray(sample(data=OTHER_DATA).positions), np.asarray(other.positions))
    assert len(entries(folder)) == 2
    assert not np.allclose(np.asarray(other.positions).mean(), np.asarray(first.positions).mean(), atol=0.5)


def test_a_run_of_another_number_of_draws_takes_the_same_kept_program(tmp_path, monkeypatch):
    """Chunks of 50 and of 60 steps run on one program compiled for 64 (``program.compiled_length``): the second run
    finds it kept, and draws what the first drew for its steps (each step's key depends on the step only)."""
    chain_keys_compiled_before()
    folder = tmp_path / "programs"
    monkeypatch.setattr(program_cache, "folder", lambda: folder)
    longer = sample(num_warmup=0, num_samples=60, num_chunks=1)
    assert len(entries(folder)) == 1
    shorter = sample(num_warmup=0, num_samples=50, num_chunks=1)
    assert len(entries(folder)) == 1  # not exported again: the same program
    np.testing.assert_array_equal(np.asarray(shorter.positions), np.asarray(longer.positions)[:, :50])


def test_compiled_lengths_are_powers_of_two_unless_the_rows_added_would_be_large():
    assert [compiled_length(n) for n in (1, 16, 17, 50, 64, 65, 1000, 1025)] == [16, 16, 32, 64, 64, 128, 1024, 2048]
    assert compiled_length(1025, bytes_per_step=2**20) == 1025  # 1,023 rows of 1 MiB added: more than the bound
    assert compiled_length(1000, bytes_per_step=2**10) == 1024


def test_the_asynchronous_drivers_programs_are_kept_too(tmp_path, monkeypatch):
    """Its two programs (``initialise`` and ``run``; a run with a warm-up has two others, with step-size factors,
    which its warm-up and kept draws share: the next test),
    keyed by their whole traces: written, loaded rather than exported again, and serving other data of the same
    shapes, every run drawing what a direct compilation draws. (What a damaged entry or a changed constant does is
    the same code as above.)"""
    folder = tmp_path / "programs"
    monkeypatch.setattr(program_cache, "folder", lambda: folder)

    def run(**options):
        return sample(driver="asynchronous", num_warmup=0, **options)

    first = run()
    kept = entries(folder)
    written = [entry.stat().st_mtime_ns for entry in kept]
    assert len(kept) == 2
    again = run()  # loaded, not exported again
    on_other_data = run(data=OTHER_DATA)  # the same two programs
    assert entries(folder) == kept and [entry.stat().st_mtime_ns for entry in kept] == written
    monkeypatch.setattr(program_cache, "folder", lambda: None)
    assert_same_draws(again, first)
    assert_same_draws(first, run())  # compiled directly
    assert_same_draws(on_other_data, run(data=OTHER_DATA))


def test_an_asynchronous_warmup_and_its_kept_draws_run_one_pair_of_programs(tmp_path, monkeypatch):
    """The asynchronous driver's warm-up adapts and its kept draws use the adapted factors in one program (a traced
    ``adapting``, as the vmapped driver's), with draws' buffers of the rows both need (``RunPlan.asynchronous_rows``):
    compiled once in the process and kept once on disk. A run of another number of draws within those rows takes the
    same two programs and draws what the first drew for its steps."""
    chain_keys_compiled_before()
    folder = tmp_path / "programs"
    monkeypatch.setattr(program_cache, "folder", lambda: folder)
    compiled = []
    honest = asynchronous._compiled

    def counted(function, layout, what, *arguments):
        compiled.append(what)
        return honest(function, layout, what, *arguments)

    monkeypatch.setattr(asynchronous, "_compiled", counted)
    longer = sample(driver="asynchronous", num_warmup=40, num_samples=100)  # both on 128 rows
    assert compiled == ["initialise", "run"]  # the kept draws ran what the warm-up compiled
    assert len(entries(folder)) == 2
    shorter = sample(driver="asynchronous", num_warmup=40, num_samples=90)  # 128 rows as well
    assert len(entries(folder)) == 2  # not exported again: the same programs
    assert_same_draws(shorter, longer, draws=90)
    np.testing.assert_array_equal(shorter.warmup_positions, longer.warmup_positions)


def assert_same_draws(one, other, draws=None) -> None:
    np.testing.assert_array_equal(np.asarray(one.positions)[:, :draws], np.asarray(other.positions)[:, :draws])
    np.testing.assert_array_equal(
        np.asarray(one.info["accepted"])[:, :draws], np.asarray(other.info["accepted"])[:, :draws]
    )
    if one.step_size_factor is not None or other.step_size_factor is not None:
        np.testing.assert_array_equal(np.asarray(one.step_size_factor), np.asarray(other.step_size_factor))


# asynchronous with --runslow only (11 s of the default suite's ten minutes): its programs serving other data of the
# same shapes stay checked by test_the_asynchronous_drivers_programs_are_kept_too, as a default run keeps them
@pytest.mark.parametrize("driver", ["vmap", pytest.param("asynchronous", marks=pytest.mark.slow)])
def test_a_run_on_other_data_of_the_same_shapes_compiles_nothing_new(monkeypatch, driver):
    """The control variate's passes take the centre, and either driver's chain program the step's constants, as
    arguments: the next data set's run finds every program in JAX's persistent cache (embedded constants miss)."""
    if not jax.config.jax_compilation_cache_dir:
        pytest.skip("JAX's persistent cache is off (TALLMCMC_COMPILATION_CACHE=0)")
    monkeypatch.setattr(program_cache, "folder", lambda: None)  # JAX's cache alone (the kept program has its test)
    sample(driver=driver)
    misses = collections.Counter()

    def listener(event, **_):
        misses[event] += event.endswith("cache_misses")

    jax.monitoring.register_event_listener(listener)
    try:
        sample(data=OTHER_DATA, centre=(-0.5, 0.5), driver=driver)
    finally:
        jax.monitoring.unregister_event_listener(listener)
    assert sum(misses.values()) == 0, misses


def key(function, *arguments, variant=(100, False, False)):
    step = jax.make_jaxpr(function)(*arguments)
    constants = [jax.device_put(constant) for constant in step.consts]  # an argument of the loop, as in a run
    return program_cache.program_key(step, (*arguments, constants), variant)


def test_the_key_changes_with_what_shapes_the_program_and_nothing_else():
    centre = jnp.array([1.0, 2.0])

    def step(x, c=centre):
        return jnp.sum((x - c) ** 2)

    x = jnp.zeros(2)
    reference = key(step, x)
    assert key(step, x) == reference  # traced again: the same key
    assert key(lambda x: jnp.sum((x - jnp.array([1.0, 2.0])) ** 2), x) == reference  # the same program
    assert key(step, jnp.ones(2)) == reference  # argument values do not shape the program
    assert key(lambda x: step(x, jnp.array([1.0, 2.5])), x) == reference  # nor a constant's (an argument too)
    assert key(lambda x: step(x, jnp.array([1.5])), x) != reference  # its shape does
    assert key(lambda x: jnp.sum((x - 1.5) ** 2), x) != key(lambda x: jnp.sum((x - 2.5) ** 2), x)  # and a literal
    plain = lambda x: jnp.sum(x**2)  # noqa: E731
    assert key(plain, jnp.zeros(3)) != key(plain, x)  # so do the arguments' shapes
    assert key(plain, jnp.zeros(2, jnp.int32)) != key(plain, x)  # and dtypes
    assert key(lambda x: jnp.sum((x - centre) ** 3), x) != reference  # and the operations
    assert key(step, x, variant=(200, False, False)) != reference  # and the loop's own settings
    with jax.default_matmul_precision("highest"):
        assert key(step, x) != reference  # and JAX's flags
    with jax.log_compiles(True):
        assert key(step, x) == reference  # but not those that only log (bench_compilation.py --where sets this one)


def test_no_folder_without_a_local_cache():
    before = jax.config.jax_compilation_cache_dir
    try:
        for directory in (None, "gs://bucket/jax"):  # off, or not a local folder
            jax.config.update("jax_compilation_cache_dir", directory)
            assert program_cache.folder() is None
        jax.config.update("jax_compilation_cache_dir", "/some/folder")
        assert program_cache.folder() == program_cache.Path("/some/folder") / program_cache.FOLDER_NAME
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def scaled_model(scale, prior_variance=100.0):
    """xᵢ ~ N(θ, diag(scale²)), θ ~ N(0, prior_variance·I), with ``scale`` and ``prior_variance`` closed over as
    arrays: constants of the likelihood's and of the prior's traces."""
    scale = jnp.asarray(scale, jnp.float32)
    prior_variance = jnp.full((2,), prior_variance, jnp.float32)

    def log_likelihood(theta, x):
        return -0.5 * jnp.sum(((x - theta) / scale) ** 2)

    def log_prior(theta):
        return -0.5 * jnp.sum(theta**2 / prior_variance)

    return tallmcmc.Model(log_likelihood, log_prior, jnp.asarray(SETUP_DATA), position_shape=(2,))


SETUP_DATA = np.random.default_rng(5).normal(1.0, 1.0, size=(200_000, 2)).astype(np.float32)


def setup_values(scale, prior_variance=100.0):
    setup = fast_setup(scaled_model(scale, prior_variance))
    assert setup.full_passes == 2  # the fast path, not find_mode's fallback
    sums = (setup.control_variate.gradient_sum, setup.control_variate.hessian_sum)
    return [np.asarray(setup.mode.position), np.asarray(setup.covariance), *map(np.asarray, sums)]


def test_the_setup_pass_is_kept_and_takes_the_likelihoods_constants_as_an_argument(tmp_path, monkeypatch):
    """``fast_setup``'s data pass and its prior's terms are kept like a chain program, keyed by the likelihood's
    trace of one chunk and by the prior's trace: a second setup loads them and computes what a direct compilation
    computes, and a likelihood or prior whose closed-over array differs (same shapes, same key) computes with its
    own value, not the kept program's."""
    folder = tmp_path / "programs"
    monkeypatch.setattr(program_cache, "folder", lambda: folder)
    first = setup_values([1.0, 1.5])
    assert len(entries(folder)) == 2  # the data pass and the prior's value, gradient and Hessian
    again = setup_values([1.0, 1.5])
    other = setup_values([2.0, 3.0])  # the same key: the scale is the loop's argument
    tight = setup_values([1.0, 1.5], prior_variance=1.0)  # the same key: the prior's variance is its argument
    assert len(entries(folder)) == 2
    monkeypatch.setattr(program_cache, "folder", lambda: None)
    direct, direct_other = setup_values([1.0, 1.5]), setup_values([2.0, 3.0])
    direct_tight = setup_values([1.0, 1.5], prior_variance=1.0)
    assert not np.array_equal(direct_tight[1], direct[1])  # the prior's variance shows in the covariance
    for kept, compiled in ((first, direct), (again, direct), (other, direct_other), (tight, direct_tight)):
        for a, b in zip(kept, compiled, strict=True):
            np.testing.assert_array_equal(a, b)
    # the posterior covariance grows with the scale² (×4 here, up to the prior): a kept program that had baked in
    # the first scale would give the first covariance
    np.testing.assert_allclose(np.diag(other[1]) / np.diag(first[1]), 4.0, rtol=0.01)


def mode_values(model):
    mode = tallmcmc.find_mode(model, jnp.zeros(2))
    return [np.asarray(mode.position), np.asarray(mode.hessian)]


def test_find_modes_pass_is_kept_and_takes_the_constants_and_the_temperature_into_account(tmp_path, monkeypatch):
    """``find_mode``'s data pass is kept the same way: kept and direct compilations agree, another closed-over
    scale (the same key) computes with its own value, and another temperature (a literal of the pass, not of the
    likelihood's trace) gets a program of its own."""
    folder = tmp_path / "programs"
    monkeypatch.setattr(program_cache, "folder", lambda: folder)
    first = mode_values(scaled_model([1.0, 1.5]))
    assert len(entries(folder)) == 1
    again = mode_values(scaled_model([1.0, 1.5]))
    other = mode_values(scaled_model([2.0, 3.0]))
    assert len(entries(folder)) == 1
    hot = mode_values(scaled_model([1.0, 1.5]).with_temperature(2.0))
    assert len(entries(folder)) == 2
    monkeypatch.setattr(program_cache, "folder", lambda: None)
    direct = mode_values(scaled_model([1.0, 1.5]))
    direct_other = mode_values(scaled_model([2.0, 3.0]))
    direct_hot = mode_values(scaled_model([1.0, 1.5]).with_temperature(2.0))
    for kept, compiled in ((first, direct), (again, direct), (other, direct_other), (hot, direct_hot)):
        for a, b in zip(kept, compiled, strict=True):
            np.testing.assert_array_equal(a, b)
    # the likelihood's curvature N/scale² per coordinate (the prior's 1/100 is negligible), halved at temperature 2
    np.testing.assert_allclose(np.diag(first[1]) / np.diag(other[1]), 4.0, rtol=0.01)
    np.testing.assert_allclose(np.diag(first[1]) / np.diag(hot[1]), 2.0, rtol=0.01)


def test_a_kept_pass_compiles_once_per_argument_signature(tmp_path, monkeypatch):
    """A :class:`program_cache.KeptPass` called with arguments of another shape compiles (and keeps) another program
    rather than calling the first one's executable with them."""
    folder = tmp_path / "programs"
    monkeypatch.setattr(program_cache, "folder", lambda: folder)
    trace = program_cache.Traced.of(lambda x: x * 2.0, jax.ShapeDtypeStruct((3,), jnp.float32))
    kept = program_cache.KeptPass(lambda x: (jnp.sum(x * 2.0),), trace, ("a pass",), jax.tree_util.tree_structure((0,)))
    assert float(kept(np.ones(3, np.float32))[0]) == 6.0
    assert float(kept(np.ones(5, np.float32))[0]) == 10.0
    assert float(kept(np.full(3, 2.0, np.float32))[0]) == 12.0
    assert len(entries(folder)) == 2


def control_variate_values(scale, **options):
    cv = tallmcmc.taylor_control_variate(scaled_model(scale), jnp.asarray([1.0, 1.0]), **options)
    return [np.asarray(cv.gradient_sum), np.asarray(cv.hessian_sum)]


def test_taylor_control_variates_passes_are_kept_per_chunk_size(tmp_path, monkeypatch):
    """``taylor_control_variate``'s passes are kept per chunk size (a last chunk of another size is another trace
    and another program), agree with direct compilations, and another closed-over scale (the same keys) computes
    with its own value."""
    folder = tmp_path / "programs"
    monkeypatch.setattr(program_cache, "folder", lambda: folder)
    first = control_variate_values([1.0, 1.5])
    assert len(entries(folder)) == 2  # the gradient's and the Hessian's pass over one chunk of all rows
    chunked = control_variate_values([1.0, 1.5], batch_size=70_000)  # chunks of 70,000 rows and a last of 60,000
    assert len(entries(folder)) == 6
    other = control_variate_values([2.0, 3.0])
    assert len(entries(folder)) == 6
    monkeypatch.setattr(program_cache, "folder", lambda: None)
    direct = control_variate_values([1.0, 1.5])
    direct_chunked = control_variate_values([1.0, 1.5], batch_size=70_000)
    direct_other = control_variate_values([2.0, 3.0])
    for kept, compiled in ((first, direct), (chunked, direct_chunked), (other, direct_other)):
        for a, b in zip(kept, compiled, strict=True):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.diag(first[1]) / np.diag(other[1]), 4.0, rtol=1e-4)
    np.testing.assert_allclose(chunked[1], first[1], rtol=1e-4)
