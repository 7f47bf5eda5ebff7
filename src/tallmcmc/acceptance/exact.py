"""The full-data tests (Metropolis, Barker) and the no-test rule (``always_accept``).

The full-data tests cache the current position's per-datum log-likelihoods and
evaluate only θ′ each step: N points per step, exact decisions.

Several chains (``vmap``) evaluate θ′ chain by chain on the CPU when there are
few of them (:data:`CHAIN_BY_CHAIN_MAX`): each chain's evaluation is traced
separately (a Python loop over the few chains) and the results stacked, so
every chain keeps the one-chain ``(N,)`` layout and XLA fuses the per-datum
work of all the chains into one loop split over the CPU's threads, instead of
evaluating the model vmapped over chains (an ``(N, chains)`` layout). Above
that many chains, and on accelerators, it is the ordinary vmapped evaluation.
The draws are the same either way. Why, with the measurements and the forms
tried before: ``docs/drivers.md``, "Full-data tests on a CPU: chain by chain".

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
from jax.custom_batching import custom_vmap

from tallmcmc.acceptance.base import AcceptanceTest, Decision, info_for, is_bad
from tallmcmc.model import Model, Position

#: Up to this many chains vmapped together, the CPU evaluates θ′ of a full-data test chain by chain
#: (one traced evaluation per chain, stacked); above it (and on accelerators) in one vmapped pass.
#: See the module docstring.
CHAIN_BY_CHAIN_MAX = 8


def _chain_by_chain(axis_size: int) -> bool:
    return 1 < axis_size <= CHAIN_BY_CHAIN_MAX and jax.default_backend() == "cpu"


def per_datum_log_likelihood(model: Model, position: Position) -> jax.Array:
    """``model.per_datum_log_likelihood(position)``, vmapped over few chains one chain at a time on the CPU.

    Unbatched it is exactly the model's method. Under ``vmap`` with the
    position batched and the data not, it evaluates each chain's position
    separately and stacks the values when :func:`_chain_by_chain` says so
    (same values, the one-chain memory layout, all threads), and the ordinary
    vmapped evaluation otherwise.
    """

    def plain(position, data):
        return model.per_datum_log_likelihood(position, data)

    evaluate = custom_vmap(plain)

    @evaluate.def_vmap
    def rule(axis_size, in_batched, position, data):
        position_batched, data_batched = in_batched
        positions_only = all(jax.tree_util.tree_leaves(position_batched)) and not any(
            jax.tree_util.tree_leaves(data_batched)
        )
        if positions_only and _chain_by_chain(axis_size):
            chains = [plain(_chain_of(position, chain), data) for chain in range(axis_size)]
            return jnp.stack(chains), True
        in_axes = jax.tree_util.tree_map(lambda batched: 0 if batched else None, (position_batched, data_batched))
        return jax.vmap(plain, in_axes=in_axes)(position, data), True

    return evaluate(position, model.data)


def _chain_of(position, chain: int):
    """Chain ``chain``'s slice of a chain-batched position."""
    return jax.tree_util.tree_map(lambda leaf: leaf[chain], position)


def _full_data_test(
    name: str, accept: Callable[[jax.Array, jax.Array], jax.Array], max_acceptance: float = 1.0
) -> AcceptanceTest:
    def init(model: Model, position: Position) -> jax.Array:
        return model.per_datum_log_likelihood(position)

    def decide(rng_key, model, position, proposed, log_ratio_offset, cache):
        new_cache = per_datum_log_likelihood(model, proposed)
        # per-datum differences first, then one sum: never a difference of two large sums
        delta = model.sum_over_data(new_cache - cache) / model.temperature + log_ratio_offset
        delta = delta.astype(log_ratio_offset.dtype)
        bad = is_bad(delta)
        accepted = accept(rng_key, delta) & ~bad
        info = info_for(delta, model.num_data, used_full_data=True, non_finite=bad)
        return Decision(accepted, new_cache, info)

    return AcceptanceTest(init, decide, name, max_acceptance=max_acceptance)


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

    return _full_data_test("exact_barker", accept, max_acceptance=0.5)


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
