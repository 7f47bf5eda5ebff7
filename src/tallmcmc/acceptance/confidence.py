"""MHSubLhd: the adaptive-subsampling "confidence" sampler of Bardenet, Doucet and Holmes (2014).

The Metropolis test ``u < α`` is written per datum as ``μ > μ₀`` with

    μ  = (1/N) Σᵢ lᵢ,   lᵢ = (1/K)[log p(xᵢ|θ′) − log p(xᵢ|θ)],
    μ₀ = (1/N) · (log u − log_ratio_offset).

The test draws data without replacement in geometrically growing stages and
stops as soon as an empirical-Bernstein confidence interval around the
subsample mean Λ*ₜ excludes μ₀ (Algorithm 3 and Section 3.2 of Bardenet et
al. 2014). At stage k, with t points seen,

    cₜ = σ̂ₜ √(2 log(3/δₖ)/t) + 6 C log(3/δₖ)/t,   δₖ = (p − 1)/(p kᵖ) · δ,

where σ̂ₜ is the empirical standard deviation (1/t normalisation, as in the
empirical-Bernstein bound of Audibert et al. 2009) and C ≥ maxᵢ |lᵢ| bounds
the range of the lᵢ (each lies in [−C, C], a range of 2C, whence the 6 = 3·2).
Since Σₖ δₖ ≤ δ, the decision agrees with the exact Metropolis decision with
probability at least 1 − δ (a union bound over the looks), whatever μ − μ₀.

Randomness: u is drawn from the first key of ``jax.random.split(rng_key)``, the
order of the data from the second (the tests fix μ₀ through this).

The range bound C is, by default, maxᵢ |lᵢ| from a full pass over the data
(what the authors' code and Seita et al. 2017 did; it is counted in
``data_used``), or a model-supplied analytic bound ``bound(position,
proposed)``, which needs no full pass. An analytic bound that is not a true
bound on the *tempered* |lᵢ| voids the guarantee.

References
----------
.. [1] Bardenet, R., Doucet, A. and Holmes, C. (2014). Towards scaling up
   Markov chain Monte Carlo: an adaptive subsampling approach. ICML 2014,
   Algorithm 3, Section 3.
.. [2] Bardenet, R., Doucet, A. and Holmes, C. (2017). On Markov chain Monte
   Carlo methods for tall data. JMLR 18(47), Section 6.1.
.. [3] Audibert, J.-Y., Munos, R. and Szepesvári, C. (2009). Exploration-
   exploitation tradeoff using variance estimates in multi-armed bandits.
   Theoretical Computer Science 410(19).
.. [4] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
   minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 6.1
   (γ = 1.5, p = 2, δ = 0.01, initial batch 50).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from tallmcmc._checks import integer_at_least, open_unit_interval
from tallmcmc.acceptance.base import AcceptanceTest
from tallmcmc.acceptance.sequential import (
    LoopRule,
    checked_batch_size,
    estimated_log_ratio,
    full_data_log_ratios,
    machine_test,
    metropolis_threshold,
    minibatch_test_init,
    sequential_decision,
    sequential_machine,
    with_control_variate,
)
from tallmcmc.model import Model, Position

BOUND_RULES = ("full_pass",)


def confidence_sampler(
    batch_size: int,
    gamma: float = 1.5,
    p: float = 2.0,
    delta: float = 0.01,
    bound: str | Callable[[Position, Position], jax.Array] = "full_pass",
    *,
    chunk_size: int = 1024,
    control_variate=None,
) -> AcceptanceTest:
    """The MHSubLhd acceptance test (empirical-Bernstein stopping).

    Parameters
    ----------
    batch_size
        b₀: points in the first stage (``2 <= batch_size <= N``).
    gamma
        γ > 1: after a failed look at t points the next stage has
        ``min(N, ⌈γ t⌉)`` points.
    p
        p > 1: the error budget of look k is δₖ = (p − 1)/(p kᵖ) δ.
    delta
        δ ∈ (0, 1): bound on the probability that the decision differs from
        the exact Metropolis decision.
    bound
        ``"full_pass"`` (default): C = maxᵢ |lᵢ| from a pass over all N
        points each step, counted in ``data_used`` (not in
        ``data_used_by_test``); or a function ``bound(position, proposed) ->
        C`` returning an upper bound on the tempered |lᵢ| for every datum
        (analytic, no full pass). With a ``control_variate`` the bound must
        hold for the residuals |rᵢ| (``"full_pass"`` measures them).
    chunk_size
        Points evaluated per loop iteration; stage sizes are honoured exactly
        whatever it is.
    control_variate
        Optional :func:`tallmcmc.taylor_control_variate`: the test then runs on
        the residuals of the Taylor proxy and adds the proxy's exact sum to Δ
        (:func:`~tallmcmc.acceptance.sequential.with_control_variate`).

    Returns
    -------
    AcceptanceTest
        Its :class:`~tallmcmc.acceptance.base.AcceptanceInfo` reports ``statistic`` =
        N·Λ*ₜ + offset (the estimate of Δ; accept ⇔ statistic > log u),
        ``variance`` = N²σ̂ₜ²/t (0 at t = N), ``error_bound`` = Σ_{j≤k} δⱼ, the
        error budget spent by the looks made (0 when all N points were used).

    References
    ----------
    .. [1] Bardenet, R., Doucet, A. and Holmes, C. (2014). Towards scaling up
       Markov chain Monte Carlo: an adaptive subsampling approach. ICML 2014.
    .. [2] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
       minibatch acceptance test for Metropolis-Hastings. UAI 2017.
    """
    batch_size = checked_batch_size(batch_size)
    gamma = float(gamma)
    if not gamma > 1.0:
        raise ValueError(f"gamma must be > 1 (the geometric growth factor of the stages); got {gamma!r}")
    p = float(p)
    if not p > 1.0:
        raise ValueError(f"p must be > 1 (so that the looks' error budgets δ(p−1)/(p kᵖ) sum to at most δ); got {p!r}")
    delta = open_unit_interval(delta, "delta", "the bound on the probability of a wrong decision")
    if not (callable(bound) or bound in BOUND_RULES):
        raise ValueError(f"bound must be 'full_pass' or a function bound(position, proposed) -> C; got {bound!r}")
    chunk_size = integer_at_least(chunk_size, "chunk_size")
    full_pass = not callable(bound)

    init = minibatch_test_init(batch_size)

    def budget(stage, dtype):
        k = jnp.maximum(stage, 1).astype(dtype)
        return (p - 1.0) / (p * k**p) * delta

    def prepare(rng_key, model: Model, position, proposed, log_ratio_offset, cache):
        dtype = log_ratio_offset.dtype
        log_u, threshold, order_key = metropolis_threshold(rng_key, log_ratio_offset)  # threshold = N·μ₀
        if full_pass:
            range_bound = model.max_over_data(jnp.abs(full_data_log_ratios(model, position, proposed).astype(dtype)))
        else:
            range_bound = jnp.asarray(bound(position, proposed), dtype)
        return (log_u, threshold, range_bound), order_key, log_ratio_offset == -jnp.inf

    def rule(context, model: Model, log_ratio_offset) -> LoopRule:
        num_data = model.num_data
        dtype = log_ratio_offset.dtype
        _, threshold, range_bound = context

        def stop(state):
            t = state.count.astype(dtype)
            log_term = jnp.log(3.0 / budget(state.stage, dtype))
            spread = jnp.sqrt(state.sum_squares / t)
            width = spread * jnp.sqrt(2.0 * log_term / t) + 6.0 * range_bound * log_term / t
            # |Λ*ₜ − μ₀| ≥ cₜ, multiplied through by N
            return jnp.abs(float(num_data) * state.mean - threshold) >= float(num_data) * width

        def next_stage(count, stage):
            return jnp.ceil(gamma * count.astype(jnp.float32)).astype(jnp.int32)

        return LoopRule(min(chunk_size, num_data), batch_size, next_stage, stop)

    def conclude(context, state, model: Model, position, proposed, log_ratio_offset, cache):
        num_data = model.num_data
        dtype = log_ratio_offset.dtype
        log_u, _, range_bound = context
        t = state.count.astype(dtype)
        estimate = estimated_log_ratio(state, num_data, log_ratio_offset)
        looks = jnp.arange(1, 64, dtype=dtype)
        spent = jnp.sum(jnp.where(looks <= state.stage.astype(dtype), (p - 1.0) / (p * looks**p) * delta, 0.0))
        variance = float(num_data) ** 2 * state.sum_squares / jnp.maximum(t, 1) / jnp.maximum(t, 1)
        return sequential_decision(
            state,
            num_data,
            estimate,
            estimate > log_u,
            cache,
            variance=variance,
            error_bound=jnp.where(state.count >= num_data, 0.0, spent),
            extra_data_used=num_data if full_pass else 0,
            non_finite=full_pass & ~jnp.isfinite(range_bound),
        )

    machine = sequential_machine(prepare, rule, conclude, start_is_full_pass=full_pass)

    return with_control_variate(machine_test(machine, init, "confidence_sampler"), control_variate)
