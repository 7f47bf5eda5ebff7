r"""NumPyro models as tallmcmc models: :func:`from_numpyro`.

A NumPyro model states its data's conditional independence with a plate,

.. code-block:: python

    def model(X, y):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)

and :func:`from_numpyro` reads the rest from it. The *data plate* is the plate
that holds the observed sites. The *data* are the model's array arguments whose
leading length is the plate's size N (here ``X`` and ``y``); one datum is one
row of each. The per-datum log-likelihood runs the model on one datum: every
data argument cut to its row (leading length 1) and the plate's indices
substituted by ``[0]``, so the plate has one element whether its size is
written ``X.shape[0]`` or a number, and a model that indexes its data with the
plate's indices (``y[idx]``) or ``numpyro.subsample`` reads that row. Its value
is the sum of the plate's observed sites' log-densities. A model with no array
argument of leading length N (data held in a closure and reached through the
plate's indices or ``numpyro.subsample``, as NumPyro's HMCECS expects) is run
on its full arguments with the plate's indices substituted by the datum's
index ``[i]``; the data are then the indices ``0, …, N − 1``.

The position is NumPyro's own: a dict from latent site name to its value on
the unconstrained scale, mapped to the site's support by
``numpyro.distributions.transforms.biject_to(site["fn"].support)`` while the
model runs (so supports that depend on other sites are followed). The log-prior
is the sum of the latent sites' log-densities, the log-Jacobians of those maps
and the log-densities of observed sites outside the data plate, computed by
running the model on the first datum and keeping only those sites (the
likelihood part is unused and compiled away under ``jit``).
:meth:`tallmcmc.Model.log_density` is then −(NumPyro's potential energy) at any
position when ``temperature`` is 1.

Before the model is returned, the decomposition is checked at two random
unconstrained points (uniform on (−2, 2), NumPyro's ``init_to_uniform``
region), on all the data or, for N above 4,096, on 4,096 rows drawn at random
(the model run with its data arguments cut to those rows, or its plate's
indices set to them): site by site, the log-prior's terms must equal those of
the model run on those rows, each data-plate site's sum of per-datum values
over the rows must equal its value there, and the total must equal
``-numpyro.infer.util.potential_energy`` there (the plate's sites scaled by
its size over the rows' number, as NumPyro scales a subsampling plate). A model that reads its data outside the plate (``y.mean()`` in a
prior, a plate size used in a likelihood, data on a non-leading axis) fails
this check and is refused with the site named.

NumPyro is imported inside :func:`from_numpyro`, not when ``tallmcmc`` is.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc._device import to_device
from tallmcmc.model import Model
from tallmcmc.precision import full_float32_dots

__all__ = ["INDEX_KEY", "from_numpyro"]

#: The data's key when the model has no array argument of leading length N and
#: a datum is the index of a row (``data = {INDEX_KEY: arange(N)}``).
INDEX_KEY = "index"

#: An array argument at most this many rows longer or shorter than the data plate is named as a lagged series.
_LAG_ROWS = 10
#: Where NumPyro's log density is finite nowhere, the rows whose log-likelihood is not finite at this many check
#: points (the origin first) are named (data outside the support).
_ROWS_CHECK_POINTS = 3
_ROWS_CHUNK = 4096  # rows evaluated at once when naming them
#: The decomposition is compared at this many points where NumPyro's log density is finite: the origin and two random
#: ones (a dropped log-Jacobian of an exp transform is 0 at the origin, so random points are needed besides).
_NUM_CHECK_POINTS = 3
_MAX_CHECK_DRAWS = 20
_CHECK_RADIUS = 2.0
_CHUNK = 4096
#: The decomposition check runs on this many rows, drawn once without replacement (seeded), where N is larger: every
#: way of breaking the decomposition it looks for shows on any rows, and at N = 10⁷ the whole data cost six passes.
_CHECK_ROWS = 4096


def from_numpyro(
    model: Callable,
    *args: Any,
    plate: str | None = None,
    temperature: float = 1.0,
    model_kwargs: dict | None = None,
    **kwargs: Any,
) -> Model:
    """A :class:`tallmcmc.Model` from a NumPyro model function and its arguments.

    Parameters
    ----------
    model
        A NumPyro model: a function whose ``numpyro.sample`` sites with
        ``obs=`` inside one plate are the data's likelihood and whose other
        ``numpyro.sample`` sites are global, continuous parameters.
    *args, **kwargs
        The arguments to call ``model`` with, data included, as for
        ``numpyro.infer.MCMC.run``. Arrays (NumPy or JAX) whose leading length
        is the data plate's size N are the data, one row per datum; every
        other argument is passed to every evaluation unchanged.
    plate
        Name of the data plate. Default: the one plate that holds observed
        sites; give it when several do (e.g. an inner plate over the entries
        of a vector observation).
    temperature
        The ``K`` of :class:`tallmcmc.Model`: the likelihood enters as
        ``p(x_i | θ)^(1/K)``.
    model_kwargs
        Keyword arguments for ``model`` whose names clash with this function's
        own (``plate``, ``temperature``, ``model_kwargs``); merged with
        ``**kwargs``.

    Returns
    -------
    Model
        ``log_likelihood(position, datum)``: the data plate's observed sites'
        log-density at one datum; ``log_prior(position)``: the latent sites'
        log-densities on the unconstrained scale (log-Jacobians included) plus
        observed sites outside the data plate; ``data``: a dict from argument
        name to array (``"X"``, ``"y"``; a nested argument as
        ``"name['key']"``), or ``{INDEX_KEY: arange(N)}`` when the data are
        reached through the plate's indices; ``position_shape``: the position
        at the unconstrained origin, a dict from latent site name to zeros
        (a valid start: ``model.position_shape``); ``constrain``: maps a
        position to a dict from latent site name to its constrained value,
        and from each deterministic site outside the data plate to its value,
        so that :func:`tallmcmc.sample` reports the draws by site on the
        model's own scale.

    Raises
    ------
    ValueError
        Naming the site or argument and the fix, if the model cannot be run
        with the arguments, if it has no observed site, no plate around its
        observed sites or several candidate plates (pass ``plate=``), a latent
        site inside the data plate (a local latent variable: marginalise it),
        a discrete latent site, a subsampling plate other than the data plate,
        no latent site, or if the per-datum decomposition does not reproduce
        NumPyro's log density at the check points (data read outside the
        plate, a datum's term depending on other data, data on a non-leading
        axis).
    """
    if not callable(model):
        raise TypeError(f"model must be a NumPyro model function; got {type(model).__name__}")
    if model_kwargs is not None:
        if not isinstance(model_kwargs, dict):
            raise ValueError(
                f"model_kwargs must be a dict of keyword arguments for the model; got {type(model_kwargs).__name__}"
            )
        clash = sorted(set(model_kwargs) & set(kwargs))
        if clash:
            raise ValueError(f"model_kwargs and **kwargs both give {clash}: pass each keyword argument once")
        kwargs = {**kwargs, **model_kwargs}
    built = _NumPyroModel(model, args, kwargs, plate)
    built.check_decomposition()
    built.check_deterministic_sites()
    # jit: a model traced op by op (check_model's first evaluation, a user's call) would dispatch
    # every NumPyro operation on its own; under an outer jit these inline
    return Model(
        jax.jit(built.log_likelihood),
        jax.jit(built.log_prior),
        built.data,
        temperature=temperature,
        position_shape=built.origin,
        constrain=jax.jit(built.constrain),
    )


class _NumPyroModel:
    """What :func:`from_numpyro` finds in a NumPyro model, and its evaluations by datum."""

    def __init__(self, model: Callable, args: tuple, kwargs: dict, plate: str | None) -> None:
        self.model = model
        self.signature, arguments = _bind(model, args, kwargs)
        _refuse_pandas(arguments)
        # NumPy arrays become JAX arrays, as when numpyro.infer.MCMC passes them through jit: the model may
        # index them with traced values (the plate's indices); transferred, not converted by a compiled program
        # (``tallmcmc._device``)
        self.arguments = jax.tree_util.tree_map(
            lambda leaf: to_device(leaf) if isinstance(leaf, np.ndarray) else leaf, arguments
        )
        prototype = self._prototype_trace()
        self.plate, self.num_data = _data_plate(prototype, plate)
        _refuse_lists_of_data(arguments, self.num_data)
        self.latent_names = _latent_sites(prototype, self.plate)
        # reported with the draws, as NumPyro's MCMC does, where they do not depend on the datum (checked below)
        self.deterministic_names = [
            name
            for name, site in prototype.items()
            if site["type"] == "deterministic"
            and not any(frame.name == self.plate for frame in site["cond_indep_stack"])
        ]
        self.origin = _unconstrained_origin(prototype, self.latent_names)
        held = [name for name, site in prototype.items() if site["type"] == "param"]
        if held:  # NumPyro's MCMC holds them silently too; a user coming from SVI may expect them sampled or fitted
            warnings.warn(
                f"from_numpyro: param site{'s' if len(held) > 1 else ''} {', '.join(map(repr, held))} "
                "held at the initial value the model gives (tallmcmc, like NumPyro's MCMC, samples only "
                "numpyro.sample sites); to sample one, give it a prior with numpyro.sample",
                UserWarning,
                stacklevel=3,
            )
        # the sample sites on all N rows (traced abstractly: nothing read), for the check on a subsample of rows
        self.full_data_sites = frozenset(name for name, site in prototype.items() if site["type"] == "sample")

        leaves_with_paths, self.treedef = jax.tree_util.tree_flatten_with_path(self.arguments)
        self.leaves = [leaf for _, leaf in leaves_with_paths]
        self.leaf_names = [_leaf_name(path) for path, _ in leaves_with_paths]
        self.data_slots: dict[int, str] = {}
        for slot, (path, leaf) in enumerate(leaves_with_paths):
            if isinstance(leaf, (np.ndarray, jax.Array)) and np.ndim(leaf) >= 1 and np.shape(leaf)[0] == self.num_data:
                self.data_slots[slot] = _leaf_name(path)
        if self.data_slots:
            self.by_rows = True
            self.data = {name: self.leaves[slot] for slot, name in self.data_slots.items()}
            given = jax.tree_util.tree_leaves(arguments)  # as passed: row 0 of a NumPy array is read on the host
            self.first_datum = {
                name: to_device(given[slot][0]) if isinstance(given[slot], np.ndarray) else self.leaves[slot][0]
                for slot, name in self.data_slots.items()
            }
        else:
            self.by_rows = False
            self.data = {INDEX_KEY: to_device(np.arange(self.num_data))}  # jnp.arange's dtype: int32 without x64
            self.first_datum = {INDEX_KEY: to_device(0, np.int32)}

    # -- running the model -------------------------------------------------------------

    def _prototype_trace(self):
        """The model's trace at an ``init_to_uniform`` point, traced with abstract values (as under ``jit``).

        Only what does not depend on values is read from it: sites, plates,
        supports and shapes.
        """
        from numpyro import handlers
        from numpyro.infer import init_to_uniform

        args, kwargs = self._call_arguments(self.arguments)
        found = {}

        def run():
            seeded = handlers.substitute(handlers.seed(self.model, rng_seed=0), substitute_fn=init_to_uniform)
            found["trace"] = handlers.trace(seeded).get_trace(*args, **kwargs)
            return 0

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                jax.eval_shape(run)
        except Exception as error:
            raise ValueError(
                f"the NumPyro model could not be run with the arguments given: {type(error).__name__}: {error}. "
                "Pass the arguments the model takes, data included, as to numpyro.infer.MCMC.run; the model is "
                "traced as under jax.jit, so it may not branch in Python on the values of its sites"
            ) from error
        return found["trace"]

    def _call_arguments(self, arguments: dict) -> tuple[tuple, dict]:
        if self.signature is None:
            return tuple(arguments["args"]), dict(arguments["kwargs"])
        bound = inspect.BoundArguments(self.signature, arguments)
        return bound.args, bound.kwargs

    def _arguments_with(self, data: dict, rows: bool) -> tuple[tuple, dict]:
        """The model's arguments with the data leaves taken from ``data`` (one row each when ``rows``)."""
        leaves = list(self.leaves)
        for slot, name in self.data_slots.items():
            leaves[slot] = data[name][None] if rows else data[name]
        return self._call_arguments(jax.tree_util.tree_unflatten(self.treedef, leaves))

    def run(self, position: dict, arguments: tuple[tuple, dict], indices: jax.Array):
        """Trace the model with the plate's indices and the latent sites substituted.

        Returns the trace and the log-Jacobians of the unconstraining maps, by site.
        """
        from numpyro import handlers
        from numpyro.distributions import constraints
        from numpyro.distributions.transforms import biject_to

        log_jacobians = {}

        def constrained_value(site):
            name = site["name"]
            if site["type"] != "sample" or site["is_observed"] or name not in position:
                return None
            support = site["fn"].support
            unconstrained = position[name]
            if support is constraints.real or (
                isinstance(support, constraints.independent) and support.base_constraint is constraints.real
            ):
                return unconstrained
            transform = biject_to(support)
            value = transform(unconstrained)
            log_jacobians[name] = jnp.sum(transform.log_abs_det_jacobian(unconstrained, value))
            return value

        args, kwargs = arguments
        substituted = handlers.substitute(
            handlers.substitute(self.model, data={self.plate: indices}), substitute_fn=constrained_value
        )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="subsample_size does not match")
            trace = handlers.trace(substituted).get_trace(*args, **kwargs)
        return trace, log_jacobians

    def _datum_run(self, position: dict, datum: dict):
        if self.by_rows:
            return self.run(position, self._arguments_with(datum, rows=True), jnp.zeros(1, jnp.int32))
        return self.run(position, self._call_arguments(self.arguments), jnp.reshape(datum[INDEX_KEY], (1,)))

    def _plate_factor(self, trace) -> float:
        """The data plate's size over the number of its indices in ``trace``: the scale NumPyro gives its sites."""
        plate_site = trace[self.plate]
        return plate_site["args"][0] / np.shape(plate_site["value"])[0]

    def _terms(self, trace, log_jacobians, *, in_plate: bool) -> dict[str, jax.Array]:
        """Summed log-densities by site: the data plate's observed sites, or every other term."""
        plate_factor = self._plate_factor(trace)
        terms = {}
        for name, site in trace.items():
            if site["type"] != "sample":
                continue
            inside = any(frame.name == self.plate for frame in site["cond_indep_stack"])
            if inside != in_plate:
                continue
            if site["intermediates"]:
                log_prob = site["fn"].log_prob(site["value"], site["intermediates"])
            else:
                log_prob = site["fn"].log_prob(site["value"])
            scale = site["scale"]
            if inside and plate_factor != 1 and scale is not None:
                # the plate scales its sites by size / len(indices); a datum counts once
                scale = None if isinstance(scale, (int, float)) and scale == plate_factor else scale / plate_factor
            if scale is not None:
                log_prob = scale * log_prob
            terms[name] = jnp.sum(log_prob)
        if not in_plate:
            for name, value in log_jacobians.items():
                terms[f"{name} (log-Jacobian)"] = value
        return terms

    # -- the Model's functions ---------------------------------------------------------

    def datum_terms(self, position: dict, datum: dict) -> dict[str, jax.Array]:
        """The data plate's observed sites' log-densities at one datum, by site."""
        trace, log_jacobians = self._datum_run(position, datum)
        return self._terms(trace, log_jacobians, in_plate=True)

    def log_likelihood(self, position: dict, datum: dict) -> jax.Array:
        """log p(datum | position): the data plate's observed sites at one datum."""
        return sum(self.datum_terms(position, datum).values())

    def prior_terms(self, position: dict) -> dict[str, jax.Array]:
        """The log-prior's terms by site (log-Jacobians as ``"name (log-Jacobian)"``)."""
        trace, log_jacobians = self._datum_run(position, self.first_datum)
        return self._terms(trace, log_jacobians, in_plate=False)

    def log_prior(self, position: dict) -> jax.Array:
        """Latent sites on the unconstrained scale, log-Jacobians, observed sites outside the data plate."""
        return sum(self.prior_terms(position).values(), jnp.zeros(()))

    def constrain(self, position: dict) -> dict[str, jax.Array]:
        """The latent sites' values on their supports and the deterministic sites outside the data plate, by name."""
        trace, _ = self._datum_run(position, self.first_datum)
        return {name: trace[name]["value"] for name in self.latent_names + self.deterministic_names}

    def check_deterministic_sites(self) -> None:
        """Drop, with a warning, a deterministic site outside the data plate whose value depends on the datum.

        ``constrain`` runs the model on the first datum; a site that reads the
        data outside the plate (``y.mean()``) would report that datum's value.
        Compared at the unconstrained origin between the first and the last datum.
        """
        if not self.deterministic_names:
            return
        last = {name: value[-1] for name, value in self.data.items()}
        first_run, last_run = (self._datum_run(self.origin, datum)[0] for datum in (self.first_datum, last))
        for name in list(self.deterministic_names):
            first, other = np.asarray(first_run[name]["value"]), np.asarray(last_run[name]["value"])
            if first.shape != other.shape or not np.allclose(first, other, rtol=1e-5, atol=1e-6, equal_nan=True):
                self.deterministic_names.remove(name)
                warnings.warn(
                    f"from_numpyro: deterministic site {name!r} depends on the datum the model runs on (it reads the "
                    f"data outside the data plate {self.plate!r}), so it is not reported with the draws; compute it "
                    "from the draws and the data",
                    UserWarning,
                    stacklevel=3,
                )

    # -- the check ---------------------------------------------------------------------

    def check_rows(self) -> np.ndarray:
        """The rows the check runs on: all N, or :data:`_CHECK_ROWS` of them drawn without replacement (seeded),
        in order."""
        if self.num_data <= _CHECK_ROWS:
            return np.arange(self.num_data)
        return np.sort(np.random.default_rng(0).choice(self.num_data, _CHECK_ROWS, replace=False))

    def _subsample_run(self, data: dict, rows: jax.Array) -> tuple[tuple[tuple, dict], jax.Array]:
        """The model's arguments and the plate's indices for a run on ``rows`` alone: data arguments cut to those
        rows and the indices ``0, …, n − 1``, or (data reached through the plate's indices) the arguments as given
        and the indices ``rows``."""
        if self.by_rows:
            cut = {name: data[name][rows] for name in self.data_slots.values()}
            return self._arguments_with(cut, rows=False), jnp.arange(rows.shape[0])
        return self._call_arguments(self.arguments), rows

    def subsample_terms(self, position: dict, data: dict, rows: jax.Array) -> tuple[dict[str, jax.Array], float]:
        """Every term by site of the model run on ``rows`` (the data plate's sites unscaled: each datum once), and
        the plate's scale there (its size over ``len(rows)``; NumPyro multiplies the plate's sites by it)."""
        trace, log_jacobians = self.run(position, *self._subsample_run(data, rows))
        terms = {
            **self._terms(trace, log_jacobians, in_plate=False),
            **self._terms(trace, log_jacobians, in_plate=True),
        }
        return terms, self._plate_factor(trace)

    def numpyro_log_density(self, position: dict, data: dict, rows: jax.Array) -> jax.Array:
        """−``numpyro.infer.util.potential_energy`` of the model run on ``rows`` (its plate's indices substituted)."""
        from numpyro import handlers
        from numpyro.infer.util import potential_energy

        (args, kwargs), indices = self._subsample_run(data, rows)
        substituted = handlers.substitute(self.model, data={self.plate: indices})
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="subsample_size does not match")
            return -potential_energy(substituted, args, kwargs, position)

    def summed_datum_terms(self, position: dict, data: dict, rows: jax.Array) -> tuple[dict, dict]:
        """Σᵢ and Σᵢ|·| of each data-plate site's per-datum values over ``rows``.

        Evaluated :data:`_CHUNK` data at a time (a ``lax.map`` over chunks, each
        ``vmap``-ed), so memory stays bounded whatever one evaluation allocates.
        """
        count = int(rows.shape[0])
        chunk = min(count, _CHUNK)
        num_chunks = -(-count // chunk)
        slots = jnp.arange(num_chunks * chunk)
        valid = (slots < count).reshape(num_chunks, chunk)
        chosen = rows[jnp.minimum(slots, count - 1)].reshape(num_chunks, chunk)

        def chunk_terms(chunk_rows):
            batch = jax.tree_util.tree_map(lambda leaf: leaf[chunk_rows], data)
            return jax.vmap(lambda datum: self.datum_terms(position, datum))(batch)

        values = jax.lax.map(chunk_terms, chosen)
        return (
            {name: jnp.sum(jnp.where(valid, value, 0.0)) for name, value in values.items()},
            {name: jnp.sum(jnp.where(valid, jnp.abs(value), 0.0)) for name, value in values.items()},
        )

    def check_points(self) -> list[dict]:
        """The unconstrained origin, then :data:`_MAX_CHECK_DRAWS` unconstrained positions drawn uniformly on (−2, 2).

        The origin comes first: on covariates of large magnitude (an age in years, an income in dollars) a log link
        overflows at every random point, where the origin's linear predictor is 0 (the 2026-11-30 audit's negative
        binomial regression: NumPyro's log density finite at the origin, at none of the 20 draws).
        """
        rng = np.random.default_rng(0)
        origin = {
            name: to_device(np.zeros(jnp.shape(zero)), jnp.result_type(zero)) for name, zero in self.origin.items()
        }
        return [dict(sorted(origin.items()))] + [
            {
                name: to_device(rng.uniform(-_CHECK_RADIUS, _CHECK_RADIUS, jnp.shape(zero)), jnp.result_type(zero))
                for name, zero in sorted(self.origin.items())
            }
            for _ in range(_MAX_CHECK_DRAWS)
        ]

    def check_values(self, position: dict, data: dict, rows: jax.Array):
        """Everything :meth:`check_decomposition` compares, at one position, on ``rows`` (one compiled function)."""
        whole, factor = self.subsample_terms(position, data, rows)
        return (
            self.numpyro_log_density(position, data, rows),
            whole,
            self.prior_terms(position),
            *self.summed_datum_terms(position, data, rows),
            jnp.asarray(factor, jnp.result_type(float)),
        )

    def _lagged_hint(self) -> str:
        """Where an array argument is a few rows longer or shorter than the data plate, what that usually means: a
        series read with lags (``y[:-1]``, ``y[1:]``), whose terms are not one per datum (``""`` otherwise)."""
        lagged = [
            (name, int(np.shape(leaf)[0]))
            for slot, (name, leaf) in enumerate(zip(self.leaf_names, self.leaves, strict=True))
            if slot not in self.data_slots
            and np.ndim(leaf) >= 1
            and 0 < abs(int(np.shape(leaf)[0]) - self.num_data) <= _LAG_ROWS
        ]
        if not lagged:
            return ""
        name, rows = lagged[0]
        return (
            f". The argument {name} has {rows:,} rows against the plate's N = {self.num_data:,}: a series read with "
            f"lags inside the model (y[:-1] and y[1:], as an AR(1) is often written) makes each term read two rows, "
            "so the terms are not one per datum. Pass the lagged pairs as data of N rows each instead "
            "(y_prev=y[:-1], y_next=y[1:], plate over their N): each datum is then one transition, and the "
            "likelihood is the series' given its first value(s)"
        )

    def check_decomposition(self) -> None:
        """Raise a ``ValueError`` naming the site unless prior + Σ per-datum = NumPyro's log density.

        See the module's docstring for what is compared.
        """
        # at full float32 precision, as the Model will evaluate it: at a GPU's default (TF32) the per-datum and the
        # whole-data products round differently, by far more than the comparison's tolerance
        values_at = jax.jit(full_float32_dots(self.check_values))
        on_device = to_device(self.check_rows(), np.int32)
        checked = 0
        for point in self.check_points():
            try:
                values = values_at(point, self.data, on_device)
            except Exception as error:
                data_names = ", ".join(f"{name} {tuple(value.shape)}" for name, value in self.data.items())
                others = ", ".join(
                    f"{name} {tuple(np.shape(leaf))}"
                    for slot, (name, leaf) in enumerate(zip(self.leaf_names, self.leaves, strict=True))
                    if slot not in self.data_slots and np.ndim(leaf) >= 1
                )
                raise ValueError(
                    f"the model could not be evaluated on {self._rows_checked()} and one datum at a time "
                    f"({type(error).__name__}: {error}). The data plate {self.plate!r} has N = {self.num_data}; the "
                    f"data found (arguments of leading length N): {data_names or 'none'}"
                    + (f"; other array arguments (leading length not N, passed whole): {others}" if others else "")
                    + ". Give every array that holds the data its N rows on the leading axis"
                    + self._lagged_hint()
                ) from error
            reference, whole, prior, sums, magnitudes, factor = jax.tree_util.tree_map(float, values)
            if not np.isfinite(reference):
                continue
            self._compare(point, whole, prior, sums, magnitudes, reference, factor)
            checked += 1
            if checked == _NUM_CHECK_POINTS:
                return
        if checked == 0:
            found = _non_finite_rows(self.data)
            if found:
                raise ValueError(
                    f"the data hold NaN or inf: {found}. Every datum's log-likelihood must be finite: drop or impute "
                    "those rows before from_numpyro"
                )
            outside = self._rows_never_finite()
            if outside:
                raise ValueError(
                    f"the log-likelihood is not finite at {outside} at the unconstrained origin or any of "
                    f"{_ROWS_CHECK_POINTS - 1} random points: "
                    "their values lie outside the support of the observed distribution (a time of 0 or below for a "
                    "Weibull or Gamma, a count that is negative or not an integer, a probability of exactly 0 or 1). "
                    "Drop or correct those rows before from_numpyro"
                )
            raise ValueError(
                f"NumPyro's own log density (-potential_energy) is not finite at the unconstrained origin or any of "
                f"{_MAX_CHECK_DRAWS} random unconstrained points in (-{_CHECK_RADIUS:g}, {_CHECK_RADIUS:g}), so the "
                "per-datum decomposition cannot be checked. Check the model and its data with "
                "numpyro.infer.util.initialize_model; covariates of large magnitude overflow a log link (standardise "
                "them)"
            )

    def _rows_never_finite(self) -> str:
        """The rows whose log-likelihood is not finite at every one of :data:`_ROWS_CHECK_POINTS` check points, in
        words (how many, and the first few), where they are some of the rows but not all (``""`` otherwise): data
        outside the observed distribution's support. Evaluated one datum at a time over every row, chunked."""
        datum_values = jax.jit(
            lambda position, data: jax.lax.map(
                lambda datum: self.log_likelihood(position, datum), data, batch_size=_ROWS_CHUNK
            )
        )
        data = {name: jnp.asarray(value) for name, value in self.data.items()}
        never = None
        try:
            for point in self.check_points()[:_ROWS_CHECK_POINTS]:
                finite = np.isfinite(np.asarray(datum_values(point, data)))
                never = ~finite if never is None else never & ~finite
        except Exception:  # a model that cannot be evaluated one datum at a time: the general message
            return ""
        bad = np.flatnonzero(never) if never is not None else np.array([], int)
        if bad.size == 0 or bad.size == self.num_data:
            return ""
        first = ", ".join(f"{row:,}" for row in bad[:5])
        return f"{bad.size:,} of the N = {self.num_data:,} rows (row{'s' if bad.size > 1 else ''} {first}{' …' if bad.size > 5 else ''})"

    def _rows_checked(self) -> str:
        """The check's rows, in words."""
        count = min(self.num_data, _CHECK_ROWS)
        if count == self.num_data:
            return f"all {self.num_data} data"
        return f"{count} of the N = {self.num_data} data (rows drawn at random)"

    def _compare(self, point, whole, prior, sums, magnitudes, expected_total, factor) -> None:
        rtol = 1e-5 if jnp.result_type(float) == jnp.float32 else 1e-10
        where = "at the unconstrained point " + ", ".join(
            f"{name}={np.array2string(np.asarray(value), precision=3, threshold=6)}"
            for name, value in sorted(point.items())
        )
        data_names = ", ".join(f"{name} {tuple(value.shape)}" for name, value in self.data.items())
        for name in sorted(set(whole) - set(prior) - set(sums)):
            raise ValueError(
                f"site {name!r} appears when the model runs on {self._rows_checked()} but not when it runs on one "
                f"datum: the model's structure depends on the data's size. Give the model a fixed set of sites"
            )
        checked_sites = {name for name in whole if not name.endswith(" (log-Jacobian)")}
        for name in sorted(self.full_data_sites ^ checked_sites):
            there, absent = f"all N = {self.num_data} data", self._rows_checked()
            if name not in self.full_data_sites:
                there, absent = absent, there
            raise ValueError(
                f"site {name!r} appears when the model runs on {there} but not on {absent}: the model's structure "
                "depends on the data's size. Give the model a fixed set of sites"
            )
        for name, value in prior.items():
            if name not in whole or not _close(value, whole[name], rtol * (abs(whole.get(name, 0.0)) + 1.0)):
                raise ValueError(
                    f"site {name!r} lies outside the data plate {self.plate!r}, yet its log-density is "
                    f"{whole.get(name)} with {self._rows_checked()} and {value} with one datum's rows {where}: the "
                    "model reads its data outside the plate (a statistic such as y.mean() or X.shape[0] in a prior, or observed "
                    f"data outside the plate). Put every observed datum inside numpyro.plate({self.plate!r}, N), and "
                    "compute data statistics before calling the model and pass them as arguments (arrays whose "
                    f"leading length is not N = {self.num_data}, or numbers)"
                )
        for name, value in sums.items():
            if name not in whole or not _close(value, whole[name], rtol * (magnitudes[name] + 1.0)):
                mode = (
                    f"one row of each data argument ({data_names})"
                    if self.by_rows
                    else "the plate's indices substituted by one datum's index (no argument has leading length N)"
                )
                raise ValueError(
                    f"the per-datum decomposition does not hold at site {name!r} in the data plate {self.plate!r}: "
                    f"the sum over {self._rows_checked()} of its log-density evaluated one datum at a time "
                    f"({mode}) is {value}, the model run on those rows gives {whole.get(name)} {where}. A datum's term "
                    "must depend on that datum only: compute statistics of all the data (y.mean(), X.shape[0]) before "
                    "calling the model and pass them as arguments, and give every array that holds the data its rows "
                    "on the leading axis (pass data as arguments, or reach them only through the plate's indices / "
                    "numpyro.subsample, not both)" + self._lagged_hint()
                )
        # NumPyro scales the plate's sites by the plate's size over the rows it runs on (1 on all the data)
        total = sum(prior.values()) + factor * sum(sums.values())
        tolerance = rtol * (sum(abs(v) for v in prior.values()) + factor * sum(magnitudes.values()) + 1.0)
        if not _close(total, expected_total, tolerance):
            raise ValueError(
                f"the model's log density, log_prior + Σ per-datum log-likelihoods = {total}, differs from NumPyro's "
                f"-potential_energy = {expected_total} {where}, although every site agrees with the model run on "
                f"{self._rows_checked()}; this model uses a NumPyro feature from_numpyro does not handle (e.g. scaled or masked sites "
                "in nested plates). Write the model as a tallmcmc.Model by hand"
            )


def _non_finite_rows(data: dict) -> str:
    """Each floating data argument holding NaN or inf, with how many rows and the first (``""`` if none)."""
    found = []
    for name, value in data.items():
        array = np.asarray(value)
        if not np.issubdtype(array.dtype, np.inexact):
            continue
        bad = np.flatnonzero(~np.isfinite(array.reshape(array.shape[0], -1)).all(axis=1))
        if bad.size:
            found.append(f"argument {name!r} in {bad.size:,} row{'s' if bad.size > 1 else ''} (first: row {bad[0]:,})")
    return "; ".join(found)


def _close(value: float, expected: float, tolerance: float) -> bool:
    if not (np.isfinite(value) and np.isfinite(expected)):
        return value == expected
    return abs(value - expected) <= tolerance


def _bind(model: Callable, args: tuple, kwargs: dict):
    """The model's arguments by name (``inspect.signature``), or as ``{"args", "kwargs"}`` if it has none."""
    try:
        signature = inspect.signature(model)
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError) as error:
        try:
            inspect.signature(model)
        except (TypeError, ValueError):
            return None, {"args": tuple(args), "kwargs": dict(kwargs)}
        raise ValueError(
            f"the arguments do not fit the model's signature: {error}. Pass the arguments the model takes, data "
            "included, as to numpyro.infer.MCMC.run"
        ) from error
    return signature, dict(bound.arguments)


