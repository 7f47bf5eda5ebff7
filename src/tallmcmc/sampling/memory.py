"""Before compiling: will a run's data, chain states and held draws fit on one device? (an estimate from shapes)"""

from __future__ import annotations

import jax

from tallmcmc.kernel import MHInfo
from tallmcmc.sharding import check_device_memory, tree_bytes

__all__ = ["check_run_memory"]


def check_run_memory(data, initialise, starts, layout=None, held_draws: int = 0) -> None:
    """Refuse, before compiling, a run whose data and chain states cannot fit on one device (estimate only).

    Per device: the data (its block of rows with a mesh) and the chains'
    states counted twice (the current state and the proposed one, e.g. a
    full-data test's ``num_chains × N`` per-datum values and their
    replacement), from the shapes alone (``jax.eval_shape``); and
    ``held_draws`` draws (position and step statistics) kept on the device
    until the run ends (the asynchronous driver's output buffers). Raises
    :class:`tallmcmc.sharding.DeviceMemoryError` (a ``ValueError``) with the
    estimate and the remedy.
    """
    states = jax.eval_shape(initialise, data, starts)
    one_start = tree_bytes(starts) // max(1, jax.tree_util.tree_leaves(starts)[0].shape[0])
    draw_bytes = held_draws * (one_start + 4 * len(MHInfo._fields))
    if layout is None:
        devices = {
            device
            for leaf in jax.tree_util.tree_leaves(data)
            if isinstance(leaf, jax.Array)
            for device in leaf.devices()
        }
        device = min(devices, key=lambda d: d.id) if devices else jax.devices()[0]
        data_bytes = tree_bytes(data)
        state_bytes = tree_bytes(states)
    else:
        device = layout.local_device()
        data_bytes = tree_bytes(data) // layout.num_data_shards
        state_bytes = tree_bytes(states) // (layout.num_data_shards * layout.num_chain_shards)
        draw_bytes //= layout.num_chain_shards
    parts = {"data": data_bytes, "chain states (current and proposed)": 2 * state_bytes}
    if draw_bytes:
        parts["draws held on the device (asynchronous driver)"] = draw_bytes
    check_device_memory(parts, device, resident=data_bytes if layout is None else 0, mesh_given=layout is not None)
