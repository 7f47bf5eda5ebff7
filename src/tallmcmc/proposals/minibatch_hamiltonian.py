r"""A Hamiltonian proposal whose leapfrog uses minibatch gradients, with an exact proposal ratio.

SGHMC (Chen, Fox and Guestrin 2014) runs a leapfrog on a minibatch estimate of
the gradient and accepts every move: its proposal density is a mixture over
minibatches and cannot be evaluated, so no Metropolis–Hastings test can correct
it. :func:`minibatch_hamiltonian` makes the same kind of move exact. The
minibatches are drawn from the step's key alone, *before* and independently of
the state; for a fixed sequence of minibatches the leapfrog map followed by a
momentum flip is a volume-preserving involution (the reverse sequence undoing
it), and the law of the sequence is made exactly symmetric under reversal. The
move is then a Metropolis–Hastings proposal on the extended space (θ, p,
minibatches) whose ratio is the target ratio times exp(K(p) − K(p′)): the
log proposal ratio handed to the test is the kinetic-energy difference
K(p) − K(p′), and the test (exact or minibatch) supplies π(θ′)/π(θ) of the
*full* posterior. The derivation, the effect of the minibatch noise on the
acceptance rate and when to prefer :func:`tallmcmc.proxy_hamiltonian` or SGLD:
``docs/minibatch_hamiltonian.md``.

By default the momentum is drawn afresh at every step (full refresh). With
``momentum_persistence=ρ > 0`` it persists in the chain's state
(:attr:`tallmcmc.MHState.proposal_state`) and is partially refreshed,
p ← ρp + √(1 − ρ²) ξ, before each trajectory; a rejection reverses it
(Horowitz's generalised HMC), so consecutive accepted trajectories continue
in the same direction while the move stays exact.

References
----------
.. [1] Chen, T., Fox, E. and Guestrin, C. (2014). Stochastic gradient
   Hamiltonian Monte Carlo. ICML 2014.
.. [2] Betancourt, M. (2015). The fundamental incompatibility of scalable
   Hamiltonian Monte Carlo and naive data subsampling. ICML 2015.
.. [3] Neal, R. M. (2011). MCMC using Hamiltonian dynamics. Handbook of
   Markov Chain Monte Carlo, Chapter 5.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from tallmcmc._checks import integer_at_least, positive_finite
from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices
from tallmcmc.model import Model, Position
from tallmcmc.proposals.base import Proposal, Proposed, tunable

__all__ = ["MINIBATCH_MODES", "leapfrog", "minibatch_gradient", "minibatch_hamiltonian"]

#: How the minibatches of one trajectory are drawn (``minibatch=``): ``"step"``, a new minibatch per leapfrog step
#: (consecutive blocks of one random permutation); ``"trajectory"``, one minibatch for every leapfrog step.
MINIBATCH_MODES = ("step", "trajectory")
#: Acceptance rate warm-up aims at under a Metropolis-type test. The rejections of this move come mostly from the
#: minibatch noise, whose contribution to the log ratio grows linearly with the displacement, as a random
#: walk's does; maximising the expected squared jump then gives the random-walk optimum (docs/minibatch_hamiltonian.md).
METROPOLIS_TARGET = 0.234


class _Metric:
    """The inverse mass M of p ~ N(0, M⁻¹) and K(p) = ½pᵀMp: a diagonal (d,) or a factor L of M = LLᵀ (d, d)."""

    def __init__(self, preconditioner: Any):
        self.setup = ()
        self.diagonal: np.ndarray | None = None
        self.factor: np.ndarray | None = None
        if preconditioner is None:
            return
        source = getattr(preconditioner, "source", None)
        self.setup = () if source is None else (source,)
        try:
            matrix = np.asarray(preconditioner, np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError("preconditioner must be a (d,) diagonal or a (d, d) matrix of numbers") from error
        if matrix.ndim == 1:
            if not (matrix.size and np.all(np.isfinite(matrix)) and np.all(matrix > 0)):
                raise ValueError(
                    "preconditioner given as a (d,) diagonal must hold finite numbers > 0 (the inverse masses, "
                    f"e.g. posterior variances); got {preconditioner!r}"
                )
            self.diagonal = matrix
        elif matrix.ndim == 2 and matrix.shape[0] == matrix.shape[1] and matrix.size:
            try:
                self.factor = np.linalg.cholesky(0.5 * (matrix + matrix.T))
            except np.linalg.LinAlgError as error:
                raise ValueError(
                    "preconditioner must be symmetric positive definite (an inverse mass, e.g. a posterior covariance)"
                ) from error
            if not np.all(np.isfinite(self.factor)):
                raise ValueError("preconditioner must be finite")
        else:
            raise ValueError(f"preconditioner must be a (d,) diagonal or a (d, d) matrix; got shape {matrix.shape}")

    def check(self, dimension: int) -> None:
        size = (
            None
            if self.diagonal is None and self.factor is None
            else (self.diagonal.shape[0] if self.diagonal is not None else self.factor.shape[0])
        )
        if size is not None and size != dimension:
            raise ValueError(f"preconditioner is for {size} coordinates but the position has {dimension}")

    def momentum(self, key: jax.Array, dimension: int, dtype) -> jax.Array:
        """p ~ N(0, M⁻¹)."""
        noise = jax.random.normal(key, (dimension,), dtype)
        if self.diagonal is not None:
            return noise / jnp.sqrt(jnp.asarray(self.diagonal, dtype))
        if self.factor is not None:  # p = L⁻ᵀ ξ
            inverse_transposed = np.linalg.solve(self.factor, np.eye(self.factor.shape[0])).T
            return jnp.asarray(inverse_transposed, dtype) @ noise
        return noise

    def velocity(self, momentum: jax.Array) -> jax.Array:
        """M p, the drift of the leapfrog's position update."""
        if self.diagonal is not None:
            return jnp.asarray(self.diagonal, momentum.dtype) * momentum
        if self.factor is not None:
            factor = jnp.asarray(self.factor, momentum.dtype)
            return factor @ (factor.T @ momentum)
        return momentum

    def kinetic(self, momentum: jax.Array) -> jax.Array:
        """K(p) = ½ pᵀ M p."""
        return 0.5 * jnp.sum(momentum * self.velocity(momentum))


