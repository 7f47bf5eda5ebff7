r"""Stochastic-gradient Hamiltonian Monte Carlo (SGHMC) as a proposal, with a momentum that persists.

Chen, Fox and Guestrin's (2014) simplified update (their Equation 15), the
proposer of Chen, Seita, Pan, Jiang and Canny's (2016) neural-network
experiment:

.. math:: v′ = (1 − α) v + η ĝ(θ) + N\bigl(0,\, 2(α − \hat β) η\bigr),
          \qquad θ′ = θ + v′,

where ĝ is the minibatch estimate of ∇ log π (minus ∇Ũ of the papers), α
the friction, η the step ("learning rate") and
:math:`\hat β = \tfrac12 η \hat V` the estimate of the noise that the
minibatch gradient itself injects, from the minibatch's empirical Fisher
information (the per-coordinate variance of the gradient estimate; Ahn,
Korattikara and Welling 2012). The velocity ``v`` lives in
:attr:`tallmcmc.MHState.proposal_state` and carries over from step to step.

SGHMC's proposal density is a mixture over minibatches and cannot be
evaluated, so a Metropolis–Hastings test on it — as the 2016 paper did — is a
*heuristic*: the log proposal ratio it hands the test is taken to be 0, and
the chain's stationary law is not the posterior. With
:func:`tallmcmc.always_accept` it is plain SGHMC (biased by the
discretisation, as SGLD is). :func:`tallmcmc.sample` runs it under any other
test only with ``allow_inexact_proposal=True``, records that on the result
and warns. :func:`tallmcmc.minibatch_hamiltonian` is the exact counterpart.

References
----------
.. [1] Chen, T., Fox, E. and Guestrin, C. (2014). Stochastic gradient
   Hamiltonian Monte Carlo. ICML 2014, Section 3.3 and Equation (15).
.. [2] Chen, H., Seita, D., Pan, X., Jiang, B. and Canny, J. (2016). An
   efficient minibatch acceptance test for Metropolis-Hastings. Appendix
   "Neural Network Experiment Details".
.. [3] Ahn, S., Korattikara, A. and Welling, M. (2012). Bayesian posterior
   sampling via stochastic gradient Fisher scoring. ICML 2012.
.. [4] Duchi, J., Hazan, E. and Singer, Y. (2011). Adaptive subgradient
   methods for online learning and stochastic optimization. JMLR 12.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from tallmcmc._checks import integer_at_least, positive_finite
from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices
from tallmcmc.model import Model, Position
from tallmcmc.proposals.base import Proposal, Proposed, tunable
from tallmcmc.proposals.minibatch_hamiltonian import _check_scalar_per_datum

__all__ = ["RESCALINGS", "SGHMCState", "sghmc"]

#: How the minibatch gradient is rescaled before the update (``rescale=``): ``None``, not at all; ``"adagrad"``,
#: divided coordinate by coordinate by √(Σ of its squares so far) + δ, as AdaGrad does (the 2016 paper did this).
RESCALINGS = (None, "adagrad")
#: δ of the AdaGrad rescaling ĝ / (√Σĝ² + δ).
ADAGRAD_EPSILON = 1e-8


class SGHMCState(NamedTuple):
    """What SGHMC keeps between steps (every field per chain).

    velocity
        v, flat (d,).
    squared_gradients
        Σ ĝ² over the steps so far, (d,) (accumulated with ``rescale="adagrad"`` only; zeros otherwise).
    noise_clipped
        Steps on which α ≤ β̂ on some coordinate, whose noise variance
        2(α − β̂)η was clipped to 0 (:func:`tallmcmc.sample` warns if > 0).
    """

    velocity: jax.Array
    squared_gradients: jax.Array
    noise_clipped: jax.Array


def sghmc(
    step_size: float,
    friction: float = 0.1,
    batch_size: int = 200,
    *,
    fisher: bool = True,
    rescale: str | None = None,
    on_reject: str = "flip",
) -> Proposal:
    r"""SGHMC's simplified update as a proposal, its velocity persisting in the chain's state.

    One step draws a minibatch B of b points without replacement, the
    estimate ĝ(θ) = ∇log p₀(θ) + N/(bK) Σ_{i∈B} ∇log p(x_i|θ) of the tempered
    posterior's gradient (AdaGrad-rescaled if asked), and moves

    .. math:: v′ = (1 − α)v + ηĝ + N(0, 2(α − \hat β)η),\qquad θ′ = θ + v′,

    with :math:`\hat β = \tfrac12 η \hat V`, :math:`\hat V_j` the variance of
    ĝ's coordinate j estimated from the minibatch's per-datum gradients
    (diagonal empirical Fisher; 0 with ``fisher=False``). Where α ≤ β̂ the
    noise variance is clipped to 0 and the step counted in
    ``SGHMCState.noise_clipped``; :func:`tallmcmc.sample` warns, naming
    ``friction`` and ``step_size``.

    Parameters
    ----------
    step_size
        η > 0, on the scale of ∇log π (a sum over the N data). A learning
        rate λ on the *mean* per-datum loss, as neural-network code states
        it, is η = λ/N. Schedules: :func:`tallmcmc.sample`'s
        ``step_size_schedule`` multiplies it step by step; warm-up can adapt
        it.
    friction
        α > 0, the fraction of velocity lost per step (``α = 0.1`` in the
        2016 paper). Must be ≤ 1.
    batch_size
        b, points per step (``1 <= b <= N``).
    fisher
        Estimate β̂ from the minibatch's per-datum gradients (the paper's
        choice; costs a per-datum Jacobian instead of one gradient). ``False``
        takes β̂ = 0.
    rescale
        ``None`` or ``"adagrad"``: divide ĝ coordinate-wise by
        √(Σ ĝ² so far) + δ before the update, as the 2016 paper did "since
        the frequencies of the features are quite different". The noise is
        not rescaled (as printed); the chain then follows a preconditioned,
        heuristic dynamic.
    on_reject
        What a rejection under a Metropolis–Hastings test does to the
        velocity: ``"flip"`` (v ← −v′, as a generalised HMC step does),
        ``"keep"`` (v unchanged) or ``"zero"``. Irrelevant under
        :func:`tallmcmc.always_accept`.

    Returns
    -------
    Proposal
        ``init_state`` gives a zero velocity; ``data_used`` = b per step;
        ``log_proposal_ratio`` = 0 (*not* the true ratio, which cannot be
        computed: see the module docstring); ``exact_ratio`` is ``False``,
        so :func:`tallmcmc.sample` refuses it under a test other than
        :func:`tallmcmc.always_accept` unless ``allow_inexact_proposal=True``.

    Raises
    ------
    ValueError
        For a bad ``step_size``, ``friction``, ``batch_size``, ``rescale`` or
        ``on_reject``; when first run on a model, if ``batch_size`` exceeds
        its N or its ``log_likelihood`` does not return one scalar per datum.
    """
    step = positive_finite(step_size, "step_size", "SGHMC's η (learning rate on the sum-of-log-likelihoods scale)")
    alpha = positive_finite(friction, "friction", "SGHMC's α, the fraction of velocity lost per step")
    if alpha > 1.0:
        raise ValueError(f"friction must be in (0, 1] (the fraction of velocity lost per step); got {friction!r}")
    batch = integer_at_least(batch_size, "batch_size")
    if rescale not in RESCALINGS:
        raise ValueError(f"rescale must be one of {RESCALINGS}; got {rescale!r}")
    if on_reject not in ("flip", "keep", "zero"):
        raise ValueError(f"on_reject must be 'flip', 'keep' or 'zero'; got {on_reject!r}")

    def init_state(position: Position) -> SGHMCState:
        flat = ravel_pytree(position)[0]
        zeros = jnp.zeros_like(flat)
        return SGHMCState(zeros, zeros, jnp.zeros((), jnp.int32))

    def make(multiplier):
        def propose(rng_key: jax.Array, position: Position, model: Model, state: SGHMCState) -> Proposed:
            num_data = model.num_data
            if batch > num_data:
                raise ValueError(f"batch_size = {batch} exceeds the number of data points N = {num_data} of the model")
            flat, unravel = ravel_pytree(position)
            dtype = flat.dtype
            eta = jnp.asarray(step, dtype) if multiplier is None else jnp.asarray(step, dtype) * multiplier
            batch_key, noise_key = jax.random.split(rng_key)
            indices = permuted_indices(permutation_keys(batch_key), jnp.arange(batch), num_data)
            rows = model.data_at(indices)
            _check_scalar_per_datum(model, position, rows, batch)
            scale = num_data / (batch * model.temperature)
            prior_gradient = ravel_pytree(jax.grad(model.log_prior)(position))[0].astype(dtype)
            if fisher:  # per-datum gradients (b, d): their mean gives ĝ, their variance V̂
                per_datum = _per_datum_gradients(model, unravel, flat, rows).astype(dtype)
                gradient = prior_gradient + scale * jnp.sum(per_datum, axis=0)
                # Var ĝ_j = (N/K)² Var(one datum's gradient)/b (draws without replacement: times (N − b)/(N − 1))
                spread = jnp.var(per_datum, axis=0, ddof=1) if batch > 1 else jnp.zeros_like(flat)
                finite_population = (num_data - batch) / max(num_data - 1, 1)
                variance = (num_data / model.temperature) ** 2 * spread / batch * finite_population
            else:
                likelihood = lambda theta: scale * jnp.sum(model.per_datum_log_likelihood(unravel(theta), rows))  # noqa: E731
                gradient = prior_gradient + jax.grad(likelihood)(flat).astype(dtype)
                variance = jnp.zeros_like(flat)
            squared = state.squared_gradients  # accumulated only where it is used
            if rescale == "adagrad":
                squared = squared + gradient**2
                divisor = jnp.sqrt(squared) + ADAGRAD_EPSILON
                gradient, variance = gradient / divisor, variance / divisor**2
            beta = 0.5 * eta * variance
            noise_variance = 2.0 * (alpha - beta) * eta
            clipped = jnp.any(noise_variance < 0)
            noise = jax.random.normal(noise_key, flat.shape, dtype) * jnp.sqrt(jnp.maximum(noise_variance, 0.0))
            velocity = (1.0 - alpha) * state.velocity + eta * gradient + noise
            counted = state.noise_clipped + clipped.astype(jnp.int32)
            if on_reject == "flip":
                kept_velocity = -velocity
            elif on_reject == "keep":
                kept_velocity = state.velocity
            else:
                kept_velocity = jnp.zeros_like(velocity)
            return Proposed(
                unravel(flat + velocity),
                jnp.zeros((), dtype),  # as printed: no proposal ratio (the true one is intractable)
                jnp.asarray(batch, jnp.int32),
                accepted_state=SGHMCState(velocity, squared, counted),
                rejected_state=SGHMCState(kept_velocity, squared, counted),
            )

        return propose

    name = f"sghmc(step_size={step:g}, friction={alpha:g}, batch_size={batch}, fisher={fisher}, rescale={rescale!r})"
    return tunable(make, name, init_state=init_state, exact_ratio=False, state_problem=_clipped_noise)


def _clipped_noise(states: SGHMCState) -> str | None:
    """The warning the chains' final states call for: steps whose noise variance 2(α − β̂)η was clipped to 0."""
    clipped = int(np.max(states.noise_clipped))
    if not clipped:
        return None
    return (
        f"on {clipped} step(s) of some chain the friction α was below β̂ = ½ηV̂, the noise the minibatch gradient "
        "injects, so the injected noise variance 2(α − β̂)η was clipped to 0: raise friction or lower step_size (or "
        "batch more points)"
    )


def _per_datum_gradients(model: Model, unravel, flat: jax.Array, rows) -> jax.Array:
    """∇_θ log p(x_i | θ) for each row of ``rows``, (b, d): one gradient per row, vmapped.

    (``jax.jacrev`` of the (b,) vector would run b backward passes through the whole minibatch's graph: 27× slower
    on a 2,273-weight network with b = 200.)
    """

    def one(row):
        single = jax.tree_util.tree_map(lambda leaf: leaf[None], row)
        return jax.grad(lambda theta: model.per_datum_log_likelihood(unravel(theta), single)[0])(flat)

    return jax.vmap(one)(rows)
