"""The minibatch Hamiltonian proposal: the involution its exactness rests on, its ratio, its data count, warm-up's
handle on ε, and bad input. Its posterior checks (exact, minibatch Barker and TunaMH tests, and the variant without
the kinetic term that fails) are in the registry of ``tests/test_posterior.py``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc.examples import logistic_regression
from tallmcmc.proposals.minibatch_hamiltonian import leapfrog, minibatch_gradient

BATCH = 40


@pytest.fixture(scope="module")
def logistic():
    covariates, response = logistic_regression.simulate(400, 3, seed=5)
    model = logistic_regression.model(covariates, response)
    return model, jnp.asarray([0.3, -0.2, 0.5], jnp.float32)


def gradients_of(model, blocks_of_rows):
    """``gradient_for(block)`` over fixed rows: block k uses rows ``blocks_of_rows[k]``."""
    rows = jnp.asarray(blocks_of_rows)
    scale = model.num_data / (rows.shape[1] * model.temperature)
    return lambda block: minibatch_gradient(model, lambda flat: flat, model.data_at(rows[block]), scale)


@pytest.mark.parametrize("same_minibatch", [False, True])
def test_flipped_momentum_and_reversed_minibatches_return_to_the_start(logistic, same_minibatch):
    model, theta = logistic
    rows = np.random.default_rng(0).permutation(model.num_data)[: 5 * BATCH].reshape(5, BATCH)
    gradient_for = gradients_of(model, rows)
    metric = jnp.asarray([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]], jnp.float32)

    def velocity(p):
        return metric @ p

    blocks = jnp.zeros(5, jnp.int32) if same_minibatch else jnp.arange(5)  # one minibatch: block 0 throughout
    momentum = jnp.asarray([1.0, -0.5, 0.8], jnp.float32)
    moved, final = leapfrog(theta, momentum, 0.05, gradient_for, blocks, velocity, same_minibatch=same_minibatch)
    assert float(jnp.linalg.norm(moved - theta)) > 0.05  # it went somewhere
    back, returned = leapfrog(moved, -final, 0.05, gradient_for, blocks[::-1], velocity, same_minibatch=same_minibatch)
    np.testing.assert_allclose(back, theta, rtol=0, atol=2e-6)
    np.testing.assert_allclose(-returned, momentum, rtol=0, atol=2e-5)
    if not same_minibatch:  # the minibatches must be met in reverse order: the forward order does not come back
        wrong, _ = leapfrog(moved, -final, 0.05, gradient_for, blocks, velocity)
        assert float(jnp.max(jnp.abs(wrong - theta))) > 1e-3


def test_the_leapfrog_preserves_volume(logistic):
    model, theta = logistic
    rows = np.arange(3 * BATCH).reshape(3, BATCH)
    gradient_for = gradients_of(model, rows)
    metric = jnp.asarray([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]], jnp.float32)

    def phase_map(state):
        moved, final = leapfrog(state[:3], state[3:], 0.2, gradient_for, jnp.arange(3), lambda p: metric @ p)
        return jnp.concatenate([moved, -final])

    jacobian = jax.jacfwd(phase_map)(jnp.concatenate([theta, jnp.asarray([1.0, -0.5, 0.8], jnp.float32)]))
    assert abs(abs(float(np.linalg.det(np.asarray(jacobian, np.float64)))) - 1.0) < 1e-4


def test_with_every_point_and_a_small_step_the_ratio_cancels_the_posterior_change(logistic):
    """b = N: the leapfrog follows the true posterior, so log π(θ′) − log π(θ) + K(p) − K(p′) ≈ 0 (energy kept)."""
    model, theta = logistic
    for minibatch in ("trajectory", "step"):
        proposal = tallmcmc.minibatch_hamiltonian(0.002, 20, model.num_data, minibatch=minibatch)
        for seed in range(3):
            proposed = proposal.propose(jax.random.key(seed), theta, model)
            change = model.log_density(proposed.position) - model.log_density(theta)
            assert abs(float(proposed.log_proposal_ratio)) > 0.05  # the kinetic term moves
            assert abs(float(change + proposed.log_proposal_ratio)) < 0.01 * abs(float(change)) + 1e-3


@pytest.mark.parametrize(
    "minibatch, evaluations", [("trajectory", lambda steps: steps + 1), ("step", lambda steps: 2 * steps)]
)
def test_data_used_is_b_per_gradient_evaluation(logistic, minibatch, evaluations):
    model, theta = logistic
    for steps in (1, 4):
        proposal = tallmcmc.minibatch_hamiltonian(0.05, steps, BATCH, minibatch=minibatch)
        proposed = proposal.propose(jax.random.key(1), theta, model)
        assert int(proposed.data_used) == evaluations(steps) * BATCH


def test_a_diagonal_preconditioner_is_the_diagonal_matrix(logistic):
    model, theta = logistic
    diagonal = np.array([0.5, 2.0, 1.5])
    by_vector = tallmcmc.minibatch_hamiltonian(0.1, 3, BATCH, preconditioner=diagonal)
    by_matrix = tallmcmc.minibatch_hamiltonian(0.1, 3, BATCH, preconditioner=np.diag(diagonal))
    plain = tallmcmc.minibatch_hamiltonian(0.1, 3, BATCH)
    a, b, c = (p.propose(jax.random.key(4), theta, model) for p in (by_vector, by_matrix, plain))
    np.testing.assert_allclose(a.position, b.position, rtol=1e-5)
    np.testing.assert_allclose(a.log_proposal_ratio, b.log_proposal_ratio, rtol=1e-4, atol=1e-5)
    assert not np.allclose(a.position, c.position)


def test_warm_up_scales_the_step_and_keeps_the_steps(logistic):
    model, theta = logistic
    proposal = tallmcmc.minibatch_hamiltonian(0.05, 3, BATCH)
    assert proposal.metropolis_target == 0.234
    doubled = proposal.tune(jnp.asarray(2.0)).propose(jax.random.key(2), theta, model)
    direct = tallmcmc.minibatch_hamiltonian(0.1, 3, BATCH).propose(jax.random.key(2), theta, model)
    np.testing.assert_allclose(doubled.position, direct.position, rtol=1e-6)
    assert int(doubled.data_used) == int(direct.data_used)


def test_pytree_positions_and_a_sampling_run(logistic):
    model, _ = logistic

    def log_likelihood(position, datum):
        return model.log_likelihood(jnp.concatenate([position["a"], position["b"][None]]), datum)

    def log_prior(position):
        return -0.5 * (jnp.sum(position["a"] ** 2) + position["b"] ** 2)

    split = tallmcmc.Model(log_likelihood, log_prior, model.data)
    start = {"a": jnp.zeros(2, jnp.float32), "b": jnp.zeros((), jnp.float32)}
    result = tallmcmc.sample(
        split,
        tallmcmc.minibatch_hamiltonian(0.02, 3, BATCH),
        tallmcmc.exact_metropolis(),
        start,
        num_samples=50,
        num_chains=2,
        num_warmup=50,
        progress=False,
    )
    assert 0.0 < float(result.acceptance_rate) <= 1.0
    assert np.all(np.isfinite(np.asarray(result.positions["a"])))


# --- bad input ---------------------------------------------------------------------------------------------------


def test_a_batch_larger_than_the_data_is_refused(logistic):
    model, theta = logistic
    proposal = tallmcmc.minibatch_hamiltonian(0.1, 2, model.num_data + 1)
    with pytest.raises(ValueError, match="batch_size = 401 exceeds the number of data points N = 400"):
        proposal.propose(jax.random.key(0), theta, model)
    with pytest.raises(ValueError, match="batch_size"):
        tallmcmc.sample(model, proposal, tallmcmc.exact_metropolis(), theta, num_samples=5, progress=False)


def test_a_vector_per_datum_log_likelihood_is_refused(logistic):
    model, theta = logistic
    vector = tallmcmc.Model(
        lambda position, datum: jnp.stack([model.log_likelihood(position, datum)] * 2), model.log_prior, model.data
    )
    proposal = tallmcmc.minibatch_hamiltonian(0.1, 2, BATCH)
    with pytest.raises(ValueError, match=r"log_likelihood must return one scalar per datum.*\(2,\) per datum"):
        proposal.propose(jax.random.key(0), theta, vector)


@pytest.mark.parametrize(
    "arguments, name",
    [
        ((0.0, 3, 10), "step_size"),
        ((float("nan"), 3, 10), "step_size"),
        ((0.1, 0, 10), "num_steps"),
        ((0.1, 2.5, 10), "num_steps"),
        ((0.1, 3, 0), "batch_size"),
        ((0.1, 3, 10.0), "batch_size"),
    ],
)
def test_bad_factory_arguments(arguments, name):
    with pytest.raises(ValueError, match=name):
        tallmcmc.minibatch_hamiltonian(*arguments)


@pytest.mark.parametrize(
    "preconditioner",
    [
        np.array([1.0, -1.0, 1.0]),
        np.array([[1.0, 2.0], [2.0, 1.0]]),
        np.ones((2, 2, 2)),
        np.array([[1.0, np.nan], [np.nan, 1.0]]),
    ],
)
def test_bad_preconditioners(preconditioner):
    with pytest.raises(ValueError, match="preconditioner"):
        tallmcmc.minibatch_hamiltonian(0.1, 3, 10, preconditioner=preconditioner)


def test_a_preconditioner_of_another_dimension_and_an_unknown_minibatch_mode(logistic):
    model, theta = logistic
    with pytest.raises(ValueError, match="preconditioner is for 2 coordinates but the position has 3"):
        tallmcmc.minibatch_hamiltonian(0.1, 3, 10, preconditioner=np.ones(2)).propose(jax.random.key(0), theta, model)
    with pytest.raises(ValueError, match="minibatch must be one of"):
        tallmcmc.minibatch_hamiltonian(0.1, 3, 10, minibatch="each")
