"""Data sharded over devices: the rows of a tall data set split over a mesh, chains over its other axis.

``tallmcmc.sample(..., mesh=mesh)`` runs the sampler inside one
:func:`jax.shard_map` over a :class:`jax.sharding.Mesh` whose axis names come
from ``{"data", "chains"}``:

* the data's leading axis is split into contiguous blocks over ``"data"``
  (device ``k`` holds rows ``[kB, (k + 1)B)``, ``B = ⌈N / D⌉``; the last block
  is padded with copies of the last row, which no index can draw and which
  every full-data reduction masks out);
* the chains are split over ``"chains"``; without a ``"chains"`` axis every
  device runs every chain, without a ``"data"`` axis every device holds all
  the data.

Inside, the model carries :class:`DataShards` (``Model.shards``) and reaches
the data only through its methods, which come here:

* a minibatch (:func:`log_likelihood_ratios_at`): each device evaluates the
  indices in its block, puts 0 in the other lanes, and the lanes are summed
  over ``"data"`` (``psum``). Every index lies in exactly one block, so each
  lane's sum is ``x + 0 + … + 0 = x`` exactly: the values, hence the draws,
  are those of the unsharded run bit for bit (up to the sign of a zero);
* full-data reductions (:func:`sum_over_data`, :func:`mean_and_std_over_data`,
  :func:`max_over_data`, :func:`log_likelihood_sum`): each device reduces its
  own rows and the partial results are gathered (``all_gather``) and combined
  in one fixed order, so every device holds the same bits (a loop whose
  condition depends on them runs equally long everywhere); they differ from
  the unsharded sum only by summation order.

What is counted in ``data_used`` does not depend on the mesh.

:func:`check_device_memory` is the estimate made before sampling: the bytes the
data and the per-chain states (e.g. the exact tests' cached per-datum values,
``num_chains × N``) need on one device against what the device has
(:func:`device_memory_bytes`), raised as :class:`DeviceMemoryError` before
JAX's own out-of-memory. See ``docs/sharding.md``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA_AXIS = "data"
CHAINS_AXIS = "chains"
AXES = (DATA_AXIS, CHAINS_AXIS)


@dataclasses.dataclass(frozen=True)
class DataShards:
    """What a model inside the sampler's ``shard_map`` knows of its data's layout.

    ``data`` holds rows ``[k·rows_per_shard, (k + 1)·rows_per_shard)`` of the
    (padded) data, ``k = lax.axis_index(axis)``; rows at or beyond
    ``num_data`` are padding.
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


# ------------------------------------------------------------------------------------------ the one place


def combine_exact(values: jax.Array, axis: str) -> jax.Array:
    """Sum over ``axis`` of lanes that are non-zero on exactly one device (``x + 0 + … + 0 = x``)."""
    return lax.psum(values, axis)


