"""The bridge to whichever ArviZ is installed: results as ArviZ objects, and ArviZ's diagnostics on arrays.

ArviZ has two code lines. The 0.x line (the ``arviz`` package up to 0.23)
holds draws in an :class:`arviz.InferenceData`; the 1.x line (``arviz-base``,
``arviz-stats``, ``arviz-plots``, gathered by the ``arviz`` 1.x meta-package)
holds them in an :class:`xarray.DataTree` with the same group names.
This module is the one place in tallmcmc that imports either.

* :func:`to_datatree` needs only xarray: the draws and step statistics of a
  :class:`tallmcmc.SamplingResult` as a DataTree with ArviZ's group names and
  dimensions, whatever ArviZ is installed (or none). It writes to NetCDF with
  ``tree.to_netcdf(path, engine="h5netcdf")`` and reads back with
  :func:`xarray.open_datatree`, every dtype kept.
* :func:`inference_data` is what :meth:`tallmcmc.SamplingResult.to_inference_data`
  returns: under the 0.x line the :class:`arviz.InferenceData` tallmcmc has
  always built, under the 1.x line the DataTree of :func:`to_datatree` (1.x's
  own object; ``arviz_base.convert_to_datatree`` accepts it as it is).
* :func:`ess`, :func:`rhat`, :func:`mcse` and :func:`plot_ecdf` take NumPy
  arrays shaped ``(chain, draw)`` or ``(chain, draw, …)`` (one value per
  trailing coordinate) and call ArviZ's own implementation of the installed
  line, returning NumPy floats and arrays.

Which line is used (:func:`backend`): ``TALLMCMC_ARVIZ=0`` or ``=1`` in the
environment forces it (read at each call, so a test can switch it); otherwise
the 0.x line when an ``arviz`` older than 1 is installed, else the 1.x line
(``arviz_base`` and ``arviz_stats`` importable). See ``docs/arviz.md``.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import importlib.util
import os
from typing import Any

import jax
import numpy as np

__all__ = [
    "BACKEND_VARIABLE",
    "backend",
    "ess",
    "inference_data",
    "mcse",
    "named_variables",
    "plot_ecdf",
    "rhat",
    "to_datatree",
]

#: The environment variable that forces the ArviZ line: ``"0"`` (``arviz`` < 1) or ``"1"`` (arviz-base/arviz-stats).
BACKEND_VARIABLE = "TALLMCMC_ARVIZ"


# ------------------------------------------------------------------------------------------------ which ArviZ


def _arviz_major() -> int | None:
    """Major version of the installed ``arviz`` distribution (read from its metadata, not imported), or None."""
    try:
        return int(importlib.metadata.version("arviz").split(".")[0])
    except importlib.metadata.PackageNotFoundError:
        return None


def _has_one_line() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("arviz_base", "arviz_stats"))


def backend() -> int:
    """The ArviZ line this module calls: ``0`` (``arviz`` < 1) or ``1`` (``arviz_base`` and ``arviz_stats``).

    ``TALLMCMC_ARVIZ`` (:data:`BACKEND_VARIABLE`) set to ``0`` or ``1``
    forces the line. Unset (or empty), the 0.x line is used when an ``arviz``
    older than 1 is installed, and the 1.x line when ``arviz`` is 1 or later or
    absent.

    Returns
    -------
    int
        0 or 1.

    Raises
    ------
    ImportError
        If the chosen line is not installed.
    ValueError
        If ``TALLMCMC_ARVIZ`` holds anything but ``0``, ``1`` or nothing.
    """
    forced = os.environ.get(BACKEND_VARIABLE, "").strip()
    major = _arviz_major()
    if forced not in ("", "0", "1"):
        raise ValueError(f"{BACKEND_VARIABLE} must be 0 (ArviZ 0.x) or 1 (ArviZ 1.x); got {forced!r}")
    if forced == "0" or (not forced and major is not None and major < 1):
        if major is None or major >= 1:
            raise ImportError(
                f"{BACKEND_VARIABLE}=0 asks for ArviZ 0.x, but the installed arviz is "
                f"{'absent' if major is None else importlib.metadata.version('arviz')}"
            )
        return 0
    if not _has_one_line():
        raise ImportError(
            "ArviZ 1.x needs arviz-base and arviz-stats (pip install 'arviz-base>=0.8' 'arviz-stats>=0.8'), "
            "or install arviz<1 for the 0.x line"
        )
    return 1


# --------------------------------------------------------------------------------------- results as trees


def named_variables(positions) -> dict[str, np.ndarray]:
    """ArviZ variables of draws: a dict's keys, ``theta`` for one array, ``theta_0``, … for tuples and other pytrees.

    Parameters
    ----------
    positions : pytree
        Draws, every leaf with leading axes ``(chain, draw)``.

    Returns
    -------
    dict of str to numpy.ndarray
    """
    if isinstance(positions, dict):
        return {str(key): np.asarray(value) for key, value in positions.items()}
    if isinstance(positions, (tuple, list)):
        return {f"theta_{i}": np.asarray(value) for i, value in enumerate(positions)}
    leaves, _ = jax.tree_util.tree_flatten(positions)
    if len(leaves) == 1:
        return {"theta": np.asarray(leaves[0])}
    return {f"theta_{i}": np.asarray(value) for i, value in enumerate(leaves)}


def _dataset(variables: dict[str, Any], attrs: dict[str, Any]):
    """An xarray Dataset with ArviZ's dims: ``chain``, ``draw``, then ``<name>_dim_0``, … with integer coordinates."""
    import xarray as xr

    data_vars, coords = {}, {}
    for name, value in variables.items():
        value = np.asarray(value)
        if value.ndim < 2:
            raise ValueError(f"{name}: draws need leading axes (chain, draw); got shape {value.shape}")
        dims = ("chain", "draw", *(f"{name}_dim_{i}" for i in range(value.ndim - 2)))
        data_vars[name] = (dims, value)
        for dim, length in zip(dims, value.shape):
            coords.setdefault(dim, np.arange(length))
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


