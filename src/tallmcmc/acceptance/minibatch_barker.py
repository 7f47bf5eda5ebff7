"""The minibatch Barker test (MHminibatch) of Seita, Pan, Chen and Canny (2017).

Accepting θ′ with the Barker probability 1/(1 + e^(−Δ)) is the same as
accepting iff Δ + X_log > 0 with X_log standard logistic. The test replaces
the exact Δ by a minibatch estimate Δ*, whose sampling noise is close to
N(0, s²), and makes up the rest of X_log with *added* noise:

    accept  iff  Δ* + X_nc + X_corr > 0,
    X_nc ~ N(0, σ² − s²),   X_corr ~ C_σ,   N(0, σ²) * C_σ ≈ Logistic(0, 1).

The minibatch grows (by ``batch_size``, or geometrically) until the estimated
variance s² of Δ* is below σ² (Algorithm 1); so a step costs about what an
SGD step costs.

Details that the paper leaves open, and what is done here:

* Points are drawn **without replacement** within a step, so the variance of
  Δ* carries the finite-population factor (1 − b/N): with b = N it is 0 and
  the estimate is exact. If the whole data set is reached before s² < σ²
  (or before ε ≤ δ), the step falls back to the exact full-data Barker test
  (Δ + X_log > 0, with X_log drawn from the logistic law itself), and
  ``used_full_data`` records it.
* The error estimate of Corollary 1 is computed on **standardized** Λᵢ:
  ε = (6.4 E|Z|³ + 2 E|Z|)/√b with Z = (Λᵢ − Λ̄)/s_Λ. The paper prints the
  bound with unnormalised moments, which is not scale-invariant (scaling
  every Λᵢ by c would scale the "bound" on a probability by c³); Novak's
  inequality is for the self-normalised sum, i.e. standardized moments.
  The absolute moments are estimated from the first ``moment_sample_size``
  points of the minibatch (a uniform random subsample of it), the size b in
  √b is the whole minibatch.
* No shortcut the paper does not state (such as a deterministic accept when
  |Δ*|/s is large) is taken; such shortcuts bias the test.

References
----------
.. [1] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
   minibatch acceptance test for Metropolis-Hastings. UAI 2017. Algorithm 1,
   Sections 3-5, Appendix A.
.. [2] Novak, S. Y. (2005). On self-normalized sums and Student's statistic.
   Theory Probab. Appl. 49(2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from tallmcmc.acceptance.base import AcceptanceTest
from tallmcmc.acceptance.sequential import (
    LoopRule,
    buffered_fourth_central_sum,
    checked_batch_size,
    estimated_log_ratio,
    machine_test,
    minibatch_test_init,
    sample_variance,
    sequential_decision,
    sequential_machine,
    with_control_variate,
)
from tallmcmc.correction.distribution import CorrectionDistribution, correction_distribution
from tallmcmc.model import Model

GROWTH_RULES = ("linear", "geometric")
LOGISTIC_STANDARD_DEVIATION = math.pi / math.sqrt(3.0)
_SQRT_TWO_PI = math.sqrt(2.0 * math.pi)
#: The tail guard stands down when the first-stage Var(Δ*), averaged over the chain's steps, is
#: below this fraction of σ²: then even heavy points the minibatch missed move Δ* by little.
SMALL_NOISE = 0.1

#: With ``pilot=True``, the minibatch Barker test stops only where the pilot's
#: predicted Var(Δ*) times 1 + ``PILOT_MARGIN``·√((κ̂ − 1)/p) is below σ² (p the
#: pilot's points, κ̂ the pooled kurtosis): √((κ̂ − 1)/p) is the relative standard
#: error of the pilot's variance, so the points after the pilot end above σ²
#: (which X_nc cannot take away) about as often as a normal exceeds 2 sds, and
#: not on 27% of the steps, as with no margin on ``reproduce bias``'s Student-t
#: (``docs/minibatch_error.md``, "Skewed log ratios").
PILOT_MARGIN = 2.0


class LoopHelpers(NamedTuple):
    """What the stopping rule and the decision of one step share (built by :func:`stopping_helpers`).

    ``buffer_size`` values are kept for the moments, the first stage has
    ``first_size`` points; the rest are functions of the loop's state:
    ``moments`` (b, Var(Δ*)), ``clt_error`` (the bound on the CLT error),
    ``first_stage_variance``, ``fourth_power_sum`` (Σ z⁴ over the buffered
    lᵢ), ``pooled_kurtosis`` (κ̂ over this step's moment sample and the
    chain's earlier ones), ``stop`` (the stopping rule), ``pilot_free``
    ((Δ*, Var(Δ*), b) from the b points after the pilot, for ``pilot=True``)
    and ``pilot_size`` (the pilot's points, for the loop's
    :class:`~tallmcmc.acceptance.sequential.LoopRule`; ``None`` without a
    pilot).
    """

    buffer_size: int
    first_size: int
    moments: Callable
    clt_error: Callable
    first_stage_variance: Callable
    fourth_power_sum: Callable
    pooled_kurtosis: Callable
    stop: Callable
    pilot_free: Callable
    pilot_size: Any = None


class TailPool(NamedTuple):
    """What a chain's earlier steps saw of the tails of the lᵢ: the test's cache.

    ``fourth`` is Σ z⁴ over the standardised log ratios z of earlier steps'
    moment samples and ``count`` how many there were, so ``fourth / count``
    estimates the kurtosis of the per-datum log ratios. ``first_variance``
    sums the estimated Var(Δ*) of each step's *first* stage (a fixed size, so
    its average over ``steps`` is unbiased for the typical noise, heavy points
    included). It is kept whether or not a step accepts
    (``AcceptanceTest.keeps_cache_on_reject``).
    """

    fourth: jax.Array
    count: jax.Array
    first_variance: jax.Array
    steps: jax.Array

    @classmethod
    def empty(cls, dtype) -> TailPool:
        zero = jnp.zeros((), dtype)
        return cls(zero, zero, zero, zero)

    @classmethod
    def of(cls, cache, dtype) -> TailPool:
        """A chain's cache as a pool in ``dtype`` (an empty one where the cache is not a pool)."""
        pool = cache if isinstance(cache, cls) else cls.empty(dtype)
        return cls(*(field.astype(dtype) for field in pool))


