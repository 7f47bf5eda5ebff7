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

Both report the Metropolis log ratio of their move *on the proxy* (for the
Hamiltonian move, minus its energy error), which is data-free and says how
accurately the move follows π̃. Warm-up adapts their step size on it
(``Proposal.proxy_target``), not on the test's acceptance: a Barker-type test
accepts a near-exact proposal about half the time whatever its step, so it
cannot tell warm-up that a step is too long. A Hamiltonian move also keeps its
integration time ε·L when warm-up changes ε (L follows), so adaptation cannot
stretch a trajectory to half an oscillation of the proxy, where every move
would mirror the current point through the mode (``docs/warmup.md``).

Why minibatch-gradient proposals (SGLD, SGHMC) cannot do this: their drift
uses a gradient estimated from a random minibatch, so the density of θ′ given
θ is a mixture over all minibatches, whose value at θ′ (and the reverse move's)
cannot be computed from the one minibatch drawn. The proxy gradient is a
deterministic function of θ, which is what makes the ratio exact and cheap.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from jax.flatten_util import ravel_pytree

from tallmcmc._checks import integer_at_least, positive_finite
from tallmcmc.control_variate import ControlVariate
from tallmcmc.model import Model, Position
from tallmcmc.proposals.base import Proposal, Proposed, tunable

__all__ = ["proxy_hamiltonian", "proxy_langevin", "proxy_oscillation_time"]


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


def _warn_if_first_order(control_variate: ControlVariate, name: str) -> None:
    """Warn that a first-order control variate's proxy has no likelihood curvature (``order=2`` is the fix)."""
    if control_variate.order == 1:
        warnings.warn(
            f"{name}: the control variate is first order (order=1), so its proxy log-likelihood is linear in θ and "
            "the proxy posterior is the prior tilted by the gradient at the centre: the proposal's moves ignore the "
            "likelihood's curvature (the posterior's scale and shape) and are little more than a random walk on the "
            "preconditioner's scale. Build the control variate with order=2 (tallmcmc.taylor_control_variate(model, "
            "mode.position), the default)",
            UserWarning,
            stacklevel=3,
        )


def _proxy_log_density(control_variate: ControlVariate, model: Model, unravel):
    """log π̃(θ) = log p₀(θ) + (1/K) Σᵢ qᵢ(θ) on flat θ, data-free (up to a constant)."""

    def log_density(flat):
        position = unravel(flat)
        return model.log_prior(position) + control_variate.proposal_log_likelihood(position)

    return log_density


#: Most leapfrog steps a tuned :func:`proxy_hamiltonian` takes to keep its integration time (a step size
#: adapted far below the proxy's scale would otherwise ask for unboundedly many data-free steps).
MAX_TUNED_STEPS = 1000
#: Proxy acceptance rates warm-up aims at (``Proposal.proxy_target``): the leapfrog integrator's energy
#: error on the proxy costs no data, so it is kept small (0.9) and the test's rejections come from the
#: proxy's misfit alone; the Langevin move at MALA's optimal 0.574 (Roberts & Rosenthal 1998).
HAMILTONIAN_PROXY_TARGET = 0.9
LANGEVIN_PROXY_TARGET = 0.574
#: :func:`proxy_hamiltonian`'s integrators.
INTEGRATORS = ("leapfrog", "split")


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
        proposal; ``data_used`` 0; ``proxy_log_ratio`` the MALA log ratio on
        the proxy posterior, which warm-up steers towards an acceptance of
        0.574 (``proxy_target``).

    Warns
    -----
    UserWarning
        If ``control_variate`` is first order (``order=1``): its proxy has no
        likelihood curvature to follow.
    """
    factor = _checked(control_variate, preconditioner)
    _warn_if_first_order(control_variate, "proxy_langevin")
    step = positive_finite(step_size, "step_size", "the ε of θ′ = θ + (ε/2)M∇log π̃ + √ε L ξ")
    inverse_factor = np.linalg.solve(factor, np.eye(factor.shape[0]))
    metric = factor @ factor.T

    def make(multiplier):
        def propose(rng_key: jax.Array, position: Position, model: Model) -> Proposed:
            flat, unravel = ravel_pytree(position)
            log_density = _proxy_log_density(control_variate, model, unravel)
            gradient = jax.grad(log_density)
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
            proxy_ratio = log_density(moved) - log_density(flat) + ratio
            rows = _rows_read(control_variate, 4)  # ∇ at θ and θ′, the density at both
            return Proposed(unravel(moved), ratio, rows, proxy_ratio)

        return propose

    return tunable(
        make,
        "proxy_langevin",
        setup=_setup_of(control_variate, preconditioner),
        metropolis_target=0.574,
        proxy_target=LANGEVIN_PROXY_TARGET,
    )


def proxy_oscillation_time(control_variate: ControlVariate, preconditioner: Any = None) -> float | None:
    """Half the shortest oscillation period of Hamiltonian dynamics on the proxy likelihood, π/ω_max.

    ω_max² is the largest eigenvalue of M·A with M the inverse mass
    (``preconditioner``) and A = −H̄/K the proxy log-likelihood's curvature
    (the prior's curvature is left out: it is not known here, and on tall
    data it is small against A). An integration time ε·L near this value
    makes the fastest direction of a leapfrog trajectory end where it began,
    mirrored through the mode. With M = the Laplace covariance, ω_max ≤ 1
    and the time is at least π. ``None`` for a first-order control variate
    (no curvature) or a curvature that is not negative definite.
    """
    if control_variate.order != 2:
        return None
    factor = _checked(control_variate, preconditioner)
    curvature = -control_variate.hessian_matrix() / control_variate.temperature
    symmetric = factor.T @ curvature @ factor  # same eigenvalues as M·A, M = L Lᵀ
    largest = float(np.linalg.eigvalsh(0.5 * (symmetric + symmetric.T)).max())
    if not np.isfinite(largest) or largest <= 0:
        return None
    return math.pi / math.sqrt(largest)


def proxy_hamiltonian(
    control_variate: ControlVariate,
    step_size: float,
    num_steps: int,
    *,
    preconditioner: Any = None,
    step_size_jitter: float = 0.0,
    integrator: str = "leapfrog",
    momentum_temperature: float = 1.0,
) -> Proposal:
    """Hamiltonian proposal on the proxy posterior (data-free, exact ratio).

    Parameters
    ----------
    control_variate
        From :func:`tallmcmc.taylor_control_variate`.
    step_size
        Leapfrog step ε > 0.
    num_steps
        Leapfrog steps L ≥ 1. With ``preconditioner`` = the Laplace
        covariance the proxy dynamics have period ≈ 2π, so ε·L ≈ π/2 gives
        nearly independent proposals; ε·L near π (half a period) mirrors
        every proposal through the mode, a chain that does not mix, and is
        warned about.
    preconditioner
        M (d, d), the *inverse* mass matrix (momentum p ~ N(0, M⁻¹)); default
        the identity. A :func:`tallmcmc.laplace_covariance` carries its mode,
        whose data passes :func:`tallmcmc.sample` then counts.
    step_size_jitter
        j in [0, 1): each proposal draws its step from ε·U(1 − j, 1 + j),
        independently of the state (so the chain stays exact), which spreads
        the integration time ε·L over ±j of itself and keeps a trajectory
        from resonating with a period of the target. 0 (default): no jitter.
    integrator
        ``"leapfrog"`` (default): ``num_steps`` leapfrog steps on −log π̃.
        ``"split"``: split Hamiltonian Monte Carlo (Shahbaba, Lan, Johnson &
        Neal 2014): −log π̃ is split into the Gaussian
        ½(θ − θ*)ᵀM⁻¹(θ − θ*) around θ* = c + M∇log π̃(c), a Newton step
        from the control variate's centre c, whose flow is solved exactly
        (a rotation in whitened coordinates), and the rest, whose gradient
        kicks the momentum half a step before and after
        each rotation. Exact at any step where the proxy posterior is that
        Gaussian (M the Laplace covariance, a flat or Gaussian prior), so
        near the mode of a tall-data posterior a step as long as the whole
        integration time is accurate, where leapfrog needs more steps as d
        grows (``docs/warmup.md``, "The split integrator"). A split step
        costs three (d × d) products, a leapfrog step two (M p and the
        curvature times θ − c; each step's closing gradient is the next
        one's opening gradient).
    momentum_temperature
        λ > 0: the momentum is drawn from N(0, λM⁻¹) and the kinetic energy
        in the ratio is ½pᵀMp/λ, the density of that momentum; the
        trajectory is integrated as before. The move is then as exact as
        with λ = 1 (the same reversible, volume-preserving map; the extended
        target is π(θ)·N(p; 0, λM⁻¹)), and since the proxy's energy is nearly
        conserved along the trajectory it proposes roughly from π̃^{1/λ}, a
        proxy √λ times wider. 1 (default): the plain move. λ = 2 let the
        chains reach tails heavier than the Laplace approximation that the
        plain move rarely visits (the N = 1,000 normal mixture: bulk ESS
        2,100–2,300 instead of 83–1,800 at 4 × 2,000 draws), at a lower
        acceptance everywhere (a Poisson regression with d = 6: 0.42–0.43
        against 0.995, ESS 3.3–3.5× lower). :func:`tallmcmc.sample_tall`
        uses λ = 3 where its warm-up accepts too little (``docs/sample_tall.md``,
        "Tails wider than the Laplace approximation").
        Warm-up still adapts the step on the untempered energy error.

    Returns
    -------
    Proposal
        ``log_proposal_ratio`` = (½pᵀMp − ½p′ᵀMp′)/λ (the kinetic energy lost); the
        test adds the potential part from the true target. ``data_used`` 0.
        ``proxy_log_ratio`` is minus the energy error on the proxy. Tuned by
        warm-up (``tune(f)``), the step becomes min(f·ε, ε·L) and the number
        of steps round(ε·L / step) (at most :data:`MAX_TUNED_STEPS`), so the
        integration time stays ε·L; warm-up aims at a proxy acceptance of 0.9.

    Warns
    -----
    UserWarning
        If ε·L(1 + j) reaches half the proxy's shortest oscillation
        (:func:`proxy_oscillation_time`), or if ``control_variate`` is first
        order (``order=1``): its proxy has no likelihood curvature, so the
        trajectories do not follow the posterior's scale or shape.
    """
    factor = _checked(control_variate, preconditioner)
    _warn_if_first_order(control_variate, "proxy_hamiltonian")
    step = positive_finite(step_size, "step_size", "the leapfrog step")
    steps = integer_at_least(num_steps, "num_steps")
    if integrator not in INTEGRATORS:
        raise ValueError(
            f"integrator must be one of {', '.join(repr(name) for name in INTEGRATORS)} (how the trajectory on the "
            f"proxy is integrated); got {integrator!r}"
        )
    temperature = positive_finite(momentum_temperature, "momentum_temperature", "the momentum's variance factor λ")
    jitter = float(step_size_jitter)
    if not 0.0 <= jitter < 1.0:
        raise ValueError(
            f"step_size_jitter must lie in [0, 1) (each step is drawn from ε·U(1 − j, 1 + j)); got {step_size_jitter!r}"
        )
    integration_time = step * steps
    half_period = proxy_oscillation_time(control_variate, preconditioner)
    if half_period is not None and integration_time * (1 + jitter) >= half_period:
        warnings.warn(
            f"proxy_hamiltonian: the integration time step_size × num_steps = {integration_time:.3g}"
            f"{' (up to ' + format(integration_time * (1 + jitter), '.3g') + ' with the jitter)' if jitter else ''} "
            f"reaches half an oscillation of the proxy (π/ω = {half_period:.3g}), where trajectories fold back and "
            "the fastest direction's proposals mirror the current point through the mode (a chain that does not "
            f"mix). Use step_size × num_steps ≈ {half_period / 2:.3g} (a quarter period), with the Laplace "
            "covariance as preconditioner",
            UserWarning,
            stacklevel=2,
        )
    inverse_factor = scipy.linalg.solve_triangular(factor, np.eye(factor.shape[0]), lower=True)  # L⁻¹
    integrate = _split_hamiltonian if integrator == "split" else _leapfrog
    return tunable(
        integrate(control_variate, factor, inverse_factor, step, steps, jitter, temperature),
        "proxy_hamiltonian",
        setup=_setup_of(control_variate, preconditioner),
        metropolis_target=0.65,
        proxy_target=HAMILTONIAN_PROXY_TARGET,
        max_step_factor=float(steps),
    )


def _leapfrog(
    control_variate: ControlVariate,
    factor: np.ndarray,
    inverse_factor: np.ndarray,
    step: float,
    steps: int,
    jitter,
    temperature: float = 1.0,
):
    """``make(multiplier)`` of the leapfrog integrator: momentum p = √λ L⁻ᵀξ ~ N(0, λM⁻¹), kinetic energy ½pᵀMp (the
    ratio's: ½pᵀMp/λ)."""
    metric = factor @ factor.T  # M

    def make(multiplier):
        def propose(rng_key: jax.Array, position: Position, model: Model) -> Proposed:
            flat, unravel = ravel_pytree(position)
            value_and_gradient = _proxy_value_and_gradient(control_variate, model, unravel)
            dtype = flat.dtype
            m = jnp.asarray(metric, dtype)
            momentum_key, epsilon, num = _trajectory(rng_key, step, steps, multiplier, jitter, dtype)
            root_temperature, temperature_now = _temperature_of(temperature, dtype)
            momentum = root_temperature * (
                jnp.asarray(inverse_factor.T, dtype) @ jax.random.normal(momentum_key, flat.shape, dtype)
            )

            def kinetic(p):
                return 0.5 * p @ (m @ p)

            def leapfrog(_, carry):  # a step's closing gradient is the next step's opening one (carried)
                theta, p, gradient, _ = carry
                p = p + 0.5 * epsilon * gradient
                theta = theta + epsilon * m @ p
                value, gradient = value_and_gradient(theta)
                return theta, p + 0.5 * epsilon * gradient, gradient, value

            value, gradient = value_and_gradient(flat)
            moved, final_momentum, _, moved_value = jax.lax.fori_loop(
                0, num, leapfrog, (flat, momentum, gradient, value)
            )
            ratio = kinetic(momentum) - kinetic(final_momentum)
            proxy_ratio = moved_value - value + ratio  # −(energy error) on the proxy
            ratio = ratio / temperature_now  # the momentum's density N(0, λM⁻¹)
            return Proposed(unravel(moved), ratio, _rows_read(control_variate, num + 1), proxy_ratio)

        return propose

    return make


def _temperature_of(temperature: float, dtype) -> tuple[jax.Array, jax.Array]:
    """(√λ, λ) in ``dtype``, read in the trace from one constant array that the trace holds, not as literals.

    A Python scalar would be written into the lowered program, so that the plain move (λ = 1) and each tempered one
    were different programs, each compiled again by a run drawn again tempered (``docs/compilation.md``, "One program
    for every λ"); an array of two is one of the trace's constants, which the chain program takes as an argument
    (:class:`tallmcmc.program_cache.Traced`). Multiplying by √1 and dividing by 1 change no bit of the plain move.
    """
    values = jnp.asarray(np.array([math.sqrt(temperature), temperature]), dtype)
    return values[0], values[1]


def _trajectory(rng_key: jax.Array, step: float, steps: int, multiplier, jitter: float, dtype) -> tuple:
    """(the momentum's key, the step, the number of steps) of one trajectory.

    The step as given, or (tuned) the step times ``multiplier``, at most the integration time ε·L, with L following
    so that the time stays (at most :data:`MAX_TUNED_STEPS` steps); then, with ``jitter`` j, times U(1 − j, 1 + j)
    drawn from a key split off ``rng_key``.
    """
    if multiplier is None:
        epsilon, num = jnp.asarray(step, dtype), steps
    else:
        epsilon, num = tuned_step(step, steps, multiplier, dtype=dtype)
    if not jitter:
        return rng_key, epsilon, num
    momentum_key, jitter_key = jax.random.split(rng_key)
    return momentum_key, epsilon * jax.random.uniform(jitter_key, (), dtype, 1.0 - jitter, 1.0 + jitter), num


def tuned_step(step: float, steps: int, multiplier, *, xp=jnp, dtype=None) -> tuple:
    """(ε, L) of a tuned :func:`proxy_hamiltonian`: the step times ``multiplier``, at most the integration time
    ``step × steps``, and the number of steps that keeps that time, round(time / ε) in [1, :data:`MAX_TUNED_STEPS`].
    ``xp`` = ``numpy`` gives the same on the host (``sample_tall`` counts the rows a trajectory reads with it)."""
    integration_time = step * steps
    epsilon = xp.minimum(xp.asarray(step, dtype) * multiplier, xp.asarray(integration_time, dtype))
    return epsilon, xp.clip(xp.round(integration_time / epsilon), 1, MAX_TUNED_STEPS).astype(xp.int32)


def _rows_read(control_variate: ControlVariate, evaluations) -> jax.Array:
    """Rows a proposal reads in ``evaluations`` evaluations of its target: the outlying rows each time where the proxy
    follows them (``ControlVariate.outlying_in_proxy``), else the constant 0 (the same program as before them)."""
    if not control_variate.proposal_rows:
        return jnp.zeros((), jnp.int32)
    return jnp.asarray(evaluations, jnp.int32) * control_variate.proposal_rows


def _proxy_value_and_gradient(control_variate: ControlVariate, model: Model, unravel):
    """θ ↦ (log π̃(θ), ∇log π̃(θ)) on flat θ with one product by the proxy's curvature A (symmetric: ∇½uᵀAu = Au)."""
    center_flat, _ = ravel_pytree(control_variate.center)

    def value_and_gradient(flat):
        dtype = flat.dtype
        u = flat - center_flat.astype(dtype)
        gradient_sum = control_variate.gradient_sum.astype(dtype)
        prior, prior_gradient = jax.value_and_grad(lambda theta: model.log_prior(unravel(theta)))(flat)
        if control_variate.order == 2:
            curved = control_variate.hessian_times(u)
            value = jnp.dot(gradient_sum, u) + 0.5 * jnp.dot(u, curved)
            gradient = gradient_sum + curved
        else:
            value, gradient = jnp.dot(gradient_sum, u), gradient_sum
        value, gradient = (
            prior + value / control_variate.temperature,
            prior_gradient + gradient / control_variate.temperature,
        )
        if control_variate.outlying_in_proxy:  # the outlying rows' own log-likelihoods in place of their proxies
            excess, excess_gradient = jax.value_and_grad(lambda theta: control_variate.outlying_excess(unravel(theta)))(
                flat
            )
            value, gradient = value + excess, gradient + excess_gradient
        return value, gradient

    return value_and_gradient


def _split_hamiltonian(
    control_variate: ControlVariate,
    factor: np.ndarray,
    inverse_factor: np.ndarray,
    step: float,
    steps: int,
    jitter,
    temperature: float = 1.0,
):
    """``make(multiplier)`` of the split integrator (:func:`proxy_hamiltonian`'s ``integrator="split"``).

    The Gaussian part is centred at θ* = c + M∇log π̃(c), a Newton step from the control variate's centre c on π̃
    (its mode where π̃ is Gaussian with precision M⁻¹): centred at c itself, the rest U₁ would keep a linear term
    −∇log π̃(c)·(θ − c), which kick-rotate-kick integrates only to O(ε³) (the flows do not commute), and a control
    variate centred off the mode (``fast_setup``'s, ~0.2 sd) made one step's proxy acceptance 0.92 at d = 50.
    In whitened coordinates z = L⁻¹(θ − θ*), w = Lᵀp (M = L Lᵀ) the Gaussian part's Hamiltonian is ½|z|² + ½|w|²,
    whose flow for a time ε is the rotation (z, w) ↦ (z cos ε + w sin ε, w cos ε − z sin ε); the rest of −log π̃,
    U₁(θ) = −log π̃(θ) − ½(θ − θ*)ᵀM⁻¹(θ − θ*), kicks w by −ε/2·Lᵀ∇U₁ = ε/2·(Lᵀ∇log π̃(θ) + z). Kick, rotate,
    kick is symmetric and each part preserves volume, so the map is reversible under w ↦ −w and volume-preserving;
    the kinetic energy is ½|w|², and w ~ N(0, I) is p ~ N(0, M⁻¹). A step's closing kick is the next step's opening
    one (carried), so a trajectory of L steps evaluates the proxy gradient L + 1 times. With θ − c = L(z + a),
    a = Lᵀ∇log π̃(c), θ* costs one product per proposal.
    """

    def make(multiplier):
        def propose(rng_key: jax.Array, position: Position, model: Model) -> Proposed:
            flat, unravel = ravel_pytree(position)
            dtype = flat.dtype
            value_and_gradient = _proxy_value_and_gradient(control_variate, model, unravel)
            center = ravel_pytree(control_variate.center)[0].astype(dtype)
            lower, lower_inverse = jnp.asarray(factor, dtype), jnp.asarray(inverse_factor, dtype)
            momentum_key, epsilon, num = _trajectory(rng_key, step, steps, multiplier, jitter, dtype)
            root_temperature, temperature_now = _temperature_of(temperature, dtype)
            momentum = root_temperature * jax.random.normal(momentum_key, flat.shape, dtype)  # w = Lᵀp ~ N(0, λI)
            prior_gradient = jax.grad(lambda theta: model.log_prior(unravel(theta)))(center)
            gradient_sum = control_variate.gradient_sum.astype(dtype) / control_variate.temperature
            anchor = lower.T @ (prior_gradient + gradient_sum)  # a = Lᵀ∇log π̃(c): θ* = c + L a

            def position_of(z):
                return center + lower @ (z + anchor)

            whitened = lower_inverse @ (flat - center) - anchor
            value, gradient = value_and_gradient(flat)
            cosine, sine = jnp.cos(epsilon), jnp.sin(epsilon)

            def split_step(_, carry):
                z, w, kick, _ = carry
                w = w + 0.5 * epsilon * kick
                z, w = cosine * z + sine * w, cosine * w - sine * z
                new_value, new_gradient = value_and_gradient(position_of(z))
                kick = lower.T @ new_gradient + z
                return z, w + 0.5 * epsilon * kick, kick, new_value

            kick = lower.T @ gradient + whitened
            z, final_momentum, _, moved_value = jax.lax.fori_loop(0, num, split_step, (whitened, momentum, kick, value))
            ratio = 0.5 * (momentum @ momentum - final_momentum @ final_momentum)
            proxy_ratio = moved_value - value + ratio  # −(energy error) on the proxy
            ratio = ratio / temperature_now  # the momentum's density N(0, λI)
            return Proposed(unravel(position_of(z)), ratio, _rows_read(control_variate, num + 1), proxy_ratio)

        return propose

    return make


def _setup_of(control_variate: ControlVariate, preconditioner: Any) -> tuple:
    """What the proposal relies on: the control variate and, if the preconditioner came from one, the mode."""
    source = getattr(preconditioner, "source", None)
    return (control_variate,) if source is None else (control_variate, source)
