"""Which test :func:`tallmcmc.sample_tall`'s kept draws run: the one that costs less per effective draw.

The cost is counted in plain points (one datum's log-likelihood in the exact test's full pass): the minibatch test's
measured residuals per step, each priced at :func:`residual_point_cost` (:data:`RESIDUAL_POINT_COST`, a fixed table
by d), against the exact Metropolis test's N per step, each divided by the ESS per draw its measured acceptance gives
(:func:`ess_per_draw`). :func:`choose_test` makes the choice from warm-up's measurement window and gives its reason
(:class:`TestChoice`); ``docs/sample_tall.md`` ("The steps", 5, and "What a residual costs") has the derivation
and the measurements behind the table.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tallmcmc._checks import positive_finite
from tallmcmc.control_variate import ControlVariate
from tallmcmc.run_warnings import MOST_OF_THE_DATA, DataUse, data_use

__all__ = [
    "PROPOSAL_ROW_COST",
    "RESIDUAL_POINT_COST",
    "TestChoice",
    "barker_acceptance",
    "choose_test",
    "ess_per_draw",
    "residual_point_cost",
]

#: The diagnosis reports a problem where the kept steps accepted less than this fraction of their proposals: the
#: proposal, built on the Laplace approximation at the mode, does not describe the posterior (``docs/sample_tall.md``,
#: "When the posterior is far from its Laplace approximation"); a test choice whose warm-up accepted less under
#: either test gives that as its cause (``"rejected"``).
LOW_ACCEPTANCE = 0.05
#: What one control-variate residual costs, in plain likelihood points (one point of the exact test's full pass),
#: by what each residual evaluates and d: ``"per_datum"`` (second order with per-datum curvature: two
#: log-likelihoods and a nested forward-mode jvp at the centre, gathered rows) and ``"gradient"`` (first order, or a
#: shared curvature: two log-likelihoods and one jvp). Measured on logistic regression (N = 10⁵, 4 chains, chunks of
#: 100 residuals as ``sample_tall``'s minibatch test draws them) on a 2-core Xeon CPU, the run at the lowest load
#: (2.2: both cores), by ``benchmarks/bench_point_costs.py`` (``benchmarks/RESULTS.md``, "What a residual costs";
#: ``docs/sample_tall.md``, the same, with how the ratios move with load and N); between the calibrated d
#: interpolated linearly in log d, outside them the nearest one's value. Since the per-datum residual is computed
#: forward-over-forward (2026-11-30) it costs what the gradient kind costs (within 9% at every d, same run,
#: ``benchmarks/RESULTS.md``, "A residual in forward mode"), so the two rows are the same. Since the keyed permutation
#: walks a domain of at most 2N (2026-11-30; it was 4^9 = 2.6 N at N = 10⁵) a residual's index costs 13.5 ns there
#: instead of 38, and the calibrated values (40, 28, 17, 8) are scaled by what a residual costs after over before at
#: each d, same runs (0.58, 0.48, 0.54, 0.80; ``benchmarks/RESULTS.md``, "The permutation on 2^k values"). Fixed
#: numbers, so that the choice, which changes the draws, does not depend on the timing noise of the run that makes it.
RESIDUAL_POINT_COST = {
    "per_datum": ((10, 23.0), (50, 14.0), (100, 9.0), (500, 6.5)),
    "gradient": ((10, 23.0), (50, 14.0), (100, 9.0), (500, 6.5)),
}
#: What one row read by a proxy that follows the outlying rows exactly (``ControlVariate.outlying_in_proxy``) costs,
#: in plain points: a log-likelihood and its gradient, for rows read in one block. Measured on the seventh audit's
#: Poisson intercepts under the exact test (kept draws' wall time with and without the rows in the proxy, compilation
#: excluded; ``benchmarks/RESULTS.md``, "Rows the proxy cannot follow"): 0.8 at d = 104, 2.0 at d = 504; the larger.
PROPOSAL_ROW_COST = 2.0
RESIDUAL_COST_MEANING = "what one control-variate residual costs, in plain likelihood points; e.g. 10.0"


def barker_acceptance(statistic) -> np.ndarray:
    """The Barker test's acceptance probability 1/(1 + e^{−Δ*}) at each of the window's Δ*, to predict what the
    Barker test would accept from another test's steps. A Δ* that is NaN (a step that met a non-finite ratio, which
    every test rejects) predicts 0; −inf 0 and +inf 1."""
    statistic = np.asarray(statistic, np.float64)
    with np.errstate(over="ignore"):  # Δ* of −1000 and below: acceptance 0, as it should be
        barker = 1.0 / (1.0 + np.exp(-statistic))
    return np.where(np.isnan(statistic), 0.0, barker)


def ess_per_draw(acceptance: float) -> float:
    """a/(2 − a): the ESS per draw of a chain of nearly independent proposals accepted at rate a."""
    acceptance = min(max(float(acceptance), 1e-6), 1.0)
    return acceptance / (2.0 - acceptance)


def residual_point_cost(control_variate: ControlVariate) -> float:
    """What one residual of ``control_variate`` costs in plain likelihood points (:data:`RESIDUAL_POINT_COST`).

    The kind is ``"per_datum"`` for a second-order control variate with
    per-datum curvature (a nested forward-mode jvp per residual), ``"gradient"``
    otherwise; d is the length of its flattened centre. Deterministic: a
    table lookup, linear in log d between the calibrated dimensions.
    """
    kind = "per_datum" if control_variate.order == 2 and control_variate.curvature == "per_datum" else "gradient"
    dimension = int(np.asarray(control_variate.gradient_sum).shape[0])
    points = RESIDUAL_POINT_COST[kind]
    logs = np.log([float(d) for d, _ in points])
    return float(np.interp(np.log(max(dimension, 1)), logs, [cost for _, cost in points]))


@dataclasses.dataclass(frozen=True)
class TestChoice:
    """The measured window and the choice :func:`choose_test` made from it.

    Costs are in **plain points**: one plain point is one datum's
    log-likelihood in the exact test's full pass; a control-variate residual
    costs ``residual_cost`` of them (:func:`residual_point_cost`).

    Attributes
    ----------
    minibatch
        Whether the minibatch test is kept: a lower cost per effective draw
        and at most :data:`tallmcmc.run_warnings.MOST_OF_THE_DATA` of N per step.
    cause
        ``"spread"``, ``"tail weight"`` or ``"small N"``: what made the
        minibatch grow (see :mod:`tallmcmc.run_warnings`); or ``"residual
        cost"``: fewer points per effective draw than the exact test, but not
        at ``residual_cost`` plain points each.
    use
        The window's :class:`~tallmcmc.run_warnings.DataUse` (fraction of N,
        N²·Var(rᵢ), kurtosis, the minibatch each rule asks for).
    minibatch_acceptance, metropolis_acceptance
        The minibatch test's acceptance rate in the window, and the mean of
        min(1, e^{Δ*}) there (the exact Metropolis test's, estimated).
    minibatch_cost, exact_cost
        Cost per effective draw of each test, in plain points: the minibatch
        test's points per effective draw times ``residual_cost``; N per
        effective draw for the exact test.
    tuna_acceptance, tuna_points, tuna_cost
        With a TunaMH ``bound``: its acceptance, points per step and cost per
        effective draw (its points are residuals: ``residual_cost`` plain
        points each) measured on a pilot of :data:`TUNA_PILOT_STEPS` kept
        steps (NaN, NaN, ∞ without one).
    residual_cost
        What one residual costs in plain points (1.0: priced as a plain point,
        the choice by data points alone).
    minibatch_points
        The minibatch test's data points per effective draw (NaN if not given).
    proposal_points
        Rows the proposal read per step (its proxy following the outlying rows
        exactly; 0 otherwise), priced at :data:`PROPOSAL_ROW_COST` in both
        costs.
    """

    minibatch: bool
    cause: str
    use: DataUse
    minibatch_acceptance: float
    metropolis_acceptance: float
    minibatch_cost: float
    exact_cost: float
    tuna_acceptance: float = float("nan")
    tuna_points: float = float("nan")
    tuna_cost: float = float("inf")
    residual_cost: float = 1.0
    minibatch_points: float = float("nan")
    proposal_points: float = 0.0

    @property
    def cost(self) -> float:
        """Cost per effective draw of the test chosen (the minibatch test's or the exact test's), in plain points."""
        return self.minibatch_cost if self.minibatch else self.exact_cost

    def with_metropolis_acceptance(self, acceptance: float, num_data: int) -> TestChoice:
        """This choice with the exact test's acceptance measured (a warm-up run under the exact test) rather than
        estimated from Δ*, and the exact test's cost per effective draw from it."""
        exact_cost = _exact_cost(num_data, self.proposal_points, acceptance)
        return dataclasses.replace(self, metropolis_acceptance=acceptance, exact_cost=exact_cost)

    def with_tuna(self, info: dict[str, np.ndarray]) -> TestChoice:
        """This choice with TunaMH's measured acceptance, points per step and cost per effective draw."""
        acceptance = float(np.mean(info["accepted"]))
        points = float(np.mean(info["data_used"]))
        cost = points * self.residual_cost / ess_per_draw(acceptance)
        return dataclasses.replace(self, tuna_acceptance=acceptance, tuna_points=points, tuna_cost=cost)

    def describe_tuna(self) -> str:
        """TunaMH's measured figures, in words."""
        return (
            f"TunaMH measured {self.tuna_points:,.1f} points per step at acceptance "
            f"{100 * self.tuna_acceptance:.3g}%: ≈ {self.tuna_cost:,.0f} plain points per effective draw"
        )

    def describe(self, num_data: int) -> str:
        """The numbers behind the choice, in words (costs in plain points)."""
        spread = f"N²·Var(rᵢ) ≈ {self.use.spread:.3g}" if np.isfinite(self.use.spread) else "N²·Var(rᵢ) unmeasured"
        kurtosis = f"kurtosis ≈ {self.use.kurtosis:.3g}" if np.isfinite(self.use.kurtosis) else "kurtosis unmeasured"
        points = (
            self.minibatch_points if np.isfinite(self.minibatch_points) else self.minibatch_cost / self.residual_cost
        )
        return (
            f"in warm-up the minibatch test used {100 * self.use.fraction:.3g}% of N = {num_data:,} per step "
            f"({spread}, {kurtosis}) and accepted {100 * self.minibatch_acceptance:.3g}%: ≈ {points:,.0f} residuals per "
            f"effective draw at ≈ {self.residual_cost:.3g} plain points each, ≈ {self.minibatch_cost:,.0f} plain "
            f"points per effective draw, against ≈ {self.exact_cost:,.0f} for the exact test (N plain points per "
            f"step, estimated acceptance {100 * self.metropolis_acceptance:.3g}%)"
            + (
                f"; both with the ≈ {self.proposal_points:,.0f} rows per step the proposal read, at "
                f"{PROPOSAL_ROW_COST:g} plain points each"
                if self.proposal_points
                else ""
            )
        )


def _exact_cost(num_data: int, proposal_points: float, acceptance: float) -> float:
    """The exact test's cost per effective draw in plain points: N, and the rows the proposal read per step at
    :data:`PROPOSAL_ROW_COST` each, per e(a) = a/(2 − a)."""
    return (num_data + proposal_points * PROPOSAL_ROW_COST) / ess_per_draw(acceptance)


def choose_test(
    info: dict[str, np.ndarray],
    num_data: int,
    cache: Any = None,
    control_variate: ControlVariate | None = None,
    *,
    residual_cost: float | None = None,
    proposal_points: float = 0.0,
) -> TestChoice:
    """Keep the minibatch test or not, from its measured steps ``info`` (see the module docstring, step 5).

    Parameters
    ----------
    info
        The window's step statistics (arrays of any shape, one entry per step).
    num_data
        N.
    cache
        The chains' final test caches (the tail guard's pool, for the
        kurtosis), or ``None``.
    control_variate
        The minibatch test's control variate: its residuals are priced at
        :func:`residual_point_cost` plain points each.
    residual_cost
        A price per residual, in plain points, instead (``1.0``: compare data
        points alone). Without either, 1.0.
    proposal_points
        Rows the proposal read per step (a proxy that follows the outlying rows
        exactly, ``ControlVariate.outlying_in_proxy``; 0 otherwise), included
        in ``info["data_used"]``: taken out of the test's data use and priced
        at :data:`PROPOSAL_ROW_COST` in both tests' costs (either test runs
        the same proposal).

    Returns
    -------
    TestChoice
        The minibatch test is kept when its cost per effective draw,
        b̄·c/e(a_B), is below the exact test's, N/e(a_M), with e(a) = a/(2 − a),
        and it used at most :data:`tallmcmc.run_warnings.MOST_OF_THE_DATA` of N
        per step.
    """
    if residual_cost is None:
        residual_cost = 1.0 if control_variate is None else residual_point_cost(control_variate)
    residual_cost = positive_finite(residual_cost, "residual_cost", RESIDUAL_COST_MEANING)
    proposal_price = 0.0
    if proposal_points:
        info = {**info, "data_used": np.maximum(np.asarray(info["data_used"], np.float64) - proposal_points, 0.0)}
        proposal_price = proposal_points * PROPOSAL_ROW_COST
    use = data_use(info, num_data, cache)
    accepted = float(np.mean(info["accepted"]))
    statistic = np.asarray(info["statistic"], np.float64)
    metropolis = float(np.mean(np.where(np.isfinite(statistic), np.exp(np.minimum(statistic, 0.0)), 0.0)))
    minibatch_points = float(np.mean(info["data_used"])) / ess_per_draw(accepted)
    minibatch_cost = minibatch_points * residual_cost + proposal_price / ess_per_draw(accepted)
    exact_cost = _exact_cost(num_data, proposal_points, metropolis)
    cause = use.cause or "spread"
    if use.fraction <= MOST_OF_THE_DATA and minibatch_points < exact_cost <= minibatch_cost:
        cause = "residual cost"  # fewer points, but not at their price
    if max(accepted, metropolis) < LOW_ACCEPTANCE:
        cause = "rejected"  # a sequential test that rejects everything reads all of N: that is not N's fault
    keep = minibatch_cost < exact_cost and use.fraction <= MOST_OF_THE_DATA
    return TestChoice(
        keep,
        cause,
        use,
        accepted,
        metropolis,
        minibatch_cost,
        exact_cost,
        residual_cost=residual_cost,
        minibatch_points=minibatch_points,
        proposal_points=proposal_points,
    )


#: Why the control variate cannot pay (``TestChoice.cause``), in words.
CAUSES = {
    "spread": "the residuals are widely spread",
    "tail weight": "the residuals are heavy-tailed",
    "small N": "N is small against the first minibatch",
    "residual cost": "a residual costs more than the plain points it saves",
    "rejected": "the proposals were almost never accepted",
}
