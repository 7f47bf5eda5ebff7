r"""Mode, Laplace covariance and control variate together in at most three passes over the data.

:func:`fast_setup` replaces ``find_mode`` → ``laplace_covariance`` →
``taylor_control_variate`` (6–27 full-data passes plus one on the reference
posteriors) for tall data (N ≥ 10⁵ or so; ``sample_tall`` uses it from
N ≥ max(200,000, 10,000·d)):

1. **Subsample phase.** Trust-region Newton (the iterations of
   :func:`tallmcmc.find_mode`) on the tempered log posterior of a uniform
   subsample S of n rows, its likelihood scaled by N/n, on growing nested
   subsamples n₀, 4n₀, 16n₀, … (the first n rows of one fixed-seed
   permutation of the rows). Each level starts at the previous level's
   mode and stops when its Newton step is below a quarter of the distance
   that separates a subsample mode from the full-data mode, direction by
   direction (√(d(N/n − 1)) posterior sd in all where the likelihood
   dominates; a fraction of a sd along a hyperparameter the subsample's
   error does not reach: :func:`_level_size`). Every subsample row
   evaluated is counted.
   The phase stops when the error one full-data Newton step would leave,
   predicted as κ̂·χ²₀.₉₉(d_eff)·(N/n − 1)/K with κ̂ measured from the level's
   own first Newton step (the Newton error of a step of length D is κD²;
   K the temperature), or the predicted distance itself, the square root of
   χ²₀.₉₉(d_eff)·(N/n − 1)/K (small only for a tempered target), is below
   ¾ of ``decrement_limit``; it fails when its budget runs out first.
2. **Pass 1** at the subsample iterate θ_s: gradient and Hessian of −log π on
   all N rows, one Newton step to θ₁.
3. **Pass 2** at θ₁: the gradient and Hessian again, with their likelihood
   parts G = Σᵢ∇ℓᵢ(θ₁) and H̄ = Σᵢ∇²ℓᵢ(θ₁). They give at once the Newton
   decrement λ₁ (the distance from θ₁ to the mode in posterior sd, exactly
   measured), the Laplace precision, a last Newton step to θ₂ (the returned
   mode position), and the second-order control variate expanded at θ₁.
   Re-centred at θ₂ the proxy is the same function (qᵢ(θ) with
   gᵢ + Hᵢ(θ₂ − θ₁) in place of gᵢ: an identity, not an approximation), so
   the control variate keeps θ₁ as its expansion point. The setup is
   accepted when λ₁ ≤ ``decrement_limit`` (default √d/4), where the
   residuals' spread N²·Var(rᵢ) is within about 1 + 2λ₁²/d of an expansion at
   the exact mode (``docs/setup.md``).

Why two full passes and not one: a subsample of n rows locates the full-data
mode only to √(d(N/n − 1)) posterior sd (its own sampling error), which is a
fraction of a sd only when n is almost N; the control variate's residuals grow
with the distance of its expansion point from the mode, so its sums must come
from a pass at a point found with the information of all N rows, i.e. after a
first full pass.

Where anything fails — the data split over a mesh, N too small for the first
subsample, a subsample curvature that is not positive definite at a level's
end, a phase that does not settle within ``subsample_budget``, a full-data
curvature that is not positive definite at θ_s, or λ₁ above the limit —
:func:`fast_setup` warns naming why and falls back to
:func:`tallmcmc.find_mode` (started from the best point it has) and
:func:`tallmcmc.taylor_control_variate`, with what the attempt spent added to
the mode's count. ``docs/setup.md`` has the derivation and the measurements.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from tallmcmc import flat_positions, program_cache
from tallmcmc._checks import integer_at_least, optional_integer_at_least, positive_finite
from tallmcmc._device import to_device
from tallmcmc.control_variate import ControlVariate, taylor_control_variate
from tallmcmc.mode import (
    DEFAULT_CHUNK_ROWS,
    ModeResult,
    _accurate_sum,
    _neumaier,
    _newton_decrement,
    _Point,
    _symmetric,
    _trust_region_newton,
    _whitened_gradient,
    find_mode,
)
from tallmcmc.model import (
    DEFAULT_START_SPREAD,
    Model,
    Position,
    as_position,
    check_differentiable,
    check_model,
    default_start,
    rows_of,
)
from tallmcmc.program_cache import Traced
from tallmcmc.proposals.laplace import LaplaceCovariance, laplace_covariance
from tallmcmc.sharding import row_sharding

__all__ = [
    "FIRST_SUBSAMPLE_PER_DIMENSION",
    "FastSetup",
    "SetupLevel",
    "SetupMode",
    "fast_setup",
    "placeholder_control_variate",
]

#: The first subsample holds at least this many rows per coordinate (and at least one chunk of rows).
FIRST_SUBSAMPLE_PER_DIMENSION = 64
#: Each level of the subsample phase holds this many times the previous level's rows.
_GROWTH = 4
#: A level stops when its Newton step is below this fraction of the subsample mode's own error, direction by
#: direction (:func:`_level_size`; √(d(N/n − 1)) in all directions where the prior is negligible and K = 1).
_LEVEL_TOLERANCE = 0.25
#: Chunks of rows one compiled call adds up (a scan; chunks past a level's end are skipped).
_CHUNKS_PER_CALL = 16
#: The predicted error of the full-data Newton step uses this quantile of the squared distance (χ² with d_eff dof) ...
_QUANTILE = 0.99
#: ... and the phase stops when it is below this fraction of ``decrement_limit``.
_PREDICTION_MARGIN = 0.75


class SetupLevel(NamedTuple):
    """One level of the subsample phase.

    rows
        n, the subsample's size.
    evaluations
        Points evaluated on it (each touches ``rows`` data points).
    decrement
        The Newton decrement of the scaled subsample posterior at the level's
        last point (in posterior sd of the full data, the curvature being
        scaled to N).
    start_decrement
        The decrement at the level's start (the previous level's mode): its
        distance to this level's mode.
    curvature_constant
        κ̂ = (decrement after the first full Newton step) / start_decrement²
        (``nan`` where the first step was not a full Newton step or the start
        too close to tell).
    predicted_error
        κ̂·χ²₀.₉₉(d_eff)·(N/n − 1)/K: the error, in posterior sd, predicted for
        one full-data Newton step from this level's mode, with the 99%
        quantile of its squared distance to the mode (d_eff the larger of d
        and the nested levels' measured D²·K/(N/n' − N/n); K the
        temperature); ``nan`` without κ̂.
    """

    rows: int
    evaluations: int
    decrement: float
    start_decrement: float
    curvature_constant: float
    predicted_error: float


class SetupMode(ModeResult):
    """The mode :func:`fast_setup` returns: a :class:`tallmcmc.mode.ModeResult` with its own cost key.

    The fields mean what they mean for ``find_mode``, with the points named in
    :func:`fast_setup`: ``position`` is θ₂ (the Newton point of pass 2);
    ``hessian``, ``gradient_norm`` and ``newton_decrement`` are measured at
    θ₁ (pass 2's point, one Newton step before ``position``: the decrement is
    θ₁'s distance to the mode; θ₂'s is about κλ₁², far smaller);
    ``log_density`` is the quadratic model's value at θ₂; ``converged`` means
    λ₁ ≤ ``decrement_limit``; ``iterations`` counts the points evaluated
    (every level's, the two full passes'). ``data_used`` counts the subsample phase and
    pass 1; pass 2 is counted once, by the control variate built from it.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        """Key of this cost in ``SamplingResult.setup_data_used``."""
        return "fast_setup"


