r"""The posterior mode and the Hessian there: the centre of control variates and Laplace proposals.

:func:`find_mode` maximises the full-data tempered log posterior

.. math:: \log π(θ) = \log p_0(θ) + \frac{1}{K} \sum_{i=1}^N \log p(x_i \mid θ)

and says whether it got there by one criterion for every method: the
**Newton decrement** λ = sqrt(gᵀH⁻¹g), g and H the gradient and Hessian of
−log π on the full data. λ is the distance to the mode of the local quadratic
model measured in the Laplace approximation's own metric, i.e. in posterior
standard deviations; ``converged`` is ``True`` only when H is positive
definite and λ ≤ ``decrement_tolerance`` (default 10⁻² sd), whatever the
optimiser reported.

The default method (``"newton"``, chosen by ``method="auto"`` up to
:data:`NEWTON_MAX_DIMENSION` coordinates) is a trust-region Newton method on
the exact full-data Hessian: one pass over the data gives the value, the
gradient and the Hessian together; each iteration solves the trust-region
subproblem exactly (eigendecomposition, diagonally scaled so that a rescaled
column does not matter), which damps the step Levenberg–Marquardt-style
where the Hessian is not positive definite instead of stopping. A step is
kept if it decreases −log π as the quadratic model predicts; where the
predicted decrease is below the float32 rounding of the value, it is judged
by its gradient instead. For larger d, ``"L-BFGS-B"`` (or on request
``"BFGS"``, ``"trust-exact"``) from :func:`scipy.optimize.minimize` runs first
and the same Newton iterations finish from its result until the decrement
criterion holds or ``max_iterations`` is spent.

The sums over the data are taken in chunks of rows: within a chunk the
value's terms are summed by an error-free extraction (Rump, Ogita and
Oishi's, two float32 numbers whose sum is exact to far below the terms'
precision) and the gradient's and Hessian's by XLA; the chunks' results are
added with Neumaier's compensated summation, and the parts (with the
per-device partial sums of data split over a mesh) are added on the host in
float64. The value's error is then that of its per-datum terms, not the
float32 spacing of a number of size N (0.125 at 10⁶ terms of order 1). An optional phase of minibatch Adam steps
(optax) first brings a start far from the mode close to it at the cost of a
few minibatches. The Hessian at the returned point is the precision of the
Laplace approximation N(θ̂, H⁻¹) (:func:`laplace_covariance`). Every data
point touched is counted. See ``docs/mode.md``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from jax import lax

from tallmcmc import flat_positions, program_cache, sharding
from tallmcmc._checks import integer_at_least, optional_integer_at_least, positive_finite
from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices
from tallmcmc.model import Model, Position, as_position, check_differentiable, check_model
from tallmcmc.program_cache import Traced
from tallmcmc.proposals.laplace import laplace_covariance
from tallmcmc.sharding import row_sharding

__all__ = [
    "DECREMENT_TOLERANCE",
    "CRAWL_RATIO",
    "DEFAULT_CHUNK_ROWS",
    "HANDOVER_ITERATIONS",
    "HANDOVER_NATS",
    "METHODS",
    "NEWTON_MAX_DIMENSION",
    "ModeResult",
    "find_mode",
    "laplace_covariance",
]

#: The methods :func:`find_mode` accepts besides ``"auto"``: three from
#: :func:`scipy.optimize.minimize` (the trust-region one is also given the exact
#: Hessian) and the trust-region Newton method of this module.
METHODS = ("L-BFGS-B", "BFGS", "trust-exact", "newton")
_SCIPY_METHODS = ("L-BFGS-B", "BFGS", "trust-exact")
_USES_HESSIAN = ("trust-exact",)
#: ``method="auto"`` runs ``"newton"`` up to this many coordinates, ``"L-BFGS-B"`` above (``docs/mode.md``).
NEWTON_MAX_DIMENSION = 200
#: ``"L-BFGS-B"`` and ``"BFGS"`` hand over to the Newton iterations after an iteration that lowers −log π by less
#: than this many nats (near the mode −log π lies about λ²/2 above its minimum: λ of order one) ...
HANDOVER_NATS = 0.1
#: ... and by at least this fraction of the iteration before: they crawl there instead of converging superlinearly
#: (each gain a small fraction of the last), and the Newton iterations, with the exact Hessian, finish in a pass or
#: two (``docs/mode.md``, "Handing over").
CRAWL_RATIO = 0.5
#: ... or after this many iterations, whatever they gain: a quasi-Newton method still short of the mode after 40
#: iterations is working through an ill-conditioned valley (a hierarchical model's group effects informed by 100 to
#: 20,000 rows each: 196 iterations and 212 passes, where the Newton iterations took 13), and well-conditioned
#: problems finish within 20 (``docs/mode.md``, "Handing over").
HANDOVER_ITERATIONS = 40
#: Default ``decrement_tolerance``, in posterior standard deviations (``docs/mode.md``).
DECREMENT_TOLERANCE = 1e-2
#: Rows per chunk of the full-data sums when ``batch_size`` is not given.
DEFAULT_CHUNK_ROWS = 4096

# Trust-region constants (Nocedal & Wright, Algorithm 4.1; Moré's diagonal scaling).
_ACCEPT = 0.01  # keep a step whose actual decrease is at least this fraction of the predicted one
_SHRINK_BELOW, _EXPAND_ABOVE = 0.25, 0.75
# A predicted decrease below this many times the value's rounding bound is judged by the gradient instead.
_NOISE_MARGIN = 4.0
#: After this many trial steps in a row along which −log π *rose* (beyond its rounding) where the quadratic model
#: predicted a fall, the gradient at the point does not describe the function there — a kink, such as NumPyro's
#: ``Bernoulli(logits=…)`` at logits exactly 0, where ``jnp.clip``/``jnp.abs`` give a one-sided derivative for every
#: datum (the unconstrained origin, a natural start): the iterations move the point by :data:`NUDGE` posterior sd in
#: a seeded random direction and go on from there (``docs/mode.md``, "A start on a kink"). With the true gradient a
#: step shrunk 4⁴ = 256-fold from a rejected one cannot raise the value beyond rounding.
KINK_REJECTIONS = 4
#: The nudge off such a point, in sd of the scaled coordinates (1/√diag H each): far below the posterior's width,
#: far above float32's resolution.
NUDGE = 1e-3
#: At most this many nudges in one search; a search that still cannot descend stops and says so.
MAX_NUDGES = 2
_NUDGE_STREAM = 0x4E0D6E  # the nudges' directions, apart from every other seed


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
        Per-datum evaluations: ``N`` for the start check and for each pass
        over the data (the value with the gradient, or the value, gradient
        and Hessian together, each count as one), the minibatch size for each
        Adam step.
    data_passes
        ``data_used / N``.
    iterations
        Iterations of the SciPy optimiser (if one ran) plus the trust-region
        Newton iterations (each one trial point, kept or not).
    converged
        Whether the Hessian of −log π at ``position`` is positive definite
        and the Newton decrement there is at most ``decrement_tolerance``.
    gradient_norm
        Max-norm of ∇log π at ``position`` (full data, not rescaled).
    newton_decrement
        λ = sqrt(gᵀH⁻¹g) at ``position``, g and H the gradient and Hessian of
        −log π: the distance to the mode in posterior standard deviations
        (for a quadratic −log π exactly, near a mode to first order);
        ``inf`` where H is not positive definite.
    passes_by_kind
        ``data_passes`` by source: ``"check"`` (the start check),
        ``"value_and_gradient"`` (SciPy's L-BFGS-B/BFGS evaluations),
        ``"value_gradient_hessian"`` (the Newton and trust-exact passes and
        the final one at ``position``) and ``"adam"`` (Adam's minibatches,
        in passes).
    method
        The method that ran (``"auto"`` resolved).
    message
        Why the iterations stopped.
    likelihood_sums
        (Σᵢ∇log p(xᵢ|θ), Σᵢ∇²log p(xᵢ|θ)) at ``position``, untempered,
        float64, flat: the likelihood's part of the final pass, from which
        ``sample_tall`` builds its control variate without a pass of its own
        (:func:`tallmcmc.control_variate.control_variate_at_mode`). ``None``
        where no final pass kept them.
    """

    position: Position
    hessian: np.ndarray
    log_density: float
    data_used: int
    data_passes: float
    iterations: int
    converged: bool
    gradient_norm: float
    newton_decrement: float = math.nan
    passes_by_kind: dict | None = None
    method: str = ""
    message: str = ""
    likelihood_sums: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def name(self) -> str:
        """Key of this cost in ``SamplingResult.setup_data_used``."""
        return "find_mode"