def _owned(shards: DataShards, indices: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Local row of each global index (clipped into the block) and whether this device holds it."""
    local = indices - shards.first_row()
    mine = (local >= 0) & (local < shards.rows_per_shard)
    return jnp.clip(local, 0, shards.rows_per_shard - 1), mine


def log_likelihood_ratios_at(model, position, proposed, indices: jax.Array) -> jax.Array:
    """Tempered per-datum log ratios at global ``indices``, each evaluated by the device holding it."""
    shards = model.shards
    local, mine = _owned(shards, indices)
    batch = jax.tree_util.tree_map(lambda leaf: leaf[local], model.data)
    values = model.log_likelihood_ratios(position, proposed, batch)
    return combine_exact(jnp.where(mine, values, jnp.zeros_like(values)), shards.axis)


def data_at(model, indices: jax.Array):
    """The rows at global ``indices``, copied from the devices that hold them."""
    shards = model.shards
    local, mine = _owned(shards, indices)

    def fetch(leaf):
        rows = leaf[local]
        keep = mine.reshape(mine.shape + (1,) * (rows.ndim - mine.ndim))
        if rows.dtype == jnp.bool_:
            return combine_exact(jnp.where(keep, rows, False).astype(jnp.int32), shards.axis).astype(jnp.bool_)
        return combine_exact(jnp.where(keep, rows, jnp.zeros_like(rows)), shards.axis)

    return jax.tree_util.tree_map(fetch, model.data)


def _gathered(value: jax.Array, axis: str) -> jax.Array:
    """The per-device partial results stacked in device order, the same on every device."""
    return lax.all_gather(value, axis)


def _real(shards: DataShards, values: jax.Array, fill) -> jax.Array:
    if not shards.padded:
        return values
    held = shards.held().reshape((-1,) + (1,) * (values.ndim - 1))
    return jnp.where(held, values, fill)


def sum_over_data(shards: DataShards, values: jax.Array) -> jax.Array:
    """Σ over all real rows of per-datum ``values`` held here (leading axis the local rows)."""
    local = jnp.sum(_real(shards, values, 0))
    return jnp.sum(_gathered(local, shards.axis))


def mean_and_std_over_data(shards: DataShards, values: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mean and 1/N standard deviation over all real rows (two passes: mean, then squared deviations)."""
    mean = sum_over_data(shards, values) / shards.num_data
    squares = sum_over_data(shards, jnp.abs(values - mean) ** 2) / shards.num_data
    return mean, jnp.sqrt(squares)


def max_over_data(shards: DataShards, values: jax.Array) -> jax.Array:
    local = jnp.max(_real(shards, values, -jnp.inf))
    return jnp.max(_gathered(local, shards.axis))


def log_likelihood_sum(model, position) -> jax.Array:
    """Untempered Σᵢ log p(xᵢ|position) over all shards, with a gradient that sums the shards' gradients."""
    shards = model.shards

    def local(position):
        return jnp.sum(_real(shards, model.per_datum_log_likelihood(position), 0))

    @jax.custom_vjp
    def total(position):
        return jnp.sum(_gathered(local(position), shards.axis))

    def forward(position):
        value, pullback = jax.vjp(local, position)
        return jnp.sum(_gathered(value, shards.axis)), pullback

    def backward(pullback, cotangent):
        (gradient,) = pullback(cotangent)
        return (jax.tree_util.tree_map(lambda g: jnp.sum(_gathered(g, shards.axis), axis=0), gradient),)

    total.defvjp(forward, backward)
    return total(position)


# ------------------------------------------------------------------------------------------ the layout


@dataclasses.dataclass(frozen=True)
class MeshLayout:
    """How :func:`tallmcmc.sample` lays the data and the chains out over ``mesh``.

    Specs by kind (see :meth:`shard_map`): ``"data"`` the data's rows over
    ``"data"``; ``"chains"`` a leading chain axis over ``"chains"``;
    ``"state"`` a chain state with an extra leading axis of one copy per data
    shard (so that a per-datum cache, which differs between data shards, and a
    position, which does not, travel alike); ``"draws"`` ``(step, chain, …)``
    outputs; ``"replicated"`` the same everywhere.
    """

    mesh: Mesh
    num_data: int
    num_chains: int

    @property
    def data_axis(self) -> str | None:
        return DATA_AXIS if DATA_AXIS in self.mesh.axis_names else None

    @property
    def chains_axis(self) -> str | None:
        return CHAINS_AXIS if CHAINS_AXIS in self.mesh.axis_names else None

    @property
    def num_data_shards(self) -> int:
        return self.mesh.shape[DATA_AXIS] if self.data_axis else 1

    @property
    def num_chain_shards(self) -> int:
        return self.mesh.shape[CHAINS_AXIS] if self.chains_axis else 1

    @property
    def rows_per_shard(self) -> int:
        return math.ceil(self.num_data / self.num_data_shards)

    @property
    def padded_num_data(self) -> int:
        return self.rows_per_shard * self.num_data_shards

    @property
    def shards(self) -> DataShards | None:
        if self.data_axis is None:
            return None
        return DataShards(DATA_AXIS, self.num_data, self.rows_per_shard, self.num_data_shards)

    def spec(self, kind: str) -> P:
        return {
            "data": P(self.data_axis),
            "chains": P(self.chains_axis),
            "state": P(self.data_axis, self.chains_axis),
            "draws": P(None, self.chains_axis),
            "replicated": P(),
        }[kind]

    def shard_map(self, function: Callable, in_kinds: tuple, out_kinds) -> Callable:
        """``function`` run on every device of the mesh, its arguments and results laid out by kind.

        ``in_kinds`` has one kind per positional argument; ``out_kinds`` is a
        pytree of kinds, each applying to the whole subtree of the result at
        its place. ``"state"`` arguments lose, and ``"state"`` results gain,
        the leading axis of one copy per data shard.
        """

        def body(*arguments):
            arguments = [
                jax.tree_util.tree_map(lambda leaf: leaf[0], argument) if kind == "state" else argument
                for kind, argument in zip(in_kinds, arguments)
            ]
            result = function(*arguments)

            def expand(kind, value):
                return jax.tree_util.tree_map(lambda leaf: leaf[None], value) if kind == "state" else value

            return jax.tree_util.tree_map(expand, out_kinds, result)

        in_specs = tuple(self.spec(kind) for kind in in_kinds)
        mapped = jax.shard_map(
            body,
            mesh=self.mesh,
            in_specs=in_specs,
            out_specs=jax.tree_util.tree_map(self.spec, out_kinds),
            check_vma=False,
        )

        def placed(*arguments):  # laid out as the specs say (a mesh of explicit axes does not reshard by itself)
            return mapped(*(
                jax.tree_util.tree_map(lambda leaf: jax.device_put(leaf, NamedSharding(self.mesh, spec)), argument)
                for spec, argument in zip(in_specs, arguments)
            ))

        return placed

    def distribute(self, data):
        """The data as global arrays over the mesh (padded to ``padded_num_data`` rows where needed).

        Leaves that are already global arrays laid out over the mesh's
        ``"data"`` axis (e.g. from :func:`jax.make_array_from_process_local_data`
        in every process) are used as they are; nothing is brought to the host.
        """
        sharding = NamedSharding(self.mesh, self.spec("data"))
        padding = self.padded_num_data - self.num_data

        def place(leaf):
            if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
                if padding or not leaf.sharding.is_equivalent_to(sharding, leaf.ndim):
                    raise ValueError(
                        f"data leaf of shape {leaf.shape} spans several processes but is not laid out as sample(mesh=) "
                        f"needs: rows split evenly over the mesh's 'data' axis ({self.num_data_shards} shards, so N "
                        "must be a multiple of it). Build it with jax.make_array_from_process_local_data("
                        "NamedSharding(mesh, PartitionSpec('data')), local_rows)"
                    )
                return leaf
            if padding:
                leaf = np.asarray(leaf)
                leaf = np.concatenate([leaf, np.repeat(leaf[-1:], padding, axis=0)], axis=0)
            return jax.device_put(leaf, sharding)

        return jax.tree_util.tree_map(place, data)

    def first_copy(self, tree):
        """Of a ``"state"``-laid-out pytree, the data shards' first copy (leaves with a leading chain axis)."""
        return jax.jit(self.shard_map(lambda tree: tree, ("state",), "chains"))(tree)

    def local_device(self):
        return self.mesh.local_devices[0]


def layout_for(mesh, num_data: int, num_chains: int, driver: str) -> MeshLayout:
    """Validate ``mesh`` for a run of ``num_chains`` chains on ``num_data`` rows (``ValueError`` naming it)."""
    if not isinstance(mesh, Mesh):
        raise TypeError(
            "mesh must be a jax.sharding.Mesh, e.g. jax.make_mesh((4,), ('data',)) or "
            f"jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2), ('data', 'chains')); got {type(mesh).__name__}"
        )
    unknown = [name for name in mesh.axis_names if name not in AXES]
    if unknown or len(set(mesh.axis_names)) != len(mesh.axis_names):
        raise ValueError(
            f"mesh axis names must be 'data' and/or 'chains' (the data's rows are split over 'data', the chains over "
            f"'chains'); got {tuple(mesh.axis_names)}. Name the axes e.g. jax.make_mesh((4,), ('data',))"
        )
    layout = MeshLayout(mesh, int(num_data), int(num_chains))
    if num_chains % layout.num_chain_shards:
        raise ValueError(
            f"num_chains = {num_chains} is not a multiple of the mesh's 'chains' axis size "
            f"{layout.num_chain_shards}: every device must run the same number of chains. Use num_chains = "
            f"{layout.num_chain_shards * max(1, round(num_chains / layout.num_chain_shards))} or a mesh whose "
            "'chains' axis divides num_chains"
        )
    return layout


# ------------------------------------------------------------------------------------------ checks and transfers


def check_model_on_mesh(model, layout: MeshLayout, data) -> Callable:
    """``check(position, name) -> (log_prior, log_likelihood_sum)``: :func:`tallmcmc.check_model` on sharded data.

    Evaluates every datum where it lives and brings back only scalars (the
    number of non-finite values, the first one's index and value, the sum), so
    data spread over several processes are never gathered. The scalar check of
    one datum's log-likelihood is made on its shape alone (``jax.eval_shape``).
    """
    run = jax.jit(layout.shard_map(_finite_summary(model, layout.shards, layout.num_data), ("data", "replicated"),
                                   "replicated"))
    return _check_with(model, run, data)


def _finite_summary(model, shards: DataShards | None, num_data: int) -> Callable:
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
            total = jnp.sum(_gathered(total, shards.axis))
        return count, first, value, total

    return summary


def _check_with(model, run: Callable, data) -> Callable:
    """``check(position, name)``: :func:`tallmcmc.check_model` with the data's part done by ``run(data, position)``."""
    from tallmcmc.model import check_model

    row = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype), data)

    def check(position, name):
        def values(position, data):
            count, first, value, total = (np.asarray(to_host(part)) for part in run(data, position))
            return count, first, value, total

        return check_model(model, position, name, evaluate_data=values, datum_shape=row, data=data)

    return check


