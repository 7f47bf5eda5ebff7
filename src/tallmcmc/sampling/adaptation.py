"""Dual averaging of a chain's step-size factor during warm-up (Hoffman & Gelman 2014, Algorithm 5).

Each chain keeps ``(log_factor, log_factor_bar, h_bar)``: after its step
``t`` (0-based) with acceptance statistic ``a``,

    h̄ ← (1 − w) h̄ + w (target − a),   w = 1/(t + 1 + t₀),
    log ε ← μ − √(t + 1)/γ · h̄,
    log ε̄ ← η log ε + (1 − η) log ε̄,   η = (t + 1)^(−κ),

and its next step uses the factor exp(log ε); after warm-up the chain keeps
exp(log ε̄). Both drivers of :func:`tallmcmc.sample` call :func:`update`, so
their warm-ups give the same factors.

The statistic (:func:`statistic`) is the step's acceptance indicator, except
for a proposal that reports a data-free proxy ratio
(``Proposal.proxy_target`` set, e.g. the proxy Hamiltonian and Langevin
moves): then it is that move's acceptance probability on the proxy,
min(1, e^{proxy log ratio}). A Barker-type test accepts a near-exact
proposal about half the time whatever its step size, so its acceptance cannot
say that a step is too long; the proxy's can (``docs/warmup.md``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc._device import to_device

GAMMA, T0, KAPPA = 0.05, 10.0, 0.75
#: μ = log 10 (rounded to float32, as the warm-up computes in float32): a bias towards larger
#: steps than the proposal's own, as in NUTS. NumPy, not JAX, so that importing tallmcmc does not
#: start JAX's backend (``tallmcmc.distributed.initialize`` must run before it starts).
MU = float(np.float32(np.log(10.0)))


class DualAveraging(NamedTuple):
    """Per chain (leading axis): the current log factor, its running average, and h̄."""

    log_factor: jax.Array
    log_factor_bar: jax.Array
    h_bar: jax.Array

    @classmethod
    def start(cls, num_chains: int) -> DualAveraging:
        zeros = to_device(np.zeros((num_chains,), np.float32))
        return cls(zeros, zeros, zeros)


def adapts_on_proxy(proposal) -> bool:
    """Whether warm-up adapts ``proposal`` on its proxy acceptance (it reports one) rather than the test's."""
    return proposal.proxy_target is not None


def statistic(info, on_proxy: bool) -> jax.Array:
    """What dual averaging drives towards the target: the proxy acceptance or the acceptance indicator."""
    return info.proxy_acceptance if on_proxy else info.accepted


def update(
    state: DualAveraging, step: jax.Array, accepted: jax.Array, target: float, largest: float | None = None
) -> DualAveraging:
    """The state after step ``step`` (0-based, per chain or shared) whose acceptance statistic is ``accepted``.

    ``accepted`` is the acceptance indicator (bool) or an acceptance probability (see :func:`statistic`).
    ``largest``: the factor is held at most this (``Proposal.max_step_factor``; ``None``: no limit).
    """
    dtype = state.log_factor.dtype
    count = step.astype(dtype) + 1.0
    weight = 1.0 / (count + T0)
    h_bar = (1.0 - weight) * state.h_bar + weight * (target - accepted.astype(dtype))
    log_factor = MU - jnp.sqrt(count) / GAMMA * h_bar
    if largest is not None:  # a factor beyond it no longer changes the move: hold it there
        log_factor = jnp.minimum(log_factor, jnp.asarray(np.log(largest), dtype))
    eta = count ** (-KAPPA)
    log_factor_bar = eta * log_factor + (1.0 - eta) * state.log_factor_bar
    return DualAveraging(log_factor, log_factor_bar, h_bar)
