"""Models: a per-datum log-likelihood, a log-prior, the data and a temperature.

The target of every sampler in tallmcmc is the tempered posterior

.. math:: \\pi(\\theta) \\propto p_0(\\theta) \\prod_{i=1}^N p(x_i \\mid \\theta)^{1/K},

given as :class:`Model`. :func:`check_model` is the one check of a target that
every sampler runs before it starts (the emcee practice): it evaluates the model
once at the initial position and turns every mistake it can see into an error
that names the argument and the fix.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from tallmcmc._device import jax_dtype, to_device
from tallmcmc.precision import full_float32_dots

Position = Any  # a pytree of arrays
Data = Any  # a pytree of arrays, every leaf with leading axis N


@functools.partial(jax.jit, static_argnums=0)
def _per_datum_values(log_likelihood: Callable, position: Position, data: Data) -> jax.Array:
    """What :meth:`Model.per_datum_log_likelihood` computes, compiled once per log-likelihood function."""
    return jax.vmap(log_likelihood, in_axes=(None, 0))(position, data)


def per_datum_program(model: Model) -> Callable:
    """``model``'s per-datum log-likelihoods as a compiled function of ``(position, data)`` that a later call for a
    model with the same log-likelihood finds compiled: ``jax.jit(model.per_datum_log_likelihood)`` wraps a new bound
    method each time, which JAX traces, lowers and compiles again (measured: every ``check_model`` of a process)."""
    if type(model).per_datum_log_likelihood is Model.per_datum_log_likelihood:
        try:
            hash(model.log_likelihood)
        except TypeError:
            pass
        else:
            return functools.partial(_per_datum_values, model.log_likelihood)
    return jax.jit(model.per_datum_log_likelihood)


def _datum_type(leaf) -> jax.ShapeDtypeStruct:
    """The shape and dtype of one row of a data leaf, as JAX sees it."""
    return jax.ShapeDtypeStruct(np.shape(leaf)[1:], jax_dtype(leaf))


@jax.jit
def rows_of(data: Data, indices: jax.Array) -> Data:
    """The rows of ``data`` (a pytree of arrays, rows first) at ``indices``, in one compiled program (gathered
    eagerly, each leaf would compile programs of its own)."""
    return jax.tree_util.tree_map(lambda leaf: jnp.take(leaf, indices, axis=0), data)


@dataclasses.dataclass(frozen=True)
class AllRows:
    """The data all here: how a :class:`Model` reaches its rows outside a mesh (``Model.shards``, the default).

    :class:`Model`'s methods that touch the data by index or sum over it call
    the methods of ``model.shards``. This one gathers and reduces the rows
    ``model.data`` holds (``data[indices]``, ``jnp.sum``, …); on a mesh the
    sampler gives the model a :class:`tallmcmc.sharding.DataShards` instead,
    whose methods of the same names combine the devices' blocks of rows with
    collectives.
    """

    def num_rows(self, model: Model) -> int:
        """``N``, the length of ``model.data``'s leading axis."""
        return num_data_of(model.data)

    def log_likelihood_ratios_at(
        self, model: Model, position: Position, proposed: Position, indices: jax.Array
    ) -> jax.Array:
        """``model.log_likelihood_ratios`` of the rows at ``indices``."""
        batch = jax.tree_util.tree_map(lambda leaf: leaf[indices], model.data)
        return model.log_likelihood_ratios(position, proposed, batch)

    def data_at(self, model: Model, indices: jax.Array) -> Data:
        """The rows at ``indices``."""
        return rows_of(model.data, indices)

    def sum_over_data(self, values: jax.Array) -> jax.Array:
        """Σ of per-datum ``values``."""
        return jnp.sum(values)

    def mean_and_std_over_data(self, values: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Mean and 1/N standard deviation of per-datum ``values``."""
        return jnp.mean(values), jnp.std(values)

    def max_over_data(self, values: jax.Array) -> jax.Array:
        """Max of per-datum ``values``."""
        return jnp.max(values)

    def log_likelihood_sum(self, model: Model, position: Position) -> jax.Array:
        """Untempered Σᵢ log p(xᵢ | position) over ``model.data``."""
        return jnp.sum(model.per_datum_log_likelihood(position))


ALL_ROWS = AllRows()


@dataclasses.dataclass(frozen=True)
class Model:
    """A tempered Bayesian model over a tall data set.

    Parameters
    ----------
    log_likelihood
        ``log_likelihood(position, datum) -> scalar``: log-density of *one*
        datum (a pytree of arrays without the leading axis) at ``position``.
    log_prior
        ``log_prior(position) -> scalar``: log prior density (up to a
        constant). ``-inf`` outside the support is allowed; a proposal there
        is rejected without touching the data.
    data
        Pytree of arrays, every leaf with the same leading axis of length
        ``N`` (the number of data points).
    temperature
        ``K > 0``; the likelihood enters as ``p(x_i | θ)^(1/K)``.
    position_shape
        Optional: the shape of a position, so that a start of the wrong shape
        is caught before sampling. A tuple of ints for an array position
        (``(10,)`` for ten coefficients, ``()`` for a scalar), a pytree of
        such tuples for a pytree position (``{"beta": (5,), "log_sigma": ()}``),
        or an example position (an array or pytree of arrays) whose structure
        and leaf shapes positions must match. ``None`` (default) skips the
        check.
    constrain
        Optional ``constrain(position) -> pytree``: what a position means to
        the user, when the chain moves on another scale (e.g.
        :func:`tallmcmc.from_numpyro` samples NumPyro's unconstrained sites and
        reports them constrained, by site name). :func:`tallmcmc.sample`
        applies it to the kept and warm-up draws (``result.positions``, the
        ArviZ variables); the chain's state (``result.final_state``) stays on
        the sampling scale. ``None`` (default): draws are the positions.

    Attributes
    ----------
    shards
        How the methods below reach the rows: :data:`ALL_ROWS` (an
        :class:`AllRows`, the data all here), or, inside the sampler's
        ``shard_map`` on a mesh with a ``"data"`` axis, a
        :class:`tallmcmc.sharding.DataShards` (``data`` then holds one
        contiguous block of the rows, and the methods combine the blocks with
        collectives). Not a constructor argument: set by :meth:`with_shards`.

    Notes
    -----
    Every leaf of ``data`` is converted to a JAX array (``jnp.asarray``, the
    default float precision), so NumPy data work with every sampler and with
    :func:`tallmcmc.build_kernel` under ``jit``. Samplers reach the data only
    through the methods below, so that one place decides how rows held on other
    devices are reached.

    ``log_likelihood`` and ``log_prior`` are kept wrapped by
    :func:`tallmcmc.precision.full_float32_dots`: their matrix products run at
    full float32 precision wherever tallmcmc traces them, not at the TF32 or
    bfloat16 passes a GPU's or TPU's default precision uses (which biased a
    peer's posterior by 13.7 Monte Carlo standard errors on a GPU,
    ``docs/precision.md``), unless JAX's ``jax_default_matmul_precision``
    names a precision, which is then used. On a CPU nothing changes.
    :func:`tallmcmc.precision.unwrapped` gives back the functions as passed.

    References
    ----------
    .. [1] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
       minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 2.1.
    """

    log_likelihood: Callable[[Position, Any], jax.Array]
    log_prior: Callable[[Position], jax.Array]
    data: Data
    temperature: float = 1.0
    position_shape: Any = None
    constrain: Callable[[Position], Any] | None = None
    shards: Any = dataclasses.field(default=ALL_ROWS, init=False, repr=False, compare=False)  # AllRows | DataShards

    def __post_init__(self) -> None:
        if not callable(self.log_likelihood):
            raise TypeError("log_likelihood must be a function log_likelihood(position, datum) -> scalar")
        if not callable(self.log_prior):
            raise TypeError("log_prior must be a function log_prior(position) -> scalar")
        if self.constrain is not None and not callable(self.constrain):
            raise TypeError("constrain must be a function constrain(position) -> the draws to report, or None")
        try:
            temperature = float(self.temperature)
        except (TypeError, ValueError):
            hint = (
                " (the fourth positional argument is temperature: pass the shape as position_shape=...)"
                if isinstance(self.temperature, (tuple, list, dict)) or hasattr(self.temperature, "shape")
                else ""
            )
            raise TypeError(
                f"temperature must be a finite number > 0 (the K in p(x|θ)^(1/K)); got {self.temperature!r}{hint}"
            ) from None
        if not np.isfinite(temperature) or temperature <= 0:
            raise ValueError(
                f"temperature must be a finite number > 0 (the K in p(x|θ)^(1/K)); got {self.temperature!r}"
            )
        object.__setattr__(self, "log_likelihood", full_float32_dots(self.log_likelihood))
        object.__setattr__(self, "log_prior", full_float32_dots(self.log_prior))
        object.__setattr__(self, "data", as_data(self.data))
        num_data_of(self.data)  # validates the data's shape
        object.__setattr__(self, "data", jax.tree_util.tree_map(jnp.asarray, self.data))
        if self.position_shape is not None:
            expected_position_shapes(self.position_shape)  # validates it

    @property
    def num_data(self) -> int:
        """``N``, the length of the data's leading axis (of all shards together when sharded)."""
        return self.shards.num_rows(self)

    def with_data(self, data: Data) -> Model:
        """The same model over other arrays of the same structure (used under ``jit``), with the same ``shards``."""
        replaced = dataclasses.replace(self, data=data)
        object.__setattr__(replaced, "shards", self.shards)
        return replaced

    def with_shards(self, shards) -> Model:
        """The same model reaching its rows through ``shards`` (see ``Model.shards``).

        ``shards`` is a :class:`tallmcmc.sharding.DataShards` (the data are one
        block of rows of a sharded data set) or ``None`` (the data all here:
        :data:`ALL_ROWS`), e.g. a :class:`tallmcmc.sharding.MeshLayout`'s
        ``shards`` for a mesh without a ``"data"`` axis.
        """
        sharded = copy.copy(self)
        object.__setattr__(sharded, "shards", ALL_ROWS if shards is None else shards)
        return sharded

    def with_temperature(self, temperature) -> Model:
        """The same model at temperature ``temperature``, which may be a traced value.

        Used by temperature schedules (``sample(..., temperature_schedule=...)``),
        whose values are checked before sampling; nothing is validated here.
        """
        tempered = copy.copy(self)
        object.__setattr__(tempered, "temperature", temperature)
        return tempered

    def per_datum_log_likelihood(self, position: Position, data: Data | None = None) -> jax.Array:
        """Untempered ``log p(x_i | position)`` for every datum of ``data`` (default: the rows held here).

        Shape ``(N,)``; when sharded, the values of this device's block of rows
        (padding rows included), to be reduced with :meth:`sum_over_data` and
        its siblings.
        """
        data = self.data if data is None else data
        return jax.vmap(self.log_likelihood, in_axes=(None, 0))(position, data)

    def log_likelihood_ratios(self, position: Position, proposed: Position, data: Data) -> jax.Array:
        """Tempered per-datum log ratios ``(1/K)[log p(x_i|θ') − log p(x_i|θ)]``.

        Each ratio is formed per datum before anything is summed, so no
        difference of two large sums is ever taken.
        """
        new = self.per_datum_log_likelihood(proposed, data)
        old = self.per_datum_log_likelihood(position, data)
        return (new - old) / self.temperature

    def log_likelihood_ratios_at(self, position: Position, proposed: Position, indices: jax.Array) -> jax.Array:
        """:meth:`log_likelihood_ratios` of the data at ``indices`` (integers in ``[0, N)``), shape of ``indices``.

        The one place where a minibatch is gathered (``self.shards``). Sharded,
        each device evaluates the indices it holds and the exact per-datum
        values are combined across devices
        (:meth:`tallmcmc.sharding.DataShards.log_likelihood_ratios_at`).
        """
        return self.shards.log_likelihood_ratios_at(self, position, proposed, indices)

    def data_at(self, indices: jax.Array) -> Data:
        """The rows of the data at ``indices`` (integers in ``[0, N)``), e.g. for a minibatch gradient.

        Sharded, the rows are fetched from the devices that hold them (exact
        copies), so what is computed from them is differentiable as usual.
        """
        return self.shards.data_at(self, indices)

    def sum_over_data(self, values: jax.Array) -> jax.Array:
        """Σᵢ of per-datum ``values`` (leading axis: the rows held here) over all N data."""
        return self.shards.sum_over_data(values)

    def mean_and_std_over_data(self, values: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Mean and standard deviation (1/N normalisation) of per-datum ``values`` over all N data."""
        return self.shards.mean_and_std_over_data(values)

    def max_over_data(self, values: jax.Array) -> jax.Array:
        """maxᵢ of per-datum ``values`` over all N data."""
        return self.shards.max_over_data(values)

    def log_likelihood_sum(self, position: Position) -> jax.Array:
        """Untempered Σᵢ log p(xᵢ | position) over all N data (differentiable; a full pass)."""
        return self.shards.log_likelihood_sum(self, position)

    def log_density(self, position: Position) -> jax.Array:
        """Full-data tempered log posterior (up to a constant); touches all N points."""
        return self.log_prior(position) + self.log_likelihood_sum(position) / self.temperature


def _taking_deprecated_shards(init: Callable) -> Callable:
    """``Model.__init__`` that still takes the former keyword ``shards=`` (with a ``DeprecationWarning``).

    ``shards`` was a constructor argument until it became an attribute set by
    :meth:`Model.with_shards`; a caller passing it gets the model
    ``with_shards(shards)`` would give.
    """

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if "shards" not in kwargs:
            init(self, *args, **kwargs)
            return
        shards = kwargs.pop("shards")
        warnings.warn(
            "Model(..., shards=...) is deprecated: shards is set by the sampler on a mesh; "
            "use model.with_shards(shards) where it must be set by hand",
            DeprecationWarning,
            stacklevel=2,
        )
        init(self, *args, **kwargs)
        object.__setattr__(self, "shards", ALL_ROWS if shards is None else shards)

    return __init__


Model.__init__ = _taking_deprecated_shards(Model.__init__)


def as_data(data: Any) -> Data:
    """``data`` as a pytree of arrays: a pandas ``DataFrame`` or any mapping of columns becomes a dict of columns.

    A ``DataFrame`` gives ``{column name: values}`` (so ``datum["x1"]`` reads
    one row's column); a ``Series`` its values; any other mapping a ``dict``.
    Columns that are not numbers or booleans are refused naming ``data``.
    """
    if hasattr(data, "columns") and hasattr(data, "to_numpy") and hasattr(data, "__getitem__"):  # a DataFrame
        columns = {}
        for name in data.columns:
            values = np.asarray(data[name].to_numpy())
            if not (np.issubdtype(values.dtype, np.number) or values.dtype == bool):
                raise ValueError(
                    f"data: column {name!r} holds {values.dtype} values, which cannot be an array of numbers; "
                    "encode it as numbers (e.g. pandas.get_dummies or .cat.codes) or drop it before building the Model"
                )
            columns[str(name)] = values
        if not columns:
            raise ValueError("data is an empty DataFrame: pass one column per variable and one row per datum")
        return columns
    if hasattr(data, "to_numpy") and hasattr(data, "index") and not isinstance(data, np.ndarray):  # a Series
        return np.asarray(data.to_numpy())
    if isinstance(data, Mapping) and not isinstance(data, dict):
        return dict(data)
    return data


def num_data_of(data: Data) -> int:
    """Length ``N`` of the leading axis shared by every leaf of ``data``."""
    leaves = jax.tree_util.tree_leaves(data)
    if not leaves:
        raise ValueError("data is empty: pass a pytree of arrays whose leaves share a leading axis of length N >= 1")
    lengths = set()
    for leaf in leaves:
        shape = np.shape(leaf)
        if len(shape) == 0:
            raise ValueError(
                "data leaves must have a leading axis of length N (one row per datum); "
                "got a scalar leaf. Wrap single values as arrays of shape (N, ...)"
            )
        lengths.add(shape[0])
    if len(lengths) != 1:
        raise ValueError(
            f"every leaf of data must have the same leading length N; got lengths {sorted(lengths)}. "
            "Put one row per datum in every array"
        )
    (num,) = lengths
    if num == 0:
        raise ValueError("data is empty (N = 0): a posterior needs at least one datum")
    return int(num)


def is_shape(value: Any) -> bool:
    """Whether ``value`` is a shape: a tuple of ints (``()`` included)."""
    return isinstance(value, tuple) and all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in value)


def expected_position_shapes(position_shape: Any) -> Any:
    """``Model.position_shape`` as a pytree of shape tuples.

    A tuple of ints is one array's shape; in a pytree (``{"beta": (5,),
    "log_sigma": ()}``) every tuple of ints is a leaf's shape; any other leaf
    is an example value whose shape is taken.
    """
    shapes = jax.tree_util.tree_map(
        lambda leaf: tuple(int(n) for n in leaf) if is_shape(leaf) else tuple(np.shape(leaf)),
        position_shape,
        is_leaf=is_shape,
    )
    for shape in jax.tree_util.tree_leaves(shapes, is_leaf=is_shape):
        if any(n < 0 for n in shape):
            raise ValueError(f"position_shape must hold non-negative sizes; got {position_shape}")
    return shapes


#: The mode search's default start (``sample_tall``, ``fast_setup``) is zeros of the position's shape moved by this
#: times a standard normal draw per coordinate: not exactly 0, where log densities often have a kink their gradient
#: does not describe — NumPyro's ``Bernoulli(logits=…)`` at logits exactly 0, for every datum at the unconstrained
#: origin, where the mode search never left its start on imbalanced outcomes (``docs/sample_tall.md``, "The default
#: start"). Far below a prior's width.
DEFAULT_START_SPREAD = 1e-2
_DEFAULT_START_STREAM = 0xDEF57A27  # the default start's draw, apart from every other seed


def default_start(position_shape: Any, seed: int, spread: float = DEFAULT_START_SPREAD) -> Position:
    """Zeros of ``position_shape`` moved by ``spread`` times a standard normal draw per coordinate (NumPy, seeded by
    ``seed`` on a stream of its own), in JAX's default float: the mode search's default start, off the kinks log
    densities often have at exactly 0."""
    shapes = expected_position_shapes(position_shape)
    dtype = jax.dtypes.canonicalize_dtype(np.float64)  # JAX's default float: float32, or float64 under x64
    leaves, structure = jax.tree_util.tree_flatten(shapes, is_leaf=is_shape)
    noise = np.random.default_rng([_DEFAULT_START_STREAM, int(seed) % (1 << 64)])
    return jax.tree_util.tree_unflatten(
        structure, [np.asarray(spread * noise.standard_normal(shape), dtype) for shape in leaves]
    )


def _structure(shapes: Any):
    return jax.tree_util.tree_structure(shapes, is_leaf=is_shape)


def as_position(value: Position, name: str = "initial_position") -> Position:
    """A start as a pytree of floating JAX arrays; a (nested) list of plain numbers becomes one array.

    ``[0.0, 0.0]`` is read as an array of two numbers, not as a pytree of two
    scalars; tuples, dicts and lists holding arrays stay pytrees. Integer
    leaves (``jnp.zeros(3, int)``, ``[0, 0]``) are cast to JAX's default
    float, since a position is differentiated and moved by real-valued steps;
    anything that is not a number is refused naming ``name``.
    """
    if isinstance(value, list) and all(
        isinstance(leaf, (int, float, np.integer, np.floating)) and not isinstance(leaf, bool)
        for leaf in jax.tree_util.tree_leaves(value)
    ):
        value = np.asarray(value)

    def floating(leaf):
        try:  # a NumPy leaf is transferred (jnp.asarray would compile a program per shape, tallmcmc._device)
            array = to_device(leaf) if isinstance(leaf, (np.ndarray, np.generic)) else jnp.asarray(leaf)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{name} must be an array or a pytree of arrays of numbers; got a leaf of type "
                f"{type(leaf).__name__} ({error})"
            ) from error
        if jnp.issubdtype(array.dtype, jnp.floating):
            return array
        if jnp.issubdtype(array.dtype, jnp.integer) or array.dtype == bool:
            return array.astype(jnp.result_type(float))
        raise ValueError(f"{name} must hold real numbers; got a leaf of dtype {array.dtype}")

    return jax.tree_util.tree_map(floating, value)


def check_position_shape(model: Model, position: Position, name: str = "initial_position") -> None:
    """Raise a ``ValueError`` naming ``name`` if ``position`` does not match ``model.position_shape``."""
    if model.position_shape is None:
        return
    expected = expected_position_shapes(model.position_shape)
    if isinstance(expected, tuple) and all(isinstance(n, int) for n in expected):
        leaves = jax.tree_util.tree_leaves(position)
        got = np.shape(leaves[0]) if len(leaves) == 1 and not isinstance(position, (dict, list, tuple)) else None
        if got != expected:
            described = f"shape {got}" if got is not None else f"a {type(position).__name__} of {len(leaves)} leaves"
            raise ValueError(
                f"{name} must be an array of shape {expected} for this model; got {described}. "
                f"Pass e.g. jnp.zeros({expected})"
            )
        return
    got_tree = jax.tree_util.tree_map(lambda leaf: tuple(np.shape(leaf)), position)
    same = _structure(got_tree) == _structure(expected) and got_tree == expected
    if not same:
        raise ValueError(f"{name} must have the structure and shapes {expected} for this model; got {got_tree}")


def non_finite_data_at(data: Data, row: int) -> str:
    """The data arrays whose row ``row`` holds NaN or inf, by name (``"'X', 'y'"``, ``"the data"``); ``""`` if none.

    Reads that one row of each floating array this process holds; for
    :func:`check_model`'s message about a datum whose log-likelihood is not
    finite.
    """
    found = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(data)[0]:
        if not np.issubdtype(leaf.dtype, np.inexact) or not getattr(leaf, "is_fully_addressable", True):
            continue
        if not np.all(np.isfinite(np.asarray(leaf[row]))):
            found.append(jax.tree_util.keystr(path) if path else "the data")
    return ", ".join(found)


def check_differentiable(model: Model, position: Position, purpose: str) -> None:
    """Trace one datum's log-likelihood under ``jax.grad`` at ``position``; a clear error if JAX cannot.

    The mode search and the control variates take gradients (reverse mode). A
    log-likelihood that JAX cannot differentiate so (usually one with a
    ``lax.while_loop``) fails deep inside them with JAX's own message; this
    check names the cause and the fix up front. Nothing is read or compiled:
    one datum's shape is traced (``jax.eval_shape``).

    Parameters
    ----------
    model, position
        The target and a position of its shape (a start or a centre).
    purpose
        What needs the gradient, for the message (``"find_mode"``, ...).

    Raises
    ------
    ValueError
        If ``model.log_likelihood`` cannot be differentiated in reverse mode.
    """
    datum = jax.tree_util.tree_map(_datum_type, model.data)

    def gradient(start, row):  # flattened inside the trace: an eager ravel_pytree compiles two programs
        flat, unravel = ravel_pytree(start)
        return jax.grad(lambda p: model.log_likelihood(unravel(p), row))(flat)

    try:
        jax.eval_shape(gradient, as_position(position), datum)
    except (TypeError, ValueError, NotImplementedError) as error:
        raise ValueError(
            f"model.log_likelihood cannot be differentiated in reverse mode (jax.grad), which {purpose} needs: "
            f"{type(error).__name__}: {str(error).splitlines()[0]} — the usual cause is a lax.while_loop, which JAX "
            "differentiates forward only: use lax.fori_loop with a fixed number of iterations, or lax.scan"
        ) from error


def check_model(
    model: Model, position: Position, name: str = "initial_position", *, evaluate_data=None, datum_shape=None, data=None
) -> tuple[float, float]:
    """Evaluate the model once at ``position`` and fail loudly on anything wrong.

    Runs before any sampling starts (the emcee practice: one check shared by
    every sampler). Touches all ``N`` data points once.

    Parameters
    ----------
    model
        The target.
    position
        A start (array or pytree of arrays).
    name
        How errors name ``position`` (``"initial_position"``, or
        ``"initial_positions[3]"`` for one chain's start).
    evaluate_data, datum_shape, data
        For data spread over devices (:func:`tallmcmc.sharding.check_model_on_mesh`
        passes them): ``evaluate_data(position, data) -> (count, first, value,
        total)``, the number of non-finite per-datum values, the first one's
        index and value and the sum, computed where the data live, and the
        shape of one datum (``datum_shape``, a pytree of
        ``jax.ShapeDtypeStruct``; by default that of a row of ``model.data``).
        One datum's log-likelihood is checked on that shape alone
        (``jax.eval_shape``: no datum read, no program compiled).

    Returns
    -------
    (log_prior, log_likelihood_sum)
        Both finite.

    Raises
    ------
    ValueError
        If ``position`` does not match ``model.position_shape``, if the model
        cannot be evaluated there (usually a start of the wrong shape), or if
        the log-prior or any per-datum log-likelihood is not a finite scalar
        there, naming the first offending datum.
    """
    if not isinstance(model, Model):
        raise TypeError(f"model must be a tallmcmc.Model; got {type(model).__name__}")
    leaves = jax.tree_util.tree_leaves(position)
    if not leaves:
        raise ValueError(f"{name} is empty: pass an array or a pytree of arrays")
    for leaf in leaves:
        if not np.all(np.isfinite(np.asarray(leaf))):
            raise ValueError(f"{name} contains NaN or inf")
    check_position_shape(model, position, name)

    def evaluate(function, *arguments, on_host=True):
        try:
            value = function(*arguments)
            return np.asarray(value) if on_host else value
        except jax.errors.ConcretizationTypeError as error:
            raise ValueError(
                f"the model could not be traced by JAX at {name}: {type(error).__name__}: {error}. log_prior and "
                "log_likelihood are compiled, so they cannot branch in Python on parameter values (`if theta > 0`); "
                "use jnp.where or jax.lax.cond"
            ) from error
        except Exception as error:
            shapes = jax.tree_util.tree_map(lambda leaf: tuple(np.shape(leaf)), position)
            raise ValueError(
                f"the model could not be evaluated at {name} (shape {shapes}): {type(error).__name__}: {error}. "
                "Check that the start has the shape log_prior and log_likelihood expect "
                "(Model(position_shape=...) has it checked up front)"
            ) from error

    # compiled, as every sampler runs them (and one compilation is cheaper than one per operation)
    log_prior = evaluate(jax.jit(model.log_prior), position)
    if log_prior.shape != ():
        raise ValueError(f"log_prior must return a scalar; it returned shape {log_prior.shape}")
    if not np.isfinite(log_prior):
        raise ValueError(
            f"log_prior({name}) = {float(log_prior)}: start inside the prior's support where the log-prior is finite"
        )
    if datum_shape is None:
        datum_shape = jax.tree_util.tree_map(_datum_type, model.data)
    # one datum's log-likelihood traced on that datum's shape: nothing read, nothing compiled
    one = evaluate(jax.eval_shape, model.log_likelihood, position, datum_shape, on_host=False)
    if one.shape != ():
        raise ValueError(
            f"log_likelihood(position, datum) must return a scalar for one datum; it returned shape {one.shape}. "
            "It receives one row of the data (leading axis removed)"
        )
    if evaluate_data is not None:
        count, first_bad, first_value, total = evaluate_data(position, data)
    else:
        values = evaluate(per_datum_program(model), position, model.data)
        bad = np.flatnonzero(~np.isfinite(values))
        count = bad.size
        first_bad, first_value = (bad[0], values[bad[0]]) if bad.size else (0, 0.0)
        total = values.sum()
    if count:
        held = non_finite_data_at(model.data, int(first_bad)) if evaluate_data is None else ""
        raise ValueError(
            f"log_likelihood is not finite at {name} for {int(count)} of {model.num_data} data points "
            f"(first: datum {int(first_bad)}, value {first_value})"
            + (f"; that datum's data hold NaN or inf in {held}. Drop or impute such rows" if held else "")
            + ". Fix the data (NaN/inf rows?) or the log-likelihood (use log-space formulas such as "
            "jax.nn.log_sigmoid / logsumexp)"
        )
    return float(log_prior), float(total)