def to_host(tree):
    """NumPy copies of ``tree``'s arrays; arrays spread over processes are gathered from all of them.

    Only the leaves that span processes are all-gathered (a collective: every
    process must call this with the same tree); a leaf this process holds
    whole is copied as it is, never concatenated with the other processes'.
    """
    leaves = jax.tree_util.tree_leaves(tree)
    if all(not isinstance(leaf, jax.Array) or leaf.is_fully_addressable for leaf in leaves):
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    def home(leaf):
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            return np.asarray(multihost_utils.process_allgather(leaf, tiled=True))
        return jax.device_get(leaf)

    return jax.tree_util.tree_map(home, tree)


# ------------------------------------------------------------------------------------------ passes before sample


@dataclasses.dataclass(frozen=True)
class RowSharding:
    """A model's data given as global arrays whose rows are split over a mesh, read off their own sharding.

    What :func:`tallmcmc.find_mode`, :func:`tallmcmc.taylor_control_variate`
    and the TunaMH bound helpers see of data placed with
    ``jax.device_put(leaf, NamedSharding(mesh, PartitionSpec("data")))`` or
    :func:`tallmcmc.distributed.shard_rows` (found by :func:`row_sharding`):
    their full-data passes then run as one :func:`jax.shard_map` over
    ``mesh``, every device over its own block of rows, and only per-device
    partial results travel (:func:`gather_partials`).
    """

    mesh: Mesh
    axis: object  # the mesh axis (or tuple of axes) the rows are split over: the leading entry of the leaves' spec
    num_data: int
    num_shards: int

    @property
    def rows_per_shard(self) -> int:
        return self.num_data // self.num_shards

    @property
    def shards(self) -> DataShards:
        """The :class:`DataShards` a model inside :meth:`jit` carries (``Model.with_shards``), e.g. for ``data_at``."""
        return DataShards(self.axis, self.num_data, self.rows_per_shard, self.num_shards)

    def _sharding(self, kind: str) -> NamedSharding:
        return NamedSharding(self.mesh, P(self.axis) if kind == "rows" else P())

    def place(self, tree, kind: str = "rows"):
        """``tree``'s leaves laid out by ``kind``: ``"rows"`` split as the data are, ``"replicated"`` everywhere.

        Leaves already laid out so are used as they are (data spread over
        processes never move).
        """
        sharding = self._sharding(kind)

        def put(leaf):
            if isinstance(leaf, jax.Array):
                if leaf.sharding.is_equivalent_to(sharding, leaf.ndim):
                    return leaf
                if leaf.is_fully_addressable and not sharding.is_fully_addressable:
                    leaf = np.asarray(leaf)  # the same value in every process: JAX places host values only
            return jax.device_put(leaf, sharding)

        return jax.tree_util.tree_map(put, tree)

    def jit(self, function: Callable, in_kinds: tuple[str, ...]) -> Callable:
        """``function`` run on every device over its rows (one ``shard_map`` under ``jit``); results to the host.

        ``in_kinds`` gives one kind per positional argument (``"rows"``: a
        pytree of the data's layout, the local block inside; ``"replicated"``).
        ``function`` must return the same values on every device (combine its
        partial results with :func:`gather_partials`); they come back as NumPy
        arrays (in every process).
        """
        mapped = jax.jit(jax.shard_map(
            function,
            mesh=self.mesh,
            in_specs=tuple(P(self.axis) if kind == "rows" else P() for kind in in_kinds),
            out_specs=P(),
            check_vma=False,
        ))

        def run(*arguments):
            placed = [self.place(argument, kind) for kind, argument in zip(in_kinds, arguments)]
            return jax.tree_util.tree_map(_replicated_to_host, mapped(*placed))

        return run

    def check_model(self, model, data) -> Callable:
        """``check(position, name)``: :func:`tallmcmc.check_model` with every datum evaluated where it lives."""
        run = self.jit(_finite_summary(model, self.shards, self.num_data), ("rows", "replicated"))
        return _check_with(model, run, data)


