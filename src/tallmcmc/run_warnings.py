"""What a run's own step statistics say about it, and the warnings that name the cause.

:func:`tallmcmc.sample` calls :func:`warn_about_run` once the draws are made;
:func:`tallmcmc.sample_tall` reads the same quantities into its diagnosis.

* **Error bounds that guarantee nothing**: most subsampled steps report an
  ``error_bound`` of :data:`VACUOUS_ERROR_BOUND` or more.
* **A subsampling test that does not pay**: it used more than
  :data:`MOST_OF_THE_DATA` of N per step on average. Two different causes
  make a minibatch grow, and the warning says which one it measured:

  - *spread*: N²·Var(lᵢ), the variance of the estimate of Δ from a single
    datum scaled to N, is large, so Var(Δ*) = N²Var(lᵢ)/b·(1 − b/N) reaches
    σ² only for b near N (an untempered posterior, long steps, a control
    variate centred away from the mode or too few data for its dimension);
  - *tail weight*: the lᵢ are heavy-tailed (kurtosis κ), so the minibatch
    Barker test's tail guard asks for b ≥ (κ − 1)/0.35² before it trusts the
    variance estimate, however small N²Var(lᵢ) is (control-variate residuals
    of a model with a few extreme rows); the guard acts only while the
    typical first-stage Var(Δ*) is at least 0.1σ²;
  - *small N*: neither rule asks for more than the first minibatch, which is
    itself a large part of N (``batch_size`` against a small data set).
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np


class InexactProposalWarning(UserWarning):
    """A proposal without its true log ratio (SGHMC) runs under a real test: the chain's target is not the posterior."""


class DataUseWarning(RuntimeWarning):
    """A subsampling test used more than :data:`MOST_OF_THE_DATA` of N per step (:func:`warn_if_subsampling_does_not_pay`).

    A ``RuntimeWarning``, so filters on that still catch it; its own class lets code (``sample_tall``'s watched kept
    draws, which answer it by switching to the exact test) and users single it out without reading its text:
    ``warnings.filterwarnings("error", category=tallmcmc.run_warnings.DataUseWarning)``.
    """


#: A per-step bound on |P(accept) − Barker| at or above this guarantees next to nothing (``sample``
#: warns when most subsampled steps report one; the medians measured on our targets: docs/minibatch_error.md).
VACUOUS_ERROR_BOUND = 0.25
#: A subsampling test that touches more than this fraction of N per step on average saves little over
#: the exact test (and its per-datum work, a residual with a control variate, costs more than a
#: log-likelihood): ``sample`` warns.
MOST_OF_THE_DATA = 0.25
_SMALL_NOISE = 0.1  # the minibatch Barker test's tail guard stands down below this typical first-stage Var(Δ*) (σ² = 1)
#: The tail guard's relative standard error of the variance estimate, the minibatch tests' default ``variance_rse``:
#: it asks for b ≥ (κ − 1)/0.35² before it trusts the variance of lᵢ with kurtosis κ.
TAIL_GUARD_VARIANCE_RSE = 0.35


class DataUse(NamedTuple):
    """How much of the data a subsampling test used, and why (see the module docstring)."""

    fraction: float  # mean data_used_by_test / N over the steps
    spread: float  # median over subsampled steps of the estimated N²·Var(lᵢ); NaN if no step can tell
    kurtosis: float  # the tail guard's pooled kurtosis of the lᵢ (median over chains); NaN if unknown
    guard_size: float  # (κ − 1)/variance_rse², the minibatch the tail guard asks for (0 if it stands down)
    spread_size: float  # N²V/(1 + N V): the minibatch at which Var(Δ*) = N²V(1/b − 1/N) falls to σ² = 1
    first_size: float  # the first minibatch (the smallest a step used)
    cause: str  # "spread", "tail weight", "small N" or "" (not measured)


