"""The device-memory estimate made before sampling: :func:`check_device_memory`, :class:`DeviceMemoryError`.

:func:`tallmcmc.sample` adds up the bytes the data and the per-chain states
(e.g. the exact tests' cached per-datum values, ``num_chains × N``) need on one
device (:func:`tree_bytes` of their shapes) and compares them with what the
device has (:func:`device_memory_bytes`), raising :class:`DeviceMemoryError`
before JAX's own out-of-memory. See ``docs/sharding.md``.
"""

from __future__ import annotations

import math
import os

import jax
import numpy as np


class DeviceMemoryError(MemoryError, ValueError):
    """The data and the chains' states would not fit on one device (raised before sampling)."""


def device_memory_bytes(device) -> int | None:
    """Bytes one device can hold: ``memory_stats()['bytes_limit']`` (accelerators), else available host memory.

    On the CPU, the host's available physical memory (``os.sysconf``). ``None``
    where neither is known. Tests replace this function
    (``tallmcmc.sharding.memory.device_memory_bytes``) to simulate a small
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
