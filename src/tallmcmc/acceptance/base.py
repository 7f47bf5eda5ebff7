"""Acceptance tests: the swappable rule that decides whether θ′ replaces θ.

An :class:`AcceptanceTest` is a pair of pure functions:

``init(model, position) -> cache``
    what the test keeps about the current state (the full-data tests keep
    the per-datum log-likelihoods of the current position; the minibatch
    tests keep nothing); validates the test's settings against the model
    so that impossible settings fail before sampling starts;
``decide(rng_key, model, position, proposed, log_ratio_offset, cache) -> Decision``
    where ``log_ratio_offset = log p₀(θ′) − log p₀(θ) + log q(θ|θ′) − log q(θ′|θ)``
    is the data-free part of the log acceptance ratio ``Δ``.

A test that grows a minibatch may also offer the same decision as a
:class:`StepMachine` (``start``, ``advance`` one chunk, ``done``, ``finish``),
which the chain-asynchronous driver (:mod:`tallmcmc.sampling.asynchronous`) uses
to let each chain of a batch start its next step as soon as its own test has
decided. Its ``decide`` is then :func:`decide_by_machine` of that machine (the
same code path, so both give the same draws); a test without one runs through
:func:`machine_of`'s one-shot wrapper.

This module holds the types every test shares; each test lives in its own
module and returns an :class:`AcceptanceInfo`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from tallmcmc.model import Model, Position


class AcceptanceInfo(NamedTuple):
    """What one acceptance test reports about one step.

    statistic
        The test's estimate of the log acceptance ratio Δ (exact Δ for the
        full-data tests, Δ* for the minibatch tests).
    data_used
        Every data point touched: each per-datum log-likelihood evaluation
        pair, including any full-data pass the test needs.
    data_used_by_test
        The points of the test's own (sequential) minibatch, as the papers'
        tables count them; equals ``data_used`` unless a full pass was made.
    variance
        Estimated variance s² of Δ* (0 for exact tests).
    error_bound
        The test's estimate of its own error; 0 for exact tests and for any
        step decided on all N points. For the minibatch Barker test, a bound
        on |P(accept) − 1/(1 + e^{−Δ})| from the standardised lᵢ it drew: the
        smaller of Novak's bound (Seita et al., Corollary 1) and the smoothing
        bound of :func:`~tallmcmc.acceptance.minibatch_barker.smoothed_error_bound`
        (README, "What ``error_bound`` means"). Other tests report their own
        quantity: the austerity tests the tail δ at the stage where they
        stopped, the confidence sampler the error budget Σδⱼ spent, TunaMH
        the largest bound-violation ratio (> 1) on a step that found its
        bound violated.
    used_full_data
        Whether the decision was made on all N points.
    non_finite
        Whether a non-finite Δ (NaN or +inf) was met; the proposal is then rejected.
    """

    statistic: jax.Array
    data_used: jax.Array
    data_used_by_test: jax.Array
    variance: jax.Array
    error_bound: jax.Array
    used_full_data: jax.Array
    non_finite: jax.Array


class Decision(NamedTuple):
    accepted: jax.Array
    cache: Any  # the cache for the proposed position (kept if accepted)
    info: AcceptanceInfo


class Workspace(NamedTuple):
    """Part of a ``test_state`` whose stale contents are never read.

    A test that writes values into ``values`` before it reads them (the
    minibatch Barker test's buffer of the first lᵢ, read only below the
    count seen) marks it so; a driver restarting a chain's step may then keep
    the old array instead of copying in the fresh one (the asynchronous driver
    does), with the same results.
    """

    values: jax.Array


def is_workspace(node: Any) -> bool:
    """Whether ``node`` is a :class:`Workspace` (for ``tree_map(..., is_leaf=is_workspace)``)."""
    return isinstance(node, Workspace)


class StepMachine(NamedTuple):
    """One decision of a test cut into chunks of work (see the module docstring).

    ``start(rng_key, model, position, proposed, log_ratio_offset, cache) -> test_state``
        everything before the first chunk (keys, thresholds, any full pass);
    ``advance(test_state, model, position, proposed, log_ratio_offset, cache) -> test_state``
        one chunk of data; called only while ``done`` is false, unless ``idle_when_done``
        says it returns a finished state unchanged;
    ``done(test_state) -> bool``
        whether the test has decided;
    ``finish(test_state, model, position, proposed, log_ratio_offset, cache) -> Decision``
        the decision from a finished ``test_state``.

    ``test_state`` is a pytree of arrays whose shapes do not depend on the
    step, so that a batch of chains at different stages can be advanced
    together under ``vmap``.
    """

    start: Callable[..., Any]
    advance: Callable[..., Any]
    done: Callable[[Any], jax.Array]
    finish: Callable[..., Decision]
    #: True if ``advance`` returns a finished ``test_state`` unchanged (a batched driver then
    #: need not mask the finished chains out of an advance).
    idle_when_done: bool = False
    #: True if ``start`` makes a full pass over the data (AustereMH(nc)'s μ and σ, the confidence
    #: sampler's range bound): a batched driver should then start only the chains that begin a
    #: step, one at a time, rather than every chain and keep a few.
    start_is_full_pass: bool = False


class AcceptanceTest(NamedTuple):
    """A swappable acceptance rule (see the module docstring)."""

    init: Callable[[Model, Position], Any]
    decide: Callable[[jax.Array, Model, Position, Position, jax.Array, Any], Decision]
    name: str
    setup: tuple = ()  # one-off computations it relies on (e.g. a control variate), each with a ``data_used``
    #: False: ``Decision.cache`` describes the proposed position and is kept only if it is accepted
    #: (the full-data tests' per-datum cache). True: it is the test's own running state (what the
    #: chain has learned so far, e.g. the minibatch Barker test's :class:`TailPool`) and is kept always.
    keeps_cache_on_reject: bool = False
    #: The same decision as a :class:`StepMachine`, or ``None``. A wrapper that replaces ``decide``
    #: must replace or drop it; :func:`machine_of` ignores a machine that ``decide`` was not built from.
    machine: StepMachine | None = None
    #: The acceptance rate the test tends to as proposals approach draws from the target itself: 1 for
    #: Metropolis-type tests, ½ for Barker-type tests (1/(1 + e^{−Δ}) is ½ at Δ = 0). Warm-up reads it to
    #: choose a reachable target (``sample``'s ``target_acceptance``).
    max_acceptance: float = 1.0


def decide_by_machine(machine: StepMachine) -> Callable[..., Decision]:
    """The ``decide`` of a :class:`StepMachine`: ``start``, ``advance`` while not ``done``, ``finish``."""

    def decide(rng_key, model: Model, position, proposed, log_ratio_offset, cache) -> Decision:
        state = machine.start(rng_key, model, position, proposed, log_ratio_offset, cache)
        state = lax.while_loop(
            lambda s: ~machine.done(s),
            lambda s: machine.advance(s, model, position, proposed, log_ratio_offset, cache),
            state,
        )
        return machine.finish(state, model, position, proposed, log_ratio_offset, cache)

    decide.machine = machine  # what machine_of checks
    return decide


def has_step_machine(test: AcceptanceTest) -> bool:
    """Whether ``test.decide`` was built from ``test.machine`` (a test that decides chunk by chunk)."""
    return test.machine is not None and getattr(test.decide, "machine", None) is test.machine


def machine_of(test: AcceptanceTest) -> StepMachine:
    """The test's :class:`StepMachine`, or a one-shot one that runs ``decide`` in ``start``.

    The one-shot machine (full-data tests, and any test without a machine of
    its own) keeps the :class:`Decision` as its state and is done at once, so
    a chain-asynchronous driver runs such a test in a single iteration. A
    ``test.machine`` that ``test.decide`` was not built from (a wrapper
    replaced ``decide`` only) is not trusted: the one-shot machine is used.
    """
    if has_step_machine(test):
        return test.machine

    def start(rng_key, model, position, proposed, log_ratio_offset, cache):
        return test.decide(rng_key, model, position, proposed, log_ratio_offset, cache)

    def advance(decision, model, position, proposed, log_ratio_offset, cache):
        return decision

    def done(decision):
        return jnp.ones((), bool)

    def finish(decision, model, position, proposed, log_ratio_offset, cache):
        return decision

    return StepMachine(start, advance, done, finish)


def info_for(
    statistic: jax.Array,
    data_used: jax.Array,
    *,
    data_used_by_test: jax.Array | None = None,
    variance: jax.Array | None = None,
    error_bound: jax.Array | None = None,
    used_full_data: jax.Array | bool = False,
    non_finite: jax.Array | bool = False,
) -> AcceptanceInfo:
    """Build a :class:`AcceptanceInfo` with zero defaults (the dtype of ``statistic``)."""
    zero = jnp.zeros((), statistic.dtype)
    data_used = jnp.asarray(data_used, jnp.int32)
    return AcceptanceInfo(
        statistic=statistic,
        data_used=data_used,
        data_used_by_test=data_used if data_used_by_test is None else jnp.asarray(data_used_by_test, jnp.int32),
        variance=zero if variance is None else jnp.asarray(variance, statistic.dtype),
        error_bound=zero if error_bound is None else jnp.asarray(error_bound, statistic.dtype),
        used_full_data=jnp.asarray(used_full_data, bool),
        non_finite=jnp.asarray(non_finite, bool),
    )


def is_bad(value: jax.Array) -> jax.Array:
    """NaN or +inf: a Δ no test can act on (−inf is a legitimate certain rejection)."""
    return jnp.isnan(value) | (value == jnp.inf)