def _refuse_pandas(arguments: dict) -> None:
    """A pandas Series or DataFrame among the arguments: refused, naming it (NumPyro does not read them either)."""
    for name, value in _named_arguments(arguments):
        if type(value).__module__.split(".")[0] == "pandas":
            fix = (
                f"{name}[columns].to_numpy(np.float32), the numeric columns the model reads"
                if hasattr(value, "columns")
                else f"{name}.to_numpy()"
            )
            raise ValueError(
                f"argument {name!r} is a pandas {type(value).__name__}: pass its values as an array, {fix} "
                "(from_numpyro reads NumPy and JAX arrays, one datum per row on the leading axis)"
            )


def _refuse_lists_of_data(arguments: dict, num_data: int) -> None:
    """A list or tuple of N numbers: data the model cannot index as arrays; refused, naming it."""
    for name, value in _named_arguments(arguments):
        if isinstance(value, (list, tuple)) and len(value) == num_data and num_data > 1:
            try:
                array = np.asarray(value)
            except ValueError:
                continue
            if array.dtype.kind in "biuf":
                raise ValueError(
                    f"argument {name!r} is a {type(value).__name__} of N = {num_data} numbers (the data plate's "
                    f"size): pass it as an array, np.asarray({name}) (from_numpyro finds the data as the array "
                    "arguments whose leading length is N)"
                )


