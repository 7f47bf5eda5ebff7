"""The full-data tests' chain-by-chain evaluation under vmap gives the vmapped model's values and the same draws."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc.acceptance import exact
from tallmcmc.examples import logistic_regression


@pytest.fixture(scope="module")
def model():
    covariates, response = logistic_regression.simulate(2000, 3, seed=1)
    return logistic_regression.model(covariates, response)


@pytest.mark.parametrize("chains", [1, 4, exact.CHAIN_BY_CHAIN_MAX + 1])
def test_vmapped_evaluation_matches_the_model(model, chains):
    positions = 0.1 * jax.random.normal(jax.random.key(0), (chains, 3))
    got = jax.jit(jax.vmap(lambda p: exact.per_datum_log_likelihood(model, p)))(positions)
    want = np.stack([np.asarray(model.per_datum_log_likelihood(p)) for p in positions])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_unbatched_evaluation_is_the_model(model):
    position = jnp.asarray([0.1, -0.2, 0.3])
    np.testing.assert_array_equal(
        exact.per_datum_log_likelihood(model, position), model.per_datum_log_likelihood(position)
    )


def test_batched_data_falls_back_to_vmap(model):
    # data batched too (two data sets, two positions): the ordinary vmapped evaluation
    data = jax.tree_util.tree_map(lambda leaf: jnp.stack([leaf, leaf[::-1]]), model.data)
    positions = jnp.asarray([[0.1, 0.0, 0.0], [0.0, 0.2, 0.0]])
    got = jax.vmap(lambda p, d: exact.per_datum_log_likelihood(model.with_data(d), p))(positions, data)
    want = jax.vmap(lambda p, d: model.with_data(d).per_datum_log_likelihood(p))(positions, data)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("chains", [4, exact.CHAIN_BY_CHAIN_MAX + 1])
def test_chains_draw_as_alone(model, chains):
    # every chain of a vmapped exact-Barker run makes the draws it makes alone (same per-chain keys)
    run = tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.05),
        tallmcmc.exact_barker(),
        initial_position=jnp.zeros(3),
        num_samples=30,
        num_chains=chains,
        seed=2,
        progress=False,
    )
    kernel = tallmcmc.build_kernel(model, tallmcmc.random_walk(0.05), tallmcmc.exact_barker())
    step = jax.jit(kernel.step)
    for chain in (0, chains - 1):
        state = kernel.init(jnp.zeros(3))
        key = jax.random.fold_in(jax.random.key(2), chain)
        for t in range(30):
            state, info = step(jax.random.fold_in(key, t), state)
            assert bool(info.accepted) == bool(run.accepted[chain, t])
        np.testing.assert_allclose(state.position, run.positions[chain, -1], rtol=1e-6)
