"""The file a run is saved in (:func:`save_result`, ``SamplingResult.save``): its format, its atomic writing and
the fingerprint that ties it to a model. Reading it back: :mod:`tallmcmc.sampling.checkpoint`.

A file is one NetCDF-4 file (HDF5, written with xarray and h5netcdf) that anyone can open without tallmcmc:
``xarray.open_datatree(path)``, ``arviz.from_netcdf(path)`` (ArviZ 0.x) or ``arviz_base.from_netcdf(path)``
(ArviZ 1.x). Its groups are ArviZ's (:func:`tallmcmc.interop.arviz.to_datatree`: ``posterior``,
``sample_stats``, ``warmup_posterior``, ``warmup_sample_stats``) and one of tallmcmc's, ``tallmcmc_run``: the
chains' state to resume from (one variable per array of the state), the warm-up's step-size factors and
covariance, and a JSON attribute with the run's settings, setup counts, timings, library version and a
fingerprint of the model (N, the data's shapes and dtypes, a hash of a fixed sample of its rows, and the
log-likelihood of the first rows at the first chain's position).

Files are written atomically (a temporary file in the same folder, flushed to disk, then renamed over the old
one), so a process killed while writing leaves the previous file whole.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc.model import Model, Position
from tallmcmc.sampling.continuation import RunState, position_kind, starts_of
from tallmcmc.sharding import to_host

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "STATE_GROUP",
    "check_model",
    "check_writable",
    "library_version",
    "model_fingerprint",
    "kind_from_json",
    "kind_to_json",
    "save_result",
]

FORMAT = "tallmcmc-run"
FORMAT_VERSION = 1
STATE_GROUP = "tallmcmc_run"
#: Rows of the data the fingerprint hashes (evenly spaced, the first and last included) and evaluates at.
FINGERPRINT_ROWS, PROBE_ROWS = 4096, 16


def library_version() -> str:
    try:
        return importlib.metadata.version("tallmcmc")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "unknown"


# ----------------------------------------------------------------------------------------------- the model


def model_fingerprint(model: Model, position: Position) -> dict[str, Any]:
    """What identifies a model without its code: N, the data's shapes and dtypes, a hash of a fixed sample of rows
    (``None`` where the data is spread over processes), and the log-likelihood of the first rows and the log-prior at
    ``position`` (one chain's position on the sampling scale)."""
    leaves = jax.tree_util.tree_leaves(model.data)
    num_data = model.num_data
    rows = np.unique(np.linspace(0, num_data - 1, min(num_data, FINGERPRINT_ROWS)).round().astype(np.int64))
    digest = hashlib.blake2b(digest_size=16)
    for leaf in leaves:
        digest.update(f"{np.shape(leaf)}{np.dtype(leaf.dtype)}".encode())
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            digest = None
            break
        digest.update(np.ascontiguousarray(np.asarray(leaf[rows])).tobytes())
    probe_rows = jnp.arange(min(num_data, PROBE_ROWS))
    try:
        probe = float(jnp.sum(model.per_datum_log_likelihood(position, model.data_at(probe_rows))))
        prior = float(model.log_prior(position))
    except Exception:  # noqa: BLE001 - data held elsewhere (a mesh over processes): the other checks remain
        probe = prior = None
    return {
        "num_data": int(num_data),
        "data": [[list(np.shape(leaf)), str(np.dtype(leaf.dtype))] for leaf in leaves],
        "rows_hash": None if digest is None else digest.hexdigest(),
        "log_likelihood_first_rows": probe,
        "log_prior": prior,
    }


def check_model(saved: dict[str, Any], model: Model, position: Position, name: str) -> None:
    """Refuse a file whose model fingerprint differs from ``model``'s at the same position (``ValueError`` naming it)."""
    here = model_fingerprint(model, position)
    problems = []
    if saved["num_data"] != here["num_data"] or saved["data"] != here["data"]:
        problems.append(f"the data differ in size or shape ({saved['data']} saved, {here['data']} here)")
    elif None not in (saved["rows_hash"], here["rows_hash"]) and saved["rows_hash"] != here["rows_hash"]:
        problems.append("the data's rows differ")
    for key, what in (("log_likelihood_first_rows", "log-likelihood"), ("log_prior", "log-prior")):
        a, b = saved.get(key), here.get(key)
        if a is not None and b is not None and not math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6):
            problems.append(f"the {what} at the saved position differs ({a:.9g} saved, {b:.9g} here)")
    if problems:
        raise ValueError(f"{name}: the file comes from another model: {'; '.join(problems)}")


# ------------------------------------------------------------------------------------------------ writing


