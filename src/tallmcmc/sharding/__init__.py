"""Data sharded over devices: the rows of a tall data set split over a mesh, chains over its other axis.

``tallmcmc.sample(..., mesh=mesh)`` runs the sampler inside one
:func:`jax.shard_map` over a :class:`jax.sharding.Mesh` whose axis names come
from ``{"data", "chains"}``; the one-off passes before it (``find_mode``,
``taylor_control_variate``, the TunaMH bounds) run where the rows of data
already split over a mesh live. The package is split by concern, each module
with its own callers:

* :mod:`~tallmcmc.sharding.collectives`: :class:`DataShards`, the data's
  layout inside the ``shard_map`` (``Model.shards``), whose methods reach all
  rows with collectives (exact ``psum`` of a minibatch's lanes, gathered
  partial sums); :class:`tallmcmc.Model` calls them, or those of
  :class:`AllRows` (:mod:`tallmcmc.model`, the data all here);
* :mod:`~tallmcmc.sharding.layout`: :class:`MeshLayout` and :func:`layout_for`,
  how ``sample`` lays data, chains and states out over the mesh;
* :mod:`~tallmcmc.sharding.checks`: :func:`check_model_on_mesh`, the start
  check with every datum evaluated where it lives;
* :mod:`~tallmcmc.sharding.rows`: :class:`RowSharding`, :func:`row_sharding`,
  :class:`HostRows`, :func:`gather_partials`, :func:`sum_partials`, for the
  passes before ``sample``;
* :mod:`~tallmcmc.sharding.transfer`: :func:`to_host`, results to the host
  (gathered over processes);
* :mod:`~tallmcmc.sharding.memory`: :func:`check_device_memory` and
  :class:`DeviceMemoryError`, the memory estimate made before sampling.

Every name is re-exported here (``from tallmcmc.sharding import to_host``).
See ``docs/sharding.md``.
"""

from tallmcmc.model import AllRows
from tallmcmc.sharding.checks import check_model_on_mesh
from tallmcmc.sharding.collectives import (
    DataShards,
    combine_exact,
    data_at,
    log_likelihood_ratios_at,
    log_likelihood_sum,
    max_over_data,
    mean_and_std_over_data,
    sum_over_data,
)
from tallmcmc.sharding.layout import AXES, CHAINS_AXIS, DATA_AXIS, MeshLayout, layout_for
from tallmcmc.sharding.memory import DeviceMemoryError, check_device_memory, device_memory_bytes, tree_bytes
from tallmcmc.sharding.rows import HostRows, RowSharding, gather_partials, row_sharding, sum_partials
from tallmcmc.sharding.transfer import to_host

__all__ = [
    "AXES",
    "AllRows",
    "CHAINS_AXIS",
    "DATA_AXIS",
    "DataShards",
    "DeviceMemoryError",
    "HostRows",
    "MeshLayout",
    "RowSharding",
    "check_device_memory",
    "check_model_on_mesh",
    "combine_exact",
    "data_at",
    "device_memory_bytes",
    "gather_partials",
    "layout_for",
    "log_likelihood_ratios_at",
    "log_likelihood_sum",
    "max_over_data",
    "mean_and_std_over_data",
    "row_sharding",
    "sum_over_data",
    "sum_partials",
    "to_host",
    "tree_bytes",
]
