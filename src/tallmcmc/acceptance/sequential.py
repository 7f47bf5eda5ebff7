"""The growing-minibatch loop that every subsampling acceptance test shares.

A sequential test looks at the tempered per-datum log ratios

.. math:: l_i = \\tfrac{1}{K}\\,[\\log p(x_i \\mid \\theta') - \\log p(x_i \\mid \\theta)]

of a minibatch drawn without replacement (see :mod:`tallmcmc.acceptance.subsample`),
grows the minibatch stage by stage, and stops at the first stage where its
own rule (``stop``) is satisfied or when all ``N`` points have been used.
Points are evaluated ``chunk_size`` at a time (a static shape, as XLA needs);
a stage boundary that is not a multiple of the chunk is honoured exactly by
masking, so the count of data used is the count of log ratios the test saw.

Running mean and sum of squared deviations are merged chunk by chunk with the
pairwise update of Chan, Golub and LeVeque, which is stable in float32; a test
that keeps the first values it saw (``buffer_size``) also gets their central
moments up to the fourth, merged the same way (Pébay 2008), so that a stopping
rule can read their kurtosis without a pass over the buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from tallmcmc._checks import integer_at_least
from tallmcmc.acceptance.base import (
    AcceptanceTest,
    Decision,
    StepMachine,
    Workspace,
    decide_by_machine,
    info_for,
    is_bad,
)
from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices
from tallmcmc.control_variate import ControlVariate
from tallmcmc.model import Model, Position


class SequentialState(NamedTuple):
    """Where a growing-minibatch test stands.

    ``count`` points used so far; their ``mean`` and ``sum_squares``
    (Σ (l_i − mean)²); ``stage`` checks made; ``next_check`` the size of the
    next stage; ``buffer`` the first values seen (for moment estimates that
    need the values themselves; empty unless asked for; a
    :class:`~tallmcmc.acceptance.base.Workspace`: only its first
    ``min(count, buffer_size)`` places are ever read) and
    ``buffer_moments`` theirs, (n, mean, M₂, M₃, M₄) with Mₖ = Σ (lᵢ − mean)ᵏ
    (see :func:`buffered_fourth_central_sum`); ``done`` and ``non_finite`` flags;
    ``pilot_moments`` the same moments of the first ``LoopRule.pilot_size``
    values seen (empty unless the rule has a pilot), gathered chunk by chunk
    so that a stop which reads them at every stage never rescans the buffer.
    """

    count: jax.Array
    mean: jax.Array
    sum_squares: jax.Array
    stage: jax.Array
    next_check: jax.Array
    buffer: Workspace
    done: jax.Array
    non_finite: jax.Array
    buffer_moments: jax.Array
    pilot_moments: jax.Array


def merged_moments(first: jax.Array, second: jax.Array) -> jax.Array:
    """Central moments (n, mean, M₂, M₃, M₄) of two samples pooled (Pébay 2008, eqs. 3.1 and 3.3).

    Exact in real arithmetic, and stable in float32 like Chan's update of M₂:
    the moments are never formed from raw power sums.
    """
    n_a, mean_a, m2_a, m3_a, m4_a = first
    n_b, mean_b, m2_b, m3_b, m4_b = second
    n = n_a + n_b
    safe = jnp.maximum(n, 1)
    delta = mean_b - mean_a
    share = delta / safe  # δ / n
    mean = mean_a + n_b * share
    m2 = m2_a + m2_b + delta * share * n_a * n_b
    m3 = m3_a + m3_b + delta * share**2 * n_a * n_b * (n_a - n_b) + 3 * share * (n_a * m2_b - n_b * m2_a)
    m4 = (
        m4_a
        + m4_b
        + delta * share**3 * n_a * n_b * (n_a * n_a - n_a * n_b + n_b * n_b)
        + 6 * share**2 * (n_a * n_a * m2_b + n_b * n_b * m2_a)
        + 4 * share * (n_a * m3_b - n_b * m3_a)
    )
    return jnp.stack([n, mean, m2, m3, m4])


def buffered_fourth_central_sum(state: SequentialState, center: jax.Array) -> jax.Array:
    """Σ (lᵢ − ``center``)⁴ over the buffered lᵢ, from ``state.buffer_moments``.

    Shifting the moments about their own mean to ``center`` (d = mean − center;
    the first central moment is 0): Σ (x − c)⁴ = M₄ + 4d M₃ + 6d² M₂ + n d⁴.
    """
    n, mean, m2, m3, m4 = state.buffer_moments
    d = mean - center
    return m4 + 4 * d * m3 + 6 * d**2 * m2 + n * d**4


def sample_variance(state: SequentialState) -> jax.Array:
    """Unbiased sample variance of the log ratios seen so far."""
    return state.sum_squares / jnp.maximum(state.count - 1, 1).astype(state.mean.dtype)


class LoopRule(NamedTuple):
    """How a growing-minibatch test grows and when it stops (see :func:`run_sequential_test`).

    ``chunk_size``, ``first_stage`` and ``buffer_size`` are static ints;
    ``next_stage(count, stage) -> size`` and ``stop(state) -> bool`` may close
    over traced values (a threshold, the chain's tail pool). ``pilot_size``,
    ``None`` or a traced count fixed for the step, asks for the moments of the
    first that many values in ``SequentialState.pilot_moments``.
    """

    chunk_size: int
    first_stage: int
    next_stage: Callable[[jax.Array, jax.Array], jax.Array]
    stop: Callable[[SequentialState], jax.Array]
    buffer_size: int = 0
    pilot_size: Any = None


def sequential_initial_state(num_data: int, rule: LoopRule, dtype, skip: jax.Array | bool = False) -> SequentialState:
    """The state before the first chunk: nothing seen, the first check at ``min(first_stage, N)``."""
    zero = jnp.zeros((), dtype)
    return SequentialState(
        count=jnp.zeros((), jnp.int32),
        mean=zero,
        sum_squares=zero,
        stage=jnp.zeros((), jnp.int32),
        next_check=jnp.asarray(min(rule.first_stage, num_data), jnp.int32),
        buffer=Workspace(jnp.zeros((rule.buffer_size + rule.chunk_size,) if rule.buffer_size else (0,), dtype)),
        done=jnp.asarray(skip, bool),
        non_finite=jnp.zeros((), bool),
        buffer_moments=jnp.zeros((5,) if rule.buffer_size else (0,), dtype),
        pilot_moments=jnp.zeros((0,) if rule.pilot_size is None else (5,), dtype),
    )


def masked_moments(values: jax.Array, mask: jax.Array, dtype) -> jax.Array:
    """(n, mean, M₂, M₃, M₄) of the ``values`` where ``mask`` holds, for :func:`merged_moments`."""
    n = jnp.sum(mask).astype(dtype)
    mean = jnp.sum(jnp.where(mask, values, 0)) / jnp.maximum(n, 1)
    centred = jnp.where(mask, values - mean, 0)
    squared = centred * centred
    return jnp.stack([n, mean, jnp.sum(squared), jnp.sum(squared * centred), jnp.sum(squared * squared)])


def sequential_chunk(
    round_keys: jax.Array,
    state: SequentialState,
    model: Model,
    position: Position,
    proposed: Position,
    rule: LoopRule,
    dtype,
) -> SequentialState:
    """Evaluate the next chunk of the minibatch, merge it, and check the rule at a stage boundary."""
    num_data = model.num_data
    chunk_size, buffer_size = rule.chunk_size, rule.buffer_size
    lanes = jnp.arange(chunk_size, dtype=jnp.int32)
    limit = jnp.minimum(state.next_check, num_data)
    positions = state.count + lanes
    valid = positions < limit
    indices = permuted_indices(round_keys, jnp.where(valid, positions, 0), num_data)
    values = model.log_likelihood_ratios_at(position, proposed, indices).astype(dtype)
    weights = valid.astype(dtype)
    chunk_count = jnp.sum(valid).astype(jnp.int32)
    chunk_n = chunk_count.astype(dtype)
    chunk_mean = jnp.sum(jnp.where(valid, values, 0)) / jnp.maximum(chunk_n, 1)
    chunk_squares = jnp.sum(weights * jnp.where(valid, values - chunk_mean, 0) ** 2)
    count = state.count + chunk_count
    total = count.astype(dtype)
    delta = chunk_mean - state.mean
    mean = state.mean + delta * chunk_n / total
    sum_squares = state.sum_squares + chunk_squares + delta**2 * state.count.astype(dtype) * chunk_n / total
    buffer, buffer_moments = state.buffer, state.buffer_moments
    if buffer_size:
        start = jnp.minimum(state.count, buffer_size)
        # a finished state is left as it is (only the chunk's slice is rewritten, with its own values)
        kept = lax.dynamic_slice(buffer.values, (start,), (chunk_size,))
        buffer = Workspace(lax.dynamic_update_slice(buffer.values, jnp.where(state.done, kept, values), (start,)))
        # the moments of the values that land in the first buffer_size places
        buffer_moments = merged_moments(
            buffer_moments, masked_moments(values, valid & (positions < buffer_size), dtype)
        )
    pilot_moments = state.pilot_moments
    if rule.pilot_size is not None:
        pilot_moments = merged_moments(
            pilot_moments, masked_moments(values, valid & (positions < rule.pilot_size), dtype)
        )
    non_finite = ~(jnp.isfinite(mean) & jnp.isfinite(sum_squares))
    at_check = (count >= limit) | non_finite
    stage = state.stage + at_check.astype(jnp.int32)
    new = SequentialState(
        count, mean, sum_squares, stage, state.next_check, buffer, state.done, non_finite, buffer_moments, pilot_moments
    )
    stopped = at_check & (non_finite | (count >= num_data) | rule.stop(new))
    following = jnp.clip(rule.next_stage(count, stage), count + 1, num_data)
    next_check = jnp.where(at_check & ~stopped, following, state.next_check)
    result = new._replace(next_check=next_check.astype(jnp.int32), done=stopped)
    # idle once done (so a driver may advance a batch of chains without selecting the finished ones)
    return SequentialState(
        *(
            field if name == "buffer" else jnp.where(state.done, old, field)
            for name, field, old in zip(SequentialState._fields, result, state)
        )
    )


def run_sequential_test(
    rng_key: jax.Array,
    model: Model,
    position: Position,
    proposed: Position,
    *,
    chunk_size: int,
    first_stage: int,
    next_stage: Callable[[jax.Array, jax.Array], jax.Array],
    stop: Callable[[SequentialState], jax.Array],
    dtype,
    buffer_size: int = 0,
    skip: jax.Array | bool = False,
) -> SequentialState:
    """Grow a minibatch stage by stage until ``stop`` holds or all data is used.

    Parameters
    ----------
    rng_key
        Key for this step's random order of the data.
    model, position, proposed
        The model and the pair (θ, θ′) compared.
    chunk_size
        Points evaluated per loop iteration (static).
    first_stage
        Size of the first stage (≥ 2).
    next_stage
        ``next_stage(count, stage) -> size`` of the stage after a failed check.
    stop
        ``stop(state) -> bool`` evaluated at each stage boundary (``count`` is
        the stage size, ``stage`` the number of checks made including this).
    dtype
        Floating dtype of the accumulators.
    buffer_size
        Keep the first ``buffer_size`` log ratios in ``state.buffer``.
    skip
        If true, use no data at all (e.g. a proposal outside the prior's support).
    """
    rule = LoopRule(chunk_size, first_stage, next_stage, stop, buffer_size)
    round_keys = permutation_keys(rng_key)
    initial = sequential_initial_state(model.num_data, rule, dtype, skip)
    return lax.while_loop(
        lambda s: ~s.done, lambda s: sequential_chunk(round_keys, s, model, position, proposed, rule, dtype), initial
    )


class SequentialTestState(NamedTuple):
    """The :class:`~tallmcmc.acceptance.base.StepMachine` state of a growing-minibatch test.

    ``context`` is what the test computed before its loop (thresholds, keys,
    the chain's tail pool, a full-pass bound), ``round_keys`` the step's
    permutation of the data, ``state`` the loop's :class:`SequentialState`.
    """

    context: Any
    round_keys: jax.Array
    state: SequentialState


def sequential_machine(prepare, rule, conclude, *, start_is_full_pass: bool = False) -> StepMachine:
    """A growing-minibatch test as a :class:`~tallmcmc.acceptance.base.StepMachine`.

    Parameters
    ----------
    prepare
        ``prepare(rng_key, model, position, proposed, log_ratio_offset, cache)
        -> (context, order_key, skip)``: the work before the loop; ``context``
        a pytree of arrays, ``order_key`` the key of the data's order, ``skip``
        whether to use no data at all.
    rule
        ``rule(context, model, log_ratio_offset) -> LoopRule``.
    conclude
        ``conclude(context, state, model, position, proposed,
        log_ratio_offset, cache) -> Decision`` from the loop's end state.
    start_is_full_pass
        Whether ``prepare`` reads every data point (the machine's
        :attr:`~tallmcmc.acceptance.base.StepMachine.start_is_full_pass`).

    Returns
    -------
    StepMachine
        ``start`` runs ``prepare`` and sets up the loop, ``advance`` is one
        :func:`sequential_chunk`, ``done`` the loop's flag, ``finish`` runs
        ``conclude``; :func:`~tallmcmc.acceptance.base.decide_by_machine` of it
        is the test's ``decide`` (exactly :func:`run_sequential_test` between
        ``prepare`` and ``conclude``).
    """

    def start(rng_key, model: Model, position, proposed, log_ratio_offset, cache) -> SequentialTestState:
        context, order_key, skip = prepare(rng_key, model, position, proposed, log_ratio_offset, cache)
        loop = rule(context, model, log_ratio_offset)
        initial = sequential_initial_state(model.num_data, loop, log_ratio_offset.dtype, skip)
        return SequentialTestState(context, permutation_keys(order_key), initial)

    def advance(test_state: SequentialTestState, model: Model, position, proposed, log_ratio_offset, cache):
        loop = rule(test_state.context, model, log_ratio_offset)
        state = sequential_chunk(
            test_state.round_keys, test_state.state, model, position, proposed, loop, log_ratio_offset.dtype
        )
        return test_state._replace(state=state)

    def done(test_state: SequentialTestState) -> jax.Array:
        return test_state.state.done

    def finish(test_state: SequentialTestState, model: Model, position, proposed, log_ratio_offset, cache) -> Decision:
        return conclude(test_state.context, test_state.state, model, position, proposed, log_ratio_offset, cache)

    return StepMachine(start, advance, done, finish, idle_when_done=True, start_is_full_pass=start_is_full_pass)


def machine_test(machine: StepMachine, init, name: str, **fields) -> AcceptanceTest:
    """An :class:`~tallmcmc.acceptance.base.AcceptanceTest` whose ``decide`` runs ``machine``."""
    return AcceptanceTest(init, decide_by_machine(machine), name, machine=machine, **fields)


def full_data_log_ratios(model: Model, position: Position, proposed: Position) -> jax.Array:
    """All ``N`` tempered per-datum log ratios (a full pass over the data)."""
    return model.log_likelihood_ratios(position, proposed, model.data)


def checked_batch_size(batch_size) -> int:
    """``batch_size`` as an ``int`` ≥ 2, or a ``ValueError`` naming it."""
    return integer_at_least(batch_size, "batch_size", 2, "a sample variance needs two points")


def minibatch_test_init(batch_size: int) -> Callable[[Model, Position], tuple]:
    """The ``init`` of a minibatch test: checks ``batch_size <= N`` before sampling, keeps no cache."""

    def init(model: Model, position: Position) -> tuple:
        if batch_size > model.num_data:
            raise ValueError(
                f"batch_size = {batch_size} exceeds the number of data points N = {model.num_data}; "
                "use a smaller batch_size or a full-data test"
            )
        return ()

    return init


def metropolis_threshold(rng_key: jax.Array, log_ratio_offset: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The key contract of the Metropolis-type sequential tests (AustereMH, MHSubLhd).

    ``u`` is drawn from the first key of ``jax.random.split(rng_key)`` and the
    order of the data from the second, so that a test which needs μ₀ before
    its sequential loop (AustereMH(nc)) sees the same ``u`` as the loop.

    Returns
    -------
    (log_u, threshold, order_key)
        ``threshold = log u − log_ratio_offset`` is N·μ₀: accept iff the
        estimate of Σᵢ lᵢ exceeds it.
    """
    uniform_key, order_key = jax.random.split(rng_key)
    log_u = jnp.log(jax.random.uniform(uniform_key, dtype=log_ratio_offset.dtype))
    return log_u, log_u - log_ratio_offset, order_key


def estimated_log_ratio(state: SequentialState, num_data: int, log_ratio_offset: jax.Array) -> jax.Array:
    """Δ* = N·(mean of the lᵢ seen) + the data-free part of Δ."""
    return float(num_data) * state.mean + log_ratio_offset


def sequential_decision(
    state: SequentialState,
    num_data: int,
    estimate: jax.Array,
    accepted: jax.Array,
    cache,
    *,
    variance: jax.Array,
    error_bound: jax.Array,
    extra_data_used: jax.Array | int = 0,
    non_finite: jax.Array | bool = False,
) -> Decision:
    """The epilogue every growing-minibatch test shares.

    A non-finite Δ* (or a non-finite loop) rejects; the reported variance is 0
    where it means nothing (all N points used, or fewer than two seen);
    ``data_used`` adds ``extra_data_used`` (e.g. a full pass for a range
    bound) to the test's own ``state.count``, which ``data_used_by_test``
    reports alone.
    """
    full = state.count >= num_data
    bad = state.non_finite | is_bad(estimate) | non_finite
    info = info_for(
        estimate,
        state.count + extra_data_used,
        data_used_by_test=state.count,
        variance=jnp.where(full | (state.count < 2), 0.0, variance),
        error_bound=error_bound,
        used_full_data=full,
        non_finite=bad,
    )
    return Decision(accepted & ~bad, cache, info)


#: Tests that read every residual in a full pass of their own (``model.log_likelihood_ratios`` over all rows), where a
#: control variate's outlying rows would be counted twice: they refuse one (:func:`with_control_variate`).
_FULL_PASS_TESTS = ("austere_adaptive", "confidence_sampler")


def with_control_variate(test: AcceptanceTest, control_variate) -> AcceptanceTest:
    """``test`` run on control-variate residuals instead of the raw per-datum log ratios.

    The test sees :meth:`ControlVariate.residual_model` in place of the model,
    so everything it computes from the lᵢ (the estimate, its variance, the
    finite-population factor, range and error bounds, any full-data fallback)
    is computed from the residuals rᵢ, and the exact proxy sum
    (1/K) Σᵢ [qᵢ(θ′) − qᵢ(θ)] joins the data-free part of Δ. A control variate
    with outlying rows (:mod:`tallmcmc.outlying_rows`) has their residuals
    summed exactly there too, at m more data points per step, while the
    minibatch sees 0 for them. ``None`` returns ``test`` unchanged.
    """
    if control_variate is None:
        return test
    if not isinstance(control_variate, ControlVariate):
        raise TypeError(
            "control_variate must come from tallmcmc.taylor_control_variate(model, center); "
            f"got {type(control_variate).__name__}"
        )
    outlying = control_variate.num_outlying
    if outlying and test.name in _FULL_PASS_TESTS:
        raise ValueError(
            f"control_variate: {test.name} reads every residual in full passes, which would count the control "
            "variate's outlying rows twice; use it with a control variate without outlying rows (outlying_rows=None), "
            "or use minibatch_barker or minibatch_penalty"
        )

    def init(model: Model, position: Position):
        control_variate.check_model(model)
        return test.init(model, position)

    def proxy_of(residuals, position, proposed, log_ratio_offset):
        proxy = control_variate.proxy_log_ratio(position, proposed).astype(log_ratio_offset.dtype)
        if not outlying:
            return proxy
        exact = residuals.outlying_log_ratio(position, proposed).astype(log_ratio_offset.dtype)
        # a proposal the prior rules out (offset −inf) is rejected whatever the rows say: no NaN from them
        return proxy + jnp.where(jnp.isfinite(log_ratio_offset), exact, jnp.zeros((), exact.dtype))

    def counted(decision: Decision) -> Decision:
        if not outlying:
            return decision
        info = decision.info
        return decision._replace(info=info._replace(data_used=info.data_used + jnp.int32(outlying)))

    inner = test.machine
    if inner is None or getattr(test.decide, "machine", None) is not inner:

        def decide(rng_key, model: Model, position, proposed, log_ratio_offset, cache):
            residuals = control_variate.residual_model(model)
            proxy = proxy_of(residuals, position, proposed, log_ratio_offset)
            return counted(test.decide(rng_key, residuals, position, proposed, log_ratio_offset + proxy, cache))

        return test._replace(
            init=init, decide=decide, name=f"{test.name}_cv", setup=test.setup + (control_variate,), machine=None
        )

    # the machine's state carries the proxy sum, so that advancing a chunk does not recompute it
    def start(rng_key, model: Model, position, proposed, log_ratio_offset, cache):
        residuals = control_variate.residual_model(model)
        proxy = proxy_of(residuals, position, proposed, log_ratio_offset)
        return proxy, inner.start(rng_key, residuals, position, proposed, log_ratio_offset + proxy, cache)

    def advance(test_state, model: Model, position, proposed, log_ratio_offset, cache):
        proxy, state = test_state
        residuals = control_variate.residual_model(model)
        return proxy, inner.advance(state, residuals, position, proposed, log_ratio_offset + proxy, cache)

    def done(test_state):
        return inner.done(test_state[1])

    def finish(test_state, model: Model, position, proposed, log_ratio_offset, cache):
        proxy, state = test_state
        residuals = control_variate.residual_model(model)
        return counted(inner.finish(state, residuals, position, proposed, log_ratio_offset + proxy, cache))

    machine = StepMachine(
        start, advance, done, finish, idle_when_done=inner.idle_when_done, start_is_full_pass=inner.start_is_full_pass
    )
    return test._replace(
        init=init,
        decide=decide_by_machine(machine),
        name=f"{test.name}_cv",
        setup=test.setup + (control_variate,),
        machine=machine,
    )