def gather_partials(value, axis):
    """Every device's partial result stacked in device order (leading axis, one entry per block of rows).

    The one place where the one-off passes (:class:`RowSharding`) combine
    what each device computed over its own rows; every device holds the same
    stack, so a sum over it (on the device, or on the host in float64) is the
    same everywhere. ``tests/test_sharding.py`` replaces it by one that keeps
    only the local partial, a deliberately wrong variant that must fail.
    """
    return jax.tree_util.tree_map(lambda leaf: lax.all_gather(leaf, axis), value)


def sum_partials(value, axis):
    """Σ over the devices of per-device partial results, added in device order (:func:`gather_partials`)."""
    return jax.tree_util.tree_map(lambda leaf: jnp.sum(leaf, axis=0), gather_partials(value, axis))


def _replicated_to_host(leaf) -> np.ndarray:
    if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable and leaf.is_fully_replicated:
        return np.asarray(leaf.addressable_data(0))
    return np.asarray(to_host(leaf))


def _whole(leaf) -> bool:
    """Whether every device (or the host) holding ``leaf`` holds all of it."""
    if not isinstance(leaf, jax.Array):
        return True
    return len(leaf.sharding.device_set) == 1 or leaf.sharding.is_fully_replicated


def row_sharding(data, function: str) -> RowSharding | None:
    """How ``data``'s rows are split over a mesh, or ``None`` when they are whole on one device (or everywhere).

    Parameters
    ----------
    data
        A model's data (a pytree of arrays, rows on the leading axis).
    function
        The caller's name, for the error.

    Raises
    ------
    ValueError
        When a leaf is split in a way the passes do not know (not by rows with
        a ``NamedSharding``, over different meshes, or unevenly), naming
        ``function`` and the layout to use.
    """
    leaves = jax.tree_util.tree_leaves(data)
    split = [leaf for leaf in leaves if not _whole(leaf)]
    if not split:
        return None

    def refuse(why):
        raise ValueError(
            f"{function}: the model's data are {why}. Split the rows over a mesh as sample(mesh=) does: "
            "jax.device_put(leaf, NamedSharding(mesh, PartitionSpec('data'))) in one process, "
            "tallmcmc.distributed.shard_rows(local_rows, mesh) across processes (or pass the data on one device)"
        )

    def leading(leaf):
        sharding = leaf.sharding
        if not isinstance(sharding, NamedSharding):
            refuse(f"placed with a {type(sharding).__name__}, not a NamedSharding over a mesh")
        spec = tuple(sharding.spec) + (None,) * (leaf.ndim - len(sharding.spec))
        if spec[0] is None or any(entry is not None for entry in spec[1:]):
            refuse(f"split along other axes than the rows (PartitionSpec{tuple(sharding.spec)} for shape {leaf.shape})")
        return sharding.mesh, spec[0]

    mesh, axis = leading(split[0])
    for leaf in split[1:]:
        if leading(leaf) != (mesh, axis):
            refuse("split over different meshes or mesh axes (leaves must share one layout)")
    axes = axis if isinstance(axis, tuple) else (axis,)
    num_shards = math.prod(mesh.shape[name] for name in axes)
    num_data = int(np.shape(leaves[0])[0])
    if num_data % num_shards:
        refuse(f"split unevenly ({num_data} rows over {num_shards} devices)")
    return RowSharding(mesh, axis, num_data, num_shards)