def find_mode(
    model: Model,
    initial_position: Position,
    *,
    method: str = "auto",
    batch_size: int | None = None,
    max_iterations: int = 500,
    tolerance: float = 1e-6,
    adam_steps: int = 0,
    adam_batch_size: int | None = None,
    adam_learning_rate: float = 0.01,
    rng_key: jax.Array | None = None,
    decrement_tolerance: float = DECREMENT_TOLERANCE,
) -> ModeResult:
    """Maximise the full-data tempered log posterior of ``model`` from ``initial_position``.

    Every method ends the same way: at its last point the value, gradient g
    and Hessian H of −log π are computed in one pass over the data, and the
    result counts as converged only if H is positive definite and the
    Newton decrement sqrt(gᵀH⁻¹g), the distance to the mode in posterior
    standard deviations, is at most ``decrement_tolerance``.

    ``"newton"`` iterates a trust-region Newton method on those passes: the
    step minimises the quadratic model gᵀp + ½pᵀHp within a radius (in
    coordinates scaled by the square roots of H's diagonal, so that the
    units of a coordinate do not matter), which is the Newton step where H
    is positive definite and the step fits, and a Levenberg–Marquardt step
    (H + μD², μ > 0, along negative curvature where there is some) otherwise.
    A trial point costs one pass; it is kept if −log π decreases by at least
    1% of the model's prediction, or, where the predicted decrease is below
    four times a bound on the value's rounding (ε Σᵢ|ℓᵢ|/K, ε the dtype's
    epsilon: the per-datum terms' own rounding),
    if the gradient shrinks in the metric of the damped Hessian and the
    value does not rise beyond that bound. The radius shrinks after a poor
    step and grows after a good one. The iterations stop when the decrement
    criterion holds, after ``max_iterations`` trial points, or when the step
    no longer changes the position in its floating dtype.

    The SciPy methods minimise −log π/(N/K) (their own stopping rule uses
    ``tolerance``; ``"L-BFGS-B"`` and ``"BFGS"`` also stop where they crawl:
    after an iteration that lowers −log π by less than :data:`HANDOVER_NATS`,
    0.1 nats, and by at least :data:`CRAWL_RATIO` of the iteration before,
    or after :data:`HANDOVER_ITERATIONS` iterations),
    their float64 iterates cast to the start's floating
    dtype before JAX evaluates them; the Newton iterations above then
    continue from their result, with the iterations left of
    ``max_iterations``, until the decrement criterion holds. Values and
    gradients are cached by point, so no full-data evaluation is repeated.

    Parameters
    ----------
    model
        The target.
    initial_position
        The start (array or pytree of arrays). Its floating dtype is the
        dtype of every evaluation; an integer start is cast to JAX's default
        float.
    method
        ``"auto"`` (default): ``"newton"`` for up to
        :data:`NEWTON_MAX_DIMENSION` coordinates, ``"L-BFGS-B"`` above.
        Or one of :data:`METHODS`: ``"newton"``; ``"L-BFGS-B"`` and ``"BFGS"``
        (values and gradients only, then Newton iterations with the Hessian);
        ``"trust-exact"`` (SciPy's, with the exact Hessian at every point).
    batch_size
        Rows per chunk of the full-data sums (value, gradient, Hessian; of
        each device's block when the data are split over a mesh); the chunks
        are summed in a :func:`jax.lax.scan`, so per-datum intermediates
        never exist for more than ``batch_size`` rows at once. ``None``
        (default): :data:`DEFAULT_CHUNK_ROWS` rows.
    max_iterations
        Cap on the iterations: the SciPy optimiser's plus the Newton ones.
    tolerance
        The SciPy methods' own gradient tolerance (SciPy's ``gtol``) on the
        max-norm of ∇(−log π)/(N/K); it decides when SciPy hands over to
        the Newton iterations (unused by ``"newton"``), as does, for
        ``"L-BFGS-B"`` and ``"BFGS"``, a crawl near the mode (above).
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
    decrement_tolerance
        The convergence criterion: the largest Newton decrement, in
        posterior standard deviations, at which the result counts as the
        mode (default :data:`DECREMENT_TOLERANCE`).

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
        If the result is not converged (with the decrement and what to do),
        or the Hessian of −log π at the result is not positive definite (a
        saddle or a flat direction, where the Laplace approximation does not
        exist).

    Notes
    -----
    Sums over the data: within each chunk of rows the value's terms are
    summed exactly enough by an error-free extraction (two numbers in the
    evaluation's dtype) and the gradient's and Hessian's in that dtype by
    XLA; the chunks' results are added with Neumaier's compensated
    summation (a second array carries the rounding error of each addition),
    and the parts are added on the host in float64, with the prior's terms.

    Data split by rows over a mesh (``jax.device_put(leaf, NamedSharding(mesh,
    PartitionSpec("data")))`` or :func:`tallmcmc.distributed.shard_rows`) are
    used where they live: each device sums its own rows in chunks and the
    per-device compensated partial sums are gathered in device order
    (:func:`tallmcmc.sharding.gather_partials`) and added on the host in
    float64; the Adam minibatches' rows are copied from their owners. The
    result equals the unsharded one to the rounding of the gradient's and
    Hessian's float32 chunk sums, with the same count per evaluation
    (``docs/sharding.md``).
    """
    if method != "auto" and method not in METHODS:
        raise ValueError(f"method must be one of 'auto', {', '.join(repr(m) for m in METHODS)}; got {method!r}")
    batch_size = optional_integer_at_least(batch_size, "batch_size")
    max_iterations = integer_at_least(max_iterations, "max_iterations")
    tolerance = positive_finite(tolerance, "tolerance", "the SciPy optimiser's gradient tolerance")
    decrement_tolerance = positive_finite(
        decrement_tolerance,
        "decrement_tolerance",
        "the largest Newton decrement, in posterior standard "
        "deviations, at which the result counts as the mode; e.g. 1e-2",
    )
    adam_steps = integer_at_least(adam_steps, "adam_steps", 0)
    adam_batch_size = optional_integer_at_least(adam_batch_size, "adam_batch_size")
    adam_learning_rate = positive_finite(adam_learning_rate, "adam_learning_rate", "Adam's step size")
    if rng_key is not None and not _is_one_key(rng_key):
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
    check_differentiable(model, start, "find_mode")
    num_data = model.num_data
    flat, unravel = flat_positions.ravel(start)
    dtype = flat.dtype
    if method == "auto":
        method = "newton" if flat.size <= NEWTON_MAX_DIMENSION else "L-BFGS-B"
    scale = num_data / model.temperature
    evaluate = _FullData(model, unravel, batch_size, rows, np.dtype(dtype), flat.size)

    adam_used = 0
    if adam_steps:
        batch = min(adam_batch_size or 1000, num_data)
        key = jax.random.key(0) if rng_key is None else rng_key  # made here: an eager key compiles two programs
        flat = _adam(model, unravel, optax.adam(adam_learning_rate), flat, adam_steps, batch, key, rows)
        adam_used = adam_steps * batch

    theta = np.asarray(flat)
    scipy_iterations, scipy_message = 0, ""
    if method in _SCIPY_METHODS:
        # on first use, not at `import tallmcmc` (docs/compilation.md, "The import")
        from scipy.optimize import minimize

        def objective(point: np.ndarray) -> tuple[float, np.ndarray]:
            if method in _USES_HESSIAN:  # one pass gives the Hessian too, which the method asks for next
                value, gradient = evaluate.full(point)[:2]
            else:
                value, gradient = evaluate.value_and_gradient(point)
            return value / scale, gradient / scale

        def hessian(point: np.ndarray) -> np.ndarray:
            return evaluate.full(point).hessian / scale

        values: list[float] = []  # −log π after each iteration
        handed_over: list[float] = []  # the gain of the iteration that handed over

        def hand_over(intermediate_result) -> None:  # SciPy's callback after each iteration
            values.append(float(intermediate_result.fun) * scale)
            gains = -np.diff(values[-3:])
            if len(gains) == 2 and gains[1] < HANDOVER_NATS and gains[1] >= CRAWL_RATIO * gains[0]:
                handed_over.append(float(gains[1]))
                raise StopIteration
            if len(values) >= HANDOVER_ITERATIONS:
                handed_over.append(math.nan)  # the iteration budget, not a crawl
                raise StopIteration

        fit = minimize(
            objective,
            np.asarray(theta, np.float64),
            jac=True,
            hess=hessian if method in _USES_HESSIAN else None,
            method=method,
            options={"maxiter": max_iterations, "gtol": tolerance},
            callback=None if method in _USES_HESSIAN else hand_over,
        )
        theta = evaluate.cast(fit.x)
        scipy_iterations, scipy_message = int(fit.nit), f"{method}: {fit.message}; "
        if handed_over and math.isnan(handed_over[0]):
            scipy_message = (
                f"{method}: handed over to the Newton iterations after {HANDOVER_ITERATIONS} iterations short of the "
                f"mode (the last lowered −log π by {values[-2] - values[-1]:.3g} nats: an ill-conditioned valley); "
            )
        elif handed_over:
            scipy_message = (
                f"{method}: handed over to the Newton iterations after an iteration that lowered −log π by "
                f"{handed_over[0]:.3g} nats, below {HANDOVER_NATS:g} and at least {CRAWL_RATIO:g}× the iteration "
                "before's (a crawl); "
            )
    point = evaluate.full(theta)
    theta, point, newton_iterations, stop = _trust_region_newton(
        evaluate, theta, point, decrement_tolerance, max_iterations - scipy_iterations
    )
    iterations = scipy_iterations + newton_iterations
    message = scipy_message + stop

    passes = {"check": 1.0, **{kind: float(count) for kind, count in evaluate.passes.items()}}
    passes["adam"] = adam_used / num_data
    data_used = int(round(sum(count for kind, count in passes.items() if kind != "adam") * num_data)) + adam_used
    curvature = _symmetric(point.hessian)
    decrement = _newton_decrement(point.gradient, curvature)
    gradient_norm = float(np.max(np.abs(point.gradient), initial=0.0))
    converged = bool(decrement <= decrement_tolerance)
    finite = bool(np.all(np.isfinite(curvature)))
    if not converged:
        where = (
            "the Hessian of −log π there is not finite (NaN or infinite second derivatives), so the decrement is "
            "undefined"
            if not finite
            else "the Hessian of −log π there is not positive definite, so the decrement is undefined"
            if not np.isfinite(decrement)
            else f"the Newton decrement there is {decrement:.3g} posterior sd (decrement_tolerance "
            f"{decrement_tolerance:g})"
        )
        advice = "Raise max_iterations, start closer (adam_steps, or a better initial_position), or check the model"
        if "; nudged " in stop and "converged" not in stop:
            # kinks that nudging did not get past: a likelihood with |x − θ| terms (Laplace, asymmetric Laplace,
            # quantile regression) has one at every datum, and no float precision or iteration count fixes that
            advice = (
                "The log density has kinks the gradient cannot see past: a likelihood that is not smooth (|x − θ| "
                "terms, as in dist.Laplace or dist.AsymmetricLaplace) has one at every datum, so Newton's method "
                "stalls short of the mode whatever the precision (the decrement above says how far). For the "
                "posterior use a sampler that needs no mode, such as NumPyro's NUTS, or a smooth likelihood "
                "(e.g. dist.StudentT for robustness)"
            )
        elif "resolution" in stop and np.dtype(dtype) == np.float32:
            advice = (
                "The position's float32 spacing is too coarse for the posterior's width: evaluate in float64 "
                "(JAX_ENABLE_X64=1 and a float64 initial_position) or reparametrise (centre and scale the "
                "coordinates)"
            )
        elif "resolution" in stop:
            advice = (
                f"The steps fell below the position's {np.dtype(dtype).name} resolution without converging: the "
                "gradient there does not describe the log density (a kink, or a non-smooth likelihood), or the "
                "coordinates are badly scaled: reparametrise (centre and scale the coordinates), or check the "
                "model's gradient"
            )
        elif method in _SCIPY_METHODS:
            advice += ' (method="newton" uses the exact Hessian from the start)'
        warnings.warn(
            f"find_mode: {method} stopped without converging after {iterations} iterations ({message}); "
            f"{where}; max |∇log π| = {gradient_norm:.3g}. {advice}",
            RuntimeWarning,
            stacklevel=2,
        )
    if not finite:
        warnings.warn(
            "find_mode: the Hessian of −log π at the result is not finite (NaN or infinite second derivatives: a "
            "log density whose second derivative under- or overflows, such as NumPyro's Bernoulli(probs=Φ(η)) in "
            "float32 far in the tails), so the Laplace approximation N(mode, H⁻¹) does not exist there and "
            "laplace_covariance will refuse it",
            RuntimeWarning,
            stacklevel=2,
        )
    elif not _is_positive_definite(curvature):
        warnings.warn(
            "find_mode: the Hessian of −log π at the result is not positive definite (a saddle, a flat "
            "direction or an unbounded posterior), so the Laplace approximation N(mode, H⁻¹) does not exist "
            "there and laplace_covariance will refuse it",
            RuntimeWarning,
            stacklevel=2,
        )
    return ModeResult(
        position=flat_positions.placer(start, dtype)(theta),
        hessian=curvature,
        log_density=-float(point.value),
        data_used=data_used,
        data_passes=data_used / num_data,
        iterations=iterations,
        converged=converged,
        gradient_norm=gradient_norm,
        newton_decrement=float(decrement),
        passes_by_kind=passes,
        method=method,
        message=message,
        likelihood_sums=point.likelihood_sums,
    )


