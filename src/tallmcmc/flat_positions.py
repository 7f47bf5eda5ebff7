"""Positions as flat vectors on the host: ``jax.flatten_util.ravel_pytree``'s flat vector, its unravel function, and
its inverse for a flat NumPy vector, without the programs JAX's own functions compile when called outside a trace.

``ravel_pytree`` called eagerly reshapes each leaf and concatenates them, and its unravel splits and reshapes: each
operation an XLA program compiled in a user's first run (for a NumPyro model's dict of positions, four programs in
``find_mode`` alone; its split and reshape took 0.75 s of XLA in one first run on a loaded 2-core CPU, tens of
milliseconds on a quiet one). Here the values are
flattened and split with NumPy, and the unravel function that traced code replays is taken from tracing
``ravel_pytree`` once (``jax.eval_shape``: nothing compiled). Arrays that this process cannot read whole (a
multi-process mesh) are flattened by ``ravel_pytree`` itself, as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from tallmcmc._device import jax_dtype, to_device

__all__ = ["dimension", "flat_draws", "placer", "ravel"]


def ravel(position: Any) -> tuple[np.ndarray | jax.Array, Callable]:
    """``position`` flattened, in a floating dtype (JAX's default float where every leaf is an integer), and
    ``ravel_pytree``'s unravel function for it.

    The flat vector is a NumPy array computed on the host (the values ``ravel_pytree`` gives, bit for bit); where a
    leaf is a JAX array this process cannot read whole, it is ``ravel_pytree``'s own, on the device.
    """
    leaves = jax.tree_util.tree_leaves(position)
    if any(isinstance(leaf, jax.Array) and not leaf.is_fully_addressable for leaf in leaves):
        flat, unravel = ravel_pytree(position)
        return flat.astype(_floating(flat.dtype)), unravel
    traced: dict[str, Callable] = {}

    def flatten(tree):
        flat, traced["unravel"] = ravel_pytree(tree)
        return flat

    shape = jax.eval_shape(flatten, position)
    values = [np.ravel(np.asarray(leaf, jax_dtype(leaf))) for leaf in leaves]
    dtype = _floating(shape.dtype)
    return (np.concatenate(values).astype(dtype) if values else np.zeros((0,), dtype)), traced["unravel"]


def placer(position: Any, dtype: np.dtype) -> Callable[[np.ndarray], Any]:
    """``place(flat)``: what ``unravel(to_device(flat, dtype))`` gives for a flat NumPy vector — ``position``'s
    tree, each leaf its shape and dtype, on the device — split and cast on the host and transferred, so that no
    eager ``split`` program is compiled."""
    leaves, tree = jax.tree_util.tree_flatten(position)
    shapes = [np.shape(leaf) for leaf in leaves]
    dtypes = [jax_dtype(leaf) for leaf in leaves]
    ends = np.cumsum([math.prod(shape) for shape in shapes])[:-1]

    def place(flat) -> Any:
        parts = np.split(np.asarray(flat, dtype), ends)
        return jax.tree_util.tree_unflatten(
            tree, [to_device(part.reshape(shape).astype(kind)) for part, shape, kind in zip(parts, shapes, dtypes)]
        )

    return place


def dimension(position: Any) -> int:
    """The number of coordinates of ``position`` (its flat vector's length), from the leaves' shapes alone."""
    return sum(math.prod(np.shape(leaf)) for leaf in jax.tree_util.tree_leaves(position))


def flat_draws(positions: Any, leading: int = 2) -> np.ndarray:
    """Draws whose leaves carry ``leading`` axes (chains and draws, or steps and chains) as one float64 array of
    those axes and the flat position, each position flattened in ``ravel_pytree``'s order, on the host."""
    leaves = [np.asarray(leaf, np.float64) for leaf in jax.tree_util.tree_leaves(positions)]
    return np.concatenate([leaf.reshape(*leaf.shape[:leading], -1) for leaf in leaves], axis=-1)


def _floating(dtype) -> np.dtype:
    """``dtype`` if it is floating (or complex), else JAX's default float."""
    return np.dtype(dtype if jnp.issubdtype(dtype, jnp.inexact) else jnp.result_type(float))