class HostRows:
    """The rows of one data leaf that this process holds, as NumPy blocks, for per-datum work on the host.

    In one process (or for a leaf every process holds whole) that is the
    whole leaf, one block: what ``np.asarray(leaf)`` gives. For a leaf
    spread over processes it is this process's blocks of rows (one per
    distinct addressable shard, in row order), and the results travel:
    :meth:`map` assembles per-row values on every process, :meth:`sum` adds
    per-block sums over the processes. Float64 results travel as their bits
    (``uint32`` pairs), so nothing is rounded to float32 on the way.
    ``by_shard=True`` takes the per-shard route even for a leaf this process
    holds whole but split over its devices (what each process of a
    multi-process run does; the tests use it in one process).
    """

    def __init__(self, leaf, by_shard: bool = False):
        self.num_data = int(np.shape(leaf)[0])
        self.spread = isinstance(leaf, jax.Array) and not _whole(leaf) and (by_shard or not leaf.is_fully_addressable)
        if not self.spread:
            self.blocks = [np.asarray(leaf)]
            self.starts = [0]
            return
        self.sharding = leaf.sharding
        by_start = {}
        for shard in leaf.addressable_shards:
            start = shard.index[0].indices(self.num_data)[0] if shard.index else 0
            if start not in by_start:  # a device of another "chains" group holds the same rows
                by_start[start] = shard.data
        self.starts = sorted(by_start)
        self.blocks = [np.asarray(by_start[start]) for start in self.starts]

    def map(self, function: Callable) -> np.ndarray:
        """``function(block)`` (per-row float64 values) for every block, as the values of all N rows, in row order."""
        values = [np.ascontiguousarray(function(block), np.float64) for block in self.blocks]
        if not self.spread:
            return values[0]
        trailing = values[0].shape[1:]
        encoded = {start: value.reshape(value.shape[0], -1).view(np.uint32)
                   for start, value in zip(self.starts, values)}
        width = next(iter(encoded.values())).shape[1]
        sharding = NamedSharding(self.sharding.mesh, P(self.sharding.spec[0], None))
        every = jax.make_array_from_callback(
            (self.num_data, width), sharding, lambda index: encoded[index[0].indices(self.num_data)[0]]
        )
        return np.ascontiguousarray(to_host(every)).view(np.float64).reshape((self.num_data,) + trailing)

    def sum(self, function: Callable) -> np.ndarray:
        """Σ over all rows, as ``function(block)`` (a block's float64 sum) added over the blocks and processes."""
        total = sum(np.asarray(function(block), np.float64) for block in self.blocks)
        if not self.spread:
            return total
        from jax.experimental import multihost_utils

        total = np.array(total, np.float64)  # (a copy, contiguous, of the same shape: 0-d stays 0-d)
        gathered = np.asarray(multihost_utils.process_allgather(total.reshape(-1).view(np.uint32)))
        return np.sum(np.ascontiguousarray(gathered).view(np.float64), axis=0).reshape(total.shape)


