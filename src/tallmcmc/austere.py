"""AustereMH: the sequential t-test of Korattikara, Chen and Welling (2014).

The Metropolis test ``u < α`` is written per datum as ``μ > μ₀`` with

    μ  = (1/N) Σᵢ lᵢ,   lᵢ = (1/K)[log p(xᵢ|θ′) − log p(xᵢ|θ)],
    μ₀ = (1/N) · (log u − log_ratio_offset),

(``log_ratio_offset = log p₀(θ′) − log p₀(θ) + log q(θ|θ′) − log q(θ′|θ)``;
the lᵢ are already tempered by :meth:`tallmcmc.Model.log_likelihood_ratios`).
AustereMH draws the data without replacement in stages of ``m`` points and,
after each stage of n points, computes

    t = (l̄ − μ₀) / s,   s = (s_l/√n) · √(1 − (n − 1)/(N − 1)),

(s_l the sample standard deviation, the second factor the finite-population
correction) and the one-sided Student-t tail δ = 1 − F_{n−1}(|t|). If δ < ε
(or n = N, where the decision is exact) it accepts iff l̄ > μ₀.

Randomness: u is drawn from the first key of ``jax.random.split(rng_key)``, the
order of the data from the second (the tests fix μ₀ through this).

Three ways to set (m, ε) are offered:

* :func:`austere` — fixed, given (m, ε);
* :func:`austere_conservative` — AustereMH(c): (m, ε) chosen once by
  :func:`choose_austere_parameters` so that the *worst-case* error over the
  standardized gap μ_std stays below an error bound;
* :func:`austere_adaptive` — AustereMH(nc): every step first makes a full
  pass over the data to compute μ and σ_l, hence μ_std, and uses the (m, ε)
  that is cheapest *at that* μ_std among the designs whose error there is
  below the bound (a table precomputed on the host).

How the error and the data use of a design are computed
-------------------------------------------------------
Under the central limit theorem for sampling without replacement, the sum
S_n of the first n centred values (lᵢ − μ) has Var S_n = nσ_l²(N−n)/(N−1) and
Cov(S_n, S_n′) = nσ_l²(N−n′)/(N−1) for n ≤ n′. Hence X_n = S_n√(N−1)/(σ_l(N−n))
is a Brownian motion in the time τ_n = n/(N−n), and the t-statistic (with s_l
replaced by σ_l) is

    t_n = (X_n + μ_std τ_n) / √τ_n,   μ_std = (μ − μ₀)√(N − 1)/σ_l,

i.e. √τ_n·t_n is a Gaussian random walk with drift μ_std — the model of
Korattikara et al. (2014, Section 4 and Appendix). In log-time s = log τ the
centred statistic V = t − μ_std√τ is a stationary Ornstein-Uhlenbeck process
(unit variance, V_{s+D} = e^{−D/2}V_s + √(1 − e^{−D}) ξ); the test stops at
stage n when |V + μ_std√τ_n| ≥ q_n = F⁻¹_{n−1}(1 − ε). The probability of a
wrong decision (for μ_std > 0: stopping with t ≤ −q before n = N; by symmetry
the same for −μ_std) and the expected number of points used are computed by
propagating the density of V on a grid, look by look, with the exact Gaussian
transition kernel (one matrix product per look, batched over ε and μ_std, so
one pass serves a whole column of the (m, ε) grid). Exit masses through the
two moving barriers are split at the barrier within each grid cell.

Stage grouping. With N = 10⁶ and m = 50 there are 20,000 looks, most of them
in the middle where consecutive looks are only Δs = mN/(n(N−n)) ≈ 2·10⁻⁴ apart
in log-time; there the monitoring is practically continuous. Consecutive
stages closer than ``look_spacing`` in s are therefore grouped into one look,
and the discreteness of the true monitoring is restored with the continuity
correction of Broadie, Glasserman and Kou (1997): a barrier watched every Δ
behaves like a continuous one shifted outward by β√Δ, β = −ζ(1/2)/√(2π) ≈
0.5826, so a look standing for k stages spread over D uses the barrier
q + β(√(D/k) − √D). Stopping mass at a grouped look is charged the mean of the
group's stage sizes. ``look_spacing = 0`` keeps every stage (exact up to the
grid). The result is checked against a direct simulation of the walk in the
tests.

References
----------
.. [1] Korattikara, A., Chen, Y. and Welling, M. (2014). Austerity in MCMC
   land: cutting the Metropolis-Hastings budget. ICML 2014, Algorithm 1,
   Sections 4-5 and Appendix.
.. [2] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
   minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 6 and
   Appendix C.2.1 (the grid of m and ε searched).
.. [3] Broadie, M., Glasserman, P. and Kou, S. (1997). A continuity correction
   for discrete barrier options. Mathematical Finance 7(4).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from tallmcmc.acceptance import AcceptanceTest, Decision, info_for, is_bad
from tallmcmc.model import Model
from tallmcmc.sequential import (
    checked_batch_size,
    full_data_log_ratios,
    minibatch_test_init,
    run_sequential_test,
    sample_variance,
)

DEFAULT_BATCH_SIZES = (50, 100, 150, 200, 250, 300, 350, 400, 450, 500)
DEFAULT_EPSILONS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.2)
# Broadie-Glasserman-Kou constant −ζ(1/2)/√(2π)
_CONTINUITY_CORRECTION = 0.5825971579390106
_GRID_HALF_WIDTH = 6.5
# the default expected data use averages μ_std uniformly over [0, WEIGHTED_GAP_RANGE]
WEIGHTED_GAP_RANGE = 5.0


# ----------------------------------------------------------------------------
# Host-side design computation (NumPy / SciPy)
# ----------------------------------------------------------------------------


def sequential_test_characteristics(
    num_data: int,
    batch_size: int,
    epsilons,
    standardized_gaps,
    *,
    look_spacing: float = 0.1,
) -> tuple[np.ndarray, np.ndarray]:
    """Error and expected data use of AustereMH's sequential t-test (CLT model).

    Parameters
    ----------
    num_data
        N.
    batch_size
        m: stages at n = m, 2m, …; the decision at n = N is exact.
    epsilons
        Per-look thresholds ε, shape ``(E,)``.
    standardized_gaps
        μ_std = (μ − μ₀)√(N − 1)/σ_l values, shape ``(M,)`` (the error is
        symmetric in the sign; ``0`` means the limit μ_std → 0⁺).
    look_spacing
        Stages closer than this in log-time s = log(n/(N − n)) are grouped
        into one look with a continuity correction (see the module
        docstring); 0 keeps every stage.

    Returns
    -------
    (error, data_fraction)
        Arrays ``(E, M)``: the probability of a decision opposite to the exact
        one, and the expected fraction n/N of the data used.
    """
    num_data = int(num_data)
    batch_size = int(batch_size)
    epsilons = np.atleast_1d(np.asarray(epsilons, float))
    gaps = np.abs(np.atleast_1d(np.asarray(standardized_gaps, float)))
    sizes = np.arange(batch_size, num_data, batch_size, dtype=float)  # looks before n = N
    num_eps, num_gaps = epsilons.size, gaps.size
    if sizes.size == 0:  # a single stage of all N points: exact
        return np.zeros((num_eps, num_gaps)), np.ones((num_eps, num_gaps))
    tau = sizes / (num_data - sizes)
    log_tau = np.log(tau)
    keep = np.ones(sizes.size, bool)
    if look_spacing > 0 and sizes.size > 1:
        bins = np.floor((log_tau - log_tau[0]) / look_spacing)
        keep[:-1] = bins[:-1] != bins[1:]
        keep[0] = True
    looks = np.flatnonzero(keep)

    spacing = np.diff(log_tau[looks])
    smallest = float(np.min(spacing)) if spacing.size else 1.0
    kernel_scale = math.sqrt(-math.expm1(-smallest))
    step = min(0.07, kernel_scale / 3.0)
    grid = np.arange(-_GRID_HALF_WIDTH, _GRID_HALF_WIDTH + step / 2, step)
    lower_edges, upper_edges = grid - step / 2, grid + step / 2

    mass = stats.norm.pdf(grid) * step
    mass = np.broadcast_to(mass / mass.sum(), (num_eps * num_gaps, grid.size)).copy()
    error = np.zeros(num_eps * num_gaps)
    data = np.zeros(num_eps * num_gaps)
    rows_epsilon = np.repeat(np.arange(num_eps), num_gaps)
    rows_gap = np.tile(gaps, num_eps)
    active = np.arange(num_eps * num_gaps)  # rows with mass left
    previous = -1
    for look in looks:
        if previous >= 0:
            distance = log_tau[look] - log_tau[previous]
            rho = math.exp(-distance / 2)
            scale = math.sqrt(-math.expm1(-distance))
            kernel = stats.norm.pdf((grid[None, :] - rho * grid[:, None]) / scale)
            kernel /= np.maximum(kernel.sum(axis=1, keepdims=True), 1e-300)
            mass[active] = mass[active] @ kernel
            grouped = look - previous
            charged = 0.5 * (sizes[previous + 1] + sizes[look]) if grouped > 1 else sizes[look]
            shift = _CONTINUITY_CORRECTION * (math.sqrt(distance / grouped) - math.sqrt(distance))
        else:
            grouped, charged, shift = 1, sizes[look], 0.0
        barrier = stats.t.isf(epsilons, sizes[look] - 1.0)[rows_epsilon[active]] + shift
        centre = rows_gap[active] * math.sqrt(tau[look])
        upper = (barrier - centre)[:, None]  # V ≥ upper: accept
        lower = (-barrier - centre)[:, None]  # V ≤ lower: reject
        upper_fraction = np.clip((upper_edges - upper) / step, 0.0, 1.0)
        lower_fraction = np.minimum(np.clip((lower - lower_edges) / step, 0.0, 1.0), 1.0 - upper_fraction)
        current = mass[active]
        exit_up = np.sum(current * upper_fraction, axis=-1)
        exit_down = np.sum(current * lower_fraction, axis=-1)
        error[active] += exit_down
        data[active] += (exit_up + exit_down) * charged
        current *= 1.0 - upper_fraction - lower_fraction
        mass[active] = current
        active = active[current.sum(axis=-1) > 1e-13]
        previous = look
        if active.size == 0:
            break
    survived = np.sum(mass, axis=-1)
    data = data / num_data + survived
    shape = (num_eps, num_gaps)
    return error.reshape(shape), np.minimum(data, 1.0).reshape(shape)


@dataclasses.dataclass(frozen=True)
class AustereDesign:
    """A choice of AustereMH's stage size m and per-look threshold ε.

    Attributes
    ----------
    batch_size, epsilon
        The chosen (m, ε).
    error
        Its worst-case probability of a wrong decision over the gaps considered.
    expected_data_fraction
        Its expected data use as a fraction of N (see
        :func:`choose_austere_parameters` for the averaging).
    batch_sizes, epsilons, standardized_gaps, gap_weights
        The grid searched.
    errors, data_fractions
        Arrays ``(len(batch_sizes), len(epsilons), len(standardized_gaps))``.
    """

    batch_size: int
    epsilon: float
    error: float
    expected_data_fraction: float
    batch_sizes: tuple
    epsilons: tuple
    standardized_gaps: np.ndarray
    gap_weights: np.ndarray
    errors: np.ndarray
    data_fractions: np.ndarray


def default_standardized_gaps(num_data: int, batch_sizes=DEFAULT_BATCH_SIZES, epsilons=DEFAULT_EPSILONS) -> np.ndarray:
    """0 and 80 log-spaced gaps from 10⁻³ up to the gap at which every design of
    the grid stops at its first stage with probability ≈ 1:
    ``μ_max = (q + 4)·√(N/m_min)`` with q the largest t-quantile of the grid.
    """
    smallest = min(batch_sizes)
    largest_quantile = float(stats.t.isf(min(epsilons), max(smallest - 1, 1)))
    top = (largest_quantile + 4.0) * math.sqrt(max(num_data - smallest, 1) / smallest)
    return np.concatenate([[0.0], np.geomspace(1e-3, max(top, 1e-2), 80)])


def _trapezoid_weights(points: np.ndarray) -> np.ndarray:
    weights = np.zeros(points.size)
    if points.size == 1:
        return np.ones(1)
    widths = np.diff(points)
    weights[:-1] += widths / 2
    weights[1:] += widths / 2
    return weights / weights.sum()


@functools.lru_cache(maxsize=32)
def _characteristics_table(num_data, batch_sizes, epsilons, gaps_key, look_spacing):
    gaps = np.asarray(gaps_key, float)
    errors = np.empty((len(batch_sizes), len(epsilons), gaps.size))
    data = np.empty_like(errors)
    for i, size in enumerate(batch_sizes):
        errors[i], data[i] = sequential_test_characteristics(
            num_data, min(size, num_data), epsilons, gaps, look_spacing=look_spacing
        )
    return errors, data


def _check_grid(batch_sizes, epsilons) -> tuple[tuple, tuple]:
    batch_sizes = tuple(int(b) for b in batch_sizes)
    epsilons = tuple(float(e) for e in epsilons)
    if not batch_sizes or any(b < 2 for b in batch_sizes):
        raise ValueError(f"batch_sizes must be a non-empty sequence of integers >= 2; got {batch_sizes!r}")
    if not epsilons or any(not (0.0 < e < 1.0) for e in epsilons):
        raise ValueError(f"epsilons must be a non-empty sequence of thresholds in (0, 1); got {epsilons!r}")
    return batch_sizes, epsilons


def choose_austere_parameters(
    error_bound: float,
    num_data: int,
    batch_sizes=DEFAULT_BATCH_SIZES,
    epsilons=DEFAULT_EPSILONS,
    *,
    standardized_gaps=None,
    gap_weights=None,
    look_spacing: float = 0.1,
) -> AustereDesign:
    """Grid search for AustereMH(c)'s (m, ε) (Seita et al. 2017, Appendix C.2.1).

    For every (m, ε) of the grid, the probability of a wrong decision E(μ_std)
    and the expected fraction of data used π̄(μ_std) are computed from the CLT
    random-walk model of the sequential t-test (Korattikara et al. 2014,
    Section 4; see :func:`sequential_test_characteristics` and the module
    docstring). The design chosen minimises the expected data use

        Σ_k w_k π̄(μ_k)

    among the designs whose **worst-case error** max_k E(μ_k) is at most
    ``error_bound`` (the conservative design: it holds whatever μ_std a step
    meets; the worst case is at μ_std → 0).

    Parameters
    ----------
    error_bound
        Largest acceptable worst-case probability of a wrong decision, in (0, 1).
    num_data
        N.
    batch_sizes, epsilons
        The grid (default: Appendix C.2.1's m ∈ {50, …, 500}, ε ∈ {0.001,
        0.005, 0.01, 0.05, 0.1, 0.2}).
    standardized_gaps
        The μ_std values considered (default :func:`default_standardized_gaps`).
    gap_weights
        Weights of those values in the expected data use (normalised here).
        Default: a **uniform density of μ_std on [0, 5]** (trapezoid weights
        of the grid points there; 0 elsewhere): the density of μ − μ₀ =
        (Δ − log u)/N is smooth and nearly flat near 0, and this is the
        region where the test is long and its errors are made. With this
        weighting the search reproduces the designs Seita et al. (2017,
        Table 5) report from Korattikara et al.'s code: error bound 0.1 at
        N = 13,000 gives (m, ε) = (450, 0.01), error bound 0.2 at N = 100,000
        gives (300, 0.01). (Weighting the whole range of μ_std uniformly
        instead favours small m and ε and does not reproduce them.)
    look_spacing
        Grouping of stages in the computation (see
        :func:`sequential_test_characteristics`).

    Returns
    -------
    AustereDesign

    Notes
    -----
    The worst case (μ_std → 0⁺) is large for tall data: the walk is watched
    N/m times, so even ε = 0.001 errs there with probability ≈ 0.05-0.07 at
    N = 10⁶. For the Gaussian-mixture setting (N = 10⁶, default grid) the
    search gives

    ============  ============  ================
    error bound   (m, ε)        worst-case error
    ============  ============  ================
    0.05          (500, 0.001)  0.049
    0.10, 0.15    (50, 0.001)   0.067
    0.18          (250, 0.005)  0.180
    0.20          (100, 0.005)  0.199
    0.22, 0.25    (50, 0.005)   0.212
    0.30          (100, 0.01)   0.299
    ============  ============  ================

    so Seita et al.'s "ε = 0.005" for that experiment is the per-look
    threshold, reached for error bounds in [0.164, 0.255); with (100, 0.005)
    the sampler uses ≈ 1.2·10⁴ points per step there (the paper reports
    12,562).

    Raises
    ------
    ValueError
        If no design of the grid meets ``error_bound`` (the message gives the
        smallest worst-case error available).

    References
    ----------
    .. [1] Korattikara, A., Chen, Y. and Welling, M. (2014). Austerity in MCMC
       land: cutting the Metropolis-Hastings budget. ICML 2014.
    .. [2] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
       minibatch acceptance test for Metropolis-Hastings. UAI 2017, Appendix C.2.1.
    """
    error_bound = float(error_bound)
    if not (0.0 < error_bound < 1.0):
        raise ValueError(f"error_bound must lie in (0, 1) (a probability of a wrong decision); got {error_bound!r}")
    if isinstance(num_data, bool) or int(num_data) != num_data or num_data < 2:
        raise ValueError(f"num_data must be an integer >= 2; got {num_data!r}")
    num_data = int(num_data)
    batch_sizes, epsilons = _check_grid(batch_sizes, epsilons)
    gaps = default_standardized_gaps(num_data, batch_sizes, epsilons) if standardized_gaps is None else standardized_gaps
    gaps = np.abs(np.atleast_1d(np.asarray(gaps, float)))
    if gap_weights is None:
        order = np.argsort(gaps)
        within = gaps[order] <= WEIGHTED_GAP_RANGE
        if within.sum() < 2:
            within[:] = True
        weights = np.zeros(gaps.size)
        weights[order[within]] = _trapezoid_weights(gaps[order][within])
    else:
        weights = np.asarray(gap_weights, float)
        if weights.shape != gaps.shape or np.any(weights < 0) or weights.sum() <= 0:
            raise ValueError("gap_weights must be non-negative, not all zero, one per standardized gap")
        weights = weights / weights.sum()
    errors, data = _characteristics_table(num_data, batch_sizes, epsilons, tuple(gaps.tolist()), float(look_spacing))
    worst = errors.max(axis=-1)  # (B, E)
    expected = data @ weights  # (B, E)
    feasible = worst <= error_bound
    if not feasible.any():
        raise ValueError(
            f"no (batch_size, epsilon) of the grid has worst-case error <= error_bound = {error_bound}; "
            f"the smallest available is {worst.min():.4g}. Raise error_bound or add smaller epsilons / larger batch_sizes"
        )
    cost = np.where(feasible, expected + 1e-9 * worst, np.inf)
    i, j = np.unravel_index(np.argmin(cost), cost.shape)
    return AustereDesign(
        batch_size=batch_sizes[i],
        epsilon=epsilons[j],
        error=float(worst[i, j]),
        expected_data_fraction=float(expected[i, j]),
        batch_sizes=batch_sizes,
        epsilons=epsilons,
        standardized_gaps=gaps,
        gap_weights=weights,
        errors=errors,
        data_fractions=data,
    )


def adaptive_design_table(
    error_bound: float,
    num_data: int,
    batch_sizes=DEFAULT_BATCH_SIZES,
    epsilons=DEFAULT_EPSILONS,
    *,
    standardized_gaps=None,
    look_spacing: float = 0.1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """AustereMH(nc)'s lookup table: the cheapest admissible (m, ε) per μ_std.

    For each gap μ_k of the (sorted) grid the design with the least expected
    data use π̄(μ_k) among those with error E(μ_k) ≤ ``error_bound`` is chosen;
    where none qualifies (μ_std near 0) the entry is m = N (the exact test on
    all N points). A step with gap |μ_std| uses the entry of the largest grid
    gap ≤ |μ_std|; E decreases in |μ_std|, so this is conservative.

    Returns
    -------
    (gaps, batch_size, epsilon)
        Sorted gaps ``(K,)`` and the chosen m (int) and ε per gap.
    """
    error_bound = float(error_bound)
    if not (0.0 < error_bound < 1.0):
        raise ValueError(f"error_bound must lie in (0, 1) (a probability of a wrong decision); got {error_bound!r}")
    batch_sizes, epsilons = _check_grid(batch_sizes, epsilons)
    gaps = default_standardized_gaps(num_data, batch_sizes, epsilons) if standardized_gaps is None else standardized_gaps
    gaps = np.unique(np.abs(np.asarray(gaps, float)))
    if gaps[0] != 0.0:
        gaps = np.concatenate([[0.0], gaps])
    errors, data = _characteristics_table(num_data, batch_sizes, epsilons, tuple(gaps.tolist()), float(look_spacing))
    # ties in data use (e.g. every design stopping at its first stage) go to the smaller error
    cost = np.where(errors <= error_bound, data + 1e-9 * errors, np.inf).reshape(-1, gaps.size)  # (B·E, K)
    best = np.argmin(cost, axis=0)
    admissible = np.isfinite(cost[best, np.arange(gaps.size)])
    rows, cols = np.unravel_index(best, (len(batch_sizes), len(epsilons)))
    chosen_sizes = np.where(admissible, np.asarray(batch_sizes)[rows], num_data).astype(np.int32)
    chosen_epsilons = np.where(admissible, np.asarray(epsilons)[cols], 0.0)
    return gaps, chosen_sizes, chosen_epsilons


# ----------------------------------------------------------------------------
# The test itself (JAX)
# ----------------------------------------------------------------------------


def student_t_tail(t: jax.Array, degrees_of_freedom: jax.Array) -> jax.Array:
    """One-sided tail 1 − F_ν(|t|) of Student's t.

    ½ I_{ν/(ν+t²)}(ν/2, ½) for ν ≤ 200. For larger ν the argument ν/(ν+t²)
    is within float32 rounding of 1 and the incomplete beta function loses
    several percent (measured: 5% at ν = 10⁶, t = 0.5), so the expansion in 1/ν
    Φ̄(|t|) + φ(t)[(t³ + t)/(4ν) + (3t⁷ − 7t⁵ − 5t³ − 3t)/(96ν²)] is used there
    (second coefficient checked against SciPy's float64 tail at ν = 10⁴ for
    |t| ∈ [0.5, 4]); the float32 result matches SciPy within 2·10⁻⁴ relative
    for |t| ≤ 3 at every ν tested (tests/test_baselines.py).
    """
    nu = degrees_of_freedom
    t = jnp.abs(t)
    safe_nu = jnp.minimum(nu, 200.0)
    beta_form = 0.5 * jax.scipy.special.betainc(safe_nu / 2, jnp.asarray(0.5, nu.dtype), safe_nu / (safe_nu + t**2))
    density = jnp.exp(-0.5 * t**2) / jnp.sqrt(2 * jnp.pi).astype(t.dtype)
    expansion = jax.scipy.special.ndtr(-t) + density * (
        (t**3 + t) / (4 * nu) + (3 * t**7 - 7 * t**5 - 5 * t**3 - 3 * t) / (96 * nu**2)
    )
    return jnp.where(nu > 200, expansion, beta_form)


def _check_chunk_size(chunk_size) -> int | None:
    if chunk_size is None:
        return None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer or None; got {chunk_size!r}")
    return int(chunk_size)


def _sequential_t_test(
    rng_key, model: Model, position, proposed, log_ratio_offset, batch_size, epsilon, *, chunk_size, first_stage, skip=False
):
    """Run the sequential t-test with (possibly traced) m and ε.

    Returns (accepted, state, estimate, variance, tail, log_u).
    """
    num_data = model.num_data
    dtype = log_ratio_offset.dtype
    uniform_key, order_key = jax.random.split(rng_key)
    log_u = jnp.log(jax.random.uniform(uniform_key, dtype=dtype))
    threshold = log_u - log_ratio_offset  # N·μ₀
    batch_size = jnp.asarray(batch_size, jnp.int32)
    epsilon = jnp.asarray(epsilon, dtype)

    def statistics(state):
        n = state.count.astype(dtype)
        correction = jnp.maximum(1 - (n - 1) / (num_data - 1), 0.0) if num_data > 1 else jnp.zeros((), dtype)
        # variance of N·l̄ (the estimate of Δ − offset): N² s_l²/n · (1 − (n−1)/(N−1))
        variance = float(num_data) ** 2 * sample_variance(state) / jnp.maximum(n, 1) * correction
        t = (float(num_data) * state.mean - threshold) / jnp.sqrt(variance)
        tail = student_t_tail(t, jnp.maximum(n - 1, 1))
        return variance, tail

    def stop(state):
        _, tail = statistics(state)
        at_stage = (state.count % batch_size) == 0
        return at_stage & (tail < epsilon)

    def next_stage(count, stage):
        return (count // batch_size + 1) * batch_size

    state = run_sequential_test(
        order_key,
        model,
        position,
        proposed,
        chunk_size=chunk_size,
        first_stage=first_stage,
        next_stage=next_stage,
        stop=stop,
        dtype=dtype,
        skip=skip | (log_ratio_offset == -jnp.inf),
    )
    variance, tail = statistics(state)
    full = state.count >= num_data
    estimate = float(num_data) * state.mean + log_ratio_offset
    accepted = estimate > log_u
    variance = jnp.where(full | (state.count < 2), 0.0, variance)
    tail = jnp.where(full, 0.0, tail)
    return accepted, state, estimate, variance, tail, log_u


def austere(batch_size: int, epsilon: float, *, chunk_size: int | None = None) -> AcceptanceTest:
    """The AustereMH sequential t-test with fixed stage size m and threshold ε.

    Algorithm 1 of Korattikara et al. (2014), with the details of the module
    docstring: data drawn without replacement, stages n = m, 2m, …, the
    finite-population correction in the standard error, the Student-t tail
    with n − 1 degrees of freedom, and the exact decision at n = N.

    Parameters
    ----------
    batch_size
        m: points per stage (``2 <= batch_size <= N``).
    epsilon
        ε ∈ (0, 1): the test stops at the first stage whose one-sided tail
        probability δ = 1 − F_{n−1}(|t|) is below ε.
    chunk_size
        Points evaluated per loop iteration (default ``batch_size``; a larger
        chunk is masked to the exact stage sizes).

    Returns
    -------
    AcceptanceTest
        Its :class:`~tallmcmc.acceptance.TestInfo` reports ``statistic`` =
        N·l̄ + offset (the estimate of Δ, so that accept ⇔ statistic > log u),
        ``variance`` = the estimated variance of that estimate (with the
        finite-population correction; 0 at n = N), ``error_bound`` = the tail
        δ at the stage where the test stopped (0 at n = N), ``data_used`` =
        ``data_used_by_test`` = n.

    References
    ----------
    .. [1] Korattikara, A., Chen, Y. and Welling, M. (2014). Austerity in MCMC
       land: cutting the Metropolis-Hastings budget. ICML 2014, Algorithm 1.
    .. [2] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
       minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 6.
    """
    batch_size = checked_batch_size(batch_size)
    epsilon_value = float(epsilon)
    if not (0.0 < epsilon_value < 1.0):
        raise ValueError(f"epsilon must lie in (0, 1) (a threshold on the t-test's tail probability); got {epsilon!r}")
    chunk_size = _check_chunk_size(chunk_size) or batch_size

    init = minibatch_test_init(batch_size)

    def decide(rng_key, model: Model, position, proposed, log_ratio_offset, cache):
        return _fixed_design_decision(
            rng_key, model, position, proposed, log_ratio_offset, cache, batch_size, epsilon_value, chunk_size
        )

    return AcceptanceTest(init, decide, "austere")


def _fixed_design_decision(
    rng_key, model: Model, position, proposed, log_ratio_offset, cache, batch_size: int, epsilon: float, chunk_size: int
) -> Decision:
    """One AustereMH decision with stage size ``batch_size`` and threshold ``epsilon``."""
    accepted, state, estimate, variance, tail, _ = _sequential_t_test(
        rng_key,
        model,
        position,
        proposed,
        log_ratio_offset,
        batch_size,
        epsilon,
        chunk_size=min(chunk_size, model.num_data),
        first_stage=batch_size,
    )
    bad = state.non_finite | is_bad(estimate)
    info = info_for(
        estimate,
        state.count,
        variance=variance,
        error_bound=tail,
        used_full_data=state.count >= model.num_data,
        non_finite=bad,
    )
    return Decision(accepted & ~bad, cache, info)


def austere_conservative(
    error_bound: float,
    batch_sizes=DEFAULT_BATCH_SIZES,
    epsilons=DEFAULT_EPSILONS,
    *,
    num_data: int | None = None,
    standardized_gaps=None,
    gap_weights=None,
    look_spacing: float = 0.1,
    chunk_size: int | None = None,
) -> AcceptanceTest:
    """AustereMH(c): the sequential t-test with (m, ε) from the conservative grid search.

    (m, ε) is chosen once by :func:`choose_austere_parameters` (worst-case
    error over μ_std at most ``error_bound``, least expected data use) and
    kept for every step; no full pass over the data is ever made.

    Parameters
    ----------
    error_bound
        Bound on the worst-case probability of a wrong accept/reject decision.
    batch_sizes, epsilons
        The grid searched (Seita et al. 2017, Appendix C.2.1).
    num_data
        N; if given the design is chosen now (and appears in the test's name),
        otherwise when the test first meets a model.
    standardized_gaps, gap_weights, look_spacing
        Passed to :func:`choose_austere_parameters`.
    chunk_size
        Points evaluated per loop iteration (default: the chosen m).

    Returns
    -------
    AcceptanceTest

    References
    ----------
    .. [1] Korattikara, A., Chen, Y. and Welling, M. (2014). Austerity in MCMC
       land: cutting the Metropolis-Hastings budget. ICML 2014, Section 5.
    .. [2] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
       minibatch acceptance test for Metropolis-Hastings. UAI 2017, Appendix C.2.1.
    """
    batch_sizes, epsilons = _check_grid(batch_sizes, epsilons)
    error_bound = float(error_bound)
    if not (0.0 < error_bound < 1.0):
        raise ValueError(f"error_bound must lie in (0, 1) (a probability of a wrong decision); got {error_bound!r}")
    chunk_size = _check_chunk_size(chunk_size)
    gaps_key = None if standardized_gaps is None else tuple(np.asarray(standardized_gaps, float).ravel().tolist())
    weights_key = None if gap_weights is None else tuple(np.asarray(gap_weights, float).ravel().tolist())

    @functools.lru_cache(maxsize=8)
    def design_for(size: int) -> AustereDesign:
        return choose_austere_parameters(
            error_bound,
            size,
            batch_sizes,
            epsilons,
            standardized_gaps=gaps_key,
            gap_weights=weights_key,
            look_spacing=look_spacing,
        )

    name = "austere_conservative"
    if num_data is not None:
        design = design_for(int(num_data))
        name = f"austere_conservative(m={design.batch_size}, epsilon={design.epsilon})"

    def init(model: Model, position) -> tuple:
        if min(batch_sizes) > model.num_data:
            raise ValueError(
                f"every batch size of the grid exceeds the number of data points N = {model.num_data}; "
                "pass smaller batch_sizes"
            )
        design_for(model.num_data)
        return ()

    def decide(rng_key, model: Model, position, proposed, log_ratio_offset, cache):
        design = design_for(model.num_data)
        size = min(design.batch_size, model.num_data)
        return _fixed_design_decision(
            rng_key, model, position, proposed, log_ratio_offset, cache, size, design.epsilon, chunk_size or size
        )

    return AcceptanceTest(init, decide, name)


def austere_adaptive(
    error_bound: float,
    batch_sizes=DEFAULT_BATCH_SIZES,
    epsilons=DEFAULT_EPSILONS,
    *,
    standardized_gaps=None,
    look_spacing: float = 0.1,
    chunk_size: int | None = None,
) -> AcceptanceTest:
    """AustereMH(nc): per-step (m, ε) chosen from the step's own standardized gap.

    Each step draws u, makes a **full pass** over the data to get μ and the
    full-data standard deviation σ_l of the lᵢ, computes μ_std =
    (μ − μ₀)√(N − 1)/σ_l, looks up the cheapest design of the grid whose error
    at that μ_std is at most ``error_bound`` (:func:`adaptive_design_table`,
    computed once per N on the host), and runs the sequential t-test with it.
    Where no design of the grid qualifies (|μ_std| near 0) the step decides
    exactly from the full pass it has already made.

    A bound on the error *at every μ_std* is weaker than it sounds: the design
    chosen for each μ_std errs at about the bound's rate everywhere, so even
    hopeless downhill moves are accepted that often. On a conjugate Gaussian
    model (N = 2000, random walk of 2 posterior sds) a bound of 0.05 inflates
    the posterior variance by ≈ 60 %; 0.002 is indistinguishable from exact
    in 6000 draws.

    The full pass is counted in ``data_used`` (N extra points) and not in
    ``data_used_by_test``, which counts the sequential test's points (N when
    the exact fallback decided), as the papers' tables do.

    Parameters
    ----------
    error_bound
        Bound on the probability of a wrong decision at the step's μ_std.
    batch_sizes, epsilons
        The grid (Seita et al. 2017, Appendix C.2.1).
    standardized_gaps, look_spacing
        Passed to :func:`adaptive_design_table`.
    chunk_size
        Points evaluated per loop iteration (default: the smallest batch size;
        stages are honoured exactly whatever it is).

    Returns
    -------
    AcceptanceTest

    References
    ----------
    .. [1] Korattikara, A., Chen, Y. and Welling, M. (2014). Austerity in MCMC
       land: cutting the Metropolis-Hastings budget. ICML 2014, Section 5.
    .. [2] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
       minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 6
       and Appendix C.2.1.
    """
    batch_sizes, epsilons = _check_grid(batch_sizes, epsilons)
    error_bound = float(error_bound)
    if not (0.0 < error_bound < 1.0):
        raise ValueError(f"error_bound must lie in (0, 1) (a probability of a wrong decision); got {error_bound!r}")
    chunk_size = _check_chunk_size(chunk_size) or min(batch_sizes)
    gaps_key = None if standardized_gaps is None else tuple(np.asarray(standardized_gaps, float).ravel().tolist())

    @functools.lru_cache(maxsize=8)
    def table_for(size: int):
        sizes = tuple(min(b, size) for b in batch_sizes)
        return adaptive_design_table(
            error_bound, size, sizes, epsilons, standardized_gaps=gaps_key, look_spacing=look_spacing
        )

    def init(model: Model, position) -> tuple:
        if model.num_data < 2:
            raise ValueError("austere_adaptive needs N >= 2 data points")
        table_for(model.num_data)
        return ()

    def decide(rng_key, model: Model, position, proposed, log_ratio_offset, cache):
        num_data = model.num_data
        dtype = log_ratio_offset.dtype
        gaps, sizes, thresholds = table_for(num_data)
        values = full_data_log_ratios(model, position, proposed).astype(dtype)
        mean = jnp.mean(values)
        spread = jnp.std(values)
        # the sequential test draws u from the same key, so μ₀ here is its μ₀
        uniform_key, _ = jax.random.split(rng_key)
        log_u = jnp.log(jax.random.uniform(uniform_key, dtype=dtype))
        gap = (float(num_data) * mean + log_ratio_offset - log_u) / float(num_data)  # μ − μ₀
        standardized = jnp.abs(gap) * math.sqrt(num_data - 1) / spread
        standardized = jnp.where(jnp.isnan(standardized), 0.0, standardized)
        index = jnp.clip(jnp.searchsorted(jnp.asarray(gaps, dtype), standardized, side="right") - 1, 0, gaps.size - 1)
        size = jnp.asarray(sizes)[index]
        threshold = jnp.asarray(thresholds, dtype)[index]
        exact = size >= num_data
        accepted, state, estimate, variance, tail, _ = _sequential_t_test(
            rng_key,
            model,
            position,
            proposed,
            log_ratio_offset,
            jnp.maximum(size, 2),
            threshold,
            chunk_size=min(chunk_size, num_data),
            first_stage=min(min(batch_sizes), num_data),
            skip=exact,
        )
        exact_estimate = float(num_data) * mean + log_ratio_offset
        estimate = jnp.where(exact, exact_estimate, estimate)
        accepted = jnp.where(exact, exact_estimate > log_u, accepted)
        used = jnp.where(exact, num_data, state.count)
        bad = state.non_finite | is_bad(estimate)
        info = info_for(
            estimate,
            num_data + used,
            data_used_by_test=used,
            variance=jnp.where(exact, 0.0, variance),
            error_bound=jnp.where(exact, 0.0, tail),
            used_full_data=used >= num_data,
            non_finite=bad,
        )
        return Decision(accepted & ~bad, cache, info)

    return AcceptanceTest(init, decide, "austere_adaptive")
