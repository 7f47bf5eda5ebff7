"""Langevin proposals: full-data (MALA) and stochastic-gradient (SGLD).

Both discretise the overdamped Langevin diffusion of the tempered posterior
``π(θ) ∝ p₀(θ) Π p(xᵢ|θ)^(1/K)`` with step ``ε``:

.. math:: θ′ = θ + \\tfrac{ε}{2} g(θ) + \\sqrt{ε}\\, ξ, \\qquad ξ \\sim N(0, I),

with ``g = ∇ log π`` (:func:`langevin`) or its minibatch estimate
(:func:`stochastic_gradient_langevin`).

* :func:`langevin` with :func:`tallmcmc.exact_metropolis` is the
  Metropolis-adjusted Langevin algorithm (MALA, Roberts & Tweedie 1996): its
  Gaussian proposal density is known, and so is the exact log proposal ratio.
* :func:`stochastic_gradient_langevin` with :func:`tallmcmc.always_accept` is
  SGLD (Welling & Teh 2011) at constant step size: no correction, a biased
  chain whose bias grows with ``ε``. Its proposal density depends on the
  minibatch drawn, so no exact log proposal ratio exists from one minibatch;
  the proposal reports ``NaN`` for it. The kernel treats a NaN ratio as a
  rejection and flags the step ``non_finite``, so pairing SGLD with a real
  Metropolis–Hastings test gives a chain that never moves and a warning from
  :func:`tallmcmc.sample`, never a silently wrong chain.

Positions are arbitrary pytrees (flattened with
:func:`jax.flatten_util.ravel_pytree`); gradients come from :func:`jax.grad`.

References
----------
.. [1] Welling, M. and Teh, Y. W. (2011). Bayesian learning via stochastic
   gradient Langevin dynamics. ICML 2011, Equation (4).
.. [2] Roberts, G. O. and Tweedie, R. L. (1996). Exponential convergence of
   Langevin distributions and their discrete approximations. Bernoulli 2(4).
.. [3] Gorham, J. and Mackey, L. (2015). Measuring sample quality with
   Stein's method. NeurIPS 28, Section 5.3.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from tallmcmc._checks import integer_at_least, positive_finite
from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices
from tallmcmc.model import Model, Position
from tallmcmc.proposals.base import Proposal, Proposed, tunable

__all__ = ["full_data_score", "langevin", "stochastic_gradient_langevin"]


def _check_step_size(step_size: float) -> float:
    return positive_finite(step_size, "step_size", "the ε of θ′ = θ + (ε/2)g + N(0, εI)")


def full_data_score(model: Model, position: Position) -> jax.Array:
    """``∇ log π(θ)`` of the tempered posterior, flattened (touches all N points).

    Parameters
    ----------
    model
        The tempered target.
    position
        θ (a pytree).

    Returns
    -------
    jax.Array
        The gradient of :meth:`tallmcmc.Model.log_density` at ``position``,
        flattened in pytree order.
    """
    return ravel_pytree(jax.grad(model.log_density)(position))[0]


def langevin(step_size: float) -> Proposal:
    """Langevin proposal with the full-data gradient (MALA with an exact test).

    θ′ = θ + (ε/2)∇log π(θ) + N(0, εI), with the exact log proposal ratio

    .. math:: \\log q(θ|θ′) − \\log q(θ′|θ)
       = \\frac{\\lVert θ′ − θ − \\tfrac{ε}{2} g(θ)\\rVert^2
              − \\lVert θ − θ′ − \\tfrac{ε}{2} g(θ′)\\rVert^2}{2ε}.

    Parameters
    ----------
    step_size
        ε > 0 (the variance of the injected noise).

    Returns
    -------
    Proposal
        ``data_used`` = 2N per step: the full-data gradients at θ and θ′
        (the gradient at θ is recomputed, not cached).

    References
    ----------
    .. [1] Roberts, G. O. and Tweedie, R. L. (1996). Exponential convergence of
       Langevin distributions and their discrete approximations. Bernoulli 2(4).
    """
    step = _check_step_size(step_size)

    def make(multiplier):
        def propose(rng_key: jax.Array, position: Position, model: Model) -> Proposed:
            flat, unravel = ravel_pytree(position)
            epsilon = jnp.asarray(step, flat.dtype)
            if multiplier is not None:
                epsilon = epsilon * multiplier
            gradient = full_data_score(model, position).astype(flat.dtype)
            noise = jax.random.normal(rng_key, flat.shape, flat.dtype)
            proposed_flat = flat + 0.5 * epsilon * gradient + jnp.sqrt(epsilon) * noise
            proposed = unravel(proposed_flat)
            proposed_gradient = full_data_score(model, proposed).astype(flat.dtype)
            forward = proposed_flat - flat - 0.5 * epsilon * gradient  # = √ε ξ
            backward = flat - proposed_flat - 0.5 * epsilon * proposed_gradient
            log_ratio = (jnp.sum(forward**2) - jnp.sum(backward**2)) / (2.0 * epsilon)
            return Proposed(proposed, log_ratio, jnp.asarray(2 * model.num_data, jnp.int32))

        return propose

    return tunable(make, f"langevin(step_size={step:g})", metropolis_target=0.574)


def stochastic_gradient_langevin(step_size: float, batch_size: int) -> Proposal:
    """Stochastic-gradient Langevin proposal (SGLD with :func:`tallmcmc.always_accept`).

    θ′ = θ + (ε/2)ĝ(θ) + N(0, εI) with the unbiased minibatch estimate

    .. math:: ĝ(θ) = ∇\\log p_0(θ) + \\frac{N}{bK} \\sum_{i ∈ B} ∇\\log p(x_i|θ)

    over a batch ``B`` of ``b`` points drawn without replacement
    (:mod:`tallmcmc.acceptance.subsample`).

    Parameters
    ----------
    step_size
        ε > 0, held constant (the Gorham–Mackey setting, not the decreasing
        schedule of Welling & Teh).
    batch_size
        b, points per gradient estimate (``1 <= b <= N``).

    Returns
    -------
    Proposal
        ``data_used`` = b per step. The log proposal ratio is ``NaN``: the
        density of θ′ given θ is a mixture over all minibatches, which one
        minibatch cannot evaluate. Use it with
        :func:`tallmcmc.always_accept` (plain SGLD). With any real test the
        kernel rejects every proposal and marks the steps ``non_finite``,
        and :func:`tallmcmc.sample` warns.

    References
    ----------
    .. [1] Welling, M. and Teh, Y. W. (2011). Bayesian learning via stochastic
       gradient Langevin dynamics. ICML 2011.
    .. [2] Gorham, J. and Mackey, L. (2015). Measuring sample quality with
       Stein's method. NeurIPS 28, Section 5.3.
    """
    step = _check_step_size(step_size)
    batch = integer_at_least(batch_size, "batch_size")

    def propose(rng_key: jax.Array, position: Position, model: Model) -> Proposed:
        num_data = model.num_data
        if batch > num_data:
            raise ValueError(f"batch_size = {batch} exceeds the number of data points N = {num_data}")
        flat, unravel = ravel_pytree(position)
        epsilon = jnp.asarray(step, flat.dtype)
        batch_key, noise_key = jax.random.split(rng_key)
        indices = permuted_indices(permutation_keys(batch_key), jnp.arange(batch), num_data)
        minibatch = model.data_at(indices)
        scale = num_data / (batch * model.temperature)

        def estimate(theta):
            likelihood = jnp.sum(model.per_datum_log_likelihood(theta, minibatch))
            return model.log_prior(theta) + scale * likelihood

        gradient = ravel_pytree(jax.grad(estimate)(position))[0].astype(flat.dtype)
        noise = jax.random.normal(noise_key, flat.shape, flat.dtype)
        proposed = unravel(flat + 0.5 * epsilon * gradient + jnp.sqrt(epsilon) * noise)
        return Proposed(proposed, jnp.full((), jnp.nan, flat.dtype), jnp.asarray(batch, jnp.int32))

    return Proposal(propose, f"stochastic_gradient_langevin(step_size={step:g}, batch_size={batch})")
