r"""The posterior mode and the Hessian there: the centre of control variates and Laplace proposals.

:func:`find_mode` maximises the full-data tempered log posterior

.. math:: \log π(θ) = \log p_0(θ) + \frac{1}{K} \sum_{i=1}^N \log p(x_i \mid θ)

with :func:`scipy.optimize.minimize`, its gradient (and, for trust-region
methods, its Hessian) from JAX. The sum over the data can be taken in chunks of
``batch_size`` rows so that memory stays bounded on tall data. An optional
phase of minibatch Adam steps (optax) first brings a start far from the mode
close to it at the cost of a few minibatches. At the optimiser's result the
Hessian of −log π is computed on the full data and, while the gradient is above
tolerance, used for up to three Newton steps: in float32 the value of a sum of
N terms is too coarse for a line search to resolve the last digits of the
mode, but the gradient and the Hessian still point at them. The Hessian at the
returned point is the precision of the Laplace approximation N(θ̂, H⁻¹)
(:func:`laplace_covariance`). Every data point touched is counted.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
from jax import lax
from jax.flatten_util import ravel_pytree

from tallmcmc._checks import integer_at_least, optional_integer_at_least, positive_finite
from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices
from tallmcmc.model import Model, Position, as_position, check_model
from tallmcmc.proposals.laplace import laplace_covariance
from tallmcmc.sharding import row_sharding

__all__ = ["METHODS", "ModeResult", "find_mode", "laplace_covariance"]

#: The :func:`scipy.optimize.minimize` methods :func:`find_mode` accepts; the
#: trust-region one is also given the exact Hessian.
METHODS = ("L-BFGS-B", "BFGS", "trust-exact")
_USES_HESSIAN = ("trust-exact",)
_MAX_NEWTON_STEPS = 3


class ModeResult(NamedTuple):
    """What :func:`find_mode` found and what it cost.

    position
        The mode, the same pytree as the start.
    hessian
        Hessian of −log π at ``position`` on the full data, flat (d, d),
        symmetrised, float64: the precision of the Laplace approximation.
    log_density
        log π at ``position`` (up to the model's constant).
    data_used
        Per-datum evaluations: ``N`` for the start check and for each full-data
        evaluation (value and gradient together count as one, each Hessian as
        another), the minibatch size for each Adam step.
    data_passes
        ``data_used / N``.
    iterations
        Iterations of the SciPy optimiser plus the polishing Newton steps taken.
    converged
        Whether the optimiser reported success or the gradient at
        ``position`` meets ``tolerance``.
    gradient_norm
        Max-norm of ∇log π at ``position`` (full data, not rescaled).
    """

    position: Position
    hessian: np.ndarray
    log_density: float
    data_used: int
    data_passes: float
    iterations: int
    converged: bool
    gradient_norm: float

    @property
    def name(self) -> str:
        """Key of this cost in ``SamplingResult.setup_data_used``."""
        return "find_mode"


def find_mode(
    model: Model,
    initial_position: Position,
    *,
    method: str = "L-BFGS-B",
    batch_size: int | None = None,
    max_iterations: int = 500,
    tolerance: float = 1e-6,
    adam_steps: int = 0,
    adam_batch_size: int | None = None,
    adam_learning_rate: float = 0.01,
    rng_key: jax.Array | None = None,
) -> ModeResult:
    """Maximise the full-data tempered log posterior of ``model`` from ``initial_position``.

    The objective handed to SciPy is −log π(θ)/(N/K), so that ``tolerance``
    does not grow with the data; SciPy's float64 iterates are cast to the
    start's floating dtype before JAX evaluates them. After the optimiser
    stops, the Hessian of −log π is computed at the result and, while the
    gradient there is above ``tolerance`` and the Hessian is positive
    definite, up to three Newton steps θ ← θ − H⁻¹∇(−log π) are taken, each
    kept only if it shrinks the gradient's max-norm (a step costs one pass for
    the value and gradient at the new point and, if kept, one for the Hessian
    there). Values and gradients are cached by point and the latest Hessian
    is kept, so no full-data evaluation is repeated.

    Parameters
    ----------
    model
        The target.
    initial_position
        The start (array or pytree of arrays). Its floating dtype is the
        dtype of every evaluation; an integer start is cast to JAX's default
        float.
    method
        One of :data:`METHODS`: ``"L-BFGS-B"`` (default) or ``"BFGS"`` use
        values and gradients only; ``"trust-exact"`` also evaluates the exact
        Hessian at every iteration (each a full pass) and suits small d.
    batch_size
        Rows per chunk of the full-data sums (value, gradient, Hessian); the
        chunks are summed in a :func:`jax.lax.scan`, so per-datum
        intermediates never exist for more than ``batch_size`` rows at once.
        ``None`` (default) sums all N rows at once.
    max_iterations
        Cap on the optimiser's iterations.
    tolerance
        Gradient tolerance (SciPy's ``gtol``) on the max-norm of
        ∇(−log π)/(N/K).
    adam_steps
        Minibatch Adam steps before the optimiser (0, the default: none).
        Each step draws ``adam_batch_size`` points without replacement and
        follows the unbiased gradient estimate
        ∇log p₀ + (N/b) Σ_batch ∇log p(xᵢ|θ)/K. Needs ``optax``.
    adam_batch_size
        Points per Adam step; default ``min(N, 1000)``.
    adam_learning_rate
        Adam's step size.
    rng_key
        JAX PRNG key for the Adam minibatches; default ``jax.random.key(0)``.

    Returns
    -------
    ModeResult

    Raises
    ------
    ValueError
        If an argument is out of range, ``method`` is unknown, or the model
        cannot be evaluated at ``initial_position`` (wrong shape, NaN or inf,
        outside the prior's support; see :func:`tallmcmc.model.check_model`).
    ImportError
        If ``adam_steps > 0`` and optax is not installed.

    Warns
    -----
    RuntimeWarning
        If the optimiser did not converge, or the Hessian of −log π at the
        result is not positive definite (a saddle or a flat direction, where
        the Laplace approximation does not exist).

    Notes
    -----
    Data split by rows over a mesh (``jax.device_put(leaf, NamedSharding(mesh,
    PartitionSpec("data")))`` or :func:`tallmcmc.distributed.shard_rows`) are
    used where they live: each device sums its own rows and the partial sums
    are added in device order (:class:`tallmcmc.sharding.RowSharding`); the
    Adam minibatches' rows are copied from their owners. The result equals
    the unsharded one to float32 rounding of the sums, with the same count
    per evaluation (``docs/sharding.md``).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(repr(m) for m in METHODS)}; got {method!r}")
    batch_size = optional_integer_at_least(batch_size, "batch_size")
    max_iterations = integer_at_least(max_iterations, "max_iterations")
    tolerance = positive_finite(tolerance, "tolerance", "the optimiser's gradient tolerance")
    adam_steps = integer_at_least(adam_steps, "adam_steps", 0)
    adam_batch_size = optional_integer_at_least(adam_batch_size, "adam_batch_size")
    adam_learning_rate = positive_finite(adam_learning_rate, "adam_learning_rate", "Adam's step size")
    if rng_key is None:
        rng_key = jax.random.key(0)
    elif not _is_one_key(rng_key):
        raise ValueError(
            "rng_key must be one JAX PRNG key such as jax.random.key(0) (or jax.random.PRNGKey(0)); got "
            f"{type(rng_key).__name__}{getattr(rng_key, 'shape', '')}"
        )
    if adam_steps:
        try:
            import optax
        except ImportError as error:
            raise ImportError(
                "find_mode(adam_steps > 0) needs optax: pip install optax (or pass adam_steps=0)"
            ) from error

    start = as_position(initial_position)
    rows = row_sharding(model.data, "find_mode")  # data split over a mesh: every pass runs where the rows live
    if rows is None:
        check_model(model, start, "initial_position")
    else:
        rows.check_model(model, model.data)(start, "initial_position")
    num_data = model.num_data
    data_used = num_data  # the start check
    flat, unravel = ravel_pytree(start)
    dtype = flat.dtype if jnp.issubdtype(flat.dtype, jnp.inexact) else jnp.result_type(float)
    flat = flat.astype(dtype)
    scale = num_data / model.temperature
    value_and_gradient, hessian_of = _full_data_functions(model, unravel, batch_size, rows)

    if adam_steps:
        batch = min(adam_batch_size or 1000, num_data)
        flat = _adam(model, unravel, optax.adam(adam_learning_rate), flat, adam_steps, batch, rng_key, rows)
        data_used += adam_steps * batch

    numpy_dtype = np.dtype(dtype)
    # Evaluations by point as JAX sees it (cast to ``dtype``): every value and gradient (O(d) each), and
    # the latest Hessian only (O(d²); the optimisers ask for it at the current iterate alone).
    cache: dict[str, dict[bytes, Any]] = {"value_and_gradient": {}, "hessian": {}}
    evaluations = {"value_and_gradient": 0, "hessian": 0}

    def cached(kind: str, function, theta: np.ndarray):
        point = np.ascontiguousarray(np.asarray(theta).astype(numpy_dtype))
        key = point.tobytes()
        if key not in cache[kind]:
            evaluations[kind] += 1
            values = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), function(point, model.data))
            if kind == "hessian":
                cache[kind].clear()
            cache[kind][key] = values
        return cache[kind][key]

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        value, gradient = cached("value_and_gradient", value_and_gradient, theta)
        return float(value) / scale, gradient / scale

    def hessian(theta: np.ndarray) -> np.ndarray:
        return cached("hessian", hessian_of, theta) / scale

    fit = scipy.optimize.minimize(
        objective,
        np.asarray(flat, np.float64),
        jac=True,
        hess=hessian if method in _USES_HESSIAN else None,
        method=method,
        options={"maxiter": max_iterations, "gtol": tolerance},
    )
    mode = np.asarray(fit.x).astype(numpy_dtype)
    value, gradient = cached("value_and_gradient", value_and_gradient, mode)
    curvature = _symmetric(cached("hessian", hessian_of, mode))
    newton_steps = 0
    # Polish with Newton steps (see the module docstring: float32 values limit the line search).
    while (
        newton_steps < _MAX_NEWTON_STEPS
        and np.max(np.abs(gradient), initial=0.0) / scale > tolerance
        and _is_positive_definite(curvature)
    ):
        step = np.linalg.solve(curvature, gradient)
        candidate = (mode - step).astype(numpy_dtype)
        candidate_value, candidate_gradient = cached("value_and_gradient", value_and_gradient, candidate)
        if not np.all(np.isfinite(candidate_gradient)) or (
            np.max(np.abs(candidate_gradient)) >= np.max(np.abs(gradient))
        ):
            break
        mode, value, gradient = candidate, candidate_value, candidate_gradient
        curvature = _symmetric(cached("hessian", hessian_of, mode))
        newton_steps += 1
    data_used += (evaluations["value_and_gradient"] + evaluations["hessian"]) * num_data

    gradient_norm = float(np.max(np.abs(gradient), initial=0.0))
    converged = bool(fit.success) or gradient_norm / scale <= tolerance
    if not converged:
        warnings.warn(
            f"find_mode: {method} stopped without converging after {fit.nit} iterations ({fit.message}); "
            f"max |∇log π| = {gradient_norm:.3g} at the result. Raise max_iterations, start closer "
            "(adam_steps), or check the model",
            RuntimeWarning,
            stacklevel=2,
        )
    if not _is_positive_definite(curvature):
        warnings.warn(
            "find_mode: the Hessian of −log π at the result is not positive definite (a saddle, a flat "
            "direction or an unbounded posterior), so the Laplace approximation N(mode, H⁻¹) does not exist "
            "there and laplace_covariance will refuse it",
            RuntimeWarning,
            stacklevel=2,
        )
    return ModeResult(
        position=unravel(jnp.asarray(mode)),
        hessian=curvature,
        log_density=-float(value),
        data_used=int(data_used),
        data_passes=data_used / num_data,
        iterations=int(fit.nit) + newton_steps,
        converged=converged,
        gradient_norm=gradient_norm,
    )