# ------------------------------------------------------------------------------------------ full-data passes


class _Point(NamedTuple):
    """−log π at one point, float64 on the host: value, gradient, Hessian (``None`` if not computed).

    ``rounding`` bounds the value's error from its terms' own rounding: the
    evaluation dtype's epsilon times Σᵢ|ℓᵢ|/K + |log p₀| (each term is a few
    operations in that dtype; the sums add nothing comparable).
    ``likelihood_hessian`` is the likelihood's part of ``hessian`` where the
    evaluator keeps it apart from the prior's (``fast_setup``'s subsample
    levels), else ``None``. ``likelihood_sums``: (Σᵢ∇ℓᵢ, Σᵢ∇²ℓᵢ),
    untempered, where a full-data pass with the Hessian computed them
    (:func:`find_mode`'s), else ``None``.
    """

    value: float
    gradient: np.ndarray
    hessian: np.ndarray | None
    rounding: float
    likelihood_hessian: np.ndarray | None = None
    likelihood_sums: tuple[np.ndarray, np.ndarray] | None = None


class _FullData:
    """The full-data passes of :func:`find_mode`, cached by point and counted.

    ``value_and_gradient(θ)`` and ``full(θ)`` (value, gradient and Hessian
    together) each cost one pass unless the point was evaluated before; a
    ``full`` result also answers ``value_and_gradient`` at its point.
    """

    def __init__(self, model: Model, unravel, batch_size: int | None, rows, dtype: np.dtype, size: int):
        self.dtype = dtype
        self.eps = float(np.finfo(dtype).eps)
        self.passes = {"value_and_gradient": 0, "value_gradient_hessian": 0}
        self._data = model.data
        self.temperature = model.temperature
        self._value_and_gradient, self._full_pass, self.num_chunks = _full_data_functions(
            model, unravel, batch_size, rows, jax.ShapeDtypeStruct((size,), dtype)
        )
        self._gradients: dict[bytes, tuple[float, np.ndarray]] = {}  # O(d) each: all kept
        self._full: dict[bytes, _Point] = {}  # O(d²) each: the latest few

    def cast(self, theta) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(theta).astype(self.dtype))

    def value_and_gradient(self, theta) -> tuple[float, np.ndarray]:
        point = self.cast(theta)
        key = point.tobytes()
        if key not in self._gradients:
            self.passes["value_and_gradient"] += 1
            value, gradient, _ = self._combine(self._value_and_gradient(point, self._data), hessian=False)
            self._gradients[key] = (value, gradient)
        return self._gradients[key]

    def full(self, theta) -> _Point:
        point = self.cast(theta)
        key = point.tobytes()
        if key not in self._full:
            self.passes["value_gradient_hessian"] += 1
            if len(self._full) >= 4:
                del self._full[next(iter(self._full))]
            self._full[key] = _Point(*self._combine(self._full_pass(point, self._data), hessian=True))
            self._gradients[key] = self._full[key][:2]
        return self._full[key]

    def _combine(self, parts, hessian: bool):
        """float64 totals of the devices' compensated partial sums (leading axis: devices) and the prior's terms."""
        prior, likelihood = parts
        totals = [
            np.sum(np.asarray(total, np.float64) + np.asarray(compensation, np.float64), axis=0)
            for total, compensation in zip(*likelihood)
        ]
        value = float(totals[0] + totals[1] + np.float64(prior[0]))
        gradient = totals[3] + np.asarray(prior[1], np.float64)
        rounding = self.eps * (float(totals[2]) + abs(float(prior[0])))
        if not hessian:
            return value, gradient, rounding
        hessian_total = _symmetric(totals[4] + np.asarray(prior[2], np.float64))
        temperature = float(self.temperature)  # the totals are of −ℓᵢ/K
        sums = (-temperature * totals[3], -temperature * _symmetric(totals[4]))
        return value, gradient, hessian_total, rounding, None, sums


