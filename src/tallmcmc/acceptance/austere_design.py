"""AustereMH's (m, ε) design search, on the host (NumPy/SciPy): the error and
data use of a design, the conservative and per-gap choices.

These functions run once, before sampling; :mod:`tallmcmc.acceptance.austere`
holds the JAX test that uses their designs.

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

import numpy as np

from tallmcmc._checks import error_probability

DEFAULT_BATCH_SIZES = (50, 100, 150, 200, 250, 300, 350, 400, 450, 500)
DEFAULT_EPSILONS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.2)
# Broadie-Glasserman-Kou constant −ζ(1/2)/√(2π)
_CONTINUITY_CORRECTION = 0.5825971579390106
_GRID_HALF_WIDTH = 6.5
# the default expected data use averages μ_std uniformly over [0, WEIGHTED_GAP_RANGE]
WEIGHTED_GAP_RANGE = 5.0


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
    from scipy import stats  # on first use, not at `import tallmcmc` (docs/compilation.md, "The import")

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
    from scipy import stats  # on first use, not at `import tallmcmc` (docs/compilation.md, "The import")

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


def check_grid(batch_sizes, epsilons) -> tuple[tuple, tuple]:
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
    N = 10⁶. The designs this search picks for the Gaussian-mixture setting,
    and how they relate to the paper's "ε = 0.005", are listed in
    ``benchmarks/RESULTS.md``.

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
    error_bound = error_probability(error_bound)
    if isinstance(num_data, bool) or int(num_data) != num_data or num_data < 2:
        raise ValueError(f"num_data must be an integer >= 2; got {num_data!r}")
    num_data = int(num_data)
    batch_sizes, epsilons = check_grid(batch_sizes, epsilons)
    gaps = (
        default_standardized_gaps(num_data, batch_sizes, epsilons) if standardized_gaps is None else standardized_gaps
    )
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
    error_bound = error_probability(error_bound)
    batch_sizes, epsilons = check_grid(batch_sizes, epsilons)
    gaps = (
        default_standardized_gaps(num_data, batch_sizes, epsilons) if standardized_gaps is None else standardized_gaps
    )
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
