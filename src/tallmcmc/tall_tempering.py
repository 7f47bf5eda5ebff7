"""Tempering the proxy-HMC move's momentum on ``sample_tall``'s path: where warm-up's Metropolis acceptance is low
(the gate, :data:`TEMPER_BELOW`), and where the kept draws' tails mixed far slower than their bulk (the draws
again, at :data:`STICKY_TEMPERED_MOMENTUM` and then :data:`STICKY_TEMPERED_AGAIN`).

``docs/sample_tall.md``, "Tails wider than the Laplace approximation" and "Drawn again, tempered", has the
derivations and the measurements.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from tallmcmc import tall_warmup
from tallmcmc.acceptance.exact import exact_metropolis
from tallmcmc.choice_of_test import TestChoice, ess_per_draw
from tallmcmc.control_variate import ControlVariate
from tallmcmc.model import Model
from tallmcmc.sampling import WarmupResult
from tallmcmc.tall_diagnosis import FAR_FROM_LAPLACE

#: Where the kept warm-up's Metropolis acceptance (the mean of min(1, e^{Δ*}) over its window) is below
#: :data:`TEMPER_BELOW` — after the look for outlying rows, which deals with misfits that a few rows cause — warm-up
#: runs again with the proxy-HMC move's momentum tempered to this λ, and the kept draws use it unless it costs more
#: per effective draw than an adapted random walk would. The plain move, close to an independence sampler from the
#: Laplace approximation, proposes rarely in tails heavier than the approximation's and sticks there; the tempered one
#: proposes from a proxy about √λ times wider. Measured on the zero-inflated Poisson
#: (``tallmcmc.examples.zero_inflated_poisson``, N = 2·10⁴, 12 seeds, against NUTS): its gate intercept's sd 0.77–0.92
#: (mean 0.82, pooled z −20.2) of the reference with the plain move, 0.89–1.11 (mean 0.96, pooled z −5.5) at λ = 2,
#: 0.93–1.09 (mean 1.01, pooled z +0.1) at λ = 3, at 12–14% acceptance. At N = 5·10⁴ λ = 3 gave 0.80 of NUTS's (0.60
#: plain): a fixed λ falls short as N grows (``docs/sample_tall.md``, "Tails wider than the Laplace approximation").
TEMPERED_MOMENTUM = 3.0
#: The gate on that acceptance. Measured on the warm-up each model keeps (N = 2·10⁴, seed 0 unless said): the
#: zero-inflated Poisson of ``tallmcmc.examples.zero_inflated_poisson``, whose gate intercept's sd the plain move
#: gives 18% narrow, 0.39–0.43 over seeds 0–3; 0.85–0.995 on seven models whose draws are right (Poisson, Student-t,
#: LKJ and rare-event regressions 0.96–0.995, the centred hierarchical model 0.87, the Poisson intercepts and small
#: groups, their rows followed, 0.85 and 0.89); the N = 1,000 mixture, whose sticky tails it does not catch, 0.82–0.83
#: over seeds 1–4 and 0.65 at seed 0. The same value as :data:`~tallmcmc.tall_outlying_looks.PROXY_MISFIT_ACCEPTANCE`.
TEMPER_BELOW = 0.6
#: The tempered warm-up runs only where it could pay even if its acceptance came out this many times the prediction
#: a·(λ²/(2λ − 1))^{−d/2} from the plain move's acceptance a (the factor is 1/E[π/q] for a Gaussian π and q, π's
#: covariance times λ: measured 0.42–0.43 for λ = 2 on the Poisson regression, d = 6, predicted 0.42; the
#: zero-inflated Poisson measured 0.13 at λ = 3, twice its prediction, its tails helping). At d = 104 (the Poisson
#: intercepts with their rows' misfit path off, acceptance 0.51) the prediction is 3·10⁻¹⁴ and no warm-up is spent.
TEMPER_OPTIMISM = 4.0
#: Where the kept draws' tails mixed far slower than their bulk (:func:`~tallmcmc.tall_diagnosis.sticky_tails`, the
#: diagnosis's check) and the move was not tempered,
#: warm-up and kept draws run again with the momentum tempered to this λ, where it is predicted able to pay (as for
#: :data:`TEMPERED_MOMENTUM`): chains that visit tails heavier than the Laplace approximation rarely and stick there
#: when they do, which the plain warm-up's acceptance cannot see. The tempered warm-up is kept, and the draws made
#: again, only where its ESS per draw predicted from its measured acceptance, a/(2 − a), is above the plain draws'
#: tail ESS per draw, and its cost per effective draw is not above an adapted random walk's. Measured on the N = 1,000
#: normal mixture (against NUTS): the plain move's tail ratio read 0.14–0.46 on seeds 1–24 (tail ESS 0.002–0.16 per
#: draw), r̂ to 1.038 and sds up to 9% narrow or 19% wide; λ = 2 (acceptance 0.41–0.51, a prediction of 0.26–0.34
#: per draw) gave bulk ESS 1,564–2,758, r̂ ≤ 1.005 and max |z| 2.9 of the sds, but for seed 17, whose tempered
#: chains stuck too (ESS 432, r̂ 1.012, warned; drawn again at :data:`STICKY_TEMPERED_AGAIN` since) (``docs/sample_tall.md``, "Drawn again, tempered"). On a
#: near-Gaussian regression at d = 9 the tempered move accepts 0.28–0.30 (0.16–0.17 per draw predicted, the plain
#: draws' tail ESS 0.40–0.61 per draw): it would cut the ESS four- to fivefold.
STICKY_TEMPERED_MOMENTUM = 2.0
#: ... and only for runs of at least this many kept draws a chain, where the check was measured (its ratio 0.57–0.95
#: on near-Gaussian regressions at 4 × 500 and 4 × 2,000 draws): on a short run the tail ESS is noise, and a run of
#: 2 × 60 draws, continued or not, would draw again by chance.
STICKY_MIN_DRAWS = 500
#: Where the draws made again at :data:`STICKY_TEMPERED_MOMENTUM` still read sticky tails (their tail ESS per draw
#: below the check's limit, whatever its ratio to the bulk: :data:`STICKY_AGAIN_RATIO_LIMIT`), warm-up
#: and kept draws run once more at this λ, under the same gates (able to pay against a random walk; the ESS per draw
#: its warm-up's acceptance predicts above the λ = 2 draws' tail ESS per draw). λ = 3 everywhere would halve the
#: mixture's ESS (1,052-1,821 against 1,889-2,518 at λ = 2, seeds 1-12); as a second rung it runs only where λ = 2
#: fell short. Measured (``docs/sample_tall.md``, "A second rung"): on the mixture's seeds 1-24 it fired on seeds 14,
#: 17 and 22, the three the λ = 2 draws warned about (seed 17's stuck: ESS 432, r̂ 1.012, sds to 18% wide), and gave
#: bulk ESS 994-1,220, r̂ ≤ 1.008, sds 0.985-1.054 of the reference and no warning; on the separated logistic
#: regression (seeds 1-11) it fired on the 9 runs whose λ = 2 draws warned, and one still warns (9 before). Since
#: the trigger reads the tail ESS per draw alone, on separation seeds 0-23 it fires on all 23 runs drawn again (max |z|
#: of the sds 2.7, three warned; three silent misses at z −4.4 to −5.1 before), and on the mixture on 17 of 24, where
#: the gate keeps λ = 3 on five (seeds 4 and 21 besides the three) and the λ = 2 draws stay on twelve. Set it to
#: :data:`STICKY_TEMPERED_MOMENTUM` to stop at one rung.
STICKY_TEMPERED_AGAIN = 3.0
#: The second rung's trigger needs only the first of the check's two conditions to fail: the λ = 2 draws' tail ESS per
#: draw below :data:`~tallmcmc.tall_diagnosis.TAIL_ESS_PER_DRAW_LIMIT`, whatever its ratio to their bulk ESS (this
#: limit, infinite, on the ratio). The ratio is there to spare short runs on near-Gaussian posteriors a false alarm;
#: draws that reach this rung are already known to stick in a tail, and on the separated logistic regression the λ = 2
#: draws' tail ratio read 0.52–0.82 on runs whose separated coefficient's sd came out 7–9% narrow (z −3.5 to −5.1,
#: seeds 10, 16, 19 and 22 of 24, not warned), their tail ESS 0.09–0.14 per draw. Whether λ = 3 is kept is then the
#: gate's (its predicted ESS per draw above the λ = 2 draws' tail ESS per draw).
STICKY_AGAIN_RATIO_LIMIT = math.inf


def with_tail_note(problem: str, note: str) -> str:
    """The diagnosis's tail-mixing ``problem`` with ``note`` (what tempering did after the plain draws' tails read
    low) said; other problems as they are."""
    if "tails mixed far slower than its bulk" not in problem:
        return problem
    return f"{problem}. {note} (docs/sample_tall.md, 'Drawn again, tempered')"


def sticky_rungs(choice: TestChoice, dimension: int, walk_cost: float) -> tuple[float, ...]:
    """The λs at which the kept draws are made again, in turn, while their tails read sticky:
    :data:`STICKY_TEMPERED_MOMENTUM`, then :data:`STICKY_TEMPERED_AGAIN`, each while it may pay against a random walk
    (:func:`tempering_may_pay`, from the plain warm-up's ``choice``); none where the first is the plain move's λ
    (the draws again turned off)."""
    rungs: list[float] = []
    for temperature in dict.fromkeys((STICKY_TEMPERED_MOMENTUM, STICKY_TEMPERED_AGAIN)):
        if temperature == tall_warmup.MOMENTUM_TEMPERATURE or not tempering_may_pay(
            choice, dimension, walk_cost, temperature
        ):
            break
        rungs.append(temperature)
    return tuple(rungs)


def tail_note(read: list[str], tempered: Tempered | None) -> str | None:
    """What the draws again did, for a tail-mixing problem still read on the draws returned: ``read`` says what each
    set of draws read, and a warm-up not kept (``None`` where the check did not fire)."""
    if not read:
        return None
    if tempered is None or tempered.kept is None:  # the plain draws stay
        return read[-1][0].upper() + read[-1][1:]
    return (
        "These draws were already made again with the proxy-HMC momentum tempered (λ = "
        f"{tempered.temperature:g}) after {', and '.join(read)}"
    )


def drawn_again_only_if_faster(tempered: Tempered, plain_per_draw: float) -> Tempered:
    """``tempered``, a warm-up again at :data:`STICKY_TEMPERED_MOMENTUM` after the kept draws' tails mixed slowly,
    kept only where the ESS per draw its measured Metropolis acceptance predicts, a/(2 − a) (optimistic: its tail ESS
    per draw came out about half of it on the mixture), is above the plain draws' smallest tail ESS per draw
    (``plain_per_draw``): otherwise tempering cannot mix the tails faster than the plain move already did — a tail
    ratio read low on a posterior near its Laplace approximation (the tempered move then accepts less and mixes
    slower) — and the plain draws are returned, the tempered warm-up counted as not kept."""
    if tempered.kept is None:
        return tempered
    choice = tempered.kept[3]
    acceptance = choice.minibatch_acceptance if choice.minibatch else choice.metropolis_acceptance
    predicted = ess_per_draw(acceptance)
    if predicted > plain_per_draw:
        return tempered
    return tempered.not_kept()._replace(
        summary=f"the momentum tempered (λ = {tempered.temperature:g}) was not kept: it accepted "
        f"{100 * acceptance:.3g}% on warm-up, ≈ {predicted:.2f} ESS per draw at best, no faster than the kept draws' "
        f"tails mixed ({plain_per_draw:.2f} of a tail ESS per draw)"
    )


class Tempered(NamedTuple):
    """The warm-up again with the momentum tempered: the passes of the warm-up not kept, in words, and where the
    tempered one is kept its pieces ``(warmed, proposal, warmup_test, choice, minibatch, measured)`` as
    ``sample_tall`` names them (``None`` where it is not: then ``problem`` says why that may matter)."""

    setup_data_used: dict[str, int]
    summary: str
    kept: tuple | None
    temperature: float
    problem: str = ""

    def not_kept(self) -> Tempered:
        """This warm-up counted as not kept (``"warm-up with the momentum tempered at λ = 3 (not kept)"``, its λ
        named), the one before it staying; as it is where it was not kept already."""
        if self.kept is None:
            return self
        return self._replace(setup_data_used=self.thrown(), kept=None)

    def thrown(self) -> dict[str, int]:
        """This kept warm-up's points, named as a warm-up not kept (it is being replaced, or was not kept)."""
        return {
            f"warm-up with the momentum tempered at λ = {self.temperature:g} (not kept)": tall_warmup.warmup_points(
                self.kept[0]
            )
        }


def tempering_may_pay(choice: TestChoice, dimension: int, walk_cost: float, temperature: float | None = None) -> bool:
    """Whether the move tempered to ``temperature`` (``None``: :data:`TEMPERED_MOMENTUM`) could cost no more per
    effective draw than an adapted random walk (``walk_cost``), at :data:`TEMPER_OPTIMISM` times the acceptance
    predicted for it from the plain move's (on a Gaussian posterior the tempered proposal's extra mismatch with it is
    (λ²/(2λ − 1))^{d/2})."""
    temperature = TEMPERED_MOMENTUM if temperature is None else temperature
    plain = choice.metropolis_acceptance
    mismatch = (temperature**2 / (2.0 * temperature - 1.0)) ** (dimension / 2.0)
    optimistic = min(1.0, TEMPER_OPTIMISM * plain / mismatch)
    cost = choice.cost * ess_per_draw(plain)
    return cost / ess_per_draw(optimistic) <= walk_cost


def with_tempered_momentum(
    model: Model,
    mode,
    covariance: np.ndarray,
    control_variate: ControlVariate,
    warmed: WarmupResult,
    choice: TestChoice,
    walk_cost: float,
    batch_size: int,
    minibatch_test: str,
    residual_cost: float | None,
    run: tall_warmup.RunShape,
    temperature: float | None = None,
    why: str | None = None,
) -> Tempered:
    """The kept warm-up's Metropolis acceptance was below :data:`TEMPER_BELOW` (or, ``why``, the kept draws' tails mixed
    far slower than their bulk: :data:`STICKY_TEMPERED_MOMENTUM`): warm up again, from the same starts, with the
    proxy-HMC move's momentum tempered to ``temperature`` (``None``: :data:`TEMPERED_MOMENTUM`), and keep that
    warm-up — a plain move's cost per effective draw, measured on chains that rarely reach the tails, is not one to
    compare against — unless its measured cost per effective draw is above ``walk_cost``, an adapted random walk's at
    best (then the plain warm-up stays, and ``problem`` says that its tails may be too narrow). The warm-up not kept
    is counted.

    Where the plain warm-up chose the exact test (``choice.minibatch`` false), the tempered warm-up runs under it
    too: its longer moves only spread the residuals more, and a residual costs several plain points
    (:func:`~tallmcmc.choice_of_test.residual_point_cost`), so the minibatch test would read more than N's worth
    per step for a choice already made (:func:`~tallmcmc.tall_warmup.exact_choice`)."""
    temperature = TEMPERED_MOMENTUM if temperature is None else temperature
    plain = f"warm-up's Metropolis acceptance was {100 * choice.metropolis_acceptance:.3g}% with the plain move"
    gated = why is None  # the gate on the plain warm-up's acceptance, not the kept draws' sd mixing
    why = f"{plain} (below {100 * TEMPER_BELOW:g}%)" if gated else why
    run.say(
        f"sample_tall: {why}; warming up again with the momentum tempered (λ = {temperature:g}) to reach tails the "
        "Laplace approximation misses ...",
        flush=True,
    )
    again, proposal, test = tall_warmup.warmed_up(
        model,
        mode,
        covariance,
        control_variate,
        batch_size,
        minibatch_test,
        run._replace(say=lambda *_, **__: None),
        momentum_temperature=temperature,
        test=None if choice.minibatch else exact_metropolis(),
    )
    if choice.minibatch:
        tempered, minibatch, measured = tall_warmup.measured_choice(
            model, again, test, control_variate, minibatch_test, batch_size, residual_cost
        )
    else:
        tempered, minibatch, measured = tall_warmup.exact_choice(model, again, choice)
    tempered_acceptance = f"{100 * tempered.metropolis_acceptance:.3g}% tempered"
    acceptances = f"{why}, {tempered_acceptance}" if gated else f"{why}; {plain}, {tempered_acceptance}"
    cost = tempered.cost
    if cost > walk_cost:
        summary = (
            f"the tempered momentum (λ = {temperature:g}) did not pay: {acceptances}, ≈ {cost:,.0f} plain points "
            f"per effective draw against ≈ {walk_cost:,.0f} for an adapted random walk at best"
        )
        problem = (
            f"{acceptances}: the posterior is far from its Laplace approximation, and the plain proxy-HMC move kept "
            "reaches tails heavier than the approximation's rarely, so sds may come out narrow; the tempered move "
            f"cost ≈ {cost:,.0f} plain points per effective draw, more than an adapted random walk's ≈ "
            f"{walk_cost:,.0f}. " + FAR_FROM_LAPLACE
        )
        pieces = (again, proposal, test, tempered, minibatch, measured)
        return Tempered({}, summary, pieces, temperature, problem).not_kept()
    summary = (
        f"the proxy-HMC move's momentum is tempered (λ = {temperature:g}), so that it reaches tails the Laplace "
        f"approximation misses: {acceptances}"
    )
    counted = {"warm-up with the plain momentum (not kept)": tall_warmup.warmup_points(warmed)}
    return Tempered(counted, summary, (again, proposal, test, tempered, minibatch, measured), temperature)