def _full_data_functions(model: Model, unravel, batch_size: int | None, rows, theta: jax.ShapeDtypeStruct):
    """Jitted passes over flat θ: ``(θ, data) -> (prior terms, ((totals), (compensations)))``.

    The likelihood's terms are ``(Σ −ℓᵢ/K (high part), its low part,
    Σ|ℓᵢ|/K, ∇)`` and, for the second function, ``∇²``; each is summed in
    chunks of ``chunk`` rows (:func:`_accurate_sum` for the value, XLA's sum
    for the rest), the chunks added with Neumaier's compensated summation,
    and returned as the running totals and their compensations with a
    leading axis of one entry per device (1 unsharded) to be added on the
    host in float64. The prior's terms (value, gradient, Hessian of −log p₀)
    come apart. Also returns the total number of chunks (over all devices).

    With ``rows`` (a :class:`tallmcmc.sharding.RowSharding`) every device sums
    its own block of rows and the per-device results are gathered in device
    order (:func:`tallmcmc.sharding.gather_partials`). Without, each pass is a
    :class:`~tallmcmc.program_cache.KeptPass`: the likelihood of one chunk and the prior are traced
    once (at ``theta``'s shape and dtype), the passes replay those traces with
    their constants as an argument, and the lowered passes are kept between
    processes under the traces' key (:mod:`tallmcmc.program_cache`).
    """
    block = model.num_data if rows is None else rows.rows_per_shard
    chunk = min(block, batch_size or DEFAULT_CHUNK_ROWS)
    num_chunks = -(-block // chunk)  # the last one ends at the block's end and masks the rows it repeats
    total_chunks = num_chunks * (1 if rows is None else rows.num_shards)

    if rows is None:  # traced once, replayed with their constants as the passes' argument (KeptPass)
        first_rows = jax.tree_util.tree_map(
            lambda leaf: jax.ShapeDtypeStruct((chunk, *leaf.shape[1:]), leaf.dtype), model.data
        )
        likelihood = Traced.of(lambda t, part: model.per_datum_log_likelihood(unravel(t), part), theta, first_rows)
        prior = Traced.of(lambda t: model.log_prior(unravel(t)), theta)

        def per_datum(t, part, constants):
            return likelihood.replay(constants[0], t, part)

        def log_prior(t, constants):
            return prior.replay(constants[1], t)

        constants = (likelihood.constants, prior.constants)
    else:

        def per_datum(t, part, constants):
            return model.per_datum_log_likelihood(unravel(t), part)

        def log_prior(t, constants):
            return model.log_prior(unravel(t))

        constants = ((), ())

    def likelihood_terms(with_hessian: bool, constants):
        def value_and_size(theta, part, fresh):
            terms = -per_datum(theta, part, constants) / model.temperature
            terms = jnp.where(fresh, terms, jnp.zeros_like(terms))
            fixed = lax.stop_gradient(terms)  # the accurate value is not differentiated: no tangents to carry
            value, error = _accurate_sum(fixed)
            return jnp.sum(terms), (value, error, jnp.sum(jnp.abs(fixed)))

        def first(theta, part, fresh):
            (_, (value, error, size)), gradient = jax.value_and_grad(value_and_size, has_aux=True)(theta, part, fresh)
            return value, error, size, gradient

        if not with_hessian:
            return first

        def all_three(theta, part, fresh):
            def gradient_with_aux(t):
                value, error, size, gradient = first(t, part, fresh)
                return gradient, (value, error, size, gradient)

            hessian, (value, error, size, gradient) = jax.jacfwd(gradient_with_aux, has_aux=True)(theta)
            return value, error, size, gradient, hessian

        return all_three

    def summed(per_chunk, theta, data):
        """``per_chunk(θ, rows, fresh)`` summed over all rows of ``data``: (totals, compensations), Neumaier.

        Chunk ``i`` holds rows ``[i·chunk, (i + 1)·chunk)``; the last one
        ends at the block's end instead and ``fresh`` masks the rows an
        earlier chunk held, so that one compiled body serves every chunk.
        """

        def add(carry, index):
            first_row = jnp.minimum(index * chunk, block - chunk)
            part = jax.tree_util.tree_map(lambda leaf: lax.dynamic_slice_in_dim(leaf, first_row, chunk), data)
            fresh = first_row + jnp.arange(chunk) >= index * chunk
            terms = per_chunk(theta, part, fresh)
            pairs = [_neumaier(t, c, x) for t, c, x in zip(*carry, terms)]
            return (tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)), None

        part = jax.tree_util.tree_map(lambda leaf: leaf[:chunk], data)
        shapes = jax.eval_shape(per_chunk, theta, part, jnp.ones(chunk, bool))
        zeros = tuple(jnp.zeros(shape.shape, shape.dtype) for shape in shapes)
        carry, _ = lax.scan(add, (zeros, zeros), jnp.arange(num_chunks))
        return carry

    def pass_with(with_hessian: bool):
        def run(theta, data, constants):
            def negative_log_prior(t):
                return -log_prior(t, constants)

            prior_terms = [negative_log_prior(theta), jax.grad(negative_log_prior)(theta)]
            if with_hessian:
                prior_terms.append(jax.hessian(negative_log_prior)(theta))
            sums = summed(likelihood_terms(with_hessian, constants), theta, data)
            if rows is None:
                sums = jax.tree_util.tree_map(lambda leaf: leaf[None], sums)
            else:
                sums = sharding.gather_partials(sums, rows.axis)
            return tuple(prior_terms), sums

        if rows is not None:
            return rows.jit(lambda theta, data: run(theta, data, constants), ("replicated", "rows"))
        sums = (0,) * (5 if with_hessian else 4)
        out_tree = jax.tree_util.tree_structure(((0,) * (3 if with_hessian else 2), (sums, sums)))
        # the temperature divides the terms in the pass itself (a literal of its program, not of the traces)
        variant = ("find_mode pass", with_hessian, chunk, float(model.temperature), str(prior.jaxpr))
        kept = program_cache.KeptPass(run, likelihood, variant, out_tree)
        return lambda theta, data: kept(theta, data, constants)

    return pass_with(False), pass_with(True), total_chunks


