"""``sample_tall``'s looks for rows its control variate or its proxy cannot describe: early, on Laplace draws, and
after warm-up on the warm-up's own pairs; where rows are found, a warm-up again with them held (or followed by the
proxy), kept where it pays, and stopped early where it cannot.

The rows themselves are found and held by :mod:`tallmcmc.outlying_rows`; ``docs/sample_tall.md``, "Rows the
minibatch cannot estimate" and "Rows the proxy cannot follow", has the derivations and the measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from tallmcmc import tall_warmup
from tallmcmc.choice_of_test import PROPOSAL_ROW_COST, TestChoice, ess_per_draw
from tallmcmc.control_variate import ControlVariate
from tallmcmc.model import Model, Position
from tallmcmc.outlying_rows import (
    PAIRS,
    PROXY_PAIRS,
    OutlyingRows,
    find_outlying_rows,
    find_rows_for_the_proxy,
    with_outlying_rows,
)
from tallmcmc.proposals.proxy import HAMILTONIAN_PROXY_TARGET
from tallmcmc.sampling import WarmupResult

_OUTLYING_STREAM = 0x0A7  # the Laplace draws at which the early look for outlying rows measures residuals
_PROXY_STREAM = 0x9A0  # the Laplace draws at which the look for rows the proxy should follow measures residuals
#: Whether ``sample_tall`` looks for outlying rows at all (``benchmarks/bench_outlying_rows.py`` turns it off to measure
#: the path without the look: then it draws what it drew before the look existed, bit for bit).
LOOK_FOR_OUTLYING_ROWS = True
#: After warm-up ``sample_tall`` looks for outlying rows (:mod:`tallmcmc.outlying_rows`) where the exact test was
#: chosen or the minibatch test kept used more than this fraction of N per step ...
OUTLYING_LOOK_FRACTION = 0.01
#: Where rows are found after warm-up and warm-up's Metropolis acceptance (the mean of min(1, e^{Δ*})) was below
#: this, the proxy misfits the posterior, and the warm-up again holds the rows in the proxy too: a fitting proxy-HMC
#: move is accepted about as often as its proxy acceptance, 0.9 (:data:`HAMILTONIAN_PROXY_TARGET`); the seventh audit's
#: Poisson intercepts of 5-row groups measured 0.08 at N = 10⁵ and 0.51 at N = 2·10⁴ (warm-up's estimate; 0.41 in the
#: kept draws, whose bulk ESS was then 405 of 8,000).
PROXY_MISFIT_ACCEPTANCE = 0.6
#: ... and the residuals' pooled kurtosis was at least this (or unmeasured): a few rows far out make it large (6,200–8,400
#: on the fifth audit's rare categories), residuals spread over every row do not (4.8 on bench_user_models'
#: non-centred hierarchical model, where the look held nothing; 3.9–11 on the rare-category models once their rows
#: are held).
OUTLYING_LOOK_KURTOSIS = 20.0
#: A second warm-up (outlying rows held, or followed by the proxy) stops once the points its steps read, per step and
#: chain, over the ESS per draw of a fitting proxy's move, exceed this many times the cost per effective draw of the
#: test already chosen (:func:`_stops_when_it_cannot_pay`) ...
SECOND_WARMUP_STOP = 2.0
#: ... after at least this many steps. The 2026-11-30 audit's zero-inflated Poisson on data with no zero inflation
#: (N = 2·10⁴): a warm-up with 1,063 rows in the proxy read 5.4× the exact test's cost in its first 25 steps, and
#: 9,669 passes over N before it was thrown away; the warm-ups kept on the small-group models read 0.03–0.24× it.
SECOND_WARMUP_LOOK = 20


class _Look(NamedTuple):
    """A look for outlying rows: what it found (``None`` where a residual was not finite), its cost, in words."""

    found: OutlyingRows | None
    setup_data_used: dict[str, int]
    summary: str


class _Outlying(NamedTuple):
    """The look after warm-up: its cost, in words, and where the warm-up again with the rows held is kept, its
    pieces — ``(control_variate, warmed, proposal, warmup_test, choice, minibatch, measured)`` as ``sample_tall``
    names them (``None`` where it is not)."""

    setup_data_used: dict[str, int]
    summary: str
    kept: tuple | None = None


def outlying_rows_may_pay(choice: TestChoice, run: tall_warmup.RunShape) -> bool:
    """Whether warm-up's residuals were heavy-tailed and its minibatch test cost enough to look for outlying rows (not
    where the proposals were almost never accepted)."""
    # whatever cause the window named: with one chain whose tail guard acted from its first step, the smallest
    # minibatch seen was 35,300 rows and the window said "small N" (kurtosis 4,300, N = 150,000)
    accepted = choice.cause != "rejected"
    heavy = not choice.use.kurtosis < OUTLYING_LOOK_KURTOSIS  # NaN (unmeasured) looks
    costly = not choice.minibatch or choice.use.fraction > OUTLYING_LOOK_FRACTION
    return accepted and heavy and costly and run.num_warmup >= 8


def proxy_may_misfit(choice: TestChoice, run: tall_warmup.RunShape) -> bool:
    """Whether warm-up's residuals were heavy-tailed and its moves rejected as a misfitting proxy's are (Metropolis
    acceptance below :data:`PROXY_MISFIT_ACCEPTANCE`), whatever the minibatch cost: proposals almost never accepted
    included, which :func:`outlying_rows_may_pay` leaves out (a test that rejects every move reads all of N, which
    holding rows in the test does not change; following them in the proxy may). The seventh audit's Poisson
    intercepts with τ learned, N = 10⁵: 1.0% accepted, r̂ 3.65; with the rows followed 41.7%, r̂ 1.065."""
    heavy = not choice.use.kurtosis < OUTLYING_LOOK_KURTOSIS  # NaN (unmeasured) looks
    return heavy and choice.metropolis_acceptance < PROXY_MISFIT_ACCEPTANCE and run.num_warmup >= 8


def laplace_pairs(center: Position, covariance: np.ndarray, seed: int) -> tuple[Position, Position]:
    """:data:`tallmcmc.outlying_rows.PAIRS` pairs of independent draws from the Laplace approximation."""
    draws = tall_warmup.chain_starts(center, covariance, 2 * PAIRS, seed, _OUTLYING_STREAM)
    return (
        jax.tree_util.tree_map(lambda leaf: leaf[:PAIRS], draws),
        jax.tree_util.tree_map(lambda leaf: leaf[PAIRS:], draws),
    )


def _warmup_pairs(warmed: WarmupResult) -> tuple[Position, Position]:
    """:data:`tallmcmc.outlying_rows.PAIRS` pairs of warm-up draws: chain c's draw at the start of the measurement
    window and its last one, cycling over the chains; with fewer chains than pairs, each further cycle's pair further
    in from both ends, the pairs spread over the window (draws close in time would give the same residuals twice)."""
    chains = warmed.num_chains
    half = warmed.num_warmup // 2
    cycles = -(-PAIRS // chains)
    step = max((warmed.num_warmup - half) // (2 * cycles), 1)
    picks = [
        (k % chains, half + (k // chains) * step, warmed.num_warmup - 1 - (k // chains) * step) for k in range(PAIRS)
    ]
    chain, first, last = (np.asarray(column) for column in zip(*picks))
    return (
        jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[chain, first], warmed.positions),
        jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[chain, last], warmed.positions),
    )


def outlying_look(
    model: Model, control_variate: ControlVariate, pairs: tuple, batch_size: int, run: tall_warmup.RunShape, when: str
) -> _Look:
    """Every row's residual at ``pairs`` and the rows to hold (:func:`tallmcmc.outlying_rows.find_outlying_rows`);
    ``when`` ``"early"`` (Laplace draws, before warm-up) or ``"after warm-up"`` (its draws)."""
    where = "Laplace draws" if when == "early" else "warm-up draws"
    run.say(
        f"sample_tall: looking for rows whose residuals the minibatch cannot estimate (every row's residual at "
        f"{PAIRS} pairs of {where}) ...",
        flush=True,
    )
    counted = {f"outlying rows (look, {when})": PAIRS * model.num_data}
    try:
        # the out-of-sample prediction gates only the second warm-up after warm-up (look_after_warmup)
        found = find_outlying_rows(model, control_variate, *pairs, batch_size=batch_size, out_of_sample=when != "early")
    except ValueError as error:  # a residual not finite at a draw: nothing to learn from the look
        return _Look(None, counted, f"no outlying rows held ({error})")
    if not found.indices.size:
        return _Look(found, counted, f"no outlying rows held ({found.describe()})")
    summary = (
        f"{found.indices.size:,} outlying rows are summed exactly at every step (every row's residual at {PAIRS} "
        f"pairs of {where}: {found.describe()})"
    )
    if when == "early":
        run.say(f"sample_tall: {found.describe()}", flush=True)
    return _Look(found, counted, summary)


def look_after_warmup(
    model: Model,
    mode,
    covariance: np.ndarray,
    control_variate: ControlVariate,
    warmed: WarmupResult,
    choice: TestChoice,
    batch_size: int,
    minibatch_test: str,
    residual_cost: float | None,
    run: tall_warmup.RunShape,
) -> _Outlying:
    """After a warm-up whose residuals were heavy-tailed: look for outlying rows and, where some are found, warm up again with them
    summed exactly, kept where its measured cost per effective draw is lower (``docs/sample_tall.md``, "Rows the
    minibatch cannot estimate"). Every residual of the look and of the warm-up not kept is counted."""
    look = outlying_look(model, control_variate, _warmup_pairs(warmed), batch_size, run, "after warm-up")
    counted = dict(look.setup_data_used)
    if look.found is not None and choice.metropolis_acceptance < PROXY_MISFIT_ACCEPTANCE:
        return _with_rows_in_proxy(
            model,
            mode,
            covariance,
            control_variate,
            warmed,
            choice,
            look,
            batch_size,
            minibatch_test,
            residual_cost,
            run,
        )
    if look.found is None or not look.found.indices.size:
        return _Outlying(counted, look.summary)
    # the prediction out of sample (at each pair, the rows the other pairs rank highest held), priced as the window
    # priced the minibatch test, at the acceptance it measured (the proposal stays): a warm-up again only where it
    # could beat the test chosen. The seventh audit's Poisson intercepts of 5-row groups at N = 10⁶: 5,021 rows held,
    # 10,582 residuals per step predicted in sample, 143,000 measured by the warm-up then thrown away (74 s)
    size = look.found.size_out_of_sample if np.isfinite(look.found.size_out_of_sample) else look.found.size
    predicted = size * choice.residual_cost / ess_per_draw(choice.minibatch_acceptance)
    best = min(choice.minibatch_cost, choice.exact_cost)
    if not predicted < best:
        summary = (
            f"{look.found.indices.size:,} outlying rows summed exactly could not pay ({look.found.describe()}; "
            f"≈ {size:,.0f} out of sample: ≈ {predicted:,.0f} plain points per effective draw at the window's "
            f"acceptance, against ≈ {best:,.0f}), so no second warm-up"
        )
        return _Outlying(counted, summary)
    held = with_outlying_rows(control_variate, model, look.found.indices)
    run.say(f"sample_tall: {look.found.describe()}; warming up again with them summed exactly ...", flush=True)
    kept, cheaper = _warmed_up_again(
        model, mode, covariance, held, choice, batch_size, minibatch_test, residual_cost, run
    )
    measured = kept[-1]
    if cheaper:
        counted["warm-up before the outlying rows were held"] = tall_warmup.warmup_points(warmed)
        summary = f"{look.summary}; before them, {choice.describe(model.num_data)}"
        return _Outlying(counted, summary, kept)
    counted["warm-up with outlying rows held (not kept)"] = tall_warmup.warmup_points(kept[1])
    summary = f"{look.found.indices.size:,} outlying rows summed exactly did not pay ({look.found.describe()}; measured: {measured})"
    return _Outlying(counted, summary)


def _with_rows_in_proxy(
    model: Model,
    mode,
    covariance: np.ndarray,
    control_variate: ControlVariate,
    warmed: WarmupResult,
    choice: TestChoice,
    look: _Look,
    batch_size: int,
    minibatch_test: str,
    residual_cost: float | None,
    run: tall_warmup.RunShape,
) -> _Outlying:
    """Warm-up's Metropolis acceptance was below :data:`PROXY_MISFIT_ACCEPTANCE`: the moves that follow the proxy are
    rejected because it misfits the posterior. Find the rows where it does (:func:`find_rows_for_the_proxy`, at
    :data:`~tallmcmc.outlying_rows.PROXY_PAIRS` pairs of a warm-up state and a Laplace draw) and warm up again with
    the proxy following them and the look's rows exactly and the test summing them
    (``with_outlying_rows(..., in_proxy=True)``), where even the best it could give — the exact test at the proxy's own
    target acceptance, the rows read at every evaluation of a trajectory — could beat the test chosen; keep it where
    its measured cost per effective draw is lower (``docs/sample_tall.md``, "Rows the proxy cannot follow")."""
    counted = dict(look.setup_data_used)
    found = look.found
    # the rows whose Taylor proxies the moves misfit, at pairs as the moves see them: a chain's state in warm-up's
    # window and a Laplace draw (where a trajectory of a quarter period lands). Pairs of warm-up draws alone, from
    # chains that stick, showed the misfit milder than it was (N = 2·10⁴: 175 rows, 34% accepted)
    states = _window_states(warmed, PROXY_PAIRS)
    landings = tall_warmup.chain_starts(mode.position, covariance, PROXY_PAIRS, run.seed, _PROXY_STREAM)
    counted["rows for the proxy (look, after warm-up)"] = PROXY_PAIRS * model.num_data
    try:
        proxy = find_rows_for_the_proxy(model, control_variate, states, landings)
    except ValueError as error:  # a residual not finite at a Laplace draw: no rows for the proxy from it
        return _Outlying(counted, f"{look.summary}; no rows for the proxy ({error})")
    rows_held = np.union1d(found.indices, proxy.indices).astype(np.int32)  # the test's rows are held in it too
    if not rows_held.size:
        return _Outlying(counted, f"{look.summary}; no rows for the proxy ({proxy.describe()})")
    held = with_outlying_rows(control_variate, model, rows_held, in_proxy=True)
    rows = tall_warmup.proposal_rows(held, warmed.step_size_factor)
    best = min(choice.minibatch_cost, choice.exact_cost)
    optimistic = (model.num_data + rows * PROPOSAL_ROW_COST) / ess_per_draw(HAMILTONIAN_PROXY_TARGET)
    if not optimistic < best:
        summary = (
            f"{rows_held.size:,} outlying rows followed exactly by the proxy could not pay (≈ {rows:,.0f} rows per "
            f"step for the proposal: ≈ {optimistic:,.0f} plain points per effective draw at best, against "
            f"≈ {best:,.0f}), so no second warm-up"
        )
        return _Outlying(counted, summary)
    run.say(
        f"sample_tall: warm-up's Metropolis acceptance was {100 * choice.metropolis_acceptance:.3g}%: the proxy misfits "
        f"the posterior where {rows_held.size:,} rows' residuals are extreme; warming up again with the proxy "
        "following them exactly ...",
        flush=True,
    )
    kept, cheaper = _warmed_up_again(
        model, mode, covariance, held, choice, batch_size, minibatch_test, residual_cost, run
    )
    again, measured = kept[4], kept[-1]
    if again is None:  # stopped early: its steps read more than it could pay for
        counted["warm-up with outlying rows in the proxy (not kept)"] = tall_warmup.warmup_points(kept[1])
        summary = f"{rows_held.size:,} outlying rows followed exactly by the proxy did not pay ({measured})"
        return _Outlying(counted, summary)
    if cheaper:
        counted["warm-up before the outlying rows were held"] = tall_warmup.warmup_points(warmed)
        summary = (
            f"{rows_held.size:,} outlying rows are followed exactly by the proxy and summed exactly by the test "
            f"(every row's residual at {PROXY_PAIRS} pairs of a warm-up state and a Laplace draw: {proxy.describe()}; "
            f"and at {PAIRS} pairs of warm-up draws: {found.describe()}): warm-up's Metropolis "
            f"acceptance {100 * choice.metropolis_acceptance:.3g}% before, {100 * again.metropolis_acceptance:.3g}% "
            f"with them; before them, {choice.describe(model.num_data)}"
        )
        return _Outlying(counted, summary, kept)
    counted["warm-up with outlying rows in the proxy (not kept)"] = tall_warmup.warmup_points(kept[1])
    summary = (
        f"{rows_held.size:,} outlying rows followed exactly by the proxy did not pay (warm-up's Metropolis "
        f"acceptance {100 * choice.metropolis_acceptance:.3g}% before, {100 * again.metropolis_acceptance:.3g}% with "
        f"them; measured: {measured})"
    )
    return _Outlying(counted, summary)


def _warmed_up_again(
    model: Model,
    mode,
    covariance: np.ndarray,
    held: ControlVariate,
    choice: TestChoice,
    batch_size: int,
    minibatch_test: str,
    residual_cost: float | None,
    run: tall_warmup.RunShape,
) -> tuple[tuple, bool]:
    """A warm-up again with ``held`` and the choice its window measures: ``(control_variate, warmed, proposal,
    warmup_test, choice, minibatch, measured)`` as ``sample_tall`` names them, and whether it costs less per effective
    draw than ``choice``. A warm-up whose steps read more than it could pay for stops early
    (:func:`_stops_when_it_cannot_pay`): then ``choice`` and ``minibatch`` are ``None``, ``measured`` says why, and
    it does not cost less."""
    before = choice.cost
    warmed_again, proposal, test = tall_warmup.warmed_up(
        model,
        mode,
        covariance,
        held,
        batch_size,
        minibatch_test,
        run._replace(say=lambda *_, **__: None),
        keep_going=_stops_when_it_cannot_pay(before),
    )
    if warmed_again.num_warmup < run.num_warmup:
        steps = warmed_again.num_warmup
        read = float(np.mean(warmed_again.info["data_used"]))
        measured = (
            f"its warm-up stopped after {steps} of {run.num_warmup} steps: they read ≈ {read:,.0f} points per step and "
            f"chain, ≥ {read / ess_per_draw(HAMILTONIAN_PROXY_TARGET):,.0f} plain points per effective draw at best, "
            f"more than {SECOND_WARMUP_STOP:g}× the ≈ {before:,.0f} of the test chosen"
        )
        run.say(f"sample_tall: the second warm-up could not pay; {measured}", flush=True)
        return (held, warmed_again, proposal, test, None, None, measured), False
    again, minibatch, measured = tall_warmup.measured_choice(
        model, warmed_again, test, held, minibatch_test, batch_size, residual_cost
    )
    after = again.cost
    return (held, warmed_again, proposal, test, again, minibatch, measured), after < before


def _stops_when_it_cannot_pay(cost: float) -> Callable[[dict], bool]:
    """``keep_going`` for a second warm-up (:func:`tallmcmc.warmup`): ``False`` once, after at least
    :data:`SECOND_WARMUP_LOOK` steps, the points its steps read per step and chain, over the ESS per draw of a fitting
    proxy-HMC move (its acceptance :data:`~tallmcmc.proposals.proxy.HAMILTONIAN_PROXY_TARGET`), are more than
    :data:`SECOND_WARMUP_STOP` times ``cost`` (plain points per effective draw of the test chosen). By the path's own
    cost model that warm-up could not pay: it prices a residual or a proposal's row at one plain point or more and
    an effective draw at a/(2 − a) ≤ 1 draws (:func:`~tallmcmc.choice_of_test.ess_per_draw`), so its cost per
    effective draw is at least the points read per step, more than 2 × 0.82 = 1.6 times ``cost``."""
    least = ess_per_draw(HAMILTONIAN_PROXY_TARGET)

    def keep_going(info: dict) -> bool:
        used = info["data_used"]
        return used.shape[1] < SECOND_WARMUP_LOOK or float(np.mean(used)) / least <= SECOND_WARMUP_STOP * cost

    return keep_going


def _window_states(warmed: WarmupResult, count: int) -> Position:
    """``count`` chain states from warm-up's measurement window (its second half), cycling over the chains and spread
    evenly over the window's steps."""
    chains, steps = warmed.num_chains, warmed.num_warmup
    half = steps // 2
    picks = np.arange(count)
    chain = picks % chains
    step = half + (picks * (steps - half)) // count
    return jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[chain, step], warmed.positions)