def _creation_attrs() -> dict[str, str]:
    """What ArviZ writes on each group (``created_at``, ``creation_library``, …), naming tallmcmc as the creator."""
    try:
        version = importlib.metadata.version("tallmcmc")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        version = "unknown"
    return {
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "creation_library": "tallmcmc",
        "creation_library_version": version,
        "creation_library_language": "Python",
    }


def to_datatree(result):
    """The draws and step statistics of a result as an :class:`xarray.DataTree` with ArviZ's groups.

    Needs only xarray; no ArviZ is imported, so it works with either ArviZ
    line installed, or none.

    Parameters
    ----------
    result : tallmcmc.SamplingResult
        A result of :func:`tallmcmc.sample` or :func:`tallmcmc.sample_tall`.

    Returns
    -------
    xarray.DataTree
        Groups:

        ``posterior``
            The kept draws, one variable per position leaf
            (:func:`named_variables`: a dict's keys, ``theta`` for one array,
            ``theta_0``, … otherwise), dims ``chain``, ``draw``, then
            ``<var>_dim_0``, …
        ``sample_stats``
            Every field of ``result.info`` (``accepted``, ``data_used``, …),
            dims ``chain``, ``draw``, dtypes as sampled (``accepted`` is bool).
        ``warmup_posterior``, ``warmup_sample_stats``
            The same for the warm-up, only when ``result.warmup_info`` is not
            None.

        The run's attributes (``test``, ``proposal``, ``num_data``,
        ``sampling_seconds``, ``setup_data_passes``) are on the root (where
        ArviZ 0.x keeps ``InferenceData.attrs``) and on ``posterior``; each
        group also has ArviZ's ``created_at`` and ``creation_library*``
        attributes, naming tallmcmc.

    Notes
    -----
    ``tree.to_netcdf(path, engine="h5netcdf")`` writes it and
    ``xarray.open_datatree(path, engine="h5netcdf")`` reads it back with every
    dtype and attribute (xarray stores a bool variable as int8 with a
    ``dtype: bool`` marker and decodes it to bool again).
    ``arviz.from_netcdf(path)`` (0.x) and ``arviz_base.from_netcdf(path)``
    (1.x) open the file too.
    """
    import xarray as xr

    run_attrs = dict(result._attrs())
    groups = {
        "posterior": _dataset(named_variables(result.positions), {**_creation_attrs(), **run_attrs}),
        "sample_stats": _dataset(dict(result.info), _creation_attrs()),
    }
    if result.warmup_info is not None:
        groups["warmup_posterior"] = _dataset(named_variables(result.warmup_positions), _creation_attrs())
        groups["warmup_sample_stats"] = _dataset(dict(result.warmup_info), _creation_attrs())
    return xr.DataTree.from_dict({"/": xr.Dataset(attrs=run_attrs), **groups})


def inference_data(result):
    """What :meth:`tallmcmc.SamplingResult.to_inference_data` returns: the installed ArviZ line's own object.

    Parameters
    ----------
    result : tallmcmc.SamplingResult

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        Under ArviZ 0.x (:func:`backend` is 0) an :class:`arviz.InferenceData`
        built by :func:`arviz.from_dict`: groups ``posterior`` and
        ``sample_stats`` (and ``warmup_posterior``, ``warmup_sample_stats``
        with ``save_warmup=True`` when the run had a warm-up), the run's
        attributes in ``.attrs``, as tallmcmc has always returned. Under
        ArviZ 1.x (:func:`backend` is 1) the :class:`xarray.DataTree` of
        :func:`to_datatree`, the object ArviZ 1.x works on.
    """
    if backend() == 1:
        return to_datatree(result)
    import arviz as az

    posterior = named_variables(result.positions)
    sample_stats = {key: np.asarray(value) for key, value in result.info.items()}
    if result.warmup_info is None:
        return az.from_dict(posterior=posterior, sample_stats=sample_stats, attrs=result._attrs())
    return az.from_dict(
        posterior=posterior,
        sample_stats=sample_stats,
        warmup_posterior=named_variables(result.warmup_positions),
        warmup_sample_stats={key: np.asarray(value) for key, value in result.warmup_info.items()},
        save_warmup=True,
        attrs=result._attrs(),
    )