def _accurate_sum(terms: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Σ ``terms`` (a vector) as two numbers whose sum carries it to far below the terms' own precision.

    Rump, Ogita and Oishi's error-free extraction (ExtractScalar, SIAM J.
    Sci. Comput. 31, 2008): with σ a power of two at least (n + 2)·max|tᵢ|,
    hᵢ = (σ + tᵢ) − σ keeps the high bits of each term on a common grid, so
    that Σhᵢ is exact in any order, and lᵢ = tᵢ − hᵢ is exact and below
    ε·σ; the plain sum of the lᵢ then errs by about n·ε²·σ. Non-finite terms
    give the plain sum (and 0).
    """
    size = terms.shape[0]
    largest = jnp.max(jnp.abs(terms))
    _, exponent = jnp.frexp(largest)  # largest < 2**exponent
    unit = jnp.ones((), terms.dtype)
    sigma = jnp.ldexp(unit, exponent + math.ceil(math.log2(size + 2)))
    sigma = jnp.where(largest > 0, sigma, unit)
    high = (sigma + terms) - sigma
    low = terms - high
    finite = jnp.isfinite(largest)
    return (
        jnp.where(finite, jnp.sum(high), jnp.sum(terms)),
        jnp.where(finite, jnp.sum(low), jnp.zeros((), terms.dtype)),
    )


def _neumaier(total, compensation, term):
    """One step of Neumaier's compensated summation: the new total and the accumulated rounding error."""
    new = total + term
    lost = jnp.where(jnp.abs(total) >= jnp.abs(term), (total - new) + term, (term - new) + total)
    return new, compensation + lost