def _state_dataset(state: RunState):
    import xarray as xr

    variables, keys = {}, {}
    for index, leaf in enumerate(to_host(state.leaves)):
        if jax.dtypes.issubdtype(getattr(leaf, "dtype", np.float32), jax.dtypes.prng_key):
            keys[str(index)] = str(jax.random.key_impl(leaf))
            leaf = jax.random.key_data(leaf)
        leaf = np.asarray(leaf)
        variables[f"state_{index}"] = ([f"state_{index}_dim_{i}" for i in range(leaf.ndim)], leaf)
    if state.step_size_factor is not None:
        variables["step_size_factor"] = (["chain"], np.asarray(state.step_size_factor))
    if state.adapted_covariance is not None:
        covariance = np.asarray(state.adapted_covariance)
        variables["adapted_covariance"] = (["covariance_row", "covariance_column"], covariance)
    return xr.Dataset(variables), keys


def _meta(result, target: int | None, keys: dict[str, str]) -> dict[str, Any]:
    state = result.last_state
    meta: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "library_version": library_version(),
        "target_draws": target,
        "num_data": result.num_data,
        "test_name": result.test_name,
        "proposal_name": result.proposal_name,
        "inexact_proposal": bool(result.inexact_proposal),
        "made_by": result.made_by,
        "driver": result.driver,
        "loop_iterations": result.loop_iterations,
        "compile_seconds": result.compile_seconds,
        "sampling_seconds": result.sampling_seconds,
        "setup_data_used": {key: int(value) for key, value in result.setup_data_used.items()},
        "first_draw": result.first_draw,
        "draws_kind": list(_draws_kind(result.positions)),
        "warmup_draws_kind": None if result.warmup_positions is None else list(_draws_kind(result.warmup_positions)),
        "state": None,
    }
    if state is not None:
        model = state.model
        fingerprint = state.fingerprint
        if fingerprint is None and model is not None:
            fingerprint = model_fingerprint(model, jax.tree_util.tree_map(lambda leaf: leaf[0], starts_of(state)))
        meta["state"] = {
            "steps_done": int(state.steps_done),
            "seed": int(state.seed),
            "num_chains": int(state.num_chains),
            "test_name": state.test_name,
            "proposal_name": state.proposal_name,
            "num_data": int(state.num_data),
            "mesh_shape": state.mesh_shape,
            "position_kind": kind_to_json(state.position_kind),
            "num_leaves": len(state.leaves),
            "prng_keys": keys,
            "model": fingerprint,
        }
    return meta


def _draws_kind(positions) -> list:
    one = jax.tree_util.tree_map(lambda leaf: np.zeros(np.shape(leaf)[2:], np.asarray(leaf).dtype), positions)
    return kind_to_json(position_kind(one))


def kind_to_json(kind: tuple) -> list:
    """A :func:`~tallmcmc.sampling.continuation.position_kind` as JSON (a list)."""
    return [kind[0], list(kind[1])] if kind[0] == "dict" else list(kind)


def kind_from_json(kind: list) -> tuple:
    """A :func:`~tallmcmc.sampling.continuation.position_kind` read back from JSON."""
    return (kind[0], tuple(kind[1])) if kind[0] == "dict" else tuple(kind)


def save_result(result, path: str | os.PathLike, *, target: int | None = None, argument: str = "path") -> Path:
    """Write ``result`` to ``path`` atomically (see the module docstring); returns the path.

    ``target``: the total draws the run aims at (written by ``sample(checkpoint=...)``).
    ``argument`` names the path in errors.
    """
    from tallmcmc.interop.arviz import to_datatree

    path = Path(path)
    check_writable(path, argument)
    tree = to_datatree(result)
    keys: dict[str, str] = {}
    if result.last_state is not None:
        state_data, keys = _state_dataset(result.last_state)
    else:
        import xarray as xr

        state_data = xr.Dataset()
    state_data.attrs["tallmcmc"] = json.dumps(_meta(result, target, keys))
    tree[STATE_GROUP] = state_data
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    try:
        tree.to_netcdf(temporary, engine="h5netcdf")
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def check_writable(path: Path, argument: str) -> None:
    folder = path.parent
    if path.is_dir():
        raise ValueError(f"{argument}={str(path)!r} is a folder; give a file path such as 'run.nc'")
    if not folder.is_dir():
        raise ValueError(f"{argument}={str(path)!r}: the folder {str(folder)!r} does not exist; create it first")
    try:
        handle, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=folder)
    except OSError as error:
        raise ValueError(
            f"{argument}={str(path)!r} cannot be written ({error.strerror}); choose a writable folder"
        ) from error
    os.close(handle)
    os.unlink(probe)