def _full_data_functions(model: Model, unravel, batch_size: int | None, rows=None):
    """Jitted ``(θ, data) -> (−log π, ∇)`` and ``(θ, data) -> ∇²(−log π)`` over flat θ, summed in chunks.

    With ``rows`` (a :class:`tallmcmc.sharding.RowSharding`) every device sums
    its own block of rows in chunks and the partial sums are added in device
    order (:func:`tallmcmc.sharding.sum_partials`); ``batch_size`` then bounds
    the rows per chunk on each device.
    """
    from tallmcmc import sharding

    block = model.num_data if rows is None else rows.rows_per_shard
    chunk = None if batch_size is None or batch_size >= block else batch_size

    def negative_log_prior(theta):
        return -model.log_prior(unravel(theta))

    def negative_log_likelihood(theta, rows):
        return -jnp.sum(model.per_datum_log_likelihood(unravel(theta), rows)) / model.temperature

    def summed(per_rows, theta, data):
        """``per_rows(θ, rows)`` summed over all rows of ``data``, ``chunk`` rows at a time."""
        if chunk is None:
            return per_rows(theta, data)
        num_chunks, remainder = divmod(block, chunk)

        def add(total, index):
            rows = jax.tree_util.tree_map(lambda leaf: lax.dynamic_slice_in_dim(leaf, index * chunk, chunk), data)
            return jax.tree_util.tree_map(jnp.add, total, per_rows(theta, rows)), None

        shapes = jax.eval_shape(per_rows, theta, jax.tree_util.tree_map(lambda leaf: leaf[:chunk], data))
        zeros = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        total, _ = lax.scan(add, zeros, jnp.arange(num_chunks))
        if remainder:
            tail = jax.tree_util.tree_map(lambda leaf: leaf[num_chunks * chunk :], data)
            total = jax.tree_util.tree_map(jnp.add, total, per_rows(theta, tail))
        return total

    def value_and_gradient(theta, data):
        prior_value, prior_gradient = jax.value_and_grad(negative_log_prior)(theta)
        value, gradient = summed(jax.value_and_grad(negative_log_likelihood), theta, data)
        if rows is not None:
            value, gradient = sharding.sum_partials((value, gradient), rows.axis)
        return prior_value + value, prior_gradient + gradient

    def hessian(theta, data):
        likelihood = summed(jax.hessian(negative_log_likelihood), theta, data)
        if rows is not None:
            likelihood = sharding.sum_partials(likelihood, rows.axis)
        return jax.hessian(negative_log_prior)(theta) + likelihood

    if rows is None:
        return jax.jit(value_and_gradient), jax.jit(hessian)
    return rows.jit(value_and_gradient, ("replicated", "rows")), rows.jit(hessian, ("replicated", "rows"))