# ------------------------------------------------------------------------------------------ trust-region Newton


def _trust_region_newton(
    evaluate: _FullData, theta: np.ndarray, point: _Point, tolerance: float, max_steps: int, measure=None
):
    """Trust-region Newton iterations from ``theta`` (evaluated: ``point``) until the decrement is ≤ ``tolerance``.

    ``measure``, a function of a :class:`_Point`, replaces the Newton decrement
    in that test (``fast_setup``'s levels weigh each direction by the
    subsample's noise in it). Returns the last kept point, its evaluation,
    the number of trial points (each one pass) and why it stopped.
    """
    scaling = None
    radius = None
    steps = 0
    rose = 0  # trial steps in a row along which the value rose where the model predicted a fall
    nudges: list[int] = []  # the rises that made each nudge, for the stop message

    def stopped(why: str):
        if not nudges:
            return theta, point, steps, why
        times = "once" if len(nudges) == 1 else f"{len(nudges)} times"
        return (
            theta,
            point,
            steps,
            (
                f"{why}; nudged {NUDGE:g} sd off a point where −log π rose along {max(nudges)} steps in a row that its "
                f"gradient said descend, {times} (a kink in the log density there, e.g. NumPyro's Bernoulli(logits=…) at "
                "logits exactly 0, or a likelihood that is not smooth)"
            ),
        )

    while True:
        gradient, hessian = point.gradient, point.hessian
        if (_newton_decrement(gradient, hessian) if measure is None else measure(point)) <= tolerance:
            return stopped("converged: Newton decrement <= decrement_tolerance")
        if rose >= KINK_REJECTIONS and len(nudges) < MAX_NUDGES and steps < max_steps:
            # the gradient here does not describe the function (a kink): move off the point and start again
            direction = np.random.default_rng([_NUDGE_STREAM, len(nudges)]).standard_normal(theta.shape)
            theta = evaluate.cast(theta + NUDGE * direction / np.maximum(scaling, 1e-300))
            point = evaluate.full(theta)
            steps += 1
            nudges.append(rose)
            radius, rose = None, 0
            continue
        if steps >= max_steps:
            return stopped("reached max_iterations")
        if not (np.all(np.isfinite(gradient)) and np.all(np.isfinite(hessian))):
            return stopped("non-finite gradient or Hessian")
        diagonal = np.sqrt(np.abs(np.diag(hessian)))
        scaling = diagonal if scaling is None else np.maximum(scaling, diagonal)  # Moré's rule: never shrinks
        floor = 1e-12 * max(float(np.max(scaling, initial=0.0)), 1e-300)
        scale = np.maximum(scaling, floor)
        scaled_gradient = gradient / scale
        scaled_hessian = hessian / scale[:, None] / scale[None, :]
        eigenvalues, eigenvectors = np.linalg.eigh(scaled_hessian)
        along = eigenvectors.T @ scaled_gradient
        if radius is None:
            radius = _initial_radius(eigenvalues, along)
        if radius == 0.0:
            return stopped("no descent direction: zero gradient and no negative curvature")
        step, damping = _subproblem(eigenvalues, along, radius)
        candidate = evaluate.cast(theta + (eigenvectors @ step) / scale)
        if np.array_equal(candidate, theta):
            return stopped(f"the step is below the {evaluate.dtype.name} resolution of the position")
        taken = (candidate.astype(np.float64) - theta.astype(np.float64)) * scale  # the step after rounding
        predicted = -(scaled_gradient @ taken + 0.5 * taken @ scaled_hessian @ taken)
        trial = evaluate.full(candidate)
        steps += 1
        length = float(np.linalg.norm(taken))
        if not (np.isfinite(trial.value) and np.all(np.isfinite(trial.gradient))):
            radius = 0.25 * length
            continue
        decrease = point.value - trial.value
        rounding = point.rounding + trial.rounding
        if predicted > _NOISE_MARGIN * rounding:
            ratio = decrease / predicted
            accept = ratio > _ACCEPT
        else:  # the value cannot tell: ask the gradient, in the metric of the damped Hessian
            metric = eigenvalues + damping
            metric = np.maximum(metric, 1e-12 * max(float(np.max(np.abs(metric))), 1e-300))

            def size(g):
                return float(np.sum((eigenvectors.T @ (g / scale)) ** 2 / metric))  # noqa: B023 (used within this iteration)

            accept = decrease > -rounding and size(trial.gradient) < size(gradient)
            ratio = 1.0 if accept else 0.0
        rose = rose + 1 if (not accept and predicted > 0 and decrease < -rounding) else 0
        if ratio < _SHRINK_BELOW:
            radius = 0.25 * length
        elif ratio > _EXPAND_ABOVE and length > 0.8 * radius:
            radius = max(radius, 2.0 * length)
        if accept:
            theta, point = candidate, trial


