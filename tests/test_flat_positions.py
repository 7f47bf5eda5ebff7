"""Positions flattened and placed on the host (``tallmcmc.flat_positions``): ``ravel_pytree``'s values, bit for bit,
without compiling a program."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compilations import compilations
from jax.flatten_util import ravel_pytree

from tallmcmc import flat_positions

POSITIONS = {
    "dict of device arrays": lambda rng: {
        "b": jnp.asarray(rng.normal(size=(2, 3)), jnp.float32),
        "a": jnp.asarray(rng.normal(), jnp.float32),
    },
    "one vector": lambda rng: jnp.asarray(rng.normal(size=5), jnp.float32),
    "host float64 and a Python float": lambda rng: {"x": rng.normal(size=3), "y": 0.1},
    "integers": lambda rng: {"n": np.arange(3, dtype=np.int32)},
    "nested": lambda rng: (jnp.asarray(rng.normal(size=2), jnp.float32), [jnp.asarray(rng.normal(size=(1, 2)))]),
}


def _compilations(function, *arguments):
    with compilations() as compiled:
        return function(*arguments), compiled


@pytest.mark.parametrize("name", list(POSITIONS))
def test_ravel_and_place_give_ravel_pytrees_values_without_compiling(name):
    position = POSITIONS[name](np.random.default_rng(0))
    jax.block_until_ready(position)
    (flat, unravel), compiled = _compilations(flat_positions.ravel, position)
    assert compiled == [] and isinstance(flat, np.ndarray)
    theirs, their_unravel = ravel_pytree(position)
    dtype = theirs.dtype if jnp.issubdtype(theirs.dtype, jnp.inexact) else jnp.result_type(float)
    assert flat.dtype == dtype
    np.testing.assert_array_equal(flat, np.asarray(theirs.astype(dtype)))
    # the unravel function traced code replays is ravel_pytree's
    moved = flat + np.float32(0.5)
    for ours, expected in zip(
        jax.tree_util.tree_leaves(jax.jit(unravel)(moved)), jax.tree_util.tree_leaves(their_unravel(moved))
    ):
        assert ours.dtype == expected.dtype
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(expected))
    # and placing a flat vector on the host is that unravel, each leaf in the position's own dtype (an integer
    # position's leaves stay integers), with nothing compiled
    placed, compiled = _compilations(flat_positions.placer(position, flat.dtype), moved)
    assert compiled == []
    leaves = jax.tree_util.tree_leaves(position)
    for ours, expected, leaf in zip(
        jax.tree_util.tree_leaves(placed), jax.tree_util.tree_leaves(their_unravel(moved)), leaves, strict=True
    ):
        kind = jnp.asarray(leaf).dtype
        assert isinstance(ours, jax.Array) and ours.dtype == kind and ours.shape == expected.shape
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(expected).astype(kind))


def test_ravel_pytree_itself_compiles_for_a_dict_of_positions():
    """What the module spares: JAX's ravel_pytree, called eagerly on a fresh dict's shapes, compiles programs (the
    twin that shows the check above can fail)."""
    position = {"u": jnp.zeros((3, 7), jnp.float32), "v": jnp.zeros((), jnp.float32)}
    jax.block_until_ready(position)
    _, compiled = _compilations(lambda p: ravel_pytree(p)[0].block_until_ready(), position)
    assert compiled != []
