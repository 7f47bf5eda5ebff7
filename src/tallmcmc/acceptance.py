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

This module holds the types and the two full-data tests; the minibatch tests
live in their own modules and return the same :class:`TestInfo`.

References
----------
.. [1] Metropolis, N. et al. (1953). Equation of state calculations by fast
   computing machines. J. Chem. Phys. 21(6).
.. [2] Hastings, W. K. (1970). Monte Carlo sampling methods using Markov
   chains and their applications. Biometrika 57(1).
.. [3] Barker, A. A. (1965). Monte Carlo calculations of the radial
   distribution functions for a proton-electron plasma. Aust. J. Phys. 18(2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from tallmcmc.model import Model, Position


class TestInfo(NamedTuple):
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
    info: TestInfo


class AcceptanceTest(NamedTuple):
    """A swappable acceptance rule (see the module docstring)."""

    init: Callable[[Model, Position], Any]
    decide: Callable[[jax.Array, Model, Position, Position, jax.Array, Any], Decision]
    name: str


def info_for(
    statistic: jax.Array,
    data_used: jax.Array,
    *,
    data_used_by_test: jax.Array | None = None,
    variance: jax.Array | None = None,
    error_bound: jax.Array | None = None,
    used_full_data: jax.Array | bool = False,
    non_finite: jax.Array | bool = False,
) -> TestInfo:
    """Build a :class:`TestInfo` with zero defaults (the dtype of ``statistic``)."""
    zero = jnp.zeros((), statistic.dtype)
    data_used = jnp.asarray(data_used, jnp.int32)
    return TestInfo(
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


def _full_data_test(name: str, accept: Callable[[jax.Array, jax.Array], jax.Array]) -> AcceptanceTest:
    def init(model: Model, position: Position) -> jax.Array:
        return model.per_datum_log_likelihood(position)

    def decide(rng_key, model, position, proposed, log_ratio_offset, cache):
        new_cache = model.per_datum_log_likelihood(proposed)
        # per-datum differences first, then one sum: never a difference of two large sums
        delta = jnp.sum(new_cache - cache) / model.temperature + log_ratio_offset
        delta = delta.astype(log_ratio_offset.dtype)
        bad = is_bad(delta)
        accepted = accept(rng_key, delta) & ~bad
        info = info_for(delta, model.num_data, used_full_data=True, non_finite=bad)
        return Decision(accepted, new_cache, info)

    return AcceptanceTest(init, decide, name)


def exact_metropolis() -> AcceptanceTest:
    """The full-data Metropolis–Hastings test: accept iff log u < Δ, u ~ U(0, 1).

    Touches all N points per step (the log-likelihood of the current state is
    cached per datum, so only θ′ is evaluated).
    """

    def accept(rng_key, delta):
        return jnp.log(jax.random.uniform(rng_key, dtype=delta.dtype)) < delta

    return _full_data_test("exact_metropolis", accept)


def exact_barker() -> AcceptanceTest:
    """The full-data Barker test: accept iff Δ + X_log > 0, X_log ~ Logistic(0, 1).

    Accepts with probability 1/(1 + e^(−Δ)). Touches all N points per step
    (the current state's per-datum log-likelihoods are cached).
    """

    def accept(rng_key, delta):
        return delta + jax.random.logistic(rng_key, dtype=delta.dtype) > 0

    return _full_data_test("exact_barker", accept)


def always_accept() -> AcceptanceTest:
    """No test: every proposal is accepted (plain, uncorrected dynamics such as SGLD).

    Pair it with :func:`tallmcmc.stochastic_gradient_langevin` for stochastic
    gradient Langevin dynamics at constant step size. The chain is then
    biased: its stationary law is not the posterior, increasingly so as the
    step grows (Welling & Teh 2011; Gorham & Mackey 2015, Section 5.3).

    Returns
    -------
    AcceptanceTest
        Touches no data (``data_used`` 0); its ``statistic`` is 0 (no Δ is
        computed) and it ignores the log proposal ratio, so a proposal
        without one (ratio ``NaN``) is fine here.

    References
    ----------
    .. [1] Welling, M. and Teh, Y. W. (2011). Bayesian learning via stochastic
       gradient Langevin dynamics. ICML 2011.
    """

    def init(model: Model, position: Position) -> tuple:
        return ()

    def decide(rng_key, model, position, proposed, log_ratio_offset, cache):
        statistic = jnp.zeros((), log_ratio_offset.dtype)
        return Decision(jnp.asarray(True), cache, info_for(statistic, 0))

    return AcceptanceTest(init, decide, "always_accept")