class FastSetup(NamedTuple):
    """What :func:`fast_setup` built and what it cost.

    mode
        A :class:`SetupMode` (a ``ModeResult``), or on the fallback
        ``find_mode``'s ``ModeResult`` with the attempt's data added to its
        ``data_used`` (``passes_by_kind["fast_setup attempt"]``).
    covariance
        :func:`tallmcmc.laplace_covariance` of ``mode`` (a
        ``LaplaceCovariance`` whose ``source`` is ``mode``), or ``None`` where
        the Hessian there is not positive definite (fallback only).
    control_variate
        The second-order, per-datum-curvature :class:`ControlVariate`:
        expanded at θ₁ from pass 2's sums (``data_used`` = N: pass 2), or on
        the fallback :func:`tallmcmc.taylor_control_variate` at the mode
        (``None`` where ``covariance`` is).
    data_used, data_passes
        Every data point touched: subsample phase, full passes, and on the
        fallback what ``find_mode`` and the control variate used; equal to
        ``mode.data_used + control_variate.data_used``. A run that uses the
        mode without the control variate (e.g. a Laplace proposal with the
        exact test) should add the control variate's pass.
    subsample_passes
        The subsample phase's data points over N.
    full_passes
        Full-data passes of the fast path (2 when it succeeds; more on the
        fallback, which also counts ``find_mode``'s and the control
        variate's).
    levels
        The subsample phase, one :class:`SetupLevel` per level.
    subsample_point
        θ_s, where pass 1 was made (``None`` if the phase failed first).
    decrement_limit
        The limit λ₁ was held to.
    fallback
        ``None``, or why the fast path was abandoned (also warned).
    """

    mode: ModeResult
    covariance: LaplaceCovariance | None
    control_variate: ControlVariate | None
    data_used: int
    data_passes: float
    subsample_passes: float
    full_passes: int
    levels: tuple
    subsample_point: Position | None
    decrement_limit: float
    fallback: str | None = None


def _unsettled_cause(attempt: _Attempt) -> str:
    """What usually keeps the subsample phase from settling, with the levels' predictions, for the fallback's warning
    (the fifth user-model audit: six indicators of 100 rows each among N = 2,000,000)."""
    predictions = [level.predicted_error for level in attempt.levels if math.isfinite(level.predicted_error)]
    trend = ""
    if len(predictions) >= 2:
        rows = [level.rows for level in attempt.levels if math.isfinite(level.predicted_error)]
        trend = (
            f"; here the predicted error of the full-data step stayed at {min(predictions):.3g}–{max(predictions):.3g} "
            f"posterior sd over subsamples of {rows[0]:,}–{rows[-1]:,} rows, against the target "
            f"{_PREDICTION_MARGIN * attempt.limit:.3g}"
        )
    return (
        ". The usual cause is a direction that few rows inform — a rare category (a one-hot column with a few hundred "
        "of the N rows), a handful of high-leverage rows — which a subsample holds only its share of, so that "
        f"direction stays noisy however the subsample grows{trend}. The full-data search finds the exact mode at a "
        'few more passes, so nothing needs changing; sample_tall(..., setup="exact") skips this attempt'
    )


