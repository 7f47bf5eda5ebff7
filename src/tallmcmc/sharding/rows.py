"""The one-off passes before ``sample`` on data split by rows over a mesh: :class:`RowSharding`, :class:`HostRows`.

:func:`tallmcmc.find_mode`, :func:`tallmcmc.taylor_control_variate` and the
TunaMH bound helpers take the user's model, not a mesh: when its data leaves are
global arrays split by rows (``jax.device_put(leaf, NamedSharding(mesh,
PartitionSpec("data")))``, :func:`tallmcmc.distributed.shard_rows`),
:func:`row_sharding` reads the layout off them, and every pass runs where the
rows live (:meth:`RowSharding.jit`, the partial results combined by
:func:`gather_partials`), or, for float64 work on the host, over the rows this
process holds (:class:`HostRows`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from tallmcmc.sharding.checks import check_with, finite_summary
from tallmcmc.sharding.collectives import DataShards
from tallmcmc.sharding.transfer import to_host


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
        mapped = jax.jit(
            jax.shard_map(
                function,
                mesh=self.mesh,
                in_specs=tuple(P(self.axis) if kind == "rows" else P() for kind in in_kinds),
                out_specs=P(),
                check_vma=False,
            )
        )

        def run(*arguments):
            placed = [self.place(argument, kind) for kind, argument in zip(in_kinds, arguments)]
            return jax.tree_util.tree_map(_replicated_to_host, mapped(*placed))

        return run

    def check_model(self, model, data) -> Callable:
        """``check(position, name)``: :func:`tallmcmc.check_model` with every datum evaluated where it lives."""
        run = self.jit(finite_summary(model, self.shards, self.num_data), ("rows", "replicated"))
        return check_with(model, run, data)


def gather_partials(value, axis):
    """Every device's partial result stacked in device order (leading axis, one entry per block of rows).

    The one place where the one-off passes (:class:`RowSharding`) combine
    what each device computed over its own rows; every device holds the same
    stack, so a sum over it (on the device, or on the host in float64) is the
    same everywhere. ``tests/test_sharding.py`` replaces it (as
    ``tallmcmc.sharding.gather_partials``, where its callers look it up) by one
    that keeps only the local partial, a deliberately wrong variant that must
    fail.
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
        encoded = {
            start: value.reshape(value.shape[0], -1).view(np.uint32) for start, value in zip(self.starts, values)
        }
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
        total = np.array(total, np.float64)  # (a copy, contiguous, of the same shape: 0-d stays 0-d)
        gathered = np.asarray(multihost_utils.process_allgather(total.reshape(-1).view(np.uint32)))
        return np.sum(np.ascontiguousarray(gathered).view(np.float64), axis=0).reshape(total.shape)