def _adam(model: Model, unravel, optimizer, flat: jax.Array, num_steps: int, batch: int, rng_key: jax.Array,
          rows=None):
    """``num_steps`` Adam steps on −log π/(N/K) estimated from ``batch`` points drawn without replacement.

    With ``rows`` (data split over a mesh) every device runs the same steps and
    each minibatch's rows are copied from the devices that hold them
    (:meth:`tallmcmc.Model.data_at`), exactly.
    """
    num_data = model.num_data

    def minibatch_loss(theta, indices, data):
        if rows is None:
            picked = jax.tree_util.tree_map(lambda leaf: leaf[indices], data)
        else:
            picked = model.with_data(data).with_shards(rows.shards).data_at(indices)
        position = unravel(theta)
        likelihood = jnp.sum(model.per_datum_log_likelihood(position, picked)) / model.temperature
        return -(model.log_prior(position) + likelihood * num_data / batch) * model.temperature / num_data

    def run(theta, data, keys):
        def step(carry, key):
            theta, state = carry
            indices = permuted_indices(permutation_keys(key), jnp.arange(batch, dtype=jnp.int32), num_data)
            updates, state = optimizer.update(jax.grad(minibatch_loss)(theta, indices, data), state, theta)
            return (theta + updates, state), None

        (theta, _), _ = lax.scan(step, (theta, optimizer.init(theta)), keys)
        return theta

    keys = jax.random.split(rng_key, num_steps)
    if rows is None:
        return jax.jit(run)(flat, model.data, keys)
    typed = jax.dtypes.issubdtype(keys.dtype, jax.dtypes.prng_key)
    if typed:  # travels as its raw bits (placed on every process like any host value)
        implementation, keys = jax.random.key_impl(keys), jax.random.key_data(keys)

    def run_raw(theta, data, raw):
        return run(theta, data, jax.random.wrap_key_data(raw, impl=implementation) if typed else raw)

    return jnp.asarray(rows.jit(run_raw, ("replicated", "rows", "replicated"))(flat, model.data, keys))


def _is_one_key(rng_key: Any) -> bool:
    """Whether ``rng_key`` is a single typed key (``jax.random.key``) or a raw ``uint32[2]`` one (``PRNGKey``)."""
    if not isinstance(rng_key, jax.Array):
        return False
    if jax.dtypes.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        return rng_key.shape == ()
    return rng_key.dtype == jnp.uint32 and rng_key.shape == (2,)


def _symmetric(matrix: np.ndarray) -> np.ndarray:
    return 0.5 * (matrix + matrix.T)


def _is_positive_definite(matrix: np.ndarray) -> bool:
    if not np.all(np.isfinite(matrix)):
        return False
    try:
        np.linalg.cholesky(matrix)
    except np.linalg.LinAlgError:
        return False
    return True
