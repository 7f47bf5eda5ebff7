"""A Metropolis–Hastings kernel assembled from a proposal and an acceptance test.

The BlackJAX shape: :func:`build_kernel` returns pure ``init(position)`` and
``step(rng_key, state) -> (state, info)`` functions, jit- and vmap-able, with
:class:`MHState` and :class:`MHInfo` named tuples.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from tallmcmc.acceptance.base import AcceptanceInfo, AcceptanceTest, Decision
from tallmcmc.model import Model, Position
from tallmcmc.proposals.base import Proposal


class MHState(NamedTuple):
    """State of one chain: the position, its log-prior, the test's cache and the proposal's own state.

    ``proposal_state`` is ``()`` unless the proposal keeps a state between
    steps (``Proposal.init_state``; e.g. the persistent momentum of
    :func:`tallmcmc.sghmc`).
    """

    position: Position
    log_prior: jax.Array
    cache: Any
    proposal_state: Any = ()


MHInfo = NamedTuple(
    "MHInfo",
    [("accepted", jax.Array), *AcceptanceInfo.__annotations__.items(), ("proxy_acceptance", jax.Array)],
)
MHInfo.__doc__ = """What one step did: ``accepted``, the test's :class:`~tallmcmc.acceptance.base.AcceptanceInfo` fields, ``proxy_acceptance``.

``data_used`` counts everything touched this step: the test's data plus any
the proposal used; ``non_finite`` also flags a NaN prior or proposal ratio
that forced a rejection. ``proxy_acceptance`` is min(1, e^{r}) for the
proposal's data-free proxy log ratio r (:class:`tallmcmc.proposals.base.Proposed`),
NaN for a proposal without a proxy; warm-up adapts proxy proposals on it.
"""


class Kernel(NamedTuple):
    init: Callable[[Position], MHState]
    step: Callable[[jax.Array, MHState], tuple[MHState, MHInfo]]


class ProposedStep(NamedTuple):
    """A step's proposal before the test: θ′, its log-prior, the data-free part of Δ and what the proposal used."""

    position: Position
    log_prior: jax.Array
    offset: jax.Array  # log p₀(θ′) − log p₀(θ) + log q(θ|θ′) − log q(θ′|θ); −inf where that is NaN
    nan_offset: jax.Array
    data_used: jax.Array
    proxy_acceptance: jax.Array  # min(1, e^{proxy log ratio}); NaN without a proxy
    accepted_state: Any = ()  # the proposal's state after the step if θ′ is accepted
    rejected_state: Any = ()  # ... and if it is rejected


def propose_step(
    model: Model, proposal: Proposal, rng_key: jax.Array, state: MHState
) -> tuple[jax.Array, ProposedStep]:
    """The part of a step before the acceptance test: ``(test_key, ProposedStep)``.

    Shared by :func:`build_kernel`'s ``step`` and the chain-asynchronous
    driver (:func:`tallmcmc.sampling.asynchronous.step_parts`), so that both make
    the same draws.
    """
    proposal_key, test_key = jax.random.split(rng_key)
    if proposal.init_state is None:
        proposed = proposal.propose(proposal_key, state.position, model)
        accepted_state = rejected_state = state.proposal_state
    else:
        proposed = proposal.propose(proposal_key, state.position, model, state.proposal_state)
        accepted_state, rejected_state = proposed.accepted_state, proposed.rejected_state
    log_prior = jnp.asarray(model.log_prior(proposed.position), state.log_prior.dtype)
    offset = log_prior - state.log_prior + proposed.log_proposal_ratio.astype(state.log_prior.dtype)
    # a NaN prior or proposal ratio can never be accepted; −inf is a plain rejection
    nan_offset = jnp.isnan(offset)
    offset = jnp.where(nan_offset, -jnp.inf, offset)
    dtype = state.log_prior.dtype
    if proposed.proxy_log_ratio is None:
        proxy_acceptance = jnp.full((), jnp.nan, dtype)
    else:  # a NaN ratio (a diverging trajectory) is a certain proxy rejection
        proxy_ratio = jnp.asarray(proposed.proxy_log_ratio, dtype)
        proxy_acceptance = jnp.where(jnp.isnan(proxy_ratio), 0.0, jnp.exp(jnp.minimum(proxy_ratio, 0.0)))
    return test_key, ProposedStep(
        proposed.position,
        log_prior,
        offset,
        nan_offset,
        jnp.asarray(proposed.data_used),
        proxy_acceptance,
        accepted_state,
        rejected_state,
    )


def conclude_step(
    test: AcceptanceTest, state: MHState, proposed: ProposedStep, decision: Decision
) -> tuple[MHState, MHInfo]:
    """The part of a step after the acceptance test: accept or reject, and the step's :class:`MHInfo`."""
    accepted = decision.accepted

    def choose(new, old):
        return jnp.where(accepted, new, old)

    new_state = MHState(
        jax.tree_util.tree_map(choose, proposed.position, state.position),
        choose(proposed.log_prior, state.log_prior),
        decision.cache if test.keeps_cache_on_reject else jax.tree_util.tree_map(choose, decision.cache, state.cache),
        jax.tree_util.tree_map(choose, proposed.accepted_state, proposed.rejected_state),
    )
    test_info = decision.info._replace(
        data_used=decision.info.data_used + proposed.data_used,
        # a NaN ratio that forced a rejection (e.g. an SGLD proposal under a real test) is flagged too
        non_finite=decision.info.non_finite | jnp.isnan(proposed.log_prior) | (proposed.nan_offset & ~accepted),
    )
    return new_state, MHInfo(accepted, *test_info, proposed.proxy_acceptance)


def build_kernel(model: Model, proposal: Proposal, test: AcceptanceTest) -> Kernel:
    """Assemble a Metropolis–Hastings kernel.

    Parameters
    ----------
    model
        The tempered target.
    proposal
        How θ′ is drawn (e.g. :func:`tallmcmc.random_walk`).
    test
        The acceptance rule (e.g. :func:`tallmcmc.minibatch_barker`).

    Returns
    -------
    Kernel
        ``init(position) -> MHState`` and ``step(rng_key, state) -> (MHState, MHInfo)``.
    """

    def init(position: Position) -> MHState:
        position = jax.tree_util.tree_map(jnp.asarray, position)
        proposal_state = () if proposal.init_state is None else proposal.init_state(position)
        return MHState(position, jnp.asarray(model.log_prior(position)), test.init(model, position), proposal_state)

    def step(rng_key: jax.Array, state: MHState) -> tuple[MHState, MHInfo]:
        test_key, proposed = propose_step(model, proposal, rng_key, state)
        decision = test.decide(test_key, model, state.position, proposed.position, proposed.offset, state.cache)
        return conclude_step(test, state, proposed, decision)

    return Kernel(init, step)
