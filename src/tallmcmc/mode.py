"""The posterior mode and the Hessian there: the centre of control variates and Laplace proposals.

:func:`find_mode` maximises the full-data tempered log posterior with SciPy's
L-BFGS-B (gradients from :func:`jax.value_and_grad`), optionally after a cheap
stochastic phase of minibatch Adam steps (optax) that brings a start far from
the mode close to it on very tall data. The Hessian of −log π at the result is
computed once with :func:`jax.hessian` and used for one polishing Newton step
(float32 L-BFGS-B stops on relative changes of the objective, a little short of
the mode). Every data point touched is counted.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
from jax.flatten_util import ravel_pytree

from tallmcmc._checks import integer_at_least, optional_integer_at_least, positive_finite
from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices
from tallmcmc.model import Model, Position, as_position, check_model

__all__ = ["ModeResult", "find_mode"]


class ModeResult(NamedTuple):
    """What :func:`find_mode` found and what it cost.

    position
        The mode (same pytree as the start).
    hessian
        Hessian of −log π there, flat (d, d), float64: the Laplace precision.
    log_density
        log π at the mode (up to the model's constant).
    data_used
        Data points touched: every full-data evaluation counts N (start check,
        each L-BFGS-B evaluation, the Hessian, the final gradient and the
        polishing Newton step), every Adam step its minibatch.
    data_passes
        ``data_used / N``.
    iterations
        L-BFGS-B iterations.
    converged
        Whether L-BFGS-B reported convergence.
    gradient_norm
        Max-norm of ∇log π at the mode.
    """

    position: Position
    hessian: np.ndarray
    log_density: float
    data_used: int
    data_passes: float
    iterations: int
    converged: bool
    gradient_norm: float

    @property
    def name(self) -> str:
        return "find_mode"


def find_mode(
    model: Model,
    initial_position: Position,
    *,
    max_iterations: int = 500,
    tolerance: float = 1e-6,
    adam_steps: int = 0,
    adam_batch_size: int | None = None,
    adam_learning_rate: float = 0.01,
    seed: int = 0,
) -> ModeResult:
    """Maximise the full-data log posterior of ``model`` from ``initial_position``.

    Parameters
    ----------
    model
        The target.
    initial_position
        The start (pytree of arrays).
    max_iterations
        Cap on L-BFGS-B iterations.
    tolerance
        L-BFGS-B's projected-gradient tolerance (``gtol``), on the gradient of
        −log π divided by N (so it does not grow with the data).
    adam_steps
        Minibatch Adam steps before L-BFGS-B (0: none). Each uses
        ``adam_batch_size`` points and the gradient estimate
        ∇log p₀ + (N/b) Σ_batch ∇log p(xᵢ|θ)/K. Needs ``optax``.
    adam_batch_size
        Default ``min(N, 1000)``.
    adam_learning_rate
        Adam's step size.
    seed
        Seed of the minibatch order.

    Returns
    -------
    ModeResult

    Warns
    -----
    RuntimeWarning
        If L-BFGS-B did not converge, or the Hessian of −log π at the result is
        not positive definite (no Laplace approximation there).
    """
    start = as_position(initial_position)
    check_model(model, start, "initial_position")
    max_iterations = integer_at_least(max_iterations, "max_iterations")
    tolerance = positive_finite(tolerance, "tolerance", "L-BFGS-B's gradient tolerance")
    adam_steps = integer_at_least(adam_steps, "adam_steps", 0)
    num_data = model.num_data
    data_used = num_data  # the start check
    flat, unravel = ravel_pytree(start)
    dtype = flat.dtype

    if adam_steps:
        try:
            import optax
        except ImportError as error:
            raise ImportError("adam_steps > 0 needs optax: pip install optax (or pass adam_steps=0)") from error
        batch = min(optional_integer_at_least(adam_batch_size, "adam_batch_size") or 1000, num_data)
        optimizer = optax.adam(positive_finite(adam_learning_rate, "adam_learning_rate", "Adam's step size"))

        def minibatch_loss(theta, indices, data):
            rows = jax.tree_util.tree_map(lambda leaf: leaf[indices], data)
            position = unravel(theta)
            likelihood = jnp.sum(model.per_datum_log_likelihood(position, rows)) / model.temperature
            return -(model.log_prior(position) + likelihood * num_data / batch)

        @jax.jit
        def adam(theta, data):
            def one(carry, step):
                theta, opt_state = carry
                keys = permutation_keys(jax.random.fold_in(jax.random.key(seed), step))
                indices = permuted_indices(keys, jnp.arange(batch, dtype=jnp.int32), num_data)
                updates, opt_state = optimizer.update(jax.grad(minibatch_loss)(theta, indices, data), opt_state)
                return (optax.apply_updates(theta, updates), opt_state), None

            (theta, _), _ = jax.lax.scan(one, (theta, optimizer.init(theta)), jnp.arange(adam_steps))
            return theta

        flat = adam(flat, model.data)
        data_used += adam_steps * batch

    value_and_gradient = jax.jit(jax.value_and_grad(lambda theta, data: -model.with_data(data).log_density(unravel(theta))))
    evaluations = 0

    def objective(theta):
        nonlocal evaluations
        evaluations += 1
        value, gradient = value_and_gradient(jnp.asarray(theta, dtype), model.data)
        return float(value) / num_data, np.asarray(gradient, np.float64) / num_data

    fit = scipy.optimize.minimize(
        objective, np.asarray(flat, np.float64), jac=True, method="L-BFGS-B",
        options={"maxiter": max_iterations, "gtol": tolerance},
    )
    data_used += evaluations * num_data
    mode = jnp.asarray(fit.x, dtype)
    hessian = np.asarray(
        jax.jit(jax.hessian(lambda theta, data: -model.with_data(data).log_density(unravel(theta))))(mode, model.data),
        np.float64,
    )
    hessian = 0.5 * (hessian + hessian.T)
    data_used += num_data
    log_density, gradient = value_and_gradient(mode, model.data)
    data_used += num_data
    if np.linalg.eigvalsh(hessian).min() > 0:
        # one Newton step with the Hessian just computed polishes what float32 L-BFGS-B leaves
        newton = mode - jnp.asarray(np.linalg.solve(hessian, np.asarray(gradient, np.float64)), dtype)
        newton_value, newton_gradient = value_and_gradient(newton, model.data)
        data_used += num_data
        if np.max(np.abs(np.asarray(newton_gradient))) < np.max(np.abs(np.asarray(gradient))):
            mode, log_density, gradient = newton, newton_value, newton_gradient
    gradient_norm = float(np.max(np.abs(np.asarray(gradient))))
    if not fit.success:
        warnings.warn(
            f"find_mode: L-BFGS-B stopped without converging ({fit.message}); gradient max-norm {gradient_norm:.3g}. "
            "Raise max_iterations, start closer (adam_steps), or check the model",
            RuntimeWarning,
            stacklevel=2,
        )
    if np.linalg.eigvalsh(hessian).min() <= 0:
        warnings.warn(
            "find_mode: the Hessian of −log π at the result is not positive definite, so there is no Laplace "
            "approximation there (a saddle or a flat direction); laplace proposals will refuse it",
            RuntimeWarning,
            stacklevel=2,
        )
    return ModeResult(
        position=unravel(mode),
        hessian=hessian,
        log_density=-float(log_density),
        data_used=int(data_used),
        data_passes=data_used / num_data,
        iterations=int(fit.nit),
        converged=bool(fit.success),
        gradient_norm=gradient_norm,
    )