def minibatch_hamiltonian(
    step_size: float,
    num_steps: int,
    batch_size: int,
    *,
    preconditioner: Any = None,
    minibatch: str = "step",
    momentum_persistence: float = 0.0,
) -> Proposal:
    r"""Leapfrog proposal on minibatch gradients drawn independently of the state (exact ratio).

    Each proposal draws p ~ N(0, M⁻¹), its minibatch(es) of ``b`` points
    without replacement from its key alone (:mod:`tallmcmc.acceptance.subsample`),
    and runs ``L`` leapfrog steps

    .. math:: p ← p + \tfrac{ε}{2} ĝ_k(θ),\quad θ ← θ + ε M p,\quad
              p ← p + \tfrac{ε}{2} ĝ_k(θ)

    on the unbiased estimate of the tempered posterior's gradient from the
    minibatch B_k of step k,

    .. math:: ĝ_k(θ) = ∇\log p_0(θ) + \frac{N}{bK} \sum_{i ∈ B_k} ∇\log p(x_i|θ),

    then flips the momentum. For a fixed sequence (B₁, …, B_L) this map is a
    volume-preserving involution (the reversed sequence undoes it), and the
    sequence's law is symmetric under reversal, so the move is exact with the
    log proposal ratio K(p) − K(p′), K(p) = ½pᵀMp; the test adds the log
    posterior ratio, exactly or from its own minibatch
    (``docs/minibatch_hamiltonian.md``).

    Parameters
    ----------
    step_size
        Leapfrog step ε > 0. Warm-up adapts it (``tune(f)``: ε·f), keeping
        ``num_steps``, so the data a step touches stay fixed.
    num_steps
        Leapfrog steps L ≥ 1 per proposal.
    batch_size
        b, points per minibatch (``1 <= b <= N``; N is checked when the
        proposal first runs on a model).
    preconditioner
        M, the *inverse* mass (momentum p ~ N(0, M⁻¹), drift θ ← θ + εMp):
        ``None`` (identity), a (d,) diagonal of positive numbers, or a
        (d, d) symmetric positive definite matrix, e.g. a posterior covariance
        estimate or :func:`tallmcmc.laplace_covariance` (whose mode
        :func:`tallmcmc.sample` then counts as setup).
    minibatch
        ``"step"`` (default): leapfrog step k uses its own minibatch B_k, the
        k-th block of b positions of one random permutation of the data
        (wrapping after N), in forward or reversed block order on a fair coin
        (which makes the law of the sequence exactly reversal-symmetric); 2L
        gradient evaluations on L·b rows gathered before the leapfrog. The
        minibatch errors of the steps add in variance, so accepted moves grow
        as √L; for b·L ≤ N the blocks are disjoint.
        ``"trajectory"``: one minibatch B for the whole trajectory; the
        leapfrog then follows the exact dynamics of the minibatch posterior
        and reuses each gradient, L + 1 gradient evaluations on b rows, but
        its accepted moves do not grow with L (for L = 1 both modes are the
        same move).
    momentum_persistence
        ρ in [0, 1). 0 (default): p is drawn afresh for every trajectory.
        ρ > 0: generalised HMC (Horowitz 1991). p persists in the chain's
        state, starting at 0; each step refreshes it partially,
        p̃ = ρp + √(1 − ρ²)ξ with ξ ~ N(0, M⁻¹), runs the trajectory from p̃,
        and keeps p′ if the test accepts, −p̃ if it rejects. The refresh
        leaves N(0, M⁻¹) invariant and the accept-or-flip step is the
        exact move above followed by a momentum flip, so the chain still
        targets the posterior (the log ratio is K(p̃) − K(p′)). With short
        trajectories (small L) this keeps the direction of motion across
        steps, as a longer trajectory would, without spending more data per
        step on one minibatch error.

    Returns
    -------
    Proposal
        ``log_proposal_ratio`` = ½pᵀMp − ½p′ᵀMp′; ``data_used`` = b × the
        number of gradient evaluations: (L + 1)·b for ``"trajectory"``, 2L·b
        for ``"step"``. ``tune(f)`` scales ε; ``metropolis_target`` 0.234.

    Raises
    ------
    ValueError
        At construction, for a bad ``step_size``, ``num_steps``,
        ``batch_size``, ``preconditioner`` or ``minibatch``; when first run on
        a model, if ``batch_size`` exceeds its N, if the model's
        ``log_likelihood`` does not return one scalar per datum, or if the
        ``preconditioner`` does not match the position's dimension.

    References
    ----------
    .. [1] Horowitz, A. M. (1991). A generalized guided Monte Carlo
       algorithm. Physics Letters B 268(2), 247-252.
    """
    step = positive_finite(step_size, "step_size", "the leapfrog step ε")
    steps = integer_at_least(num_steps, "num_steps")
    batch = integer_at_least(batch_size, "batch_size")
    if minibatch not in MINIBATCH_MODES:
        raise ValueError(f"minibatch must be one of {MINIBATCH_MODES}; got {minibatch!r}")
    persistence = _persistence(momentum_persistence)
    metric = _Metric(preconditioner)
    per_trajectory = steps + 1 if minibatch == "trajectory" else 2 * steps

    def make(multiplier):
        def propose(rng_key: jax.Array, position: Position, model: Model, kept_momentum=None) -> Proposed:
            num_data = model.num_data
            if batch > num_data:
                raise ValueError(f"batch_size = {batch} exceeds the number of data points N = {num_data} of the model")
            flat, unravel = ravel_pytree(position)
            dtype = flat.dtype
            metric.check(flat.shape[0])
            epsilon = jnp.asarray(step, dtype) if multiplier is None else jnp.asarray(step, dtype) * multiplier
            momentum_key, batch_key, order_key = jax.random.split(rng_key, 3)
            round_keys = permutation_keys(batch_key)
            scale = num_data / (batch * model.temperature)

            if minibatch == "trajectory":
                blocks = jnp.zeros((1,), jnp.int32)
            else:  # the blocks of one permutation, in forward or reversed order on a fair coin
                blocks = jnp.arange(steps, dtype=jnp.int32)
                blocks = jnp.where(jax.random.bernoulli(order_key), blocks[::-1], blocks)
            # every minibatch of the trajectory gathered at once, one row of ``batches`` per leapfrog step's block:
            # positions block·b, …, block·b + b − 1 of the permutation (wrapping after N)
            positions = (blocks[:, None] * batch + jnp.arange(batch)[None, :]) % num_data
            indices = permuted_indices(round_keys, positions.reshape(-1), num_data)
            batches = jax.tree_util.tree_map(
                lambda leaf: leaf.reshape((blocks.shape[0], batch) + leaf.shape[1:]), model.data_at(indices)
            )
            _check_scalar_per_datum(model, position, jax.tree_util.tree_map(lambda leaf: leaf[0], batches), batch)

            def gradient_for(k):
                rows = jax.tree_util.tree_map(lambda leaf: leaf[k], batches)
                estimate = minibatch_gradient(model, unravel, rows, scale)
                return lambda theta: estimate(theta).astype(dtype)

            momentum = metric.momentum(momentum_key, flat.shape[0], dtype)
            if kept_momentum is not None:  # partial refresh: N(0, M⁻¹) stays invariant
                momentum = persistence * kept_momentum + np.sqrt(1.0 - persistence**2) * momentum
            moved, final = leapfrog(
                flat,
                momentum,
                epsilon,
                gradient_for,
                jnp.arange(steps, dtype=jnp.int32) if minibatch == "step" else jnp.zeros((steps,), jnp.int32),
                metric.velocity,
                same_minibatch=minibatch == "trajectory",
            )
            ratio = metric.kinetic(momentum) - metric.kinetic(final)  # the flip leaves K unchanged
            used = jnp.asarray(per_trajectory * batch, jnp.int32)
            if kept_momentum is None:
                return Proposed(unravel(moved), ratio, used)
            # accepted: (θ′, −p′) then the flip that follows every step, p′; rejected: (θ, p̃) flipped, −p̃
            return Proposed(unravel(moved), ratio, used, accepted_state=final, rejected_state=-momentum)

        return propose

    name = (
        f"minibatch_hamiltonian(step_size={step:g}, num_steps={steps}, batch_size={batch}, "
        f"minibatch={minibatch!r}" + (f", momentum_persistence={persistence:g})" if persistence else ")")
    )
    init_state = None
    if persistence:
        init_state = lambda position: jnp.zeros_like(ravel_pytree(position)[0])  # noqa: E731
    return tunable(make, name, setup=metric.setup, metropolis_target=METROPOLIS_TARGET, init_state=init_state)


