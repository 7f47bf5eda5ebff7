"""Running on several hosts: thin helpers around JAX's own multi-process runtime.

One Python process runs per host (or per accelerator), all of them the same
program. :func:`initialize` joins them with :func:`jax.distributed.initialize`;
:func:`global_mesh` lays every process's devices out as one mesh whose ``"data"``
axis runs across the processes; :func:`shard_rows` turns the rows each process
loaded (:func:`row_block` says which) into global arrays sharded along
``"data"``; :func:`tallmcmc.sample` with ``mesh=`` then runs on all of them, each
device evaluating the minibatch indices it holds. :func:`gather` brings global
arrays home as NumPy arrays on every process, and :func:`exit_on_error` makes a
process that meets an error (its own, or a peer's death seen by a collective)
leave at once, so that the others notice and nothing waits. A typical script::

    from tallmcmc import distributed

    distributed.initialize()                      # SLURM etc.: detected; else pass the three arguments
    mesh = distributed.global_mesh()
    rows = distributed.row_block(num_data)        # this process's rows
    data = distributed.shard_rows(load(rows), mesh)
    with distributed.exit_on_error():
        result = tallmcmc.sample(model_with(data), ..., mesh=mesh)
    if distributed.is_main_process():
        print(result)

Nothing here is a runtime of its own: process discovery, health checking
(heartbeats) and the collectives (Gloo on CPU, NCCL on GPU) are JAX's. See
``docs/distributed.md`` for launching on a cluster and for what happens when
a process dies.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import sys
import time
import traceback
import zlib
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from tallmcmc.sharding import CHAINS_AXIS, DATA_AXIS, to_host

__all__ = [
    "DEFAULT_TIMEOUT",
    "Processes",
    "exit_on_error",
    "gather",
    "global_mesh",
    "initialize",
    "is_main_process",
    "local_rows",
    "processes",
    "row_block",
    "shard_rows",
]

DEFAULT_TIMEOUT = 60
"""Seconds after which a process that sent no heartbeat counts as dead (and the shutdown wait)."""


class Processes(NamedTuple):
    """Where this process stands in the run (returned by :func:`initialize` and :func:`processes`)."""

    process_index: int
    process_count: int
    local_device_count: int
    device_count: int
    platform: str


def processes() -> Processes:
    """This process's index, the number of processes and the devices, local and global."""
    return Processes(
        process_index=jax.process_index(),
        process_count=jax.process_count(),
        local_device_count=jax.local_device_count(),
        device_count=jax.device_count(),
        platform=jax.devices()[0].platform,
    )


def is_main_process() -> bool:
    """True on process 0, the one that should print and write files."""
    return jax.process_index() == 0


def _backends_started() -> bool:
    # The one JAX-internal call here: jax.distributed.initialize refuses to run
    # after it, and saying so before touching anything gives the clearer error.
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def _parse_address(coordinator_address: str) -> tuple[str, int]:
    host, sep, port = str(coordinator_address).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"coordinator_address={coordinator_address!r} is not 'host:port': pass process 0's host name or IP "
            "address and a free port, e.g. '10.0.0.1:12355' (the same string in every process)"
        )
    return host.strip("[]"), int(port)


def _check_port_free(port: int, coordinator_address: str) -> None:
    """On process 0: the coordinator service binds every interface on ``port``; JAX crashes if it is taken."""
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((address, port))
            except OSError as error:
                raise ConnectionError(
                    f"process 0 cannot start the coordinator on port {port} of coordinator_address="
                    f"{coordinator_address!r}: {error.strerror}. Choose a free port (the same in every process)."
                ) from None
        return


