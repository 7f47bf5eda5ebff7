"""The data's layout inside a ``shard_map``: :class:`DataShards` and the collectives that reach all rows.

Inside the sampler's :func:`jax.shard_map` over a mesh with a ``"data"`` axis,
the model carries a :class:`DataShards` (``Model.shards``, set by
:meth:`tallmcmc.Model.with_shards`): ``model.data`` is then one contiguous
block of the rows, and the model's methods that touch the data by index or sum
over it call the methods of :class:`DataShards`, which combine the blocks with
collectives. Outside a mesh the model carries :class:`tallmcmc.model.AllRows`
instead, whose methods of the same names are the plain gathers and sums.

* a minibatch (:meth:`DataShards.log_likelihood_ratios_at`,
  :meth:`DataShards.data_at`): each device evaluates (or copies) the indices in
  its block, puts 0 in the other lanes, and the lanes are summed over the data
  axis (:func:`combine_exact`, a ``psum``). Every index lies in exactly one
  block, so each lane's sum is ``x + 0 + … + 0 = x`` exactly: the values, hence
  the draws, are those of the unsharded run bit for bit (up to the sign of a
  zero);
* full-data reductions (:meth:`DataShards.sum_over_data`,
  :meth:`DataShards.mean_and_std_over_data`, :meth:`DataShards.max_over_data`,
  :meth:`DataShards.log_likelihood_sum`): each device reduces its own real rows
  and the partial results are gathered (:func:`all_gathered`) and combined in
  one fixed order, so every device holds the same bits (a loop whose condition
  depends on them runs equally long everywhere); they differ from the unsharded
  reduction only by summation order.

The module-level functions of the same names (``sum_over_data(shards, values)``,
``log_likelihood_ratios_at(model, ...)``, …) call these methods.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax


def combine_exact(values: jax.Array, axis: str) -> jax.Array:
    """Sum over ``axis`` of lanes that are non-zero on exactly one device (``x + 0 + … + 0 = x``).

    The one place where a minibatch's per-device lanes are combined; the tests
    replace it (``tallmcmc.sharding.collectives.combine_exact``) by the identity
    (each device then sees only its own rows' values), a deliberately wrong
    variant that must fail.
    """
    return lax.psum(values, axis)


def all_gathered(value: jax.Array, axis: str) -> jax.Array:
    """The per-device partial results stacked in device order, the same on every device."""
    return lax.all_gather(value, axis)


@dataclasses.dataclass(frozen=True)
class DataShards:
    """What a model inside a ``shard_map`` knows of its data's layout, and how it reaches all rows.

    ``data`` holds rows ``[k·rows_per_shard, (k + 1)·rows_per_shard)`` of the
    (padded) data, ``k = lax.axis_index(axis)``; rows at or beyond
    ``num_data`` are padding. The methods below are those of
    :class:`tallmcmc.model.AllRows` (the data all here), done with collectives
    over ``axis``: :class:`tallmcmc.Model` calls them through ``self.shards``.
    """

    axis: str
    num_data: int
    rows_per_shard: int
    num_shards: int

    @property
    def padded(self) -> bool:
        return self.rows_per_shard * self.num_shards != self.num_data

    def first_row(self) -> jax.Array:
        return lax.axis_index(self.axis) * self.rows_per_shard

    def held(self) -> jax.Array:
        """Whether each local row is a real datum (not padding), shape ``(rows_per_shard,)``."""
        rows = self.first_row() + jnp.arange(self.rows_per_shard)
        return rows < self.num_data

    def _owned(self, indices: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Local row of each global index (clipped into the block) and whether this device holds it."""
        local = indices - self.first_row()
        mine = (local >= 0) & (local < self.rows_per_shard)
        return jnp.clip(local, 0, self.rows_per_shard - 1), mine

    def _real(self, values: jax.Array, fill) -> jax.Array:
        """``values`` (leading axis: the local rows) with the padding rows replaced by ``fill``."""
        if not self.padded:
            return values
        held = self.held().reshape((-1,) + (1,) * (values.ndim - 1))
        return jnp.where(held, values, fill)

    # ---------------------------------------------------------------------- what Model calls

    def num_rows(self, model) -> int:
        """``N``, the rows of all shards together (padding excluded)."""
        return self.num_data

    def log_likelihood_ratios_at(self, model, position, proposed, indices: jax.Array) -> jax.Array:
        """Tempered per-datum log ratios at global ``indices``, each evaluated by the device holding it."""
        local, mine = self._owned(indices)
        batch = jax.tree_util.tree_map(lambda leaf: leaf[local], model.data)
        values = model.log_likelihood_ratios(position, proposed, batch)
        return combine_exact(jnp.where(mine, values, jnp.zeros_like(values)), self.axis)

    def data_at(self, model, indices: jax.Array):
        """The rows at global ``indices``, copied from the devices that hold them."""
        local, mine = self._owned(indices)

        def fetch(leaf):
            rows = leaf[local]
            keep = mine.reshape(mine.shape + (1,) * (rows.ndim - mine.ndim))
            if rows.dtype == jnp.bool_:
                return combine_exact(jnp.where(keep, rows, False).astype(jnp.int32), self.axis).astype(jnp.bool_)
            return combine_exact(jnp.where(keep, rows, jnp.zeros_like(rows)), self.axis)

        return jax.tree_util.tree_map(fetch, model.data)

    def sum_over_data(self, values: jax.Array) -> jax.Array:
        """Σ over all real rows of per-datum ``values`` held here (leading axis the local rows)."""
        local = jnp.sum(self._real(values, 0))
        return jnp.sum(all_gathered(local, self.axis))

    def mean_and_std_over_data(self, values: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Mean and 1/N standard deviation over all real rows (two passes: mean, then squared deviations)."""
        mean = self.sum_over_data(values) / self.num_data
        squares = self.sum_over_data(jnp.abs(values - mean) ** 2) / self.num_data
        return mean, jnp.sqrt(squares)

    def max_over_data(self, values: jax.Array) -> jax.Array:
        """Max over all real rows of per-datum ``values`` held here."""
        local = jnp.max(self._real(values, -jnp.inf))
        return jnp.max(all_gathered(local, self.axis))

    def log_likelihood_sum(self, model, position) -> jax.Array:
        """Untempered Σᵢ log p(xᵢ|position) over all shards, with a gradient that sums the shards' gradients."""

        def local(position):
            return jnp.sum(self._real(model.per_datum_log_likelihood(position), 0))

        @jax.custom_vjp
        def total(position):
            return jnp.sum(all_gathered(local(position), self.axis))

        def forward(position):
            value, pullback = jax.vjp(local, position)
            return jnp.sum(all_gathered(value, self.axis)), pullback

        def backward(pullback, cotangent):
            (gradient,) = pullback(cotangent)
            return (jax.tree_util.tree_map(lambda g: jnp.sum(all_gathered(g, self.axis), axis=0), gradient),)

        total.defvjp(forward, backward)
        return total(position)


# ------------------------------------------------------------------ the same as functions (the names before the split)


def log_likelihood_ratios_at(model, position, proposed, indices: jax.Array) -> jax.Array:
    """``model.shards.log_likelihood_ratios_at(model, position, proposed, indices)``."""
    return model.shards.log_likelihood_ratios_at(model, position, proposed, indices)


def data_at(model, indices: jax.Array):
    """``model.shards.data_at(model, indices)``."""
    return model.shards.data_at(model, indices)


def sum_over_data(shards, values: jax.Array) -> jax.Array:
    """``shards.sum_over_data(values)``."""
    return shards.sum_over_data(values)


def mean_and_std_over_data(shards, values: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``shards.mean_and_std_over_data(values)``."""
    return shards.mean_and_std_over_data(values)


def max_over_data(shards, values: jax.Array) -> jax.Array:
    """``shards.max_over_data(values)``."""
    return shards.max_over_data(values)


def log_likelihood_sum(model, position) -> jax.Array:
    """``model.shards.log_likelihood_sum(model, position)``."""
    return model.shards.log_likelihood_sum(model, position)