def _initial_radius(eigenvalues: np.ndarray, along: np.ndarray) -> float:
    """The first trust radius: the Newton step's length where H is positive definite, a gradient step's otherwise.

    0 where there is no descent direction (zero gradient, no negative curvature).
    """
    if eigenvalues[0] > 0:
        return float(np.linalg.norm(along / eigenvalues))
    length = float(np.linalg.norm(along))
    largest = float(np.max(np.abs(eigenvalues)))
    if length == 0.0:
        return 1.0 if eigenvalues[0] < 0 else 0.0
    return length / largest if largest > 0 else length


def _subproblem(eigenvalues: np.ndarray, along: np.ndarray, radius: float) -> tuple[np.ndarray, float]:
    """argmin over ‖p‖ ≤ radius of aᵀp + ½Σλᵢpᵢ² (eigen-coordinates), and the damping μ ≥ 0 it uses.

    The solution is p = −a/(λ + μ) with μ = 0 if that fits (λ > 0), else μ
    solving ‖p(μ)‖ = radius above max(0, −λ_min); in the hard case (a has no
    component along the lowest eigenvector and p(−λ_min) fits) that
    eigenvector fills the radius.
    """
    lowest = eigenvalues[0]
    if lowest > 0:
        newton = -along / eigenvalues
        if np.linalg.norm(newton) <= radius:
            return newton, 0.0
    shift = max(0.0, -lowest)
    top = float(np.max(np.abs(eigenvalues), initial=0.0))
    flat = eigenvalues + shift <= 1e-12 * max(top, 1e-300)
    norm_along = float(np.linalg.norm(along))
    if np.all(np.abs(along[flat]) <= 1e-12 * max(norm_along, 1e-300)):
        rest = np.where(flat, 0.0, -along / np.where(flat, 1.0, eigenvalues + shift))
        remaining = radius**2 - float(rest @ rest)
        if remaining >= 0:  # the hard case
            rest[np.argmax(flat)] += math.sqrt(remaining)
            return rest, shift

    def excess(mu):  # 1/‖p(μ)‖ − 1/radius: increasing in μ, zero at the solution (Moré & Sorensen)
        with np.errstate(divide="ignore", invalid="ignore"):
            length = float(np.linalg.norm(along / (eigenvalues + mu)))
        return (1.0 / length if np.isfinite(length) and length > 0 else (0.0 if length > 0 else np.inf)) - 1.0 / radius

    low = shift
    high = shift + max(norm_along / radius, 1e-300)  # ‖p(high)‖ ≤ ‖a‖/(λ_min + high) ≤ radius
    while excess(high) < 0:  # rounding may need a nudge
        high = 2.0 * high
    if excess(low) >= 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            at_low = -along / (eigenvalues + low)
        if np.all(np.isfinite(at_low)):
            return at_low, low
        return -along / (eigenvalues + high), high
    from scipy.optimize import brentq  # on first use, not at `import tallmcmc` (docs/compilation.md, "The import")

    mu = brentq(excess, low, high, xtol=1e-15 * max(high, 1e-300), rtol=4 * np.finfo(float).eps)
    return -along / (eigenvalues + mu), mu


def _whitened_gradient(gradient: np.ndarray, hessian: np.ndarray):
    """(C, C⁻¹g) with H = CCᵀ (C lower), or ``None`` where H is not positive definite or anything is not finite.

    ‖C⁻¹g‖ is the Newton decrement: the Newton step's length in the metric of H.
    """
    if not (np.all(np.isfinite(hessian)) and np.all(np.isfinite(gradient))):
        return None
    try:
        factor = np.linalg.cholesky(hessian)
    except np.linalg.LinAlgError:
        return None
    return factor, scipy.linalg.solve_triangular(factor, gradient, lower=True)


def _newton_decrement(gradient: np.ndarray, hessian: np.ndarray) -> float:
    """sqrt(gᵀH⁻¹g), or ``inf`` where H is not positive definite (or not finite)."""
    whitened = _whitened_gradient(gradient, hessian)
    return math.inf if whitened is None else float(np.linalg.norm(whitened[1]))


# ------------------------------------------------------------------------------------------ Adam


def _adam(model: Model, unravel, optimizer, flat: jax.Array, num_steps: int, batch: int, rng_key: jax.Array, rows=None):
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