def smoothed_error_bound(variance, absolute_third, batch_size, sigma_squared):
    r"""Bound on |P(accept) − Barker| from the smoothing by the added N(0, σ² − s²).

    With Δ* = Δ + E, s² = Var(E) and τ² = σ² − s², the test accepts with
    E g(Δ + E), g(y) = P(y + X_nc + X_corr > 0), X_nc ~ N(0, τ²). g is
    Lipschitz with constant at most the largest density of X_nc + X_corr,
    which is at most 1/(τ√(2π)); with G ~ N(0, s²), E g(Δ + G) is the Barker
    probability (up to the error of C_σ), so

    .. math:: |P(\text{accept}) - (1 + e^{-Δ})^{-1}| \le \frac{W_1(E, G)}{τ\sqrt{2π}}
              \le \frac{s\, E|Z|^3}{\sqrt{b}\, τ \sqrt{2π}},

    the second step by the Wasserstein Berry–Esseen bound for a standardised
    sum of b independent terms, W₁ ≤ E|Z|³/√b (Goldstein 2010), Z the
    standardised lᵢ. It shrinks like s/σ when s ≪ σ and is vacuous as s → σ,
    where the Novak bound of Corollary 1 takes over (the test reports the
    smaller). Derivation: ``docs/minibatch_error.md``.
    """
    tau = jnp.sqrt(jnp.maximum(sigma_squared - variance, 0.0))
    bound = jnp.sqrt(jnp.maximum(variance, 0.0)) * absolute_third / (jnp.sqrt(batch_size) * tau * _SQRT_TWO_PI)
    return jnp.where(tau > 0, bound, jnp.inf)