class _Fallback(Exception):
    """The fast path cannot go on; ``args[0]`` says why, ``start`` is the best point to continue from."""

    def __init__(self, why: str, start=None):
        super().__init__(why)
        self.start = start


def fast_setup(
    model: Model,
    initial_position: Position = None,
    *,
    subsample_budget: float = 1.0,
    decrement_limit: float | None = None,
    first_subsample: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
) -> FastSetup:
    """The mode, its Laplace covariance and a Taylor control variate in ``subsample_budget`` + 2 passes.

    See the module docstring for the method and ``docs/setup.md`` for the
    derivation, the pass accounting and the measurements.

    Parameters
    ----------
    model
        The target (tempered or not); its data on one device (data split over
        a mesh fall back to ``find_mode``).
    initial_position
        Where the first subsample's Newton iterations start; default zeros of
        ``model.position_shape`` moved by
        :data:`tallmcmc.model.DEFAULT_START_SPREAD` (0.01) times a seeded
        standard normal draw per coordinate, off the kinks log densities often
        have at exactly 0. Its floating dtype is that of every
        evaluation, as in :func:`tallmcmc.find_mode`.
    subsample_budget
        The most data points the subsample phase may touch, in passes over N
        (default 1.0: the whole setup then stays within 3 passes). A level is
        entered only if at least two of its evaluations fit.
    decrement_limit
        The largest Newton decrement λ₁ (posterior sd) accepted at pass 2's
        point, the control variate's expansion point; default √d/4, where the
        residuals' N²·Var(rᵢ) stays within about 1 + 2λ₁²/d ≈ 1.13 of an
        expansion at the exact mode (measured within 1.25, ``docs/setup.md``).
    first_subsample
        Rows of the first level; default the larger of 4,096 and
        :data:`FIRST_SUBSAMPLE_PER_DIMENSION`·d, rounded up to a multiple of
        4,096 (the rows per compiled chunk). Must be at most N/4.
    seed
        Seeds the permutation of the rows whose prefixes are the subsamples
        (``numpy.random.default_rng(seed).permutation(N)``).
    batch_size
        Rows per chunk of every pass, subsample or full (one compiled
        function evaluates a chunk; the levels are whole chunks), and of the
        fallback's ``find_mode`` and control variate; ``None``: 4,096.

    Returns
    -------
    FastSetup
        ``mode``, ``covariance`` and ``control_variate`` usable wherever
        ``find_mode``'s result, ``laplace_covariance(mode)`` and
        ``taylor_control_variate(model, mode.position)`` are.

    Raises
    ------
    ValueError
        If an argument is out of range or the model cannot be evaluated at
        ``initial_position`` on the first subsample (naming it).

    Warns
    -----
    RuntimeWarning
        When the fast path is abandoned for ``find_mode`` (naming why: the
        data are split over a mesh; N is too small for the first subsample; the
        subsample curvature is not positive definite at a level's end; the
        phase did not settle within ``subsample_budget``; the full-data
        curvature at θ_s is not positive definite; λ₁ exceeds
        ``decrement_limit``). ``find_mode``'s own warnings may follow.
    """
    if not isinstance(model, Model):
        raise TypeError(f"model must be a tallmcmc.Model; got {type(model).__name__}")
    subsample_budget = positive_finite(
        subsample_budget, "subsample_budget", "the most data the subsample phase may touch, in passes over N"
    )
    if decrement_limit is not None:
        decrement_limit = positive_finite(
            decrement_limit,
            "decrement_limit",
            "the largest Newton decrement, in posterior sd, accepted at the control variate's expansion point",
        )
    first_subsample = optional_integer_at_least(first_subsample, "first_subsample", 2)
    seed = integer_at_least(seed, "seed", 0)
    batch_size = optional_integer_at_least(batch_size, "batch_size")
    if initial_position is None:
        if model.position_shape is None:
            raise ValueError(
                "initial_position: give a start, or build the Model with position_shape= so that fast_setup can "
                "start at zeros"
            )
        initial_position = default_start(model.position_shape, seed, DEFAULT_START_SPREAD)
    start = as_position(initial_position)
    flat, unravel = flat_positions.ravel(start)
    dimension = int(flat.size)
    if decrement_limit is None:
        decrement_limit = math.sqrt(dimension) / 4.0
    num_data = model.num_data
    attempt = _Attempt(
        model, start, flat, unravel, subsample_budget, decrement_limit, first_subsample, seed, batch_size
    )
    try:
        return attempt.run()
    except _Fallback as failure:
        why = str(failure)
        warnings.warn(
            f"fast_setup: {why}; falling back to the full-data find_mode"
            + (" from the best point reached" if failure.start is not None else "")
            + (_unsettled_cause(attempt) if "did not settle" in why else ""),
            RuntimeWarning,
            stacklevel=2,
        )
        resume = start if failure.start is None else unravel(jnp.asarray(failure.start, flat.dtype))
        mode = find_mode(model, resume, batch_size=batch_size)
        spent = attempt.spent
        passes = dict(mode.passes_by_kind or {})
        passes["fast_setup attempt"] = spent / num_data
        mode = mode._replace(
            data_used=mode.data_used + spent, data_passes=(mode.data_used + spent) / num_data, passes_by_kind=passes
        )
        try:
            covariance = laplace_covariance(mode)
        except ValueError:
            covariance = control_variate = None
        else:
            control_variate = taylor_control_variate(model, mode.position, batch_size=batch_size or DEFAULT_CHUNK_ROWS)
        used = mode.data_used + (0 if control_variate is None else control_variate.data_used)
        return FastSetup(
            mode=mode,
            covariance=covariance,
            control_variate=control_variate,
            data_used=used,
            data_passes=used / num_data,
            subsample_passes=attempt.subsample_used / num_data,
            full_passes=attempt.full_passes,
            levels=tuple(attempt.levels),
            subsample_point=None if attempt.subsample_point is None else unravel(attempt.subsample_point),
            decrement_limit=decrement_limit,
            fallback=why,
        )


