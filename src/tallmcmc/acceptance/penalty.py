r"""The minibatch penalty test: Metropolis-type acceptance from a noisy Δ* (Ceperley and Dewing 1999).

If the minibatch estimate Δ* of the log ratio Δ is N(Δ, s²) with s² known,
accepting with probability

.. math:: a(Δ^*) = \min\{1, \exp(Δ^* - s^2/2)\}

satisfies detailed balance exactly: E a(Δ + sZ) = e^{Δ} E a(−Δ + sZ), the
*penalty* s²/2 paying for the noise ([1]_; ``docs/penalty.md`` derives it).
For s → 0 it is the Metropolis test; at every s ≤ 1.2 its acceptance is at
least the Barker probability 1/(1 + e^{−Δ}) for every Δ (checked on a grid,
``docs/penalty.md``), so with the same minibatch it Peskun-dominates the
minibatch Barker test (:func:`tallmcmc.minibatch_barker`), whose acceptance is
held to the Barker probability and so its ESS per draw to about ⅓ for
near-independent proposals. With a control variate at large N, s is far
below 1 and the test accepts almost as the full-data Metropolis test does.

The minibatch grows exactly as the minibatch Barker test's does
(:func:`~tallmcmc.acceptance.minibatch_barker.stopping_helpers`: until the
estimated Var(Δ*) is below σ², with the tail guard and the optional bound δ
on the CLT error); the two tests differ only in the decision. Both rest on
the same approximation: Δ* is close to normal (the CLT) and its variance is
estimated. For the estimated variance ŝ² the penalty takes the next term of
its expansion, ŝ⁴(κ̂ − 1)/(8b), κ̂ the pooled kurtosis of the lᵢ, b the
minibatch (``docs/penalty.md``); it is ≤ 0.0025 at ŝ = 1, b = 100, κ̂ = 3.
The reported error bound on the acceptance probability is the smaller of
Novak's bound on the Kolmogorov distance (a is monotone with values in
[0, 1]) and ŝ·E|Z|³/√b (a is 1-Lipschitz in Δ*, the Wasserstein
Berry–Esseen bound). Once all N points are used, Δ* is exact, ŝ² = 0 and the
step is the exact Metropolis test.

References
----------
.. [1] Ceperley, D. M. and Dewing, M. (1999). The penalty method for random
   walks with uncertain energies. J. Chem. Phys. 110, 9812.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from tallmcmc.acceptance.base import AcceptanceTest
from tallmcmc.acceptance.minibatch_barker import TailPool, check_stopping_arguments, pooled_tails, stopping_helpers
from tallmcmc.acceptance.sequential import (
    LoopRule,
    checked_batch_size,
    estimated_log_ratio,
    machine_test,
    minibatch_test_init,
    sequential_decision,
    sequential_machine,
    with_control_variate,
)
from tallmcmc.model import Model

__all__ = ["minibatch_penalty", "penalty"]


def penalty(variance, kurtosis, batch_size):
    """The log-acceptance penalty for an estimated Var(Δ*) = ``variance`` from ``batch_size`` points.

    ŝ²/2, the exact penalty for normal noise of known variance, plus
    ŝ⁴(κ̂ − 1)/(8b), the leading correction for ŝ² being an estimate whose
    relative variance is (κ − 1)/b (``docs/penalty.md``). 0 where ŝ² = 0.
    """
    kurtosis = jnp.where(jnp.isfinite(kurtosis), jnp.maximum(kurtosis, 1.0), 3.0)
    return variance / 2 + variance**2 * (kurtosis - 1.0) / (8.0 * jnp.maximum(batch_size, 1.0))


def minibatch_penalty(
    batch_size: int,
    sigma: float = 1.0,
    delta: float | None = None,
    moment_sample_size: int | None = None,
    *,
    variance_rse: float | None = 0.35,
    pilot: bool = False,
    control_variate=None,
) -> AcceptanceTest:
    """The minibatch penalty test: accept with min(1, exp(Δ* − ŝ²/2 − …)) once Var(Δ*) < σ².

    Parameters
    ----------
    batch_size
        m: points in the first minibatch and the increment of its growth
        (``2 <= batch_size <= N``).
    sigma
        σ: the minibatch grows until the estimated standard deviation of Δ*
        is below σ (any σ > 0; the acceptance of a near-exact proposal is
        about 2Φ(−s/2) ≥ 0.62 for s ≤ 1).
    delta
        Optional bound δ on the estimated CLT error of the acceptance
        probability: the minibatch then also grows until it is ≤ δ.
    moment_sample_size
        Points of the minibatch used for the absolute moments and kurtosis
        (default ``20 * batch_size``, at most N).
    variance_rse
        The tail guard, as in :func:`tallmcmc.minibatch_barker`: the minibatch
        may stop only once b ≥ (κ̂ − 1)/``variance_rse``²; ``None`` turns it
        off.
    pilot
        As in :func:`tallmcmc.minibatch_barker`: the step's first points only
        choose the minibatch's size, and Δ*, its variance and b come from the
        points after them, so that stopping cannot select Δ* where the lᵢ are
        skewed (``docs/minibatch_error.md``, "Skewed log ratios"). Without
        the Barker test's margin on the pilot's prediction
        (:data:`~tallmcmc.acceptance.minibatch_barker.PILOT_MARGIN`): a
        Var(Δ*) above σ² is paid for by the penalty, not left over. Not with
        ``delta``.
    control_variate
        Optional :func:`tallmcmc.taylor_control_variate`: the test then runs
        on the control variate's residuals and adds the proxy's exact sum to
        Δ (the case it is built for: the residuals' Var(Δ*) is far below 1).

    Returns
    -------
    AcceptanceTest
        Named ``"minibatch_penalty"``; its cache is the minibatch Barker test's
        :class:`~tallmcmc.acceptance.minibatch_barker.TailPool`.

    References
    ----------
    .. [1] Ceperley, D. M. and Dewing, M. (1999). The penalty method for
       random walks with uncertain energies. J. Chem. Phys. 110, 9812.
    """
    batch_size = checked_batch_size(batch_size)
    sigma = float(sigma)
    if not (0.0 < sigma < math.inf):
        raise ValueError(
            f"sigma must be a positive number (the minibatch grows until the sd of Δ* is below it; 1.0 is the "
            f"default); got {sigma!r}"
        )
    check_stopping_arguments(delta, variance_rse, moment_sample_size, pilot)
    sigma_squared = sigma**2
    check_init = minibatch_test_init(batch_size)

    def init(model: Model, position) -> TailPool:
        check_init(model, position)
        return TailPool.empty(jnp.result_type(*jax.tree_util.tree_leaves(position), float))

    def helpers(num_data: int, dtype, pool: TailPool):
        return stopping_helpers(
            num_data,
            dtype,
            pool,
            batch_size=batch_size,
            sigma_squared=sigma_squared,
            moment_sample_size=moment_sample_size,
            variance_rse=variance_rse,
            delta=delta,
            # a(Δ*) is 1-Lipschitz: |E a(Δ + E) − E a(Δ + G)| ≤ W₁(E, G) ≤ s E|Z|³/√b
            smoothing=lambda variance, third, b: jnp.sqrt(jnp.maximum(variance, 0.0)) * third / jnp.sqrt(b),
            pilot=pilot,
        )

    def next_stage(count, stage):
        return count + batch_size

    def prepare(rng_key, model: Model, position, proposed, log_ratio_offset, cache):
        dtype = log_ratio_offset.dtype
        order_key, uniform_key = jax.random.split(rng_key)
        pool = TailPool.of(cache, dtype)
        return (uniform_key, pool), order_key, log_ratio_offset == -jnp.inf

    def rule(context, model: Model, log_ratio_offset) -> LoopRule:
        _, pool = context
        shared = helpers(model.num_data, log_ratio_offset.dtype, pool)
        return LoopRule(batch_size, batch_size, next_stage, shared.stop, shared.buffer_size, shared.pilot_size)

    def conclude(context, state, model: Model, position, proposed, log_ratio_offset, cache):
        uniform_key, pool = context
        dtype = log_ratio_offset.dtype
        shared = helpers(model.num_data, dtype, pool)
        if pilot:
            estimate, variance, b = shared.pilot_free(state, log_ratio_offset)
        else:
            b, variance = shared.moments(state)  # 0 once all N points are used: the exact Metropolis test
            estimate = estimated_log_ratio(state, model.num_data, log_ratio_offset)
        log_uniform = jnp.log(jax.random.uniform(uniform_key, dtype=dtype))
        accepted = log_uniform < estimate - penalty(variance, shared.pooled_kurtosis(state), b)
        return sequential_decision(
            state,
            model.num_data,
            estimate,
            accepted,
            pooled_tails(pool, shared, state, dtype),
            variance=variance,
            error_bound=shared.clt_error(state),
        )

    machine = sequential_machine(prepare, rule, conclude)
    return with_control_variate(
        machine_test(machine, init, "minibatch_penalty", keeps_cache_on_reject=True), control_variate
    )
