"""The run plan's chain keys: one compiled program, the same keys as deriving them eagerly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tallmcmc.sampling.plan import RunPlan


def eager_chain_keys(seed, stream, num_chains):
    """The keys as ``RunPlan.chain_keys`` derived them before it was one program."""
    key = jax.random.key(seed)
    if stream is not None:
        key = jax.random.fold_in(key, stream)
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, jnp.arange(num_chains))


@pytest.mark.parametrize("seed", [0, 7, -5, 2**31 - 1, -(2**31), 2**31, 2**63 - 1])
@pytest.mark.parametrize("stream", [None, 0x7FFFFFFF])
def test_chain_keys_match_the_eager_derivation(seed, stream):
    keys = RunPlan.chain_keys(_Plan(seed, 3), stream)  # reads only the seed and the number of chains
    np.testing.assert_array_equal(jax.random.key_data(keys), jax.random.key_data(eager_chain_keys(seed, stream, 3)))
    assert keys.dtype == eager_chain_keys(0, None, 1).dtype


class _Plan:
    """What :meth:`RunPlan.chain_keys` reads of a plan."""

    def __init__(self, seed, num_chains):
        self.seed, self.num_chains = seed, num_chains