def placeholder_control_variate(model: Model, start: Position) -> ControlVariate:
    """The control variate :func:`fast_setup` returns for ``model`` from ``start``, but for its values.

    The same kind (second order, per-datum curvature), dtype, shapes and model; the centre is ``start``, the
    gradient sum zero and the Hessian sum −I (values nothing should use). For compiling, before the setup has run,
    the chain program that will run on the real one (:mod:`tallmcmc.sampling.ahead`): a step built on either traces
    to the same program, its values being arguments of it (as does one built on
    :func:`tallmcmc.taylor_control_variate`'s, by default of the same kind). Keep it in step with
    ``_Attempt._two_passes``; ``tests/test_compile_ahead.py`` compares the two.
    """
    flat, _ = flat_positions.ravel(start)
    dtype = np.dtype(flat.dtype)
    dimension = int(flat.size)
    return ControlVariate(
        center=flat_positions.placer(start, dtype)(flat),
        gradient_sum=to_device(np.zeros(dimension), dtype),
        hessian_sum=to_device(-np.eye(dimension), dtype),
        order=2,
        num_data=model.num_data,
        temperature=float(model.temperature),
        data_used=model.num_data,
        log_likelihood=model.log_likelihood,
    )


class PassCounter:
    """Counts the rows a :class:`_Passes` evaluator touches (``spent``, data points of every kind; ``subsample_used``
    of them on a subsample level; ``full_passes`` full passes): :func:`subsample_passes`'s, and the fast path's."""

    def __init__(self, flat: np.ndarray):
        self.flat = flat
        self.spent = self.subsample_used = self.full_passes = 0

    def _count(self, rows: int, subsample: bool) -> None:
        self.spent += rows
        if subsample:
            self.subsample_used += rows
        else:
            self.full_passes += 1


