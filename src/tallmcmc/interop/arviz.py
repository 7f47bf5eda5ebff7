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

Which line is used: ``TALLMCMC_ARVIZ=0`` or ``=1`` in the environment forces
it (read at each call, so a test can switch it). Otherwise the objects
(:func:`inference_data`, :func:`plot_ecdf`; :func:`backend`) follow the
installed ``arviz``: the 0.x line when it is older than 1, else the 1.x line;
and the diagnostics on arrays (:func:`ess`, :func:`rhat`, :func:`mcse`;
:func:`diagnostics_backend`) use ``arviz_stats`` wherever it is installed (a
tallmcmc dependency), because ``import arviz`` 0.23 takes about 3 s (1.2 s of
it numba compiling ArviZ's ECDF ufunc, in every new process) against 0.6 s for
``arviz_stats``, and ``sample_tall`` computes r̂ at the end of every run. See
``docs/arviz.md``.
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
    "diagnostics_backend",
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


def diagnostics_backend() -> int:
    """The ArviZ line :func:`ess`, :func:`rhat` and :func:`mcse` call: ``1`` (``arviz_stats``) wherever it is
    installed, else ``0``.

    ``TALLMCMC_ARVIZ`` forces the line as for :func:`backend`. Unset, the
    diagnostics use ``arviz_stats`` (the 1.x line's diagnostics, a tallmcmc
    dependency) even beside an ``arviz`` 0.x, whose objects :func:`backend`
    keeps: importing ``arviz`` 0.23 costs about 3 s in every new process
    (measured on a 2-core CPU: 1.2 s of it numba compiling an ECDF ufunc at
    import, not cached between processes), ``arviz_stats`` 0.6 s, and both
    compute the same rank-normalised estimates (``docs/arviz.md``).

    Returns
    -------
    int
        0 or 1.

    Raises
    ------
    ImportError
        If neither line is installed, or the forced one is not.
    ValueError
        If ``TALLMCMC_ARVIZ`` holds anything but ``0``, ``1`` or nothing.
    """
    if os.environ.get(BACKEND_VARIABLE, "").strip() or not _has_one_line():
        return backend()
    return 1


def diagnostics_module() -> str | None:
    """The module :func:`ess` and :func:`rhat` import: ``"arviz_stats"`` or ``"arviz"`` (see
    :func:`diagnostics_backend`); ``None`` where neither line can be used (they raise then).

    :func:`tallmcmc.sample_tall` imports it ahead, in a thread (:mod:`tallmcmc.import_ahead`).
    """
    try:
        return "arviz_stats" if diagnostics_backend() == 1 else "arviz"
    except (ImportError, ValueError):
        return None


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
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
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


# ------------------------------------------------------------------------------------- diagnostics on arrays


def _chain_draw_array(draws) -> np.ndarray:
    draws = np.asarray(draws)
    if draws.ndim < 2:
        raise ValueError(f"draws must have shape (chain, draw) or (chain, draw, ...); got {draws.shape}")
    return draws


def _per_coordinate(draws: np.ndarray, one) -> float | np.ndarray:
    """``one`` (a (chain, draw) array → number) on each trailing coordinate: a float for (chain, draw), else an array."""
    if draws.ndim == 2:
        return float(np.ravel(one(draws))[0])
    flat = draws.reshape(*draws.shape[:2], -1)
    values = [float(np.ravel(one(flat[..., k]))[0]) for k in range(flat.shape[-1])]
    return np.asarray(values, np.float64).reshape(draws.shape[2:])


def _as_result(value, draws: np.ndarray) -> float | np.ndarray:
    value = np.asarray(value, np.float64)
    return float(value) if draws.ndim == 2 else value.reshape(draws.shape[2:])


def ess(draws, method: str = "bulk") -> float | np.ndarray:
    """ArviZ's effective sample size of each coordinate.

    Parameters
    ----------
    draws : array_like
        Shape ``(chain, draw)`` or ``(chain, draw, ...)``; every trailing
        coordinate is a separate quantity.
    method : str, default "bulk"
        ArviZ's ESS method (``"bulk"``, ``"tail"``, ``"mean"``, ``"sd"``, …).

    Returns
    -------
    float or numpy.ndarray
        A float for ``(chain, draw)`` draws, else an array of the trailing shape.

    Notes
    -----
    ``arviz.ess`` under ArviZ 0.x (called on each coordinate's
    ``(chain, draw)`` array, as tallmcmc always did), ``arviz_stats.ess`` on
    the whole array under 1.x; both compute the same rank-normalised
    split-chain estimate (Vehtari et al. 2021).
    """
    draws = _chain_draw_array(draws)
    if diagnostics_backend() == 1:
        import arviz_stats

        # on arrays arviz_stats asks for the tail's probability, which ArviZ 0.x (and its own DataTree call) default
        # to 0.05: the 5% and 95% quantiles
        options = {"prob": 0.05} if method == "tail" else {}
        return _as_result(arviz_stats.ess(draws, method=method, chain_axis=0, draw_axis=1, **options), draws)
    import arviz as az

    return _per_coordinate(draws, lambda x: az.ess(x, method=method))


def rhat(draws, method: str = "rank") -> float | np.ndarray:
    """ArviZ's r̂ (rank-normalised split r̂ by default) of each coordinate.

    Parameters
    ----------
    draws : array_like
        Shape ``(chain, draw)`` or ``(chain, draw, ...)``.
    method : str, default "rank"
        ArviZ's r̂ method.

    Returns
    -------
    float or numpy.ndarray
        A float for ``(chain, draw)`` draws, else an array of the trailing shape.
    """
    draws = _chain_draw_array(draws)
    if diagnostics_backend() == 1:
        import arviz_stats

        return _as_result(arviz_stats.rhat(draws, method=method, chain_axis=0, draw_axis=1), draws)
    import arviz as az

    return _per_coordinate(draws, lambda x: az.rhat(x, method=method))


def _mcse_sd_arviz0(x: np.ndarray) -> float:
    """ArviZ 0.x's MCSE of the sd of one (chain, draw) array, computed without the call that NumPy 2.4 breaks.

    Works around ``arviz.mcse(..., method="sd")`` in ArviZ 0.23.4 (the last
    0.x release; the code is the same in earlier 0.x releases): with numba
    installed (a tallmcmc dependency) it ends in ``float()`` of a
    one-element 1-d array, which NumPy 2.4 refuses ("only 0-dimensional
    arrays can be converted to Python scalars"). These are the lines of
    ``arviz.stats.diagnostics._mcse_sd`` that run without numba (the delta
    method on the variance, with ArviZ's own ``ess(method="mean")`` of the
    centred squares), so the value is the one ArviZ 0.x gives where it works.
    """
    import arviz as az

    if x.shape[1] < 4 or not np.all(np.isfinite(x)):  # ArviZ 0.x's _not_valid: NaN for < 4 draws or non-finite
        return float("nan")
    squares = (x - x.mean()) ** 2
    effective = float(np.ravel(az.ess(squares, method="mean"))[0])
    variance = squares.mean()
    variance_of_variance = ((squares**2).mean() - variance**2) / effective
    return float(np.sqrt(variance_of_variance / variance / 4))


def mcse(draws, method: str = "mean") -> float | np.ndarray:
    """ArviZ's Monte Carlo standard error of each coordinate's mean (or sd, median, …).

    Parameters
    ----------
    draws : array_like
        Shape ``(chain, draw)`` or ``(chain, draw, ...)``.
    method : str, default "mean"
        ``"mean"``: sd/√ESS_mean. ``"sd"``: of the standard deviation (delta
        method on the variance). Other ArviZ methods (``"median"``) pass
        through.

    Returns
    -------
    float or numpy.ndarray
        A float for ``(chain, draw)`` draws, else an array of the trailing shape.

    Notes
    -----
    Under ArviZ 0.x ``method="sd"`` does not call ``arviz.mcse``, which
    raises under NumPy 2.4 (see :func:`_mcse_sd_arviz0`); it computes the
    same value from ArviZ's ESS. ArviZ 1.x (``arviz_stats`` 0.8) takes the
    ESS of the draws rather than of their centred squares in the sd's MCSE,
    so the two lines give slightly different ``"sd"`` values (both ≈ sd/√(2n)
    for independent normal draws).
    """
    draws = _chain_draw_array(draws)
    if diagnostics_backend() == 1:
        import arviz_stats

        return _as_result(arviz_stats.mcse(draws, method=method, chain_axis=0, draw_axis=1), draws)
    if method == "sd":
        return _per_coordinate(draws, _mcse_sd_arviz0)
    import arviz as az

    return _per_coordinate(draws, lambda x: az.mcse(x, method=method))


def _ecdf_band(values, eval_points, cdf, ci_prob: float, num_simulations: int, seed: int):
    """ECDF of ``values`` at ``eval_points``, the reference CDF there, and ArviZ 1.x's simulated simultaneous band.

    The band comes from ``arviz_stats.ecdf_utils`` (the functions behind
    ArviZ 1.x's PIT-ECDF plots) for uniform values at ``cdf(eval_points)``;
    where the CDF is 0 or 1 the band is that point.

    Returns
    -------
    tuple of numpy.ndarray
        ``(ecdf, probabilities, lower, upper)``, each of the length of ``eval_points``.
    """
    from arviz_stats.ecdf_utils import get_pointwise_confidence_band, simulate_confidence_bands

    values, eval_points = np.asarray(values), np.asarray(eval_points)
    probabilities = np.asarray(cdf(eval_points), np.float64)
    ecdf = np.searchsorted(np.sort(values), eval_points, side="right") / len(values)
    inner = (probabilities > 0) & (probabilities < 1)
    pointwise = simulate_confidence_bands(
        len(values), 1, probabilities[inner], ci_prob, num_simulations, np.random.default_rng(seed)
    )
    lower, upper = probabilities.copy(), probabilities.copy()
    lower[inner], upper[inner] = get_pointwise_confidence_band(pointwise, len(values), probabilities[inner])
    return ecdf, probabilities, lower, upper


def plot_ecdf(
    values,
    *,
    eval_points,
    cdf,
    rvs=None,
    ci_prob: float = 0.99,
    ax=None,
    plot_kwargs=None,
    fill_kwargs=None,
    num_simulations: int = 1000,
    seed: int = 0,
    **kwargs,
):
    """ECDF-difference plot of ``values`` against a reference law, with a simultaneous ``ci_prob`` band.

    Parameters
    ----------
    values : array_like
        One-dimensional sample (not modified).
    eval_points : array_like
        Where the ECDF is evaluated (for a discrete law on 0 … M: ``arange(M + 1)``).
    cdf : callable
        The reference law's CDF.
    rvs : callable, optional
        Its sampler ``rvs(size, random_state=...)`` (ArviZ 0.x's simulated bands use it).
    ci_prob : float, default 0.99
        Probability that the whole ECDF of a sample from the reference law
        stays inside the band.
    ax : matplotlib.axes.Axes, optional
    plot_kwargs, fill_kwargs : dict, optional
        Passed to the line and to the band.
    num_simulations, seed : int
        ArviZ 1.x only: simulations behind the band, and their seed.
    **kwargs
        ArviZ 0.x only: passed to :func:`arviz.plot_ecdf`.

    Returns
    -------
    matplotlib.axes.Axes

    Notes
    -----
    Under ArviZ 0.x, :func:`arviz.plot_ecdf` with ``difference=True`` and
    ``confidence_bands="optimized"`` (Säilynoja, Bürkner and Vehtari 2022's
    optimised simultaneous band). ArviZ 1.x has no such function for a given
    reference CDF (``arviz_plots.plot_ecdf_pit`` plots PIT values of a
    DataTree, and ``arviz_plots`` 0.8.0 does not import under matplotlib 3.11),
    so under 1.x the band is the same paper's simulated simultaneous band
    from ``arviz_stats.ecdf_utils`` for the uniform law evaluated at
    ``cdf(eval_points)`` (exact for any reference law: the count at or below
    x is Binomial(n, F(x)) jointly as for uniform values at F(x)), and
    matplotlib draws it.
    """
    if backend() == 0:
        import arviz as az

        return az.plot_ecdf(
            np.array(values),  # a copy: ArviZ sorts it in place
            eval_points=eval_points,
            cdf=cdf,
            rvs=rvs,
            difference=True,
            confidence_bands="optimized",
            ci_prob=ci_prob,
            ax=ax,
            plot_kwargs=plot_kwargs,
            fill_kwargs=fill_kwargs,
            **kwargs,
        )
    if kwargs:
        raise TypeError(f"plot_ecdf under ArviZ 1.x takes no further keyword arguments; got {sorted(kwargs)}")
    import matplotlib.pyplot as plt

    eval_points = np.asarray(eval_points)
    ecdf, probabilities, lower, upper = _ecdf_band(values, eval_points, cdf, ci_prob, num_simulations, seed)
    if ax is None:
        ax = plt.gca()
    ax.fill_between(
        eval_points,
        lower - probabilities,
        upper - probabilities,
        step="post",
        **{"alpha": 0.2, "color": "C0", **(fill_kwargs or {})},
    )
    ax.step(eval_points, ecdf - probabilities, where="post", **{"color": "C0", **(plot_kwargs or {})})
    return ax
