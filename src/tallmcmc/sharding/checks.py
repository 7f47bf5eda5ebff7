"""The start check on data split over devices: :func:`tallmcmc.check_model` with every datum evaluated where it lives.

Used by :func:`tallmcmc.sample` on a mesh (:func:`check_model_on_mesh`) and by
the one-off passes before it (:meth:`tallmcmc.sharding.RowSharding.check_model`):
the per-datum log-likelihoods are evaluated on every device over its own rows
and only scalars come back (the number of non-finite values, the first one's
index and value, the sum), so data spread over several processes are never
gathered.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from tallmcmc.model import check_model
from tallmcmc.sharding.collectives import DataShards, all_gathered
from tallmcmc.sharding.transfer import to_host


def check_model_on_mesh(model, layout, data) -> Callable:
    """``check(position, name) -> (log_prior, log_likelihood_sum)``: :func:`tallmcmc.check_model` on sharded data.

    ``layout`` is the run's :class:`tallmcmc.sharding.MeshLayout` and ``data``
    the data laid out by it. Evaluates every datum where it lives and brings
    back only scalars (the number of non-finite values, the first one's index
    and value, the sum), so data spread over several processes are never
    gathered. The scalar check of one datum's log-likelihood is made on its
    shape alone (``jax.eval_shape``).
    """
    run = jax.jit(
        layout.shard_map(finite_summary(model, layout.shards, layout.num_data), ("data", "replicated"), "replicated")
    )
    return check_with(model, run, data)


def finite_summary(model, shards: DataShards | None, num_data: int) -> Callable:
    """``summary(data, position) -> (count, first, value, total)`` of the per-datum log-likelihoods held here.

    The number of non-finite values among the real rows, the first one's
    global index and value, and the sum, combined over ``shards.axis``: to be
    run inside a ``shard_map`` (or on all rows when ``shards`` is ``None``).
    """

    def summary(data, position):
        values = model.per_datum_log_likelihood(position, data)
        rows = jnp.arange(values.shape[0])
        if shards is not None:
            rows = rows + shards.first_row()
        held = rows < num_data
        bad = held & ~jnp.isfinite(values)
        count = jnp.sum(bad)
        first = jnp.min(jnp.where(bad, rows, num_data))
        total = jnp.sum(jnp.where(held, values, 0))
        if shards is not None:
            count = lax.psum(count, shards.axis)
            first = lax.pmin(first, shards.axis)
        value = jnp.sum(jnp.where(held & (rows == first), values, 0))
        if shards is not None:
            value = lax.psum(value, shards.axis)
            total = jnp.sum(all_gathered(total, shards.axis))
        return count, first, value, total

    return summary


def check_with(model, run: Callable, data) -> Callable:
    """``check(position, name)``: :func:`tallmcmc.check_model` with the data's part done by ``run(data, position)``."""
    row = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype), data)

    def check(position, name):
        def values(position, data):
            count, first, value, total = (np.asarray(to_host(part)) for part in run(data, position))
            return count, first, value, total

        return check_model(model, position, name, evaluate_data=values, datum_shape=row, data=data)

    return check