# ------------------------------------------------------------------------------------------ memory


class DeviceMemoryError(MemoryError, ValueError):
    """The data and the chains' states would not fit on one device (raised before sampling)."""


def device_memory_bytes(device) -> int | None:
    """Bytes one device can hold: ``memory_stats()['bytes_limit']`` (accelerators), else available host memory.

    On the CPU, the host's available physical memory (``os.sysconf``). ``None``
    where neither is known. Tests replace this function to simulate a small
    device.
    """
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - backends without memory statistics raise various errors
        stats = None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    if getattr(device, "platform", None) == "cpu":
        try:
            return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            return None
    return None


def tree_bytes(tree) -> int:
    """Bytes of a pytree of arrays or ``ShapeDtypeStruct`` s."""
    return int(sum(math.prod(leaf.shape) * np.dtype(leaf.dtype).itemsize for leaf in jax.tree_util.tree_leaves(tree)))


def check_device_memory(parts: dict[str, int], device, *, resident: int = 0, mesh_given: bool = False) -> None:
    """Raise :class:`DeviceMemoryError` if the bytes in ``parts`` exceed :func:`device_memory_bytes`.

    ``resident`` bytes of ``parts`` already sit in the host memory that the CPU
    figure leaves out (the model's data), so on the CPU they are added to what
    the device has.
    """
    have = device_memory_bytes(device)
    if have is None:
        return
    if getattr(device, "platform", None) == "cpu":
        have += resident
    need = sum(parts.values())
    if need <= have:
        return
    described = ", ".join(f"{name} {size / 1e9:.3g} GB" for name, size in parts.items())
    fix = (
        "Use a mesh with more devices on its 'data' axis (data) or 'chains' axis (states)"
        if mesh_given
        else "Split the data over devices with sample(..., mesh=jax.make_mesh((n,), ('data',))) (docs/sharding.md)"
    )
    raise DeviceMemoryError(
        f"this run needs about {need / 1e9:.3g} GB on one device ({described}) but {device} has "
        f"{have / 1e9:.3g} GB. {fix}, or use fewer chains or a subsampling test (the full-data tests keep "
        "num_chains x N per-datum values)"
    )
