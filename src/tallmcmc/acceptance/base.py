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

This module holds the types every test shares; each test lives in its own
module and returns an :class:`AcceptanceInfo`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

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
        The test's estimate of its own error (ε of Corollary 1 for the
        minibatch Barker test; 0 for exact tests).
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