def data_use(
    info: dict[str, np.ndarray], num_data: int, cache: Any = None, variance_rse: float = TAIL_GUARD_VARIANCE_RSE
) -> DataUse:
    """Measure a subsampling run's data use and its cause from ``info`` (and the tail guard's ``cache``).

    N²·Var(lᵢ) is recovered from each step's reported Var(Δ*) and minibatch
    size b as Var(Δ*)·b/(1 − b/N), on the steps with 2 ≤ b < N (at b = N the
    finite-population factor is 0 and the step says nothing of the spread).
    The kurtosis is that of the minibatch Barker test's
    :class:`~tallmcmc.acceptance.minibatch_barker.TailPool`, Σz⁴/count, read
    from ``cache`` (the chains' final test caches) when it is one: the median
    over chains, or, where the guard acts in some chains, the median over
    those. The guard counts as acting in a chain when its pool's typical
    first-stage Var(Δ*) (``first_variance/steps``) is at least 0.1 (σ² = 1),
    as in the test; without a pool, when N²Var(lᵢ)/b₀ is. The chains that
    guard are those that grow their minibatch, so they name the cause: a
    median over chains hid two guarding chains of four, and named "small N"
    (the 2026-11-29 user-model audit, a Poisson regression with heavy-tailed
    covariates).
    """
    used = np.asarray(info["data_used_by_test"], np.float64)
    fraction = float(used.mean()) / num_data
    variance = np.asarray(info["variance"], np.float64)
    informative = (used >= 2) & (used < num_data) & np.isfinite(variance) & ~np.asarray(info["non_finite"], bool)
    if informative.any():
        b = used[informative]
        per_datum = variance[informative] * b / (1.0 - b / num_data)  # N²·Var(lᵢ)
        spread = float(np.median(per_datum))
    else:
        spread = float("nan")
    positive = used[used > 0]
    first_size = float(positive.min()) if positive.size else float("nan")
    spread_size = spread / (1.0 + spread / num_data) if np.isfinite(spread) else float("nan")
    kurtosis = float("nan")
    guarding = np.isfinite(spread) and spread / max(first_size, 1.0) >= _SMALL_NOISE
    fourth, count = getattr(cache, "fourth", None), getattr(cache, "count", None)
    if fourth is not None and count is not None:
        fourth, count = np.asarray(fourth, np.float64).ravel(), np.asarray(count, np.float64).ravel()
        known = count > 0
        if known.any():
            kurtosis = float(np.median(fourth[known] / count[known]))
        first_variance = getattr(cache, "first_variance", None)
        steps = getattr(cache, "steps", None)
        if first_variance is not None and steps is not None:
            first_variance, steps = np.ravel(np.asarray(first_variance, np.float64)), np.ravel(np.asarray(steps))
            with np.errstate(divide="ignore", invalid="ignore"):
                guards = (steps > 0) & (first_variance / np.where(steps > 0, steps, 1.0) >= _SMALL_NOISE)
            guarding = bool(guards.any())
            if guarding and (guards & known).any():
                kurtosis = float(np.median(fourth[guards & known] / count[guards & known]))
    guard_size = ((kurtosis - 1.0) / variance_rse**2 if guarding else 0.0) if np.isfinite(kurtosis) else float("nan")
    cause = ""
    asked = {name: size for name, size in (("tail weight", guard_size), ("spread", spread_size)) if np.isfinite(size)}
    if asked:
        cause = max(asked, key=asked.get)
        if asked[cause] <= first_size:
            cause = "small N"
    return DataUse(fraction, spread, kurtosis, guard_size, spread_size, first_size, cause)


