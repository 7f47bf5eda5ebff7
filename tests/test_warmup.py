"""Warm-up: dual averaging moves the step size towards the target rate; its draws are kept apart and counted."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from analytic_models import TEMPERED_2D
from compilations import compilations
from jax.flatten_util import ravel_pytree

import tallmcmc
from tallmcmc.interop.arviz import ess as arviz_ess
from tallmcmc.testing import check_posterior_moments


def run(proposal, test, **kwargs):
    return tallmcmc.sample(
        TEMPERED_2D.model,
        proposal,
        test,
        initial_position=jnp.asarray(TEMPERED_2D.mean, jnp.float32),
        num_samples=1500,
        num_chains=4,
        progress=False,
        seed=2,
        **kwargs,
    )


@pytest.mark.parametrize("test, target", [(tallmcmc.exact_metropolis(), 0.234), (tallmcmc.exact_barker(), 0.158)])
def test_a_badly_scaled_random_walk_is_tuned_to_the_target_rate(test, target):
    untuned = run(tallmcmc.random_walk(0.005), test)  # 1/20 of the posterior sd: accepts far too often
    tuned = run(tallmcmc.random_walk(0.005), test, num_warmup=1000)
    assert untuned.acceptance_rate > 0.4
    assert abs(tuned.acceptance_rate - target) < 0.06, tuned.acceptance_rate
    assert np.all(tuned.step_size_factor > 5)
    assert tuned.warmup_positions.shape == (4, 1000, 2) and tuned.positions.shape == (4, 1500, 2)
    assert tuned.total_data_used == sum(tuned.setup_data_used.values()) + (1000 + 1500) * 4 * TEMPERED_2D.num_data
    idata = tuned.to_inference_data()
    # an InferenceData under ArviZ 0.x, a DataTree under 1.x: both have the group by name
    assert "warmup_posterior" in idata and idata["warmup_posterior"]["theta"].shape == (4, 1000, 2)


def test_warmup_without_a_tunable_step_is_a_burn_in():
    proposal = tallmcmc.laplace_independence(mean=TEMPERED_2D.mean, covariance=np.diag(TEMPERED_2D.variance))
    result = run(proposal, tallmcmc.exact_metropolis(), num_warmup=100)
    assert result.step_size_factor is None and result.warmup_info["accepted"].shape == (4, 100)


def test_bad_warmup_settings():
    with pytest.raises(ValueError, match="num_warmup"):
        run(tallmcmc.random_walk(0.1), tallmcmc.exact_metropolis(), num_warmup=-1)
    with pytest.raises(ValueError, match="target_acceptance"):
        run(tallmcmc.random_walk(0.1), tallmcmc.exact_metropolis(), num_warmup=10, target_acceptance=1.5)


def _correlated_model(correlation=0.99, num_data=1000):
    covariance = np.array([[1.0, correlation], [correlation, 1.0]])
    precision = np.linalg.inv(covariance)
    data = np.random.default_rng(3).multivariate_normal([0.3, -0.2], covariance, num_data).astype(np.float32)

    def log_likelihood(theta, x):
        r = x - theta
        return -0.5 * r @ (jnp.asarray(precision, r.dtype) @ r)

    model = tallmcmc.Model(
        log_likelihood, lambda t: jnp.zeros((), t.dtype), jnp.asarray(data), 1.0, position_shape=(2,)
    )
    return model, data.astype(np.float64).mean(0), covariance / num_data


def test_covariance_adaptation_learns_the_posterior_shape_and_pays():
    model, mean, covariance = _correlated_model()
    common = dict(
        initial_position=jnp.asarray(mean, jnp.float32),
        num_samples=2000,
        num_chains=4,
        progress=False,
        num_warmup=1000,
        seed=5,
    )
    sd = float(np.sqrt(covariance[0, 0]))
    plain = tallmcmc.sample(model, tallmcmc.random_walk(sd), tallmcmc.exact_metropolis(), **common)
    shaped = tallmcmc.sample(
        model, tallmcmc.random_walk(sd), tallmcmc.exact_metropolis(), adapt_covariance=True, **common
    )
    np.testing.assert_allclose(shaped.adapted_covariance, covariance, rtol=0.35, atol=0.1 * covariance[0, 0])
    check_posterior_moments(np.asarray(shaped.positions), mean, np.diag(covariance))
    ess = [float(arviz_ess(np.asarray(r.positions)).min()) for r in (plain, shaped)]
    assert ess[1] > 3 * ess[0], ess  # correlation 0.99: an isotropic walk crawls along the ridge
    assert shaped.warmup_positions.shape == (4, 1000, 2)


def test_covariance_adaptation_refuses_what_it_cannot_shape():
    model, mean, _ = _correlated_model()
    start = jnp.asarray(mean, jnp.float32)
    with pytest.raises(ValueError, match="adapt_covariance=True needs a proposal"):
        tallmcmc.sample(
            model,
            tallmcmc.langevin(0.01),
            tallmcmc.exact_metropolis(),
            initial_position=start,
            num_samples=10,
            num_warmup=100,
            adapt_covariance=True,
            progress=False,
        )
    with pytest.raises(ValueError, match="num_warmup >= 40"):
        tallmcmc.sample(
            model,
            tallmcmc.random_walk(0.01),
            tallmcmc.exact_metropolis(),
            initial_position=start,
            num_samples=10,
            num_warmup=10,
            adapt_covariance=True,
            progress=False,
        )


@pytest.mark.parametrize(
    ("driver", "adapt_covariance"),
    [
        ("vmap", True),
        ("asynchronous", False),
        pytest.param("vmap", False, marks=pytest.mark.slow),
        pytest.param("asynchronous", True, marks=pytest.mark.slow),
    ],
)  # each driver and each warm-up kind once in the default suite (its time is counted)
def test_warmup_as_its_own_step_then_sample_equals_the_shorthand(driver, adapt_covariance):
    # sample(num_warmup=W) is tallmcmc.warmup(...) then sample(..., warmed): the same draws, bit for bit
    proposal, test = tallmcmc.random_walk(0.05), tallmcmc.minibatch_barker(50)
    options = dict(num_chains=4, seed=3, progress=False, driver=driver)
    start = jnp.asarray(TEMPERED_2D.mean, jnp.float32)
    shorthand = tallmcmc.sample(
        TEMPERED_2D.model,
        proposal,
        test,
        start,
        num_samples=200,
        num_warmup=60,
        adapt_covariance=adapt_covariance,
        **options,
    )
    warmed = tallmcmc.warmup(
        TEMPERED_2D.model, proposal, test, start, num_warmup=60, adapt_covariance=adapt_covariance, **options
    )
    assert isinstance(warmed, tallmcmc.WarmupResult) and warmed.num_warmup == 60
    assert warmed.data_used == int(warmed.info["data_used"].sum())
    continued = tallmcmc.sample(TEMPERED_2D.model, proposal, test, warmed, num_samples=200, **options)
    np.testing.assert_array_equal(continued.positions, shorthand.positions)
    for name in shorthand.info:
        np.testing.assert_array_equal(continued.info[name], shorthand.info[name])
        np.testing.assert_array_equal(continued.warmup_info[name], shorthand.warmup_info[name])
    np.testing.assert_array_equal(continued.warmup_positions, shorthand.warmup_positions)
    np.testing.assert_array_equal(continued.step_size_factor, shorthand.step_size_factor)
    assert continued.setup_data_used == shorthand.setup_data_used
    assert continued.total_data_used == shorthand.total_data_used
    if adapt_covariance:
        np.testing.assert_array_equal(continued.adapted_covariance, shorthand.adapted_covariance)
        assert continued.proposal_name == shorthand.proposal_name == "laplace_random_walk"


def test_a_warmup_is_continued_only_with_what_it_was_made_with():
    proposal, test = tallmcmc.random_walk(0.05), tallmcmc.exact_barker()
    start = jnp.asarray(TEMPERED_2D.mean, jnp.float32)
    warmed = tallmcmc.warmup(TEMPERED_2D.model, proposal, test, start, num_warmup=20, num_chains=2, progress=False)
    shown = repr(warmed)  # a few lines a user can read, not every state and array
    assert shown.startswith("WarmupResult: 2 chains × 20 warm-up steps, vmap driver, seed 0; acceptance ")
    assert "exact_barker test, random_walk proposal; adapted step size factors " in shown and len(shown) < 400
    with pytest.raises(ValueError, match="test differs"):
        tallmcmc.sample(TEMPERED_2D.model, proposal, tallmcmc.exact_metropolis(), warmed, num_chains=2, num_samples=5)
    with pytest.raises(ValueError, match="num_chains differs"):
        tallmcmc.sample(TEMPERED_2D.model, proposal, test, warmed, num_chains=3, num_samples=5)
    with pytest.raises(ValueError, match="num_warmup must be 0"):
        tallmcmc.sample(TEMPERED_2D.model, proposal, test, warmed, num_chains=2, num_samples=5, num_warmup=10)
    with pytest.raises(ValueError, match="num_warmup"):
        tallmcmc.warmup(TEMPERED_2D.model, proposal, test, start, num_warmup=0)


def test_warmup_and_the_kept_draws_share_one_compiled_program_and_chunking_changes_no_draw():
    """An adaptive warm-up and the kept draws after it run one compiled loop (``ChainProgram.run_tuned_chunk``),
    whatever the chunk lengths (chunks shorter than the compiled one run fewer steps of it): the kept draws compile
    nothing, and 130 + 70 steps in chunks of 24 draw what one chunk each draws. The wrong variant (another seed)
    differs, so the comparison can fail."""
    proposal, test = tallmcmc.random_walk(0.05), tallmcmc.exact_barker()

    def sampled(num_chunks, seed=2):
        warmed = tallmcmc.warmup(
            TEMPERED_2D.model,
            proposal,
            test,
            jnp.asarray(TEMPERED_2D.mean, jnp.float32),
            num_warmup=130,
            num_chains=2,
            seed=seed,
            progress=False,
        )
        result = tallmcmc.sample(
            TEMPERED_2D.model, proposal, test, warmed, num_samples=70, num_chunks=num_chunks, seed=seed, progress=False
        )
        return warmed, result

    warmed, chunked = sampled(num_chunks=3)  # kept chunks of 24, 24, 22 on the warm-up's compiled 100-step loop
    assert warmed.compile_seconds > 0 and chunked.compile_seconds == warmed.compile_seconds  # nothing more compiled
    _, whole = sampled(num_chunks=1)
    np.testing.assert_array_equal(chunked.warmup_positions, whole.warmup_positions)
    np.testing.assert_array_equal(chunked.positions, whole.positions)
    np.testing.assert_array_equal(chunked.step_size_factor, whole.step_size_factor)
    _, other = sampled(num_chunks=3, seed=3)
    assert not np.array_equal(other.positions, chunked.positions)


@pytest.mark.parametrize("adapt_covariance", [False, True])
def test_keep_going_stops_a_warmup_and_its_steps_are_those_of_the_full_one(adapt_covariance):
    """``keep_going`` asked every KEEP_GOING_STEPS steps: a warm-up stopped at step 30 holds the first 30 steps of the
    whole one, bit for bit (the chunk runs fewer steps per call, compiled once), and one that always keeps going is
    the whole one; with a covariance it can stop in the first window (30 of 60: its first half)."""
    from tallmcmc.sampling.warmup_phase import KEEP_GOING_STEPS

    proposal, test = tallmcmc.random_walk(0.05), tallmcmc.minibatch_barker(50)
    options = dict(num_chains=4, seed=3, progress=False, num_warmup=60, adapt_covariance=adapt_covariance)
    start = jnp.asarray(TEMPERED_2D.mean, jnp.float32)
    whole = tallmcmc.warmup(TEMPERED_2D.model, proposal, test, start, **options)
    asked = []

    def until_30(info):
        asked.append(info["data_used"].shape)
        return info["data_used"].shape[1] < 30

    stopped = tallmcmc.warmup(TEMPERED_2D.model, proposal, test, start, keep_going=until_30, **options)
    assert stopped.num_warmup == 30 and asked == [(4, KEEP_GOING_STEPS * k) for k in (1, 2, 3)]
    np.testing.assert_array_equal(stopped.positions, whole.positions[:, :30])
    for name in whole.info:
        np.testing.assert_array_equal(stopped.info[name], whole.info[name][:, :30])
    assert stopped.data_used == int(whole.info["data_used"][:, :30].sum())
    going = tallmcmc.warmup(TEMPERED_2D.model, proposal, test, start, keep_going=lambda info: True, **options)
    np.testing.assert_array_equal(going.positions, whole.positions)
    np.testing.assert_array_equal(going.step_size_factor, whole.step_size_factor)


def test_keep_going_is_refused_where_it_cannot_act():
    start = jnp.asarray(TEMPERED_2D.mean, jnp.float32)
    with pytest.raises(TypeError, match="keep_going must be a function"):
        tallmcmc.warmup(
            TEMPERED_2D.model,
            tallmcmc.random_walk(0.05),
            tallmcmc.exact_metropolis(),
            start,
            num_warmup=20,
            keep_going=True,
            progress=False,
        )
    proposal = tallmcmc.laplace_independence(mean=TEMPERED_2D.mean, covariance=np.diag(TEMPERED_2D.variance))
    with pytest.raises(ValueError, match="keep_going needs a warm-up that adapts a step size.*adapts nothing"):
        tallmcmc.warmup(
            TEMPERED_2D.model,
            proposal,
            tallmcmc.exact_metropolis(),
            start,
            num_warmup=20,
            keep_going=lambda info: True,
            progress=False,
        )


def test_the_adapted_covariance_is_pooled_on_the_host_without_compiling():
    """The warm-up draws' covariance (``_warmup_covariance``, which every ``adapt_covariance=True`` run and
    ``sample_tall``'s random-walk fallback compute) is the pooled, shrunk covariance of the flattened draws, each
    position flattened in ``ravel_pytree``'s order, and is computed on the host: no XLA program is compiled for it (an
    eager ``vmap`` of ``ravel_pytree`` compiled two, up to 1.5 s in the default suite)."""
    from tallmcmc.sampling.warmup_phase import _warmup_covariance

    rng = np.random.default_rng(0)
    positions = {  # (steps, chains, ...) leaves, on the device as a warm-up leaves them
        "b": jnp.asarray(rng.normal(size=(30, 4, 2, 3)), jnp.float32),
        "a": jnp.asarray(rng.normal(size=(30, 4)), jnp.float32),
    }
    jax.block_until_ready(positions)
    with compilations() as compiled:
        covariance = _warmup_covariance(positions, 5)
    assert compiled == []
    # the same from ravel_pytree, draw by draw (the tree's leaves in key order: "a" before "b")
    host = jax.tree_util.tree_map(np.asarray, positions)
    draws = [
        np.asarray(ravel_pytree(jax.tree_util.tree_map(lambda leaf, t=t, c=c: leaf[t, c], host))[0], np.float64)
        for t in range(5, 30)
        for c in range(4)
    ]
    count = len(draws)
    expected = count / (count + 5.0) * np.cov(np.stack(draws), rowvar=False) + 1e-3 * 5.0 / (count + 5.0) * np.eye(7)
    np.testing.assert_array_equal(covariance, expected)
