"""Continuing a run (``sample(resume=...)``, ``result.last_state``) draws what one longer run draws, bit for bit.

A run of 1,000 draws continued by 1,000 equals one run of 2,000 — positions, every step statistic and the
final state — with both drivers, after an adaptive warm-up (which is not run again), with a control variate, with
TunaMH, and on a mesh (a subprocess with four forced host devices). The deliberately wrong continuation (the key
counter restarted at 0) fails the same comparison. An interrupted run (Ctrl-C) keeps a state to resume from,
the asynchronous driver's chains brought level first. Bad input: a resume that does not match the call.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from analytic_models import CONJUGATE_1D
from forced_devices import SCRIPTS, run_on_host_devices

import tallmcmc
import tallmcmc.sampling.run as sampling_run
from tallmcmc.examples import gaussian_mean

TARGET = CONJUGATE_1D  # N = 2000, d = 1
START = jnp.zeros(1, jnp.float32)


def proposal():
    return tallmcmc.random_walk(float(2.0 * np.sqrt(TARGET.variance[0])))


def draws_equal(a, b) -> bool:
    pairs = zip(jax.tree_util.tree_leaves((a.positions, a.info)), jax.tree_util.tree_leaves((b.positions, b.info)))
    return all(np.array_equal(x, y, equal_nan=True) for x, y in pairs)


def states_equal(a, b) -> bool:
    pairs = zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))
    return all(np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True) for x, y in pairs)


@pytest.fixture(scope="module")
def control_variate():
    return tallmcmc.taylor_control_variate(TARGET.model, jnp.asarray(TARGET.mean, jnp.float32))


def configurations(control_variate):
    return {
        "warm-up": (tallmcmc.minibatch_barker(20), {"num_warmup": 100}),
        "control variate": (tallmcmc.minibatch_barker(20, control_variate=control_variate), {}),
        "tuna": (tallmcmc.tuna(1.0, gaussian_mean.tuna_bound(TARGET.model), chunk_size=16), {}),
        "exact": (tallmcmc.exact_metropolis(), {"num_warmup": 20}),
    }


@pytest.mark.parametrize(
    ("name", "driver"),
    [
        pytest.param("warm-up", "vmap", marks=pytest.mark.slow),  # 14 s; test_warming_up_again_only_when_asked stays
        pytest.param("warm-up", "asynchronous", marks=pytest.mark.slow),  # asynchronous: the control variate's
        ("control variate", "asynchronous"),
        ("tuna", "vmap"),
        pytest.param("exact", "asynchronous", marks=pytest.mark.slow),
    ],
)  # each configuration once, each driver with the adaptive warm-up (the suite's time is counted)
def test_a_continued_run_equals_one_longer_run(name, driver, control_variate):
    test, options = configurations(control_variate)[name]
    size = 1000 if (name, driver) == ("warm-up", "vmap") else 150  # the 1,000 + 1,000 once; shorter elsewhere
    run = dict(num_chains=3, seed=5, progress=False, driver=driver, num_chunks=7, **options)
    whole = tallmcmc.sample(TARGET.model, proposal(), test, START, num_samples=2 * size, **run)
    first = tallmcmc.sample(TARGET.model, proposal(), test, START, num_samples=size, **run)
    continued = tallmcmc.sample(
        TARGET.model, proposal(), test, resume=first, num_samples=size, progress=False, driver=driver
    )
    assert continued.num_draws == 2 * size
    assert draws_equal(whole, continued)
    assert states_equal(whole.final_state, continued.final_state)
    assert states_equal(whole.last_state.states, continued.last_state.states)
    assert continued.last_state.steps_done == 2 * size
    if options.get("num_warmup"):  # warm-up ran once: the continuation kept its factors and its draws
        assert np.array_equal(continued.step_size_factor, whole.step_size_factor)
        assert continued.warmup_info["accepted"].shape[1] == options["num_warmup"]
    assert continued.setup_data_used == first.setup_data_used  # nothing paid twice

    if name != "warm-up":
        return
    only_new = tallmcmc.sample(
        TARGET.model, proposal(), test, resume=first.last_state, num_samples=size, progress=False, driver=driver
    )
    assert only_new.first_draw == size and only_new.num_draws == size
    assert only_new.setup_data_used == {}
    assert np.array_equal(only_new.positions, whole.positions[:, size:])


def test_restarting_the_key_counter_is_caught():
    """The deliberately wrong continuation: the same states, but the keys of steps 0, 1, … again."""
    test = tallmcmc.minibatch_barker(20)
    run = dict(num_chains=2, seed=5, progress=False)
    whole = tallmcmc.sample(TARGET.model, proposal(), test, START, num_samples=200, **run)
    first = tallmcmc.sample(TARGET.model, proposal(), test, START, num_samples=100, **run)
    wrong = tallmcmc.sample(
        TARGET.model, proposal(), test, resume=first.last_state._replace(steps_done=0), num_samples=100, progress=False
    )
    assert not np.array_equal(wrong.positions, whole.positions[:, 100:])


def test_continued_runs_on_a_mesh_equal_one_longer_run():
    out = run_on_host_devices(SCRIPTS / "continued_runs_on_mesh.py")
    wrong = {key: value for key, value in out.items() if key.startswith("wrong")}
    assert wrong and not any(wrong.values()), out
    assert all(value for key, value in out.items() if key not in wrong), out


def test_warming_up_again_only_when_asked():
    test = tallmcmc.minibatch_barker(20)
    first = tallmcmc.sample(
        TARGET.model, proposal(), test, START, num_samples=20, num_warmup=20, num_chains=2, progress=False
    )
    again = tallmcmc.sample(
        TARGET.model, proposal(), test, resume=first.last_state, num_samples=20, num_warmup=30, progress=False
    )
    assert again.warmup_info["accepted"].shape == (2, 30)
    assert not np.array_equal(again.step_size_factor, first.step_size_factor)  # adapted afresh
    assert again.first_draw == 20 and again.setup_data_used == {}
    with pytest.raises(ValueError, match="num_warmup"):
        tallmcmc.sample(TARGET.model, proposal(), test, resume=first, num_samples=10, num_warmup=10, progress=False)


class InterruptingBar:
    """A progress bar that raises KeyboardInterrupt at its ``at``-th update, as Ctrl-C would between chunks."""

    def __init__(self, at: int):
        self.at, self.updates = at, 0

    def update(self, n):
        self.updates += 1
        if self.updates == self.at:
            raise KeyboardInterrupt

    def set_description(self, text):
        pass

    def close(self):
        pass


@pytest.mark.parametrize("driver", [pytest.param("vmap", marks=pytest.mark.slow), "asynchronous"])
def test_an_interrupted_run_resumes_to_the_same_draws(driver, monkeypatch):
    test = tallmcmc.minibatch_barker(20)
    run = dict(num_chains=8, seed=2, progress=True, driver=driver, num_chunks=10)
    whole = tallmcmc.sample(TARGET.model, proposal(), test, START, num_samples=200, **{**run, "progress": False})
    monkeypatch.setattr(sampling_run, "progress_bar", lambda *args: InterruptingBar(at=4))
    with pytest.warns(UserWarning, match="interrupted"):
        stopped = tallmcmc.sample(TARGET.model, proposal(), test, START, num_samples=200, **run)
    monkeypatch.undo()
    assert 0 < stopped.num_draws < 200
    assert stopped.last_state is not None and stopped.last_state.steps_done == stopped.num_draws
    resumed = tallmcmc.sample(
        TARGET.model,
        proposal(),
        test,
        resume=stopped,
        num_samples=200 - stopped.num_draws,
        progress=False,
        driver=driver,
    )
    assert draws_equal(whole, resumed)


@pytest.fixture(scope="module")
def finished():
    return tallmcmc.sample(
        TARGET.model, proposal(), tallmcmc.minibatch_barker(20), START, num_samples=20, num_chains=2, progress=False
    )


def test_a_resume_that_does_not_match_the_call_is_refused(finished):
    barker = tallmcmc.minibatch_barker(20)
    cases = [
        (dict(num_chains=3), "num_chains"),
        (dict(test=tallmcmc.exact_metropolis()), "test"),
        (dict(proposal=tallmcmc.langevin(0.01)), "proposal"),
        (dict(model=gaussian_mean.model(np.zeros((500, 1), np.float32))), "model"),
    ]
    for change, name in cases:
        arguments = {**dict(model=TARGET.model, proposal=proposal(), test=barker), **change}
        with pytest.raises(ValueError, match=name):
            tallmcmc.sample(
                arguments["model"],
                arguments["proposal"],
                arguments["test"],
                resume=finished,
                num_samples=5,
                progress=False,
                num_chains=change.get("num_chains"),
            )
    two_dimensional = gaussian_mean.model(np.zeros((TARGET.num_data, 2), np.float32))
    with pytest.raises(ValueError, match="shape"):  # the position's shape differs
        tallmcmc.sample(two_dimensional, proposal(), barker, resume=finished, num_samples=5, progress=False)
    with pytest.raises(TypeError, match="resume"):
        tallmcmc.sample(TARGET.model, proposal(), barker, resume=np.zeros(1), num_samples=5, progress=False)
    with pytest.raises(ValueError, match="extended_by"):
        finished.extended_by(finished)


def test_a_run_without_warmup_compiles_one_program_for_every_chunk_and_its_continuation():
    """Without warm-up or a schedule, chunks of different lengths run one compiled loop (of a traced number of steps),
    and ``resume=result`` in the same process runs the program the first run compiled: the continuation compiles
    nothing, and 2 × 3 chunks + one more run draw what one run of the same steps draws."""
    test = tallmcmc.exact_barker()
    chunked = tallmcmc.sample(
        TARGET.model, proposal(), test, START, num_samples=70, num_chunks=3, num_chains=2, progress=False
    )
    assert chunked.compile_seconds > 0 and chunked.program is not None
    more = tallmcmc.sample(
        TARGET.model, chunked.program.source[1], test, resume=chunked, num_samples=30, progress=False
    )
    assert more.compile_seconds == chunked.compile_seconds  # nothing more compiled
    whole = tallmcmc.sample(TARGET.model, proposal(), test, START, num_samples=100, num_chains=2, progress=False)
    assert draws_equal(more, whole)
    assert repr(more).count("program") == 0  # kept out of the result's repr