def warn_if_error_bounds_vacuous(info: dict[str, np.ndarray], stacklevel: int = 3) -> None:
    """Warn when most subsampled steps report an error bound that guarantees nothing."""
    # steps that met a non-finite ratio (or, for TunaMH, a violated bound reported in error_bound) rejected and are
    # warned about on their own
    subsampled = ~info["used_full_data"] & ~info["non_finite"] & (info["error_bound"] > 0)
    if not subsampled.any():
        return
    vacuous = float(np.mean(info["error_bound"][subsampled] >= VACUOUS_ERROR_BOUND))
    if vacuous > 0.5:
        median = float(np.median(info["error_bound"][subsampled]))
        warnings.warn(
            f"the test's own error bound was >= {VACUOUS_ERROR_BOUND} on {100 * vacuous:.0f}% of the subsampled steps "
            f"(median {median:.2g}, info['error_bound']): its decisions may be far from the exact test's and the draws "
            "biased. Remedies: a control variate (tallmcmc.taylor_control_variate at tallmcmc.find_mode), "
            "a larger batch_size, a bound on the error (minibatch_barker(..., delta=0.05)), or an exact test",
            RuntimeWarning,
            stacklevel=stacklevel,
        )


def warn_if_subsampling_does_not_pay(
    test_name: str,
    info: dict[str, np.ndarray],
    num_data: int,
    cache: Any,
    uses_control_variate: bool,
    stacklevel: int = 3,
) -> DataUse:
    """Warn when a subsampling test used more than :data:`MOST_OF_THE_DATA` of N per step, naming the cause."""
    use = data_use(info, num_data, cache)
    if use.fraction <= MOST_OF_THE_DATA:
        return use
    measured = []
    if np.isfinite(use.spread):
        measured.append(f"N²·Var(lᵢ) ≈ {use.spread:.3g}, so Var(Δ*) < σ² = 1 needs b ≈ {use.spread_size:,.0f}")
    if np.isfinite(use.kurtosis):
        measured.append(
            f"kurtosis of the lᵢ ≈ {use.kurtosis:.3g}, so the tail guard asks for b ≥ (κ − 1)/0.35² ≈ "
            f"{use.guard_size:,.0f}"
        )
    numbers = f" ({'; '.join(measured)})" if measured else ""
    subject = "control-variate residuals" if uses_control_variate else "per-datum log ratios lᵢ"
    if use.cause == "small N":
        cause = (
            f"N is small for this test: its first minibatch ({use.first_size:,.0f} points) is already a large part of "
            "it and no rule asked for more. Use a smaller batch_size, or the exact test (tallmcmc.exact_metropolis()), "
            "which costs little more here"
        )
    elif use.cause == "tail weight":
        cause = (
            f"the {subject} are heavy-tailed (a few data carry most of Δ) rather than widely spread. "
            "A larger batch_size does not help; the exact test (tallmcmc.exact_metropolis()) is cheaper here, "
            "or TunaMH with a bound (tallmcmc.tuna), or minibatch_barker(variance_rse=None) if you accept the "
            "bias the guard prevents (docs/minibatch_error.md)"
        )
    elif uses_control_variate:
        cause = (
            "the residuals are widely spread: the control variate's centre is far from the mode (build it at "
            "tallmcmc.find_mode(model, start).position), the steps are long, or N is too small for the dimension "
            "(the second-order residual spread grows like d³/N: docs/control_variates.md). The exact test "
            "(tallmcmc.exact_metropolis()) is then cheaper"
        )
    else:
        cause = (
            "the per-datum log ratios are widely spread, as on an untempered posterior or with long steps. "
            "tallmcmc.sample_tall(model) finds the mode, builds a control variate and chooses the test for you; "
            "or add a control variate (minibatch_barker(..., control_variate=tallmcmc.taylor_control_variate(model, "
            "mode))), or use the exact test (tallmcmc.exact_metropolis()), which is cheaper at this fraction"
        )
    warnings.warn(
        f"{test_name} used {100 * use.fraction:.0f}% of the N = {num_data:,} data points per step on average"
        f"{numbers}: {cause}",
        DataUseWarning,
        stacklevel=stacklevel,
    )
    return use
