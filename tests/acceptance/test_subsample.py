"""Index draws without replacement: a bijection, and uniform over keys."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices


@pytest.mark.parametrize("num_data", [1, 2, 3, 10, 17, 1000, 4097])
def test_is_a_permutation(num_data):
    keys = permutation_keys(jax.random.key(num_data))
    indices = np.asarray(permuted_indices(keys, jnp.arange(num_data), num_data))
    assert sorted(indices.tolist()) == list(range(num_data))


@pytest.mark.parametrize("num_data", [10, 1000])
def test_first_draws_are_uniform(num_data):
    keys = jax.random.split(jax.random.key(1), 40_000)
    draws = np.asarray(
        jax.jit(jax.vmap(lambda k: permuted_indices(permutation_keys(k), jnp.arange(2), num_data)))(keys)
    )
    for column in range(2):
        assert stats.chisquare(np.bincount(draws[:, column], minlength=num_data)).pvalue > 1e-4
    assert np.all(draws[:, 0] != draws[:, 1])