def _persistence(value: Any) -> float:
    """``momentum_persistence`` as a float in [0, 1), or a ``ValueError`` naming it."""
    try:
        persistence = float(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"momentum_persistence must be a number in [0, 1); got {value!r}") from error
    if not 0.0 <= persistence < 1.0:
        raise ValueError(
            f"momentum_persistence must be in [0, 1) (0: a fresh momentum every step; ρ → 1 keeps more of it); "
            f"got {value!r}"
        )
    return persistence


def minibatch_gradient(model: Model, unravel, data: Any, scale: Any):
    """θ ↦ ∇[log p₀(θ) + scale · Σ_{i ∈ data} log p(xᵢ|θ)] on flat θ (``scale`` = N/(bK): the unbiased estimate)."""

    def estimate(flat_theta):
        point = unravel(flat_theta)
        return model.log_prior(point) + scale * jnp.sum(model.per_datum_log_likelihood(point, data))

    return jax.grad(estimate)


def leapfrog(
    position: jax.Array,
    momentum: jax.Array,
    step_size: Any,
    gradient_for: Callable[[jax.Array], Callable[[jax.Array], jax.Array]],
    blocks: jax.Array,
    velocity: Callable[[jax.Array], jax.Array] = lambda p: p,
    *,
    same_minibatch: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """``len(blocks)`` leapfrog steps, step k on the gradient estimate ``gradient_for(blocks[k])``.

    ``gradient_for(block)`` gathers the minibatch of ``block`` and returns
    θ ↦ its gradient estimate. Step k is p ← p + (ε/2)g, θ ← θ + ε·velocity(p),
    p ← p + (ε/2)g with g = ``gradient_for(blocks[k])`` at the current θ, so each step is
    reversible on its own and the whole map, followed by p ↦ −p, is undone by
    the same map with ``blocks`` reversed. With ``same_minibatch`` every block
    is taken to be ``blocks[0]`` and the gradient at the end of a step is
    reused at the start of the next (len(blocks) + 1 evaluations instead of
    2·len(blocks)).

    Returns
    -------
    tuple
        (θ, p) at the end, momentum *not* flipped.
    """
    if same_minibatch:
        gradient = gradient_for(blocks[0])  # one gather for the whole trajectory

        def shared_step(_, carry):
            theta, p, g = carry
            p = p + 0.5 * step_size * g
            theta = theta + step_size * velocity(p)
            g = gradient(theta)
            return theta, p + 0.5 * step_size * g, g

        theta, p, _ = jax.lax.fori_loop(0, blocks.shape[0], shared_step, (position, momentum, gradient(position)))
        return theta, p

    def own_step(k, carry):
        theta, p = carry
        gradient = gradient_for(blocks[k])  # one gather per step
        p = p + 0.5 * step_size * gradient(theta)
        theta = theta + step_size * velocity(p)
        return theta, p + 0.5 * step_size * gradient(theta)

    return jax.lax.fori_loop(0, blocks.shape[0], own_step, (position, momentum))


def _check_scalar_per_datum(model: Model, position: Position, data_shape: Any, batch: int) -> None:
    """A ``ValueError`` naming ``log_likelihood`` unless it gives one scalar per datum of a minibatch."""
    values = jax.eval_shape(model.per_datum_log_likelihood, position, data_shape)
    if not hasattr(values, "shape") or tuple(values.shape) != (batch,):
        shape = getattr(values, "shape", type(values).__name__)
        per_datum = tuple(shape[1:]) if isinstance(shape, tuple) else shape
        raise ValueError(
            "the model's log_likelihood must return one scalar per datum (log p(x_i | θ)); on a minibatch of "
            f"{batch} points it gave shape {shape}, i.e. {per_datum} per datum. Sum or select the per-datum terms "
            "inside log_likelihood"
        )