def _wait_for_coordinator(host: str, port: int, timeout: float, process_id: int, coordinator_address: str) -> None:
    """On processes ≠ 0: wait until the coordinator accepts connections (JAX aborts the process if it never does)."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(5.0, max(timeout, 0.1))):
                return
        except OSError as error:
            last_error = error
        if time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    raise ConnectionError(
        f"process {process_id} could not reach the coordinator at coordinator_address={coordinator_address!r} "
        f"within initialization_timeout={timeout:g} s ({last_error}). Start process 0 (it runs the coordinator), "
        "pass process 0's address as seen from this host (not 127.0.0.1 across hosts), and check that no firewall "
        "blocks the port."
    )


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    initialization_timeout: float = 300,
    local_device_ids: int | Sequence[int] | None = None,
    cluster_detection_method: str | None = None,
) -> Processes:
    """Join this process to the run (:func:`jax.distributed.initialize`); call it first, before any JAX work.

    Parameters
    ----------
    coordinator_address
        ``"host:port"`` of process 0, which runs JAX's coordinator service on
        that port; the same string in every process. ``None``: taken from
        ``JAX_COORDINATOR_ADDRESS`` or from the cluster (SLURM, Open MPI,
        Cloud TPU, Kubernetes: JAX's auto-detection).
    num_processes
        Number of processes in the run. ``None``: from the cluster. ``1``:
        nothing to join; returns at once.
    process_id
        This process's index in ``0 … num_processes − 1``. ``None``: from the
        cluster (e.g. ``SLURM_PROCID``).
    timeout
        Seconds without a heartbeat after which a process counts as dead
        (``heartbeat_timeout_seconds``), and the longest a finishing process
        waits for the others (``shutdown_timeout_seconds``). When a peer
        dies, every other process is ended by JAX's runtime within about this
        time, even one blocked in a collective; a peer that exits while a
        collective runs is usually seen at once (the connection closes).
        JAX's own default is 100 s (and 300 s for shutdown).
    initialization_timeout
        Seconds to wait for every process to join.
    local_device_ids, cluster_detection_method
        Passed to :func:`jax.distributed.initialize` (e.g. which GPUs this
        process uses; ``"mpi4py"`` for MPI launchers JAX does not detect).

    Returns
    -------
    Processes
        This process's index, the process count and device counts.

    Notes
    -----
    On CPU the cross-process collectives are Gloo's
    (``jax_cpu_collectives_implementation``, set to ``"gloo"`` unless already
    chosen); on GPU they are NCCL's. Before calling JAX, the arguments are
    checked, and when the coordinator address is known process 0 checks
    that its port is free and every other process waits (up to
    ``initialization_timeout``) for the coordinator to accept connections:
    in both cases JAX itself would end the process without a Python error
    (a crash, or an abort saying "another task died").
    """
    for name, value in (("timeout", timeout), ("initialization_timeout", initialization_timeout)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name}={value!r}: pass a positive number of seconds")
    if num_processes is not None:
        if isinstance(num_processes, bool) or not isinstance(num_processes, (int, np.integer)) or num_processes < 1:
            raise ValueError(f"num_processes={num_processes!r}: pass a positive integer, the same in every process")
        num_processes = int(num_processes)
    if process_id is not None:
        if isinstance(process_id, bool) or not isinstance(process_id, (int, np.integer)):
            raise ValueError(f"process_id={process_id!r}: pass an integer in 0 … num_processes − 1")
        process_id = int(process_id)
        if num_processes is not None and not 0 <= process_id < num_processes:
            raise ValueError(
                f"process_id={process_id} is out of range for num_processes={num_processes}: number the processes "
                f"0 … {num_processes - 1}, each exactly once (process 0 runs the coordinator)"
            )

    address = coordinator_address or os.environ.get("JAX_COORDINATOR_ADDRESS")
    host, port = _parse_address(address) if address is not None else (None, None)

    if jax.distributed.is_initialized():
        current = processes()
        if (num_processes not in (None, current.process_count)) or (process_id not in (None, current.process_index)):
            raise RuntimeError(
                f"this process already joined a run as process {current.process_index} of {current.process_count}; "
                f"initialize(num_processes={num_processes}, process_id={process_id}) cannot change that "
                "(call it once per process)"
            )
        return current
    if num_processes == 1 and process_id in (None, 0):
        return processes()
    if _backends_started():
        raise RuntimeError(
            "tallmcmc.distributed.initialize() must run before any JAX computation in this process (creating an "
            "array, jax.devices(), sampling): move the call to the top of the script"
        )

    if jax.config.jax_cpu_collectives_implementation is None:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")

    if address is not None and num_processes is not None and process_id is not None:
        if process_id == 0:
            _check_port_free(port, address)
        else:
            _wait_for_coordinator(host, port, initialization_timeout, process_id, address)

    try:
        jax.distributed.initialize(
            coordinator_address=coordinator_address,
            num_processes=num_processes,
            process_id=process_id,
            local_device_ids=local_device_ids,
            cluster_detection_method=cluster_detection_method,
            initialization_timeout=int(math.ceil(initialization_timeout)),
            heartbeat_timeout_seconds=int(math.ceil(timeout)),
            shutdown_timeout_seconds=int(math.ceil(timeout)),
        )
    except ValueError as error:
        given = {
            "coordinator_address": coordinator_address,
            "num_processes": num_processes,
            "process_id": process_id,
        }
        missing = [name for name, value in given.items() if value is None]
        if missing:
            raise ValueError(
                f"{', '.join(missing)} not given and no cluster environment (SLURM, Open MPI, Cloud TPU, Kubernetes) "
                "detected to supply them: pass coordinator_address='host:port' of process 0, num_processes and "
                "process_id (or launch under srun / mpirun), or num_processes=1 for a single process "
                f"(JAX: {error})"
            ) from error
        raise
    return processes()


def global_mesh(chain_devices: int = 1, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A mesh over every process's devices: ``"data"`` runs across the processes, ``"chains"`` within each.

    Parameters
    ----------
    chain_devices
        Size of the ``"chains"`` axis: each process's devices are split into
        this many groups, each holding (a copy of) that process's rows and
        running its own share of the chains. ``1`` (default): a mesh with the
        ``"data"`` axis only, every device holding its own block of rows. It
        must divide every process's device count.
    devices
        Default: :func:`jax.devices`, all processes' devices.

    Returns
    -------
    jax.sharding.Mesh
        Axes ``("data",)`` or ``("data", "chains")``. Along ``"data"``,
        process 0's devices come first, then process 1's, …, so that the
        rows of process ``p`` (:func:`row_block`) are the ``p``-th block of the
        global data.
    """
    devices = list(jax.devices() if devices is None else devices)
    by_process: dict[int, list] = {}
    for device in sorted(devices, key=lambda d: (d.process_index, d.id)):
        by_process.setdefault(device.process_index, []).append(device)
    counts = {len(local) for local in by_process.values()}
    if len(counts) != 1:
        raise ValueError(
            "devices: every process must bring the same number of devices, got "
            + ", ".join(f"process {p}: {len(local)}" for p, local in sorted(by_process.items()))
        )
    per_process = counts.pop()
    if isinstance(chain_devices, bool) or not isinstance(chain_devices, (int, np.integer)) or chain_devices < 1:
        raise ValueError(f"chain_devices={chain_devices!r}: pass a positive integer")
    if per_process % chain_devices:
        raise ValueError(
            f"chain_devices={chain_devices} does not divide the {per_process} devices of each process: pass a "
            f"divisor of {per_process}"
        )
    # grid[p, j, c]: process p's (j·chain_devices + c)-th device; data index p·(per/chains) + j.
    grid = np.array([by_process[p] for p in sorted(by_process)], dtype=object)
    grid = grid.reshape(len(by_process), per_process // chain_devices, chain_devices)
    grid = grid.reshape(-1, chain_devices)
    if chain_devices == 1:
        return Mesh(grid[:, 0], (DATA_AXIS,))
    return Mesh(grid, (DATA_AXIS, CHAINS_AXIS))


def row_block(num_rows: int, process_index: int | None = None, process_count: int | None = None) -> slice:
    """The contiguous rows ``start:stop`` of a ``num_rows``-row data set that process ``process_index`` holds.

    Process ``p`` of ``P`` holds rows ``p·N/P`` to ``(p+1)·N/P``, the order
    :func:`global_mesh` lays the processes out in, so the global data are the
    rows in their original order. Use it to load only this process's rows
    (``np.load(path, mmap_mode="r")[row_block(N)]``, a Parquet row range, …).

    Raises
    ------
    ValueError
        When ``num_rows`` is not a multiple of ``process_count``: every
        process must hold the same number of rows.
    """
    process_index = jax.process_index() if process_index is None else int(process_index)
    process_count = jax.process_count() if process_count is None else int(process_count)
    if not 0 <= process_index < process_count:
        raise ValueError(f"process_index={process_index} is out of range for process_count={process_count}")
    if num_rows % process_count:
        raise ValueError(
            f"num_rows={num_rows} is not a multiple of the {process_count} processes: every process must hold the "
            f"same number of rows. Use {num_rows - num_rows % process_count} rows (drop {num_rows % process_count}) "
            "or a process count that divides the data"
        )
    size = num_rows // process_count
    return slice(process_index * size, (process_index + 1) * size)


def local_rows(data: Any, process_index: int | None = None, process_count: int | None = None) -> Any:
    """This process's rows (:func:`row_block`) of a full data set ``data`` (a pytree of arrays, leading axis N).

    For data sets every host can read whole (e.g. simulated from a seed); a
    data set too large for one host is better read block by block with
    :func:`row_block`.
    """
    leaves = jax.tree_util.tree_leaves(data)
    if not leaves:
        raise ValueError("data has no arrays")
    rows = row_block(int(np.shape(leaves[0])[0]), process_index, process_count)
    return jax.tree_util.tree_map(lambda leaf: leaf[rows], data)


def _describe(data: Any) -> tuple[int, str]:
    leaves, treedef = jax.tree_util.tree_flatten(data)
    if not leaves:
        raise ValueError("local_data has no arrays: pass a pytree of arrays with the rows on the leading axis")
    shapes = [np.shape(leaf) for leaf in leaves]
    if any(len(shape) == 0 for shape in shapes):
        raise ValueError("local_data: every leaf needs a leading axis of rows (a scalar leaf has none)")
    lengths = {shape[0] for shape in shapes}
    if len(lengths) != 1:
        raise ValueError(
            f"local_data: every leaf must have the same number of rows, got leading axes {sorted(lengths)}"
        )
    layout = f"{treedef}|" + ";".join(f"{shape[1:]}:{np.result_type(leaf)}" for shape, leaf in zip(shapes, leaves))
    return lengths.pop(), layout


def shard_rows(local_data: Any, mesh: Mesh) -> Any:
    """Every process's rows → global arrays sharded along the mesh's ``"data"`` axis.

    Parameters
    ----------
    local_data
        This process's rows (a pytree of arrays, rows on the leading axis):
        the same structure, trailing shapes, dtypes and number of rows in
        every process. Process ``p``'s rows become the ``p``-th block of the
        global arrays (:func:`row_block`).
    mesh
        From :func:`global_mesh`.

    Returns
    -------
    pytree of jax.Array
        Global arrays of ``process_count × rows`` rows (not fully addressable
        when there are several processes), for :class:`tallmcmc.Model` and
        :func:`tallmcmc.sample` with ``mesh=mesh``.

    Raises
    ------
    ValueError
        When the processes disagree (checked with a small all-gather, so every
        process raises the same error), or when the rows do not split evenly
        over this process's devices along ``"data"``.
    """
    if DATA_AXIS not in mesh.axis_names:
        raise ValueError(f"mesh has axes {mesh.axis_names}; it needs a {DATA_AXIS!r} axis (use global_mesh())")
    rows, layout = _describe(local_data)
    signature = np.array([rows, zlib.crc32(layout.encode())], dtype=np.int64)
    everyone = np.asarray(multihost_utils.process_allgather(signature)).reshape(-1, 2)
    if len({int(r) for r in everyone[:, 0]}) != 1:
        raise ValueError(
            "local_data: every process must hold the same number of rows, got "
            + ", ".join(f"process {p}: {int(r)}" for p, r in enumerate(everyone[:, 0]))
            + ". Split the data with tallmcmc.distributed.row_block(N) (N a multiple of the process count)"
        )
    if len({int(h) for h in everyone[:, 1]}) != 1:
        raise ValueError(
            "local_data: the processes pass differently structured data (pytree, trailing shapes or dtypes differ; "
            f"this process has {layout}). Load the same fields, with the same dtypes, in every process"
        )
    local_blocks = {
        index
        for device, index in zip(
            mesh.devices.flat, np.indices(mesh.devices.shape)[mesh.axis_names.index(DATA_AXIS)].flat
        )
        if device.process_index == jax.process_index()
    }
    if rows % len(local_blocks):
        raise ValueError(
            f"local_data: {rows} rows per process do not split evenly over this process's {len(local_blocks)} "
            f"devices along {DATA_AXIS!r}: use a multiple of {len(local_blocks)} rows per process"
        )
    sharding = NamedSharding(mesh, PartitionSpec(DATA_AXIS))
    return jax.tree_util.tree_map(
        lambda leaf: jax.make_array_from_process_local_data(sharding, np.asarray(leaf)), local_data
    )


def gather(tree: Any) -> Any:
    """Bring results home: every leaf as a NumPy array holding its whole (global) value, on every process.

    Global arrays that span processes are all-gathered
    (:func:`jax.experimental.multihost_utils.process_allgather`); leaves
    this process holds whole are converted in place. Every process must call
    it (it is a collective when any leaf spans processes).
    """

    return jax.tree_util.tree_map(np.asarray, to_host(tree))


@contextlib.contextmanager
def exit_on_error(exit_code: int = 1) -> Iterator[None]:
    """End this process at once, with a clear message, when the block raises (several processes only).

    In a multi-process run an error in one process leaves the others waiting
    in their next collective, and JAX's shutdown then waits for the missing
    process (up to ``timeout`` of :func:`initialize`) and aborts. Inside this
    block, an exception instead prints its traceback and a line naming this
    process, and ends the process with ``os._exit(exit_code)`` (no clean-up
    handlers run): its peers' collectives fail at once (the connection
    closes) and, if they are inside ``exit_on_error`` too, they leave the
    same way; otherwise JAX's heartbeat ends them within ``timeout``. With
    one process the exception propagates as usual.
    """
    try:
        yield
    except BaseException as error:  # noqa: BLE001 - every error must end the process in a multi-process run
        if jax.process_count() == 1 or isinstance(error, SystemExit) and error.code in (0, None):
            raise
        traceback.print_exc()
        text = str(error)
        peer = any(marker in text for marker in ("Gloo", "Connection closed", "UNAVAILABLE", "heartbeat", "NCCL"))
        cause = (
            "a collective failed: another process of this run has probably died or left (see its log)"
            if peer
            else "the error above was raised in this process"
        )
        print(
            f"tallmcmc.distributed: process {jax.process_index()} of {jax.process_count()} is exiting "
            f"(code {exit_code}): {cause}.",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.flush()
        os._exit(exit_code)