def _named_arguments(arguments: dict):
    """(name, value) of the model's arguments, with ``*args`` and ``**kwargs`` entries named by position and key."""
    for name, value in arguments.items():
        if name == "args" and isinstance(value, tuple):
            yield from ((f"args[{index}]", item) for index, item in enumerate(value))
        elif name == "kwargs" and isinstance(value, dict):
            yield from value.items()
        else:
            yield name, value


def _leaf_name(path) -> str:
    head, *rest = path
    name = str(getattr(head, "key", head))
    return name + jax.tree_util.keystr(tuple(rest)) if rest else name


def _data_plate(trace, plate: str | None) -> tuple[str, int]:
    """The data plate's name and size: ``plate`` if given, else the one plate that holds observed sites."""
    plates = {name: site for name, site in trace.items() if site["type"] == "plate"}
    observed = [site for site in trace.values() if site["type"] == "sample" and site["is_observed"]]
    described = ", ".join(f"{name!r} (size {site['args'][0]})" for name, site in plates.items()) or "none"
    if not observed:
        raise ValueError(
            "the model has no observed site: pass the data to the model (numpyro.sample(..., obs=y)) "
            "so that it has a likelihood"
        )
    holding: dict[str, list[str]] = {}
    for site in observed:
        for frame in site["cond_indep_stack"]:
            holding.setdefault(frame.name, []).append(site["name"])
    if plate is not None:
        if not isinstance(plate, str) or plate not in plates:
            raise ValueError(f"plate={plate!r}: the model has no plate of that name; its plates: {described}")
        if plate not in holding:
            raise ValueError(
                f"plate={plate!r} holds no observed site; the data plate is the plate around the observed sites "
                f"(plates holding observed sites: {sorted(holding) or 'none'})"
            )
    else:
        if not holding:
            names = sorted(site["name"] for site in observed)
            raise ValueError(
                f"no data plate: the observed site(s) {names} are not inside a numpyro.plate. tallmcmc needs one "
                "likelihood term per datum; wrap them: with numpyro.plate('data', N): numpyro.sample(..., obs=y)"
            )
        if len(holding) > 1:
            candidates = ", ".join(
                f"{name!r} (size {plates[name]['args'][0]}, sites {sorted(sites)})" for name, sites in holding.items()
            )
            raise ValueError(
                f"several plates hold observed sites: {candidates}. Pass plate='name' to say which one runs over "
                "the data (the outer one, for a plate over the entries of a vector observation)"
            )
        (plate,) = holding
    for name, site in plates.items():
        size, subsample_size = site["args"]
        if name != plate and subsample_size is not None and subsample_size < size:
            raise ValueError(
                f"plate {name!r} subsamples (subsample_size={subsample_size} of {size}) but is not the data plate "
                f"{plate!r}: only the data plate may subsample. Drop subsample_size from plate {name!r}"
            )
    return plate, int(plates[plate]["args"][0])