def check_stopping_arguments(delta, variance_rse, moment_sample_size, pilot: bool = False) -> None:
    """The arguments of :func:`stopping_helpers` a user passes, checked by name (an error naming the bad one)."""
    if not isinstance(pilot, bool):
        raise TypeError(f"pilot must be True or False; got {pilot!r}")
    if pilot and delta is not None:
        raise ValueError(
            "pilot=True cannot be combined with delta: the bound ε ≤ δ reads the whole minibatch, so its stop would "
            "again depend on the points Δ* averages; pass one of them"
        )
    if delta is not None and not (float(delta) > 0):
        raise ValueError(f"delta must be > 0 (a bound on the CLT error ε) or None; got {delta!r}")
    if variance_rse is not None and not (0.0 < float(variance_rse) < math.inf):
        raise ValueError(
            f"variance_rse must be a positive number (the allowed relative standard error of the variance "
            f"estimate; 0.35 is the default) or None to switch the tail guard off; got {variance_rse!r}"
        )
    if moment_sample_size is not None and moment_sample_size < 2:
        raise ValueError(f"moment_sample_size must be >= 2; got {moment_sample_size!r}")


def stopping_helpers(
    num_data: int,
    dtype,
    pool: TailPool,
    *,
    batch_size: int,
    sigma_squared: float,
    moment_sample_size: int | None,
    variance_rse: float | None,
    delta: float | None,
    smoothing: Callable,
    pilot: bool = False,
    pilot_margin: float = 0.0,
) -> LoopHelpers:
    """The stopping rule of Algorithm 1 with the tail guard, and what the decision reads of the loop's state.

    Shared by :func:`minibatch_barker` and
    :func:`~tallmcmc.acceptance.penalty.minibatch_penalty`, which stop their
    minibatch the same way (Var(Δ*) < σ², the tail guard, optionally ε ≤ δ)
    and differ only in the decision. ``smoothing(variance, absolute_third, b)``
    is the test's own second bound on its CLT error (the smaller of it and
    Novak's is reported).

    With ``pilot``, the step's first points (the pilot: ``batch_size``, or as
    many as the tail guard asks of the chain's earlier steps, at most
    ``buffer_size``) alone decide where the minibatch stops: it stops at the
    first size whose points after the pilot give Var(Δ*) < σ² by the pilot's
    variance (and, with the tail guard, number at least (κ̂ − 1)/ρ², κ̂ pooled
    over the chain's earlier steps and the pilot). ``pilot_free`` then gives Δ* and its
    estimated variance from the points after the pilot, which the stopping
    rule never saw (``docs/minibatch_error.md``, "Skewed log ratios").
    ``pilot_margin`` c asks the pilot's prediction times 1 + c·√((κ̂ − 1)/p) to
    be below σ² (p the pilot's points): the minibatch Barker test's
    :data:`PILOT_MARGIN`, as its X_nc cannot make up a Var(Δ*) above σ²; 0 for
    the penalty test, whose penalty takes the estimated s² whatever its size.
    """
    first_size = min(batch_size, num_data)
    buffer_size = min(num_data, moment_sample_size or 20 * batch_size)
    if pilot:  # the pilot is at most the moment buffer, and at least the first stage
        buffer_size = max(buffer_size, first_size)

    def moments(state):
        # Var(Δ*) = N² Var(l)/b · (1 − b/N)  (without replacement)
        b = state.count.astype(dtype)
        variance = float(num_data) ** 2 * sample_variance(state) / b * (1 - b / num_data)
        return b, variance

    def clt_error(state):
        b, variance = moments(state)
        used = jnp.minimum(state.count, buffer_size).astype(dtype)
        mask = jnp.arange(state.buffer.values.shape[0]) < used
        # one pass over the buffer for both absolute moments; standardised after summing
        deviation = jnp.abs(jnp.where(mask, state.buffer.values - state.mean, 0))
        absolute_sums = jnp.sum(jnp.stack([deviation, deviation * deviation * deviation]), axis=1)
        scale = jnp.sqrt(state.sum_squares / b)
        spread = scale > 0
        scale = jnp.where(spread, scale, 1)
        absolute_first = absolute_sums[0] / scale / used
        absolute_third = absolute_sums[1] / scale**3 / used
        novak = (6.4 * absolute_third + 2.0 * absolute_first) / jnp.sqrt(b)
        return jnp.where(
            spread & (state.count < num_data), jnp.minimum(novak, smoothing(variance, absolute_third, b)), 0.0
        )

    def fourth_power_sum(state):
        """Σ z⁴ over the buffered lᵢ, from the loop's running moments (no pass over the buffer)."""
        b = state.count.astype(dtype)
        spread = jnp.sqrt(state.sum_squares / b)
        spread = jnp.where(spread > 0, spread, 1)
        return buffered_fourth_central_sum(state, state.mean) / spread**4

    def pooled_kurtosis(state):
        used = jnp.minimum(state.count, buffer_size).astype(dtype)
        return (pool.fourth + fourth_power_sum(state)) / jnp.maximum(pool.count + used, 1.0)

    def first_stage_variance(state):
        # the first stage's points are the buffer's first ``first_size`` values
        values = state.buffer.values[:first_size]
        return float(num_data) ** 2 * jnp.var(values, ddof=1) / first_size * (1 - first_size / num_data)

    def tails_matter(state):
        """Whether the typical first-stage noise, pooled over steps, is not far below σ²."""
        typical = (pool.first_variance + first_stage_variance(state)) / (pool.steps + 1.0)
        return typical > SMALL_NOISE * sigma_squared

    def pilot_size():
        """Points in the pilot: ``batch_size``, or as many as the tail guard asks of the chain's earlier steps.

        Read from the tail pool alone (never this step's points), so that with
        heavy-tailed lᵢ the pilot is large enough to have drawn the heavy ones
        before its variance sets the size; at most ``buffer_size``.
        """
        size = jnp.asarray(float(first_size), dtype)
        if variance_rse is None:
            return size
        kurtosis = pool.fourth / jnp.maximum(pool.count, 1.0)
        typical = pool.first_variance / jnp.maximum(pool.steps, 1.0)
        heavy = (pool.steps > 0) & (typical > SMALL_NOISE * sigma_squared)
        wanted = jnp.where(heavy, jnp.ceil((kurtosis - 1.0) / variance_rse**2), 0.0)
        return jnp.clip(wanted, size, float(buffer_size)).astype(dtype)

    def pilot_moments(state):
        """(size, mean, Σ(l − mean)², Σ z⁴) of the pilot, the first :func:`pilot_size` points, from the moments the
        loop gathers of them chunk by chunk (``SequentialState.pilot_moments``; the loop's rule asks for them)."""
        size = pilot_size()
        _, mean, squares, _, fourth = state.pilot_moments
        spread_squared = squares / size
        return size, mean, squares, fourth / jnp.where(spread_squared > 0, spread_squared, 1) ** 2

    def pilot_free(state, log_ratio_offset):
        """(Δ*, Var(Δ*), b) from the b points after the pilot; the exact Δ, 0 and N once all N points are seen."""
        n = state.count.astype(dtype)
        size, pilot_mean, pilot_squares, _ = pilot_moments(state)
        main = jnp.maximum(n - size, 1.0)
        main_mean = (n * state.mean - size * pilot_mean) / main
        # Σ(l − mean)² over all points = pilot's + main's + the between-groups term (Chan et al.)
        main_squares = state.sum_squares - pilot_squares - size * main / n * (pilot_mean - main_mean) ** 2
        variance = (
            float(num_data) ** 2
            * jnp.maximum(main_squares, 0.0)
            / jnp.maximum(main - 1.0, 1.0)
            / main
            * (1 - main / num_data)
        )
        everything = state.count >= num_data
        estimate = float(num_data) * jnp.where(everything, state.mean, main_mean) + log_ratio_offset
        return estimate, jnp.where(everything, 0.0, variance), jnp.where(everything, n, main)

    def pilot_stop(state):
        n = state.count.astype(dtype)
        size, _, pilot_squares, pilot_fourth = pilot_moments(state)
        main = n - size
        predicted = (
            float(num_data) ** 2
            * pilot_squares
            / jnp.maximum(size - 1.0, 1.0)
            / jnp.maximum(main, 1.0)
            * (1 - main / num_data)
        )
        kurtosis = (pool.fourth + pilot_fourth) / jnp.maximum(pool.count + size, 1.0)
        if pilot_margin:  # the pilot's variance is uncertain by √((κ̂ − 1)/p) of itself
            predicted = predicted * (1.0 + pilot_margin * jnp.sqrt(jnp.maximum(kurtosis - 1.0, 0.0) / size))
        small = (main > 0) & (predicted < sigma_squared)
        if variance_rse is not None:
            trusted = main >= (kurtosis - 1.0) / variance_rse**2
            small = small & (trusted | ~tails_matter(state))
        return small

    def stop(state):
        if pilot:
            return pilot_stop(state)
        _, variance = moments(state)
        small = variance < sigma_squared
        if variance_rse is not None:
            trusted = state.count.astype(dtype) >= (pooled_kurtosis(state) - 1.0) / variance_rse**2
            small = small & (trusted | ~tails_matter(state))
        if delta is not None:
            small = small & (clt_error(state) <= delta)
        return small

    return LoopHelpers(
        buffer_size,
        first_size,
        moments,
        clt_error,
        first_stage_variance,
        fourth_power_sum,
        pooled_kurtosis,
        stop,
        pilot_free,
        pilot_size() if pilot else None,
    )


