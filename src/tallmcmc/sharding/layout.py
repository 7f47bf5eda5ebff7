"""How :func:`tallmcmc.sample` lays the data and the chains out over a mesh: :class:`MeshLayout`, :func:`layout_for`.

The mesh's axis names come from ``{"data", "chains"}`` (:data:`AXES`): the
data's leading axis is split into contiguous blocks over ``"data"`` (device
``k`` holds rows ``[kB, (k + 1)B)``, ``B = ⌈N / D⌉``; the last block is padded
with copies of the last row, which no index can draw and which every full-data
reduction masks out), the chains over ``"chains"``. Without a ``"chains"`` axis
every device runs every chain, without a ``"data"`` axis every device holds all
the data.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from tallmcmc.sharding.collectives import DataShards

DATA_AXIS = "data"
CHAINS_AXIS = "chains"
AXES = (DATA_AXIS, CHAINS_AXIS)


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
        """What the model inside :meth:`shard_map` carries (``Model.with_shards``); ``None`` without a ``"data"`` axis.

        ``None`` leaves the model reaching all rows where it runs
        (:class:`tallmcmc.model.AllRows`): every device holds all the data.
        """
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
            return mapped(
                *(
                    jax.tree_util.tree_map(lambda leaf: jax.device_put(leaf, NamedSharding(self.mesh, spec)), argument)  # noqa: B023 (used within this iteration)
                    for spec, argument in zip(in_specs, arguments)
                )
            )

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
