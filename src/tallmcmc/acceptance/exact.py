"""The full-data tests (Metropolis, Barker) and the no-test rule (``always_accept``).

The full-data tests cache the current position's per-datum log-likelihoods and
evaluate only θ′ each step: N points per step, exact decisions.

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

import jax
import jax.numpy as jnp

from tallmcmc.acceptance.base import AcceptanceTest, Decision, info_for, is_bad
from tallmcmc.model import Model, Position


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
