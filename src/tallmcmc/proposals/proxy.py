r"""Proposals driven by the data-free proxy posterior of a control variate.

The proxy posterior is π̃(θ) ∝ p₀(θ) · exp{(1/K) Σᵢ qᵢ(θ)} with the Taylor
proxy qᵢ of :func:`tallmcmc.taylor_control_variate`; its log-density and
gradient cost O(d²) and touch no data. A proposal that moves along ∇ log π̃
therefore has a proposal density that is known exactly, so every acceptance
test, exact or minibatch, still targets the *true* posterior π: the proxy
only shapes the moves, the test decides on π.

* :func:`proxy_langevin`: θ′ = θ + (ε/2) M ∇log π̃(θ) + √ε L ξ with M = L Lᵀ
  (preconditioned MALA drift on the proxy), log proposal ratio from the two
  Gaussian densities.
* :func:`proxy_hamiltonian`: ``num_steps`` leapfrog steps on −log π̃ with
  momentum p ~ N(0, M⁻¹) (so M is the inverse mass); the leapfrog map is
  volume-preserving and reversible under momentum flip, so the log proposal
  ratio is the kinetic-energy change ½pᵀMp − ½p′ᵀMp′.

Why minibatch-gradient proposals (SGLD, SGHMC) cannot do this: their drift
uses a gradient estimated from a random minibatch, so the density of θ′ given
θ is a mixture over all minibatches, whose value at θ′ (and the reverse move's)
cannot be computed from the one minibatch drawn. The proxy gradient is a
deterministic function of θ, which is what makes the ratio exact and cheap.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from tallmcmc._checks import integer_at_least, positive_finite
from tallmcmc.control_variate import ControlVariate
from tallmcmc.model import Model, Position
from tallmcmc.proposals.base import Proposal, Proposed, tunable

__all__ = ["proxy_hamiltonian", "proxy_langevin"]


def _checked(control_variate: Any, preconditioner: Any) -> np.ndarray:
    if not isinstance(control_variate, ControlVariate):
        raise TypeError(
            "control_variate must come from tallmcmc.taylor_control_variate(model, center); "
            f"got {type(control_variate).__name__}"
        )
    dimension = int(control_variate.gradient_sum.shape[0])
    if preconditioner is None:
        return np.eye(dimension)
    matrix = np.asarray(preconditioner, np.float64)
    if matrix.shape != (dimension, dimension):
        raise ValueError(f"preconditioner must be a ({dimension}, {dimension}) matrix; got shape {matrix.shape}")
    try:
        return np.linalg.cholesky(0.5 * (matrix + matrix.T))
    except np.linalg.LinAlgError as error:
        raise ValueError("preconditioner must be symmetric positive definite") from error


def _proxy_gradient(control_variate: ControlVariate, model: Model, unravel):
    def log_density(flat):
        position = unravel(flat)
        return model.log_prior(position) + control_variate.proxy_log_likelihood(position)

    return jax.grad(log_density)


def proxy_langevin(control_variate: ControlVariate, step_size: float, *, preconditioner: Any = None) -> Proposal:
    """Preconditioned Langevin proposal on the proxy posterior (data-free, exact ratio).

    Parameters
    ----------
    control_variate
        From :func:`tallmcmc.taylor_control_variate`.
    step_size
        ε > 0. With ``preconditioner`` = the Laplace covariance, ε ≈ 1/d^{1/3}
        is a reasonable start (MALA's optimal scaling).
    preconditioner
        M (d, d), symmetric positive definite; default the identity. The
        Laplace covariance (``tallmcmc.laplace_covariance(mode)``) makes the
        drift isotropic on the posterior's scale.

    Returns
    -------
    Proposal
        ``log_proposal_ratio`` = log q(θ|θ′) − log q(θ′|θ) of the Gaussian
        proposal; ``data_used`` 0.
    """
    factor = _checked(control_variate, preconditioner)
    step = positive_finite(step_size, "step_size", "the ε of θ′ = θ + (ε/2)M∇log π̃ + √ε L ξ")
    inverse_factor = np.linalg.solve(factor, np.eye(factor.shape[0]))
    metric = factor @ factor.T

    def make(multiplier):
        def propose(rng_key: jax.Array, position: Position, model: Model) -> Proposed:
            flat, unravel = ravel_pytree(position)
            gradient = _proxy_gradient(control_variate, model, unravel)
            dtype = flat.dtype
            m, l_inv = jnp.asarray(metric, dtype), jnp.asarray(inverse_factor, dtype)
            epsilon = jnp.asarray(step, dtype) if multiplier is None else jnp.asarray(step, dtype) * multiplier

            def log_q(to, frm):
                mean = frm + 0.5 * epsilon * m @ gradient(frm)
                z = l_inv @ (to - mean)
                return -0.5 * jnp.sum(z**2) / epsilon

            noise = jax.random.normal(rng_key, flat.shape, dtype)
            moved = flat + 0.5 * epsilon * m @ gradient(flat) + jnp.sqrt(epsilon) * jnp.asarray(factor, dtype) @ noise
            ratio = log_q(flat, moved) - log_q(moved, flat)
            return Proposed(unravel(moved), ratio, jnp.zeros((), jnp.int32))
        return propose

    return tunable(make, "proxy_langevin", setup=(control_variate,), metropolis_target=0.574)


def proxy_hamiltonian(
    control_variate: ControlVariate,
    step_size: float,
    num_steps: int,
    *,
    preconditioner: Any = None,
) -> Proposal:
    """Hamiltonian (leapfrog) proposal on the proxy posterior (data-free, exact ratio).

    Parameters
    ----------
    control_variate
        From :func:`tallmcmc.taylor_control_variate`.
    step_size
        Leapfrog step ε > 0.
    num_steps
        Leapfrog steps L ≥ 1. With ``preconditioner`` = the Laplace
        covariance the proxy dynamics have period ≈ 2π, so ε·L ≈ π/2 gives
        nearly independent proposals.
    preconditioner
        M (d, d), the *inverse* mass matrix (momentum p ~ N(0, M⁻¹)); default
        the identity.

    Returns
    -------
    Proposal
        ``log_proposal_ratio`` = ½pᵀMp − ½p′ᵀMp′ (the kinetic energy lost); the
        test adds the potential part from the true target. ``data_used`` 0.
    """
    factor = _checked(control_variate, preconditioner)
    step = positive_finite(step_size, "step_size", "the leapfrog step")
    steps = integer_at_least(num_steps, "num_steps")
    metric = factor @ factor.T
    inverse_factor_transposed = np.linalg.solve(factor, np.eye(factor.shape[0])).T  # L⁻ᵀ: p = L⁻ᵀ ξ ~ N(0, M⁻¹)

    def make(multiplier):
        def propose(rng_key: jax.Array, position: Position, model: Model) -> Proposed:
            flat, unravel = ravel_pytree(position)
            gradient = _proxy_gradient(control_variate, model, unravel)
            dtype = flat.dtype
            m = jnp.asarray(metric, dtype)
            epsilon = jnp.asarray(step, dtype) if multiplier is None else jnp.asarray(step, dtype) * multiplier
            momentum = jnp.asarray(inverse_factor_transposed, dtype) @ jax.random.normal(rng_key, flat.shape, dtype)

            def kinetic(p):
                return 0.5 * p @ (m @ p)

            def leapfrog(_, carry):
                theta, p = carry
                p = p + 0.5 * epsilon * gradient(theta)
                theta = theta + epsilon * m @ p
                p = p + 0.5 * epsilon * gradient(theta)
                return theta, p

            moved, final_momentum = jax.lax.fori_loop(0, steps, leapfrog, (flat, momentum))
            ratio = kinetic(momentum) - kinetic(final_momentum)
            return Proposed(unravel(moved), ratio, jnp.zeros((), jnp.int32))
        return propose

    return tunable(make, "proxy_hamiltonian", setup=(control_variate,), metropolis_target=0.65)