class _Attempt(PassCounter):
    """The fast path, with what it has spent so far (so that a fallback can count it)."""

    def __init__(self, model, start, flat, unravel, budget, limit, first_subsample, seed, batch_size):
        super().__init__(flat)
        self.model, self.start, self.unravel = model, start, unravel
        self.dtype = np.dtype(flat.dtype)
        self.place = flat_positions.placer(start, self.dtype)
        self.budget, self.limit, self.seed, self.batch_size = budget, limit, seed, batch_size
        self.num_data = model.num_data
        self.chunk, self.first = _chunk_and_first(model.num_data, flat.size, batch_size, first_subsample)
        self.passes: _Passes | None = None
        self.levels: list[SetupLevel] = []
        self.subsample_point = None

    # ------------------------------------------------------------------ the path
    def run(self) -> FastSetup:
        model, num_data = self.model, self.num_data
        if row_sharding(model.data, "fast_setup") is not None:
            raise _Fallback("the data are split over a mesh (the subsample phase reads rows on one device)")
        if 4 * self.first > num_data:
            raise _Fallback(
                f"N = {num_data:,} is too small for the subsample phase (its first subsample holds {self.first:,} "
                "rows and must be at most N/4)"
            )
        theta = self._subsample_phase()
        self.subsample_point = theta
        return self._two_passes(theta)

    def _subsample_phase(self) -> np.ndarray:
        # χ²'s quantile from scipy.special (what scipy.stats.chi2.ppf calls): importing scipy.stats costs 0.34 s in a
        # fresh process (up to 1.8 s measured inside a first sample_tall, beside its compile-ahead thread), special 0.03
        from scipy.special import chdtri

        model, num_data, dimension = self.model, self.num_data, self.flat.size
        budget_points = self.budget * num_data
        sizes = _level_sizes(self.first, self.chunk, num_data)
        order = _setup_order(num_data, self.first, self.chunk, self.seed)
        first_rows = rows_of(model.data, to_device(order[: self.first]))
        # the start as given (what unravel(flat) gives back, without unravel's eager split program)
        check_model(model.with_data(first_rows), self.start, "initial_position")
        check_differentiable(model, self.start, "fast_setup (sample_tall's setup)")
        self._count(self.first, subsample=True)  # the start check, on the first subsample
        evaluate = self.passes = _Passes(model, self.unravel, self.dtype, order, self.chunk, self)
        theta = self.flat.copy()
        temperature = float(model.temperature)
        effective_dimension = float(dimension)
        previous = previous_step = None
        for rows in sizes:
            if self.spent + 2 * rows > budget_points:
                last = self.levels[-1].predicted_error if self.levels else math.nan
                if last <= self.limit:
                    # the budget is spent with the prediction inside the limit but not its ¾ margin: pass 2 measures
                    # λ₁ exactly and falls back if it is above the limit, so try it (2 passes) rather than find_mode
                    return theta
                raise _Fallback(
                    f"the subsample phase did not settle within subsample_budget = {self.budget:g} passes (it had "
                    f"spent {self.spent / num_data:.3g} and a level of {rows:,} rows needs two evaluations more); "
                    + self._last_prediction(),
                    start=theta,
                )
            evaluate.level(rows)
            max_steps = int((budget_points - self.spent) // rows) - 1
            evaluate.trace = []
            point = evaluate.full(theta)
            start_decrement = _newton_decrement(point.gradient, point.hessian)
            # the subsample mode's squared distance from the full data's, per unit of d_eff, in posterior sd: N/n − 1
            # for an untempered target, (N/n − 1)/K for a tempered one (its sd is √K times wider, its noise not)
            spread = (num_data / rows - 1.0) / temperature
            # settled: the Newton step a quarter of the subsample's own error, direction by direction
            settled = functools.partial(_level_size, noise=spread)
            theta, point, steps, stop = _trust_region_newton(evaluate, theta, point, 1.0, max_steps, measure=settled)
            decrement = _newton_decrement(point.gradient, point.hessian)
            size = settled(point)
            # κ̂ only from a level started at the previous level's mode, in the quadratic regime of its first step
            curvature = math.nan if previous is None else _first_step_constant(evaluate.trace, start_decrement)
            if previous is not None and math.isfinite(start_decrement):
                # D² between nested subsample modes ≈ d_eff (N/n' − N/n)/K: take d_eff no smaller than d. D is
                # measured mode to mode (each estimated by a Newton step from the point the levels share), not from
                # the previous level's last point, whose own distance to its mode would count as noise
                nested = (num_data / previous - num_data / rows) / temperature
                between = _mode_to_mode(evaluate.trace[0], previous_step)
                effective_dimension = max(float(dimension), between**2 / nested)
            squared_distance = chdtri(effective_dimension, 1.0 - _QUANTILE) * spread
            predicted = curvature * squared_distance
            self.levels.append(SetupLevel(rows, steps + 1, decrement, start_decrement, curvature, predicted))
            if not (math.isfinite(point.value) and np.all(np.isfinite(point.gradient))):
                raise _Fallback(
                    f"the log density is not finite on the subsample of {rows:,} rows at the point the level started "
                    "from, where the smaller subsample's was (NaN or inf in the data of the rows it added, or a "
                    "log-likelihood that overflows there)"
                )
            if not np.all(np.isfinite(point.hessian)) or not _positive_definite(point.hessian):
                raise _Fallback(
                    f"the subsample curvature is not positive definite at the end of the level of {rows:,} rows "
                    f"({stop}): the subsample posterior has no mode to approach the full-data one from",
                )
            if not size <= 1.0:
                if stop == "reached max_iterations":
                    raise _Fallback(
                        f"the subsample phase did not settle within subsample_budget = {self.budget:g} passes (the "
                        f"level of {rows:,} rows stopped at Newton decrement {decrement:.3g}, {size:.3g} times its "
                        "tolerance)",
                        start=theta,
                    )
                raise _Fallback(f"the Newton iterations on the subsample of {rows:,} rows stopped: {stop}", start=theta)
            previous_step = _newton_step(point.gradient, point.hessian)
            if math.isfinite(predicted) and predicted <= _PREDICTION_MARGIN * self.limit:
                return theta
            # the mode itself predicted within the margin (a tempered target's small noise; never where K = 1 at the
            # default limit, as χ²₀.₉₉(d)·(N/n − 1) > d > (¾·√d/4)² for n ≤ N/2): a full-data Newton step from there
            # comes closer still
            if math.sqrt(squared_distance) <= _PREDICTION_MARGIN * self.limit:
                return theta
            previous = rows
        raise _Fallback(
            f"the subsample phase did not settle on subsamples of up to N/2 = {sizes[-1]:,} rows; "
            + self._last_prediction(),
            start=theta,
        )

    def _last_prediction(self) -> str:
        if not self.levels or not math.isfinite(self.levels[-1].predicted_error):
            return "no prediction of the full-data Newton step's error yet"
        return (
            f"the last level predicted a full-data Newton step {self.levels[-1].predicted_error:.3g} posterior sd "
            f"from the mode, against the target {_PREDICTION_MARGIN * self.limit:.3g}"
        )

    def _two_passes(self, theta: np.ndarray) -> FastSetup:
        model, num_data = self.model, self.num_data
        passes = self.passes
        passes.level(None)
        first = self._full(passes, theta)
        if not (np.all(np.isfinite(first.gradient)) and _positive_definite(first.hessian)):
            raise _Fallback(
                "the full-data curvature at the subsample iterate is not positive definite (or not finite): no "
                "Newton step to take",
                start=theta,
            )
        newton = passes.cast(theta - scipy.linalg.solve(first.hessian, first.gradient, assume_a="pos"))
        second = self._full(passes, newton)
        gradient_sum, hessian_sum = passes.likelihood
        decrement = _newton_decrement(second.gradient, second.hessian)
        if not decrement <= self.limit:
            best = newton if math.isfinite(decrement) else theta
            raise _Fallback(
                f"pass 2's point is {decrement:.3g} posterior sd from the mode (Newton decrement), above "
                f"decrement_limit = {self.limit:.3g}: the control variate expanded there would have residuals "
                "too large",
                start=best,
            )
        step = scipy.linalg.solve(second.hessian, second.gradient, assume_a="pos")
        position = passes.cast(newton - step)
        temperature = float(model.temperature)
        mode = SetupMode(
            position=self.place(position),
            hessian=second.hessian,
            log_density=-(second.value - 0.5 * decrement**2),
            data_used=int(self.spent - num_data),
            data_passes=(self.spent - num_data) / num_data,
            iterations=sum(level.evaluations for level in self.levels) + 2,
            converged=True,
            gradient_norm=float(np.max(np.abs(second.gradient), initial=0.0)),
            newton_decrement=float(decrement),
            passes_by_kind={"subsample": self.subsample_used / num_data, "value_gradient_hessian": 1.0},
            method="fast_setup",
            message=(
                f"subsample levels {[level.rows for level in self.levels]}, then 2 full passes; Newton decrement "
                f"{decrement:.3g} at pass 2's point (decrement_limit {self.limit:.3g})"
            ),
        )
        control_variate = ControlVariate(
            center=self.place(newton),
            gradient_sum=to_device(gradient_sum, self.dtype),
            hessian_sum=to_device(hessian_sum, self.dtype),
            order=2,
            num_data=num_data,
            temperature=temperature,
            data_used=num_data,
            log_likelihood=model.log_likelihood,
        )
        return FastSetup(
            mode=mode,
            covariance=laplace_covariance(mode),
            control_variate=control_variate,
            data_used=int(self.spent),
            data_passes=self.spent / num_data,
            subsample_passes=self.subsample_used / num_data,
            full_passes=self.full_passes,
            levels=tuple(self.levels),
            subsample_point=self.place(theta),
            decrement_limit=self.limit,
        )

    def _full(self, passes: _Passes, theta: np.ndarray) -> _Point:
        point = passes.full(theta)
        if not (np.isfinite(point.value) and np.all(np.isfinite(point.gradient))):
            raise _Fallback("a full-data pass gave a non-finite value or gradient (check the data for NaN rows)")
        return point


def _level_sizes(first: int, chunk: int, num_data: int) -> list[int]:
    """The subsamples' sizes: ``first``, then ×4 each, the last capped at N/2 (whole chunks)."""
    cap = max(first, (num_data // 2) // chunk * chunk)
    sizes = [first]
    while sizes[-1] < cap:
        sizes.append(min(sizes[-1] * _GROWTH, cap))
    return sizes


def _first_step_constant(trace: list, start_decrement: float) -> float:
    """κ̂ = λ(after the first step)/λ(start)² where the first step was the full Newton step (else ``nan``).

    ``trace`` holds (θ, gradient, Hessian) of each point evaluated at the
    level, in order, the start first.
    """
    if len(trace) < 2 or not math.isfinite(start_decrement) or start_decrement < 1.0:
        return math.nan  # too close to tell the quadratic term from rounding: grow
    (theta, gradient, hessian), (after, gradient_after, hessian_after) = trace[0], trace[1]
    try:
        newton = theta - scipy.linalg.solve(hessian, gradient, assume_a="pos")
    except (np.linalg.LinAlgError, ValueError):
        return math.nan
    scale = np.sqrt(np.abs(np.diag(hessian)))
    if np.max(np.abs((after - newton) * scale)) > 1e-3 * start_decrement:
        return math.nan  # a damped step: not the Newton error
    return _newton_decrement(gradient_after, hessian_after) / start_decrement**2


def _level_size(point: _Point, noise: float) -> float:
    """A level's Newton step over its tolerance, each direction weighed by the subsample's own error in it.

    A subsample of n rows puts its mode about N(0, (N/n − 1)/K·H⁻¹LH⁻¹) from
    the full data's (``noise`` = (N/n − 1)/K, K the temperature; L, the
    tempered likelihood's part of the Hessian H, stands in for the gradients'
    covariance). In coordinates whitened by H that covariance is
    ``noise``·W, W = C⁻¹LC⁻ᵀ (H = CCᵀ), eigenvalues wⱼ clipped at 0,
    eigenvectors qⱼ; with z = C⁻¹g the whitened Newton step (‖z‖ the Newton
    decrement) and sⱼ = ``noise``·wⱼ, the level has settled when

        Σⱼ (qⱼᵀz)²/(1 + sⱼ) ≤ ¼²·max(Σⱼ sⱼ/(1 + sⱼ), 1),

    i.e. the step is a quarter of the subsample's error in the directions the
    likelihood informs, and a quarter of a posterior sd or less (together) in
    those it does not — a hyperparameter that the prior and the other sites
    settle, whose level modes coincide. Where every wⱼ = 1 (the prior
    negligible) and K = 1 this is exactly the Newton decrement
    ≤ ¼·√(d(N/n − 1)).
    Returns the left side's square root over the right side's (≤ 1: settled);
    ``inf`` where H is not positive definite or anything is not finite.
    """
    likelihood = point.likelihood_hessian
    found = _whitened_gradient(point.gradient, point.hessian)
    if found is None or not np.all(np.isfinite(likelihood)):
        return math.inf
    factor, whitened = found
    half = scipy.linalg.solve_triangular(factor, likelihood, lower=True)
    weights, directions = np.linalg.eigh(_symmetric(scipy.linalg.solve_triangular(factor, half.T, lower=True)))
    spread = noise * np.maximum(weights, 0.0)
    step = float(np.sum((directions.T @ whitened) ** 2 / (1.0 + spread)))
    tolerance = _LEVEL_TOLERANCE**2 * max(float(np.sum(spread / (1.0 + spread))), 1.0)
    return math.sqrt(step / tolerance)


def _newton_step(gradient: np.ndarray, hessian: np.ndarray) -> np.ndarray | None:
    """H⁻¹g, or ``None`` where H is not positive definite or anything is not finite."""
    found = _whitened_gradient(gradient, hessian)
    if found is None:
        return None
    factor, whitened = found
    return scipy.linalg.solve_triangular(factor.T, whitened, lower=False)


def _mode_to_mode(start, previous_step) -> float:
    """The distance, in this level's posterior sd, between the previous level's mode and this level's.

    ``start`` is (θ, g, H) at this level's first point, the previous level's
    last; ``previous_step`` the previous level's Newton step there. Each mode
    is θ less its own Newton step, so the distance is ‖H^½(step − previous
    step)‖; where the previous step is unknown, this level's Newton decrement
    at θ (which then also counts the previous level's distance to its mode).
    """
    _, gradient, hessian = start
    step = _newton_step(gradient, hessian)
    if step is None:
        return math.inf
    offset = step if previous_step is None else step - previous_step
    return math.sqrt(max(float(offset @ hessian @ offset), 0.0))


def _positive_definite(matrix: np.ndarray) -> bool:
    try:
        np.linalg.cholesky(matrix)
    except np.linalg.LinAlgError:
        return False
    return True


def subsample_passes(model: Model, flat: np.ndarray, unravel, seed: int) -> tuple[_Passes, PassCounter]:
    """The setup's evaluator of −log π (value, gradient, Hessian) on the first rows of a seeded permutation of the
    data, scaled to N (``evaluator.level(n)``), or on all of them (``level(None)``), with what it touched counted.

    It is :func:`fast_setup`'s own compiled pass (chunks of ``DEFAULT_CHUNK_ROWS`` rows, or N where fewer), so a
    look at the posterior after the setup — :mod:`tallmcmc.other_modes` — compiles nothing new; ``evaluator.full(θ)``
    and :func:`tallmcmc.mode._trust_region_newton` iterate on it as the setup does."""
    counter = PassCounter(flat)
    # the setup's chunk and the length of its order (an argument of the compiled pass: the same shape, the same
    # program), as the fast path makes them with the defaults
    chunk, first = _chunk_and_first(model.num_data, flat.size)
    order = _setup_order(model.num_data, first, chunk, seed)
    return _Passes(model, unravel, np.dtype(flat.dtype), order, chunk, counter), counter


def _chunk_and_first(num_data: int, dimension: int, batch_size=None, first_subsample=None) -> tuple[int, int]:
    """The rows of a compiled chunk and of the first subsample level (whole chunks)."""
    chunk = batch_size or DEFAULT_CHUNK_ROWS
    wanted = max(chunk, FIRST_SUBSAMPLE_PER_DIMENSION * dimension) if first_subsample is None else first_subsample
    chunk = min(chunk, wanted, num_data)
    return chunk, -(-wanted // chunk) * chunk


def _setup_order(num_data: int, first: int, chunk: int, seed) -> np.ndarray:
    """The seeded order in which the subsample levels take rows, as long as the largest level."""
    return (
        np.random.default_rng(seed).permutation(num_data)[: _level_sizes(first, chunk, num_data)[-1]].astype(np.int32)
    )


class _Passes:
    """Value, gradient and Hessian of −log π from one compiled function of a chunk of rows gathered by index.

    ``level(n)`` makes the likelihood that of the first n rows of ``order``
    scaled by N/n (a subsample level), ``level(None)`` that of all N rows (a
    full pass: contiguous chunks, the last one ending at row N with the rows
    an earlier chunk held masked out). Every level and the full passes use
    the same compilation, which adds a chunk's float32 sums (the value's by
    :func:`tallmcmc.mode._accurate_sum`) to running totals with Neumaier's
    compensated summation on the device (no transfer per chunk); the totals
    and their compensations are added on the host in float64 at the end.
    ``full(θ)`` evaluates the current level, counts its rows in ``attempt``,
    records (θ, gradient, Hessian) in ``trace`` and keeps the untempered
    likelihood sums G = Σ∇ℓᵢ, H̄ = Σ∇²ℓᵢ in ``likelihood``. It is the
    evaluator :func:`tallmcmc.mode._trust_region_newton` iterates with.
    """

    def __init__(self, model: Model, unravel, dtype: np.dtype, order: np.ndarray, chunk: int, attempt: PassCounter):
        self.model, self.dtype, self.chunk, self.attempt = model, dtype, chunk, attempt
        self.order = to_device(order, np.int32)
        self.eps = float(np.finfo(dtype).eps)
        self.rows: int | None = chunk
        self.trace: list = []
        self.likelihood: tuple[np.ndarray, np.ndarray] | None = None

        flat = jax.ShapeDtypeStruct(self.attempt.flat.shape, dtype)  # θ, flattened
        # the likelihood of a chunk traced once: its trace keys the pass's program between processes, and the pass
        # replays it with the trace's constants as an argument (``program_cache``, as the chain program does)
        self._likelihood = Traced.of(
            lambda t, data, indices: model.per_datum_log_likelihood(unravel(t), rows_of(data, indices)),
            flat,
            model.data,
            jax.ShapeDtypeStruct((chunk,), jnp.int32),
        )
        likelihood = self._likelihood
        self._constants = likelihood.constants

        def chunk_sums(theta, data, order, begin, first_kept, contiguous, constants):
            position = begin + jnp.arange(chunk, dtype=jnp.int32)
            indices = jnp.where(contiguous, position, jax.lax.dynamic_slice_in_dim(order, begin, chunk))
            keep = position >= first_kept

            def negative(t):
                terms = jnp.where(keep, -likelihood.replay(constants, t, data, indices), 0.0)
                return jnp.sum(terms), terms

            def gradient_with_terms(t):
                (_, terms), gradient = jax.value_and_grad(negative, has_aux=True)(t)
                return gradient, (terms, gradient)

            hessian, (terms, gradient) = jax.jacfwd(gradient_with_terms, has_aux=True)(theta)
            fixed = jax.lax.stop_gradient(terms)
            high, low = _accurate_sum(fixed)
            return high, low, jnp.sum(jnp.abs(fixed)), gradient, hessian

        def add_chunks(carry, theta, data, order, begin, count, last, contiguous, constants):
            """The next ``count`` (≤ _CHUNKS_PER_CALL) chunks from row ``begin``, none starting after ``last``."""

            def add(carry, nominal):
                terms = chunk_sums(theta, data, order, jnp.minimum(nominal, last), nominal, contiguous, constants)
                pairs = [_neumaier(t, c, x) for t, c, x in zip(*carry, terms)]
                return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)

            def body(carry, index):
                return jax.lax.cond(index < count, add, lambda carry, _: carry, carry, begin + index * chunk), None

            carry, _ = jax.lax.scan(body, carry, jnp.arange(_CHUNKS_PER_CALL, dtype=jnp.int32))
            return carry

        # the prior traced once too: its gradient and Hessian are kept under that trace's key (tracing them took
        # 0.07 s of a second run, docs/compilation.md)
        prior = Traced.of(lambda t: model.log_prior(unravel(t)), flat)

        def prior_terms(theta, constants):
            def negative(t):
                return -prior.replay(constants, t)

            return negative(theta), jax.grad(negative)(theta), jax.hessian(negative)(theta)

        # kept between processes under the key of the chunk's likelihood trace: a second run of a script neither
        # traces the Hessian pass nor lowers it (docs/compilation.md)
        carry = (jax.ShapeDtypeStruct((), likelihood.shapes.dtype),) * 5
        out_tree = jax.tree_util.tree_structure((carry, carry))
        self._add = program_cache.KeptPass(add_chunks, likelihood, ("setup pass", chunk, _CHUNKS_PER_CALL), out_tree)
        kept_prior = program_cache.KeptPass(
            prior_terms, prior, ("setup prior",), jax.tree_util.tree_structure((0,) * 3)
        )
        prior_constants = prior.constants
        self._prior = lambda theta: kept_prior(theta, prior_constants)
        # the sums' shapes: the value's three in the likelihood's dtype, the gradient and Hessian in θ's
        scalar = jax.ShapeDtypeStruct((), likelihood.shapes.dtype)
        self._shapes = (scalar, scalar, scalar, flat, jax.ShapeDtypeStruct(flat.shape * 2, dtype))

    def level(self, rows: int | None) -> None:
        self.rows = rows

    def cast(self, theta) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(theta).astype(self.dtype))

    def _calls(self):
        """(first row, chunks, the last chunk's largest start, contiguous) of each call for the current level."""
        if self.rows is None:
            rows, last, contiguous = self.model.num_data, self.model.num_data - self.chunk, True
        else:
            rows, last, contiguous = self.rows, self.rows - self.chunk, False
        chunks = -(-rows // self.chunk)
        for first in range(0, chunks, _CHUNKS_PER_CALL):
            yield first * self.chunk, min(_CHUNKS_PER_CALL, chunks - first), last, contiguous

    def full(self, theta) -> _Point:
        theta = self.cast(theta)
        device_theta = to_device(theta)
        zeros = tuple(to_device(np.zeros(shape.shape, shape.dtype)) for shape in self._shapes)
        carry = (zeros, zeros)
        for begin, count, last, contiguous in self._calls():
            arguments = (
                carry,
                device_theta,
                self.model.data,
                self.order,
                np.int32(begin),
                np.int32(count),
                np.int32(last),
                np.bool_(contiguous),
                self._constants,
            )
            carry = self._add(*arguments)
        totals = [np.asarray(t, np.float64) + np.asarray(c, np.float64) for t, c in zip(*carry)]
        rows = self.model.num_data if self.rows is None else self.rows
        self.attempt._count(rows, subsample=self.rows is not None)
        scale = self.model.num_data / (rows * float(self.model.temperature))
        prior = [np.asarray(part, np.float64) for part in self._prior(device_theta)]
        value = scale * (totals[0] + totals[1]) + float(prior[0])
        gradient = scale * totals[3] + prior[1]
        hessian = _symmetric(scale * totals[4] + prior[2])
        rounding = self.eps * (scale * float(totals[2]) + abs(float(prior[0])))
        self.trace.append((theta.astype(np.float64), gradient, hessian))
        self.likelihood = (-totals[3], -_symmetric(totals[4]))  # the totals are of −ℓᵢ, untempered
        return _Point(float(value), gradient, hessian, rounding, _symmetric(scale * totals[4]))