def pooled_tails(pool: TailPool, shared: LoopHelpers, state, dtype) -> TailPool:
    """The chain's tail pool with this step's moment sample added (where it has one)."""
    fourth = shared.fourth_power_sum(state)
    used = jnp.minimum(state.count, shared.buffer_size).astype(dtype)
    learned = (state.count >= max(shared.first_size, 2)) & jnp.isfinite(fourth)
    return TailPool(
        pool.fourth + jnp.where(learned, fourth, 0.0),
        pool.count + jnp.where(learned, used, 0.0),
        pool.first_variance + jnp.where(learned, shared.first_stage_variance(state), 0.0),
        pool.steps + learned.astype(dtype),
    )


def minibatch_barker(
    batch_size: int,
    sigma: float = 1.0,
    delta: float | None = None,
    growth: str = "linear",
    growth_factor: float = 2.0,
    moment_sample_size: int | None = None,
    correction: CorrectionDistribution | None = None,
    *,
    variance_rse: float | None = 0.35,
    pilot: bool = False,
    control_variate=None,
) -> AcceptanceTest:
    """The minibatch Barker acceptance test (Algorithm 1 of Seita et al. 2017).

    Parameters
    ----------
    batch_size
        m: points in the first minibatch, and the increment of linear growth
        (``2 <= batch_size <= N``).
    sigma
        σ: the test waits until the standard deviation of Δ* is below σ and
        then adds X_nc ~ N(0, σ² − s²) and X_corr ~ C_σ. Must lie in
        (0, π/√3) (the logistic law's standard deviation); tables for
        σ ∈ {0.8, 0.9, …, 1.4} ship with the package.
    delta
        Optional bound δ on the estimated CLT error ε of Corollary 1: the
        minibatch then also grows until ε ≤ δ.
    growth
        ``"linear"`` (add ``batch_size`` points per stage, as Algorithm 1) or
        ``"geometric"`` (multiply the minibatch by ``growth_factor``).
    growth_factor
        Factor for geometric growth (> 1).
    moment_sample_size
        Number of the minibatch's first points used to estimate the absolute
        moments in ε (default ``20 * batch_size``, at most N).
    correction
        The law of X_corr: anything with ``sigma`` and ``sample(rng_key,
        dtype=...)``. Default: the shipped table for ``sigma``
        (:func:`tallmcmc.correction_distribution`).
    variance_rse
        Tail guard (not in the paper): the minibatch may stop only once
        b ≥ (κ̂ − 1)/``variance_rse``², the size at which the relative
        standard error of the variance estimate, √((κ − 1)/b), is at most
        ``variance_rse``; κ̂ is the kurtosis of the lᵢ pooled over this
        step's moment sample and those of the chain's earlier steps (the
        test's cache, :class:`TailPool`). Light tails (κ ≈ 3) ask for
        b ≥ 17, so the paper's minibatch sizes are unchanged; heavy-tailed
        lᵢ (a few points carrying most of Δ) make it grow the minibatch
        instead of stopping on a sample that missed them, which is what
        biases Algorithm 1 there (``docs/minibatch_error.md``). The guard
        stands down while the first-stage Var(Δ*), averaged over the chain's
        steps, is below ``SMALL_NOISE`` σ² = 0.1 σ² (control-variate
        residuals: heavy-tailed but tiny). ``None`` is Algorithm 1 as printed.
    pilot
        Not in the paper. ``True``: the step's first points (the pilot:
        ``batch_size`` of them, or as many as the tail guard asks of the
        chain's earlier steps, at most the moment buffer) only choose the
        minibatch's size; Δ* and the s² of X_nc come from the points drawn
        after them. Algorithm 1 stops on the same points it averages, and
        where the lᵢ are skewed their mean and variance are correlated
        (correlation ≈ γ/√(κ − 1), whatever b is), so stopping when the
        variance looks small biases Δ*: by up to 0.14 on the paper's
        mixture, which narrows its posterior sds by 4–5%. The pilot removes
        that bias for the pilot's points more per step. Where Algorithm 1
        stops at its first stage anyway (a control variate at the mode)
        nothing is selected and the pilot only costs. The points after the
        pilot may end with Var(Δ*) above σ², which X_nc cannot take away, so
        the stop asks the pilot's prediction with a margin of
        :data:`PILOT_MARGIN` relative standard errors √((κ̂ − 1)/p) to be
        below σ²: without it 27% of the steps on ``reproduce bias``'s
        heavy-tailed Student-t ended above σ² and widened its posterior by
        about 2%; with it 6.7%, and the sds are right. Not with ``delta``
        (``docs/minibatch_error.md``, "Skewed log ratios").
    control_variate
        Optional :func:`tallmcmc.taylor_control_variate`: the test then runs on
        the residuals of the Taylor proxy and adds the proxy's exact sum to Δ
        (:func:`~tallmcmc.acceptance.sequential.with_control_variate`).

    Returns
    -------
    AcceptanceTest

    References
    ----------
    .. [1] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
       minibatch acceptance test for Metropolis-Hastings. UAI 2017.
    """
    batch_size = checked_batch_size(batch_size)
    sigma = float(sigma)
    if not (0.0 < sigma < LOGISTIC_STANDARD_DEVIATION):
        raise ValueError(
            f"sigma must lie in (0, π/√3 ≈ {LOGISTIC_STANDARD_DEVIATION:.4f}): the correction X_corr needs "
            f"variance π²/3 − σ² > 0 left over; got {sigma!r}. σ = 1.0 is the paper's choice"
        )
    if growth not in GROWTH_RULES:
        raise ValueError(f"growth must be one of {GROWTH_RULES}; got {growth!r}")
    if growth == "geometric" and not float(growth_factor) > 1:
        raise ValueError(f"growth_factor must be > 1 for geometric growth; got {growth_factor!r}")
    check_stopping_arguments(delta, variance_rse, moment_sample_size, pilot)
    if correction is None:
        correction = correction_distribution(sigma)
    elif not (hasattr(correction, "sample") and hasattr(correction, "sigma")):
        raise TypeError("correction must be a CorrectionDistribution (from tallmcmc.correction_distribution(sigma))")
    elif abs(float(correction.sigma) - sigma) > 1e-9:
        raise ValueError(
            f"correction was built for sigma = {correction.sigma}, but the test uses sigma = {sigma}; "
            f"pass tallmcmc.correction_distribution({sigma}) or leave correction out"
        )
    sigma_squared = sigma**2

    check_init = minibatch_test_init(batch_size)

    def init(model: Model, position) -> TailPool:
        check_init(model, position)
        return TailPool.empty(jnp.result_type(*jax.tree_util.tree_leaves(position), float))

    def helpers(num_data: int, dtype, pool: TailPool) -> LoopHelpers:
        """The functions of the loop's state that the stopping rule and the decision share."""
        return stopping_helpers(
            num_data,
            dtype,
            pool,
            batch_size=batch_size,
            sigma_squared=sigma_squared,
            moment_sample_size=moment_sample_size,
            variance_rse=variance_rse,
            delta=delta,
            smoothing=lambda variance, third, b: smoothed_error_bound(variance, third, b, sigma_squared),
            pilot=pilot,
            pilot_margin=PILOT_MARGIN,
        )

    if growth == "linear":
        next_stage = lambda count, stage: count + batch_size  # noqa: E731
    else:
        next_stage = lambda count, stage: jnp.ceil(growth_factor * count).astype(jnp.int32)  # noqa: E731

    def prepare(rng_key, model: Model, position, proposed, log_ratio_offset, cache):
        dtype = log_ratio_offset.dtype
        order_key, normal_key, correction_key, logistic_key = jax.random.split(rng_key, 4)
        pool = TailPool.of(cache, dtype)
        context = ((normal_key, correction_key, logistic_key), pool)
        return context, order_key, log_ratio_offset == -jnp.inf

    def rule(context, model: Model, log_ratio_offset) -> LoopRule:
        _, pool = context
        shared = helpers(model.num_data, log_ratio_offset.dtype, pool)
        return LoopRule(batch_size, batch_size, next_stage, shared.stop, shared.buffer_size, shared.pilot_size)

    def conclude(context, state, model: Model, position, proposed, log_ratio_offset, cache):
        (normal_key, correction_key, logistic_key), pool = context
        num_data = model.num_data
        dtype = log_ratio_offset.dtype
        shared = helpers(num_data, dtype, pool)
        if pilot:
            estimate, variance, _ = shared.pilot_free(state, log_ratio_offset)
        else:
            _, variance = shared.moments(state)
            estimate = estimated_log_ratio(state, num_data, log_ratio_offset)
        extra_variance = jnp.maximum(sigma_squared - variance, 0.0)
        noise = jnp.sqrt(extra_variance) * jax.random.normal(normal_key, dtype=dtype) + correction.sample(
            correction_key, dtype=dtype
        )
        # all N points seen: Δ* is exact, and the exact Barker test draws the logistic itself
        noise = jnp.where(state.count >= num_data, jax.random.logistic(logistic_key, dtype=dtype), noise)
        pool = pooled_tails(pool, shared, state, dtype)
        return sequential_decision(
            state,
            num_data,
            estimate,
            estimate + noise > 0,
            pool,
            variance=variance,
            error_bound=shared.clt_error(state),
        )

    machine = sequential_machine(prepare, rule, conclude)
    return with_control_variate(
        machine_test(machine, init, "minibatch_barker", keeps_cache_on_reject=True, max_acceptance=0.5), control_variate
    )