def _latent_sites(trace, plate: str) -> list[str]:
    """Names of the latent sites, after refusing local and discrete ones."""
    names = []
    for name, site in trace.items():
        if site["type"] != "sample" or site["is_observed"]:
            continue
        if any(frame.name == plate for frame in site["cond_indep_stack"]):
            masked = name.removesuffix("_unobserved")
            if name.endswith("_unobserved") and f"{masked}_observed" in trace:
                raise ValueError(
                    f"site {masked!r} has obs_mask=...: NumPyro imputes its missing entries as a latent site {name!r}, "
                    f"one per datum, and tallmcmc samples global parameters only. For missing outcomes, drop those "
                    f"rows, or keep them and ignore them in the likelihood: fill the missing entries with any finite "
                    f"value and write the site as numpyro.sample({masked!r}, dist.….mask(mask), obs=filled), which "
                    "gives the posterior of the observed rows. For a missing covariate given a distribution of its "
                    "own, integrate it out of the likelihood (e.g. a marginal Gaussian) or impute it before sampling "
                    "(docs/numpyro.md, 'Missing values')"
                )
            raise ValueError(
                f"latent site {name!r} is inside the data plate {plate!r}: a local latent variable, one per datum. "
                "tallmcmc samples global parameters with one likelihood term per datum; integrate the local "
                "variable out of the likelihood (e.g. a mixture with dist.MixtureSameFamily for a discrete "
                "assignment, a Student-t for a normal scale mixture, or a marginal Gaussian), or move the site out "
                "of the plate if it is one global parameter (a site with obs=... missing values also creates one)"
            )
        if site["fn"].support.is_discrete:
            raise ValueError(
                f"latent site {name!r} is discrete ({type(site['fn']).__name__}): tallmcmc's proposals move "
                "continuous positions. Sum it out of the model (e.g. dist.MixtureSameFamily) or fix it by "
                "passing its value as an argument"
            )
        names.append(name)
    if not names:
        raise ValueError("the model has no latent site outside the data plate: there is nothing to sample")
    return names


def _unconstrained_origin(trace, names: list[str]) -> dict[str, jax.Array]:
    """Zeros of each latent site's unconstrained shape."""
    from numpyro.distributions.transforms import biject_to

    origin = {}
    for name in names:
        site = trace[name]
        shape = biject_to(site["fn"].support).inverse_shape(jnp.shape(site["value"]))
        origin[name] = to_device(np.zeros(shape))  # jnp.zeros(shape): float32 without x64
    return origin
