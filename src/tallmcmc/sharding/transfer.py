"""Results to the host: :func:`to_host`, which gathers the arrays spread over processes."""

from __future__ import annotations

import jax
import numpy as np
from jax.experimental import multihost_utils


def to_host(tree):
    """NumPy copies of ``tree``'s arrays; arrays spread over processes are gathered from all of them.

    Only the leaves that span processes are all-gathered (a collective: every
    process must call this with the same tree); a leaf this process holds
    whole is copied as it is, never concatenated with the other processes'.
    """
    leaves = jax.tree_util.tree_leaves(tree)
    if all(not isinstance(leaf, jax.Array) or leaf.is_fully_addressable for leaf in leaves):
        return jax.device_get(tree)

    def home(leaf):
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            return np.asarray(multihost_utils.process_allgather(leaf, tiled=True))
        return jax.device_get(leaf)

    return jax.tree_util.tree_map(home, tree)
