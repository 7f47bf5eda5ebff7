"""Proposals: how a candidate θ′ is drawn from the current state θ.

A proposal is a :class:`Proposal` holding one pure function
``propose(rng_key, position, model) -> Proposed``. It returns the candidate,
the log proposal ratio ``log q(θ | θ′) − log q(θ′ | θ)`` that the acceptance
test adds to the log target ratio (zero for symmetric proposals), and the
number of data points it touched (zero unless it uses gradients of the
likelihood), so that cost is counted honestly.

A proposal that moves on a data-free *proxy* of the target (the proxy
proposals of :mod:`tallmcmc.proposals.proxy`) also reports the log
Metropolis ratio of its move on that proxy, ``proxy_log_ratio``. It says how
accurately the move follows the proxy (for a Hamiltonian move, minus the
energy error), whatever the acceptance test does with the move, so warm-up
adapts the step size on it (towards ``Proposal.proxy_target``) rather than on
the test's acceptance, which a Barker-type test keeps near ½ for any
near-exact proposal and so cannot signal a step that is too long.

A proposal may keep a *state* of its own from one step to the next (a
momentum that persists, as in SGHMC or a partial momentum refresh). Such a
proposal sets ``Proposal.init_state(position) -> state``; its ``propose``
then takes the state as a fourth argument, ``propose(rng_key, position,
model, state)``, and reports in ``Proposed.accepted_state`` and
``Proposed.rejected_state`` what the state becomes if the test accepts or
rejects the candidate. The kernel keeps it in
:attr:`tallmcmc.MHState.proposal_state` (``()`` for a proposal without one),
so both drivers, warm-up and checkpoints carry it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from tallmcmc.model import Model, Position


class Proposed(NamedTuple):
    """A candidate and what the test needs to know about how it was drawn."""

    position: Position
    log_proposal_ratio: jax.Array  # log q(θ|θ′) − log q(θ′|θ)
    data_used: jax.Array  # data points the proposal touched
    #: log π̃(θ′) − log π̃(θ) + log q(θ|θ′) − log q(θ′|θ) on the proposal's data-free proxy π̃ (``None``: no proxy)
    proxy_log_ratio: Any = None
    #: A stateful proposal's state after the step if the candidate is accepted / rejected (``None``: no state)
    accepted_state: Any = None
    rejected_state: Any = None


class Proposal(NamedTuple):
    """A proposal mechanism (see the module docstring)."""

    propose: Callable[[jax.Array, Position, Model], Proposed]
    name: str = "proposal"
    setup: tuple = ()  # one-off computations it relies on (a mode, a control variate), each with a ``data_used``
    tune: Callable[[jax.Array], Proposal] | None = None  # the same proposal with its step size times a (traced) factor
    metropolis_target: float = 0.234  # acceptance rate warm-up aims at under a Metropolis-type test
    #: ``with_covariance(cov)``: the same kind of move shaped by a (d, d) covariance estimate of the
    #: target (a random walk with covariance 2.38²/d · cov); used by ``sample(adapt_covariance=True)``.
    with_covariance: Callable[[np.ndarray], Proposal] | None = None
    #: The proxy acceptance rate E[min(1, e^{proxy_log_ratio})] warm-up aims at, for a proposal that reports
    #: ``Proposed.proxy_log_ratio``; ``None`` for one that does not (warm-up then adapts on the test's acceptance).
    proxy_target: float | None = None
    #: ``init_state(position) -> state`` for a proposal that keeps a state between steps (``propose`` then takes
    #: it as a fourth argument; see the module docstring); ``None`` for a stateless one.
    init_state: Callable[[Position], Any] | None = None
    #: ``False`` for a proposal whose ``log_proposal_ratio`` is not the true one (SGHMC's, taken as 0):
    #: :func:`tallmcmc.sample` runs it under a real test only with ``allow_inexact_proposal=True``.
    exact_ratio: bool = True
    #: ``state_problem(final_states) -> str | None``: what the chains' final proposal states (on the host, leading
    #: axis chain) say went wrong, for :func:`tallmcmc.sample` to warn about; ``None`` for a proposal without one.
    state_problem: Callable[[Any], str | None] | None = None
    #: The largest step-size factor that still changes the move (a Hamiltonian move's step stops growing at its
    #: integration time); warm-up's adaptation stops there, so a move that is accurate at every step cannot drive
    #: the factor without bound. ``None``: no limit.
    max_step_factor: float | None = None


def tunable(
    make: Callable[[Any], Callable],
    name: str,
    *,
    setup: tuple = (),
    metropolis_target: float = 0.234,
    with_covariance: Callable[[np.ndarray], Proposal] | None = None,
    proxy_target: float | None = None,
    init_state: Callable[[Position], Any] | None = None,
    exact_ratio: bool = True,
    state_problem: Callable[[Any], str | None] | None = None,
    max_step_factor: float | None = None,
) -> Proposal:
    """A :class:`Proposal` whose step size warm-up can adapt.

    ``make(factor)`` returns a ``propose`` function whose step size is the
    factory's times ``factor`` (a possibly traced scalar); ``make(None)`` the
    untouched one.
    """
    return Proposal(
        make(None),
        name,
        setup,
        tune=lambda factor: Proposal(
            make(factor),
            name,
            setup,
            metropolis_target=metropolis_target,
            proxy_target=proxy_target,
            init_state=init_state,
            exact_ratio=exact_ratio,
            state_problem=state_problem,
            max_step_factor=max_step_factor,
        ),
        metropolis_target=metropolis_target,
        with_covariance=with_covariance,
        proxy_target=proxy_target,
        init_state=init_state,
        exact_ratio=exact_ratio,
        state_problem=state_problem,
        max_step_factor=max_step_factor,
    )
