r"""The automatic tall-data path: :func:`sample_tall` runs mode → control variate → proposal → test for any model.

Each joint of the hand-tuned recipe is decided from a measured quantity:

1. **The mode** and its Laplace covariance: for tall data (``setup="auto"``
   with N ≥ :data:`FAST_SETUP_MIN_ROWS` and N ≥
   :data:`FAST_SETUP_ROWS_PER_DIMENSION`·d) from :func:`tallmcmc.fast_setup`
   (subsample Newton, then two full passes that also give the control
   variate: at most three passes in all), otherwise from
   :func:`tallmcmc.find_mode` (``setup="exact"``); if the Hessian there is not
   positive definite, or the search ended more than :data:`MODE_OFF_LIMIT`
   posterior sd from the mode, there is no Laplace approximation, and the path
   falls back to the exact test with a covariance-adapted random walk.
2. **The control variate** (second order, per-datum curvature): from the sums
   of the setup's last pass — ``fast_setup``'s second, or ``find_mode``'s
   final pass at the mode (:func:`tallmcmc.control_variate.control_variate_at_mode`,
   no pass of its own); with ``mode=`` given,
   :func:`tallmcmc.taylor_control_variate` (one pass).
3. **The proposal**: proxy HMC with the Laplace covariance as its inverse mass,
   integration time ε·L = π/2 (a quarter period of the proxy dynamics: nearly
   independent proposals) with the step jittered by ±20%, so the trajectory
   never reaches half a period (0.6π at most), integrated by the split
   integrator: the proxy's Gaussian part exactly, the rest by kicks
   (``integrator="split"``; ``docs/warmup.md``, "The split integrator").
4. **Warm-up with the minibatch test, measured** (:func:`tallmcmc.warmup`):
   ``num_warmup`` steps of the minibatch test on the residuals (the
   Metropolis-type penalty test, :func:`tallmcmc.minibatch_penalty`, unless
   ``minibatch_test="barker"``: ``docs/penalty.md``),
   adapting the proxy-HMC step on the proxy's own acceptance (data-free;
   :mod:`tallmcmc.sampling.adaptation`), chains started from Laplace draws,
   each checked on a fixed subsample of :data:`START_CHECK_ROWS` rows
   (the setup's full passes already evaluated every row near the mode;
   ``sample``'s full check where N is no larger than that).
   Its second half is the measurement window: the data per step the test
   really used, its acceptance rate, the
   residuals' spread N²·Var(rᵢ) and tail weight (the tail guard's pooled
   kurtosis) where the chains really are, not where the Laplace
   approximation says they should be (on a posterior whose mean is off the
   mode, as with d/N not small, the two differ).
5. **The test for the kept draws**: the one that costs less per effective
   draw, in plain points (one datum's log-likelihood in the exact test's
   full pass). The minibatch test costs its measured b residuals per step,
   each priced at :func:`residual_point_cost` plain points (a fixed table
   by d and the control variate's kind, measured once: a residual evaluates
   two log-likelihoods and a nested forward-mode jvp on gathered rows,
   6.5–23 plain points' worth on a CPU), and accepts at its measured rate; the
   exact Metropolis test costs N per step and accepts at the mean of
   min(1, e^{Δ*}) over the window (Δ* the minibatch test's estimate of Δ,
   which it reports). With ESS per draw approximated by a/(2 − a) for an
   acceptance rate a (the rule of thumb for nearly independent proposals),
   the minibatch test is kept when b̄·c/e(a_minibatch) < N/e(a_Metropolis) and it used
   at most a quarter of N per step (:func:`tallmcmc.sample` warns above the
   same fraction). Otherwise the path says why (spread or tail weight of the
   residuals, N small against the first minibatch, or the residuals' price)
   and runs the exact test. With a ``bound`` for the residuals,
   TunaMH (exact and Metropolis-type, and often fewer residuals per step than
   the minibatch test's first minibatch) runs a short measured pilot, and
   whichever of it and the test chosen above costs less per effective draw
   is kept. Where that choice still costs more per effective draw than a
   covariance-adapted random walk would at best (N·d/:data:`RANDOM_WALK_EFFICIENCY`
   plain points: proposals so often rejected that the Laplace approximation
   does not describe the posterior), the path runs that random walk instead,
   and warns (``docs/sample_tall.md``, "When the posterior is far from its
   Laplace approximation"). Otherwise, where warm-up's Metropolis acceptance
   was below :data:`TEMPER_BELOW` and a tempered move is predicted able to
   pay, warm-up runs again with the proxy-HMC momentum tempered
   (:data:`TEMPERED_MOMENTUM`: proposals √λ wider, reaching tails heavier
   than the Laplace approximation's), kept unless it costs more per
   effective draw than that random walk (``docs/sample_tall.md``, "Tails
   wider than the Laplace approximation").
6. **The kept draws**: with the minibatch test, :func:`tallmcmc.sample`
   continues the warm-up exactly (each chain's adapted step and the tail
   guard's pool carry over); with another test, from the warm-up's final
   states with the adapted step (the chains' geometric mean factor). The
   minibatch test's kept draws are watched (:data:`KEPT_CHECKS`): where a
   segment of them costs more than :data:`KEPT_SWITCH_MARGIN` times the exact
   test per effective draw, as the tail guard may find only after warm-up on
   residuals with heavy tails, the rest run the exact test. Where the kept
   draws' tails mixed far slower than their bulk (chains stuck in tails the
   plain move visits rarely) and the move was not tempered, warm-up and kept
   draws run again with the momentum tempered to
   :data:`STICKY_TEMPERED_MOMENTUM`, where that can pay and is predicted to
   mix the tails faster, and once more at :data:`STICKY_TEMPERED_AGAIN` where
   those draws' tails still mix slowly (``docs/sample_tall.md``, "Drawn
   again, tempered").
7. **A diagnosis** (:class:`TallDiagnosis`, ``result.diagnosis``): every setup
   pass by source, the probe's measurements and the decision with its reason,
   the data per step, the error bounds, r̂ and ESS, and whether warm-up
   settled; a run whose diagnosis says its result may be wrong warns.

The choice of test lives in :mod:`tallmcmc.choice_of_test`, the diagnosis in :mod:`tallmcmc.tall_diagnosis` and
the continuation of a run (in this process, from a file, from its checkpoint) in :mod:`tallmcmc.tall_continuation`;
this module runs the path. ``docs/sample_tall.md`` has the derivations and the measurements.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import inspect
import math
import time
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from tallmcmc import import_ahead
from tallmcmc._checks import integer_at_least, positive_finite
from tallmcmc._device import to_device
from tallmcmc.acceptance.exact import exact_metropolis
from tallmcmc.acceptance.minibatch_barker import minibatch_barker
from tallmcmc.acceptance.penalty import minibatch_penalty
from tallmcmc.acceptance.tuna import TunaBound, TunaBoundViolation, tuna
from tallmcmc.choice_of_test import (
    PROPOSAL_ROW_COST,
    RESIDUAL_COST_MEANING,
    TestChoice,
    barker_acceptance,
    choose_test,
    ess_per_draw,
    residual_point_cost,
)
from tallmcmc.control_variate import ControlVariate, control_variate_at_mode, taylor_control_variate
from tallmcmc.interop import arviz as arviz_bridge
from tallmcmc.kernel import build_kernel
from tallmcmc.mode import DEFAULT_CHUNK_ROWS, find_mode
from tallmcmc.model import (
    DEFAULT_START_SPREAD,
    Model,
    Position,
    as_position,
    check_model,
    default_start,
    per_datum_program,
    rows_of,
)
from tallmcmc.other_modes import other_modes
from tallmcmc.outlying_rows import (
    PAIRS,
    PROXY_PAIRS,
    OutlyingRows,
    find_outlying_rows,
    find_rows_for_the_proxy,
    with_outlying_rows,
)
from tallmcmc.precision import unwrapped
from tallmcmc.proposals.base import Proposal
from tallmcmc.proposals.laplace import laplace_covariance
from tallmcmc.proposals.proxy import HAMILTONIAN_PROXY_TARGET, proxy_hamiltonian, tuned_step
from tallmcmc.proposals.random_walk import random_walk
from tallmcmc.run_warnings import DataUseWarning
from tallmcmc.sampling import SamplingResult, WarmupResult, ahead, reported_draws, sample, warmup
from tallmcmc.sampling.ahead import compile_ahead
from tallmcmc.sampling.continuation import starts_of
from tallmcmc.sampling.drivers import HeldBar
from tallmcmc.sampling.run_file import save_result
from tallmcmc.sampling.warmup_phase import compile_warmup
from tallmcmc.setup_fast import fast_setup, placeholder_control_variate
from tallmcmc.sharding import row_sharding, to_host
from tallmcmc.tall_continuation import (
    check_rederived,
    check_saved_run,
    checkpoint_file,
    continued_in_process,
    count_pass,
    made_in_this_process,
    resumed_kept,
    warmup_redone,
)
from tallmcmc.tall_diagnosis import (
    FAR_FROM_LAPLACE,
    ROUNDING_NOISE_LIMIT,
    TAIL_ESS_PER_DRAW_LIMIT,
    TAIL_ESS_RATIO_LIMIT,
    TallDiagnosis,
    diagnose,
    float32_rounding,
    sticky_tails,
)

__all__ = ["TallDiagnosis", "TestChoice", "choose_test", "residual_point_cost", "sample_tall"]

#: The integration time of the proxy-HMC move: a quarter period of the Laplace-preconditioned proxy dynamics.
INTEGRATION_TIME = math.pi / 2
#: The steps it starts with (warm-up then adapts the step, keeping ε·L, and may go down to one).
NUM_LEAPFROG_STEPS = 3
#: How its trajectory is integrated: the Gaussian part of the proxy exactly, the rest by kicks
#: (:func:`tallmcmc.proxy_hamiltonian`'s ``integrator="split"``; ``docs/warmup.md``, "The split integrator").
INTEGRATOR = "split"
#: The proxy-HMC move's ``momentum_temperature`` λ in the first warm-up (:func:`tallmcmc.proxy_hamiltonian`): 1, the
#: plain move (``benchmarks/bench_tempered_momentum.py`` sets it to measure every warm-up at another λ).
MOMENTUM_TEMPERATURE = 1.0
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
#: over seeds 1–4 and 0.65 at seed 0. The same value as :data:`PROXY_MISFIT_ACCEPTANCE`.
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
#: Where the draws made again at :data:`STICKY_TEMPERED_MOMENTUM` still read sticky tails (the same check), warm-up
#: and kept draws run once more at this λ, under the same gates (able to pay against a random walk; the ESS per draw
#: its warm-up's acceptance predicts above the λ = 2 draws' tail ESS per draw). λ = 3 everywhere would halve the
#: mixture's ESS (1,052-1,821 against 1,889-2,518 at λ = 2, seeds 1-12); as a second rung it runs only where λ = 2
#: fell short. Measured (``docs/sample_tall.md``, "A second rung"): on the mixture's seeds 1-24 it fired on seeds 14,
#: 17 and 22, the three the λ = 2 draws warned about (seed 17's stuck: ESS 432, r̂ 1.012, sds to 18% wide), and gave
#: bulk ESS 994-1,220, r̂ ≤ 1.008, sds 0.985-1.054 of the reference and no warning; on the separated logistic
#: regression (seeds 1-11) it fired on the 9 runs whose λ = 2 draws warned, and one still warns (9 before). Set it to
#: :data:`STICKY_TEMPERED_MOMENTUM` to stop at one rung.
STICKY_TEMPERED_AGAIN = 3.0
#: The step is drawn from ε·U(1 − j, 1 + j): integration times in [0.4π, 0.6π], far from half a period (π).
STEP_SIZE_JITTER = 0.2
#: An adapted random walk's ESS per draw is at best about this over d (Gelman, Roberts & Gilks 1996: 0.3/d at the
#: optimal scale on a Gaussian target). Where the Laplace approximation's proposal costs more per effective draw than
#: such a walk would (N·d/0.3 plain points), the path takes the walk (docs/sample_tall.md, "When the posterior is far
#: from its Laplace approximation").
RANDOM_WALK_EFFICIENCY = 0.3
#: A mode search that stopped without converging this close to the mode (its Newton decrement, in posterior sd) is
#: near enough for the path: the tests are exact whatever the centre, and a control variate or proxy centred
#: 0.1 sd off changes by a few per cent of its second-order term. ``sample_tall`` then neither warns nor reports it
#: (find_mode's own warning included; ``result.diagnosis.mode`` keeps its message): measured on the 2026-11-29
#: audit's negative-binomial regression, where a float32 search from the origin stopped at 0.024 sd.
MODE_NEAR_ENOUGH = 0.1
#: A mode search that did not converge and ended more than this many posterior sd (its Newton decrement) from the
#: mode gives no Laplace approximation: the path takes the random walk, as for a Hessian that is not positive definite.
MODE_OFF_LIMIT = 1.0
#: ``setup="auto"`` uses :func:`tallmcmc.fast_setup` from this many rows (``docs/setup.md``, "Where it pays") ...
FAST_SETUP_MIN_ROWS = 200_000
#: ... and from this many rows per coordinate, up to :data:`FAST_SETUP_MAX_DIMENSION` coordinates.
FAST_SETUP_ROWS_PER_DIMENSION = 10_000
#: Above this many coordinates ``setup="auto"`` uses ``find_mode`` (a d × d Hessian per row chunk per pass, as
#: ``find_mode``'s own Newton iterations up to :data:`tallmcmc.mode.NEWTON_MAX_DIMENSION`, 200, build). 100 until
#: 2026-11-30; measured at d = 150 and 200 (N = 1.5·10⁶ and 2·10⁶, logistic): 2.57 and 2.53 setup passes against 9.18
#: and 9.15, 11.5 and 13.7 s against 16.9 and 23.9 (``docs/setup.md``, "Where it pays").
FAST_SETUP_MAX_DIMENSION = 200
#: With a TunaMH ``bound``, the kept steps of its pilot (the first kept draws if TunaMH is chosen, else counted and
#: set aside): TunaMH is Metropolis-type and may touch fewer residuals per step than the minibatch test (docs/tuna.md).
TUNA_PILOT_STEPS = 50
#: The kept draws under the minibatch test are watched: after each of these fractions of them (where the segment since
#: the last look holds at least :data:`KEPT_CHECK_MIN_DRAWS` draws) the test's cost per effective draw over that
#: segment is measured again, as warm-up's window was (:func:`choose_test`), and where it is more than
#: :data:`KEPT_SWITCH_MARGIN` times the exact test's, the remaining draws run the exact Metropolis test. On residuals
#: with heavy tails (leverage points) the tail guard's pool may learn only after warm-up that most of N is needed per
#: step: found by the 2026-11-29 user-model audit, a logistic regression with Student-t(2) covariates at N = 10⁶
#: took 225 s where the exact test takes 22 s (docs/sample_tall.md, "When the minibatch grows during the kept draws").
KEPT_CHECKS = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875)
#: The fewest draws per chain between two looks at the kept draws' cost (fewer: no look there).
KEPT_CHECK_MIN_DRAWS = 50
#: The kept draws switch to the exact test only where the minibatch test costs more than this many times as much per
#: effective draw: a switch compiles another chain program, and near parity the choice is noise.
KEPT_SWITCH_MARGIN = 2.0
#: The values of ``sample_tall``'s ``setup``.
SETUPS = ("auto", "fast", "exact")
#: The values of ``sample_tall(minibatch_test=...)``: ``"auto"`` (default) warms up with the penalty test and keeps
#: it where its CLT error bound is small (:data:`PENALTY_ERROR_LIMIT`), else the Barker test.
MINIBATCH_TESTS = ("auto", "penalty", "barker")
#: ``minibatch_test="auto"`` keeps the penalty test when the mean of its bound on the CLT error of the acceptance
#: probability over the measurement window is at most this. Measured (docs/penalty.md, "Where the penalty test is
#: used"): 0.0013 on the logistic regression at N = 10⁶, 0.015 at N = 10⁷ in float32 (rounding noise in the
#: residuals; the posterior within 1.9 MCSE there), at most 0.008 on the other tall targets tried, and 0.04 on the
#: N = 1,000 mixture, where both minibatch tests break detailed balance at some pairs from the posterior's tails.
PENALTY_ERROR_LIMIT = 0.02
#: ``sample_tall`` checks the model at each chain's start on this many rows (a fixed, seeded subsample, the same rows
#: for every start) instead of all N; with N at most this, ``sample``'s own full check runs (docs/sample_tall.md,
#: "The start check").
START_CHECK_ROWS = 2**14
#: SciPy's modules the setup imports on first use (``chdtri``, the trust region's ``brentq``), which ArviZ imports too:
#: imported before the diagnosis's ArviZ starts importing in a thread (:mod:`tallmcmc.import_ahead`).
_SETUP_IMPORTS = ("scipy.special", "scipy.optimize")
_START_CHECK_BLOCK = DEFAULT_CHUNK_ROWS  # rows gathered and evaluated at once (a divisor of START_CHECK_ROWS)
_START_CHECK_STREAM = 0x57A27  # the start check's rows, apart from every other seed
_STARTS_STREAM = 0x57A275  # the chains' starts
_OUTLYING_STREAM = 0x0A7  # the Laplace draws at which the early look for outlying rows measures residuals
_PROXY_STREAM = 0x9A0  # the Laplace draws at which the look for rows the proxy should follow measures residuals
_CAUSES = {
    "spread": "the residuals are widely spread",
    "tail weight": "the residuals are heavy-tailed",
    "small N": "N is small against the first minibatch",
    "residual cost": "a residual costs more than the plain points it saves",
    "rejected": "the proposals were almost never accepted",
}


#: ``sample``'s arguments that ``sample_tall`` sets itself (refused by name, pointing to ``sample``).
CHOSEN_BY_SAMPLE_TALL = ("proposal", "test", "initial_positions", "adapt_covariance", "num_warmup", "check_starts")
#: What ``sample_tall(**sample_options)`` accepts: ``sample``'s arguments that ``sample_tall`` does not set itself by
#: name, and the mode and control variate to use instead of building them.
SAMPLE_OPTIONS = (
    frozenset(inspect.signature(sample).parameters)
    - {"model", "initial_position", "num_samples", "num_chains", "seed", "progress"}
) | {"mode", "control_variate"}


def check_sample_options(options: dict) -> None:
    """A ``TypeError`` naming an option ``sample_tall`` does not know, and the closest name it does.

    Before, such a name (``chains=`` for ``num_chains=``) reached ``warmup`` and was refused there, naming a function
    the user never called.
    """
    unknown = sorted(set(options) - SAMPLE_OPTIONS)
    if not unknown:
        return
    own = [name for name in inspect.signature(sample_tall).parameters if name != "sample_options"]
    passed_on = sorted(SAMPLE_OPTIONS - set(CHOSEN_BY_SAMPLE_TALL))
    close = difflib.get_close_matches(unknown[0], own + passed_on, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}=?" if close else "."
    raise TypeError(
        f"sample_tall() got an unexpected keyword argument {unknown[0]!r}{hint} Its own arguments are "
        f"{', '.join(own)}; it also takes {', '.join(passed_on)} (docs/sample_tall.md)"
    )


def sample_tall(
    model: Model,
    initial_position: Position = None,
    *,
    num_samples: int = 2000,
    num_chains: int = 4,
    num_warmup: int = 200,
    batch_size: int = 100,
    minibatch_test: str = "auto",
    bound: TunaBound | Callable[[ControlVariate], TunaBound] | None = None,
    chi: float = 0.01,
    seed: int = 0,
    progress: bool = True,
    setup: str = "auto",
    residual_cost: float | None = None,
    **sample_options,
) -> SamplingResult:
    """Sample ``model``'s posterior by the automatic tall-data path (see the module docstring).

    Parameters
    ----------
    model
        Any :class:`tallmcmc.Model` (K = 1 or tempered; e.g. from
        :func:`tallmcmc.from_numpyro`).
    initial_position
        Where the mode search starts; default zeros of ``model.position_shape``
        moved by :data:`tallmcmc.model.DEFAULT_START_SPREAD` (0.01) times a
        seeded standard normal draw per coordinate, off the kinks log densities
        often have at exactly 0.
    setup
        How the mode, the Laplace covariance and the control variate are
        built: ``"fast"`` by :func:`tallmcmc.fast_setup` (a subsample phase
        and two full passes, at most three passes in all; it falls back to
        ``find_mode`` with a warning naming why where it cannot be used);
        ``"exact"`` by :func:`tallmcmc.find_mode` to its Newton-decrement
        tolerance, the control variate from its final pass's sums;
        ``"auto"`` (default): ``"fast"`` when N ≥ :data:`FAST_SETUP_MIN_ROWS`,
        N ≥ :data:`FAST_SETUP_ROWS_PER_DIMENSION`·d, d ≤
        :data:`FAST_SETUP_MAX_DIMENSION` and the data are on one device,
        ``"exact"`` otherwise. Ignored where ``mode=`` or ``control_variate=``
        is given.
    num_samples, num_chains
        Kept draws per chain, and chains.
    num_warmup
        Warm-up steps per chain (adapting the proxy-HMC step on the proxy's
        acceptance; on the random-walk path, its covariance, at least 200;
        at least 20 on the proxy path, whose second half is the measurement
        window). Counted.
    batch_size
        The minibatch test's first minibatch and growth increment.
    minibatch_test
        Which minibatch test runs on the residuals. ``"penalty"``:
        :func:`tallmcmc.minibatch_penalty`, Metropolis-type (it accepts with
        min(1, e^{Δ* − ŝ²/2}), at least the Barker probability for every Δ, so
        with the same minibatch it mixes at least as well: ESS per draw ≈ 0.8
        against ≈ 0.3 on the logistic benchmark). ``"barker"``:
        :func:`tallmcmc.minibatch_barker`, Seita et al.'s test, whose
        acceptance is held to the Barker probability, and whose added noise
        smooths a Δ* that is not quite normal. ``"auto"`` (default): warm up
        with the penalty test and keep it when the mean of its CLT error
        bound over the measurement window is at most
        :data:`PENALTY_ERROR_LIMIT`, else continue with the Barker test. Both
        grow the minibatch by the same rule; ``docs/penalty.md`` compares
        them.
    bound
        Optional TunaMH bound for the control-variate residuals: a function
        of the control variate that returns a
        :class:`tallmcmc.acceptance.tuna.TunaBound` (e.g.
        ``bound=lambda cv: tallmcmc.examples.logistic_regression.tuna_bound(model, cv)``;
        it is called once the path has built its control variate, so the
        fast setup still runs), or a ``TunaBound`` already built for the
        ``control_variate=`` given with it. After warm-up, TunaMH with it
        runs a pilot of :data:`TUNA_PILOT_STEPS` kept steps from the warmed
        chains; it is kept (the pilot's draws are then the first kept draws)
        when its measured cost per effective draw, a/(2 − a) for acceptance
        a, is below the minibatch test's (or the exact test's, where
        the minibatch test does not pay). A pilot not kept is counted in
        ``setup_data_used["TunaMH pilot"]``; the bound's own pass over the
        data is counted under its name.
    chi
        TunaMH's χ when ``bound`` is used.
    residual_cost
        What one control-variate residual costs, in plain likelihood points
        (one datum's log-likelihood in the exact test's full pass), when the
        test is chosen; default :func:`residual_point_cost` of the control
        variate (measured on a 2-core CPU, ``docs/sample_tall.md``, "What a
        residual costs"). On other hardware, measure it with
        ``benchmarks/bench_point_costs.py``; ``1.0`` compares data points alone.
    seed
        Seeds the chains' starts and the runs.
    progress
        Progress bars and a line per phase.
    **sample_options
        Passed to :func:`tallmcmc.sample` (``driver=``, ``mesh=``,
        ``num_chunks=``, ``checkpoint=``, ``checkpoint_every=``: the kept
        draws are checkpointed, and a re-run script redoes the setup and
        warm-up, which are deterministic given ``seed``, then resumes from the
        file; at the end the file is written again with the whole run and
        ``result.made_by``); also ``mode=`` (a :class:`tallmcmc.mode.ModeResult` to use
        instead of searching), ``control_variate=`` (one built at that mode),
        and ``resume=`` (a result of ``sample_tall``: it is extended by
        ``num_samples`` draws with the same proposal and test; one made in
        this process without setup or warm-up, a saved one —
        ``tallmcmc.load_result(path)``, which holds no proposal or test — by
        redoing the setup and warm-up, deterministic given the arguments,
        which must be those of the call that made it (the file records them;
        other values are refused, naming them); the redone passes are counted
        as :data:`tallmcmc.tall_continuation.REDONE`; ``docs/long_runs.md``).

    Returns
    -------
    SamplingResult
        With ``result.diagnosis`` a :class:`TallDiagnosis`, ``result.made_by``
        the arguments that shaped the setup and warm-up (saved with the run);
        ``result.setup_data_used`` counts every one-off pass (the mode search
        or ``"fast_setup"``'s subsample phase and first pass, the control
        variate, the start check: ``"start check (subsample)"``, the chains'
        starts on :data:`START_CHECK_ROWS` rows each, or sample's full
        ``"start check"`` where N is no larger or on the random-walk path),
        ``result.warmup_info`` every warm-up step.

    Warns
    -----
    RuntimeWarning
        When the diagnosis finds r̂ above 1.01, error bounds that guarantee
        nothing, a warm-up that did not settle, or a mode search that did not
        converge; the draws are returned all the same.
    """
    num_samples = integer_at_least(num_samples, "num_samples")
    num_chains = integer_at_least(num_chains, "num_chains")
    num_warmup = integer_at_least(num_warmup, "num_warmup", 20, why="its second half measures the tests' costs")
    batch_size = integer_at_least(batch_size, "batch_size", 2)
    if residual_cost is not None:
        residual_cost = positive_finite(residual_cost, "residual_cost", RESIDUAL_COST_MEANING)
    if minibatch_test not in MINIBATCH_TESTS:
        raise ValueError(
            f"minibatch_test must be one of {', '.join(repr(name) for name in MINIBATCH_TESTS)} (the test run on the "
            f"control-variate residuals); got {minibatch_test!r}"
        )
    if not isinstance(model, Model):
        raise TypeError(f"model must be a tallmcmc.Model; got {type(model).__name__}")
    if setup not in SETUPS:
        raise ValueError(
            f"setup must be one of {', '.join(repr(name) for name in SETUPS)} (how the mode and the control variate "
            f"are built); got {setup!r}"
        )
    check_sample_options(sample_options)
    resume = sample_options.pop("resume", None)
    if resume is not None and made_in_this_process(resume):
        return continued_in_process(model, resume, num_samples, progress, num_warmup, sample_options)
    mode = sample_options.pop("mode", None)
    control_variate = sample_options.pop("control_variate", None)
    made_by = {
        "function": "sample_tall",
        "seed": int(seed) if isinstance(seed, (int, np.integer)) else repr(seed),
        "num_chains": num_chains,
        "num_warmup": num_warmup,
        "batch_size": batch_size,
        "minibatch_test": minibatch_test,
        "setup": setup,
        "residual_cost": residual_cost,
        "chi": float(chi) if isinstance(chi, (int, float, np.integer, np.floating)) else repr(chi),
        "initial_position": initial_position is not None,
        "bound": bound is not None,
        "mode": mode is not None,
        "control_variate": control_variate is not None,
    }
    if resume is not None:
        check_saved_run(resume, made_by)
    store = checkpoint_file(sample_options, made_by)
    for name in CHOSEN_BY_SAMPLE_TALL:
        if name in sample_options:
            raise ValueError(
                f"sample_tall chooses {name} itself; to set it, run the steps by hand with tallmcmc.sample "
                "(docs/sample_tall.md spells them out)"
            )
    if bound is not None and not callable(bound) and control_variate is None:
        raise ValueError(
            "bound: a TunaMH bound built for a control variate needs that control variate; pass a function of it "
            "instead, e.g. bound=lambda cv: tallmcmc.examples.logistic_regression.tuna_bound(model, cv), which "
            "sample_tall calls with the control variate it builds (or pass control_variate= and mode= as well)"
        )
    if initial_position is None:
        if model.position_shape is None:
            raise ValueError(
                "initial_position: give a start for the mode search, or build the Model with position_shape= so that "
                "sample_tall can start at zeros"
            )
        initial_position = default_start(model.position_shape, seed, DEFAULT_START_SPREAD)
    start = as_position(initial_position)
    problems: list[str] = []
    say = print if progress else (lambda *_, **__: None)
    clock = _Clock()
    # the diagnosis's ArviZ imported in a thread while the run works (0.5–0.8 s in a fresh process); SciPy's modules
    # that the setup imports on first use are imported here first, so that the two threads never import one at once
    diagnostics_import = import_ahead.start(arviz_bridge.diagnostics_module(), first=_SETUP_IMPORTS)

    one_device = row_sharding(model.data, "sample_tall") is None
    if mode is None and control_variate is None and one_device and not sample_options:
        # the default run's shape: its chain program compiled while the mode is found (the warm-up takes it)
        compile_ahead(
            functools.partial(
                _compile_warmup_ahead, model, start, batch_size, minibatch_test, num_chains, num_warmup, seed
            ),
            _ahead_signature(model, start, batch_size, minibatch_test, num_chains, num_warmup),
        )
    found_here = mode is None  # a mode found here on this model: its last pass's sums may build the control variate
    setup_warnings: list[warnings.WarningMessage] = []
    fallback = None  # fast_setup's reason for falling back to find_mode, if it did
    if mode is None:
        with warnings.catch_warnings(record=True) as setup_warnings:
            warnings.simplefilter("always")
            mode, built, fallback = default_setup(model, start, setup if control_variate is None else "exact", say)
        control_variate = built if control_variate is None else control_variate
    off = float(getattr(mode, "newton_decrement", 0.0)) if not bool(getattr(mode, "converged", True)) else 0.0
    near_enough = off <= MODE_NEAR_ENOUGH  # False for NaN and inf: a Hessian that is not positive definite
    fallback_warnings = []  # fast_setup's, held until the early look for outlying rows has said whether it found why
    for caught in setup_warnings:  # find_mode's "did not converge" only where it matters
        text = str(caught.message)
        if near_enough and text.startswith("find_mode:") and "without converging" in text:
            continue
        if fallback is not None and text.startswith("fast_setup:"):
            fallback_warnings.append(caught)
        else:
            _warn_again([caught])
    if near_enough and off > 0:
        say(
            f"sample_tall: the mode search stopped {off:.3g} posterior sd from the mode ({mode.message}); near "
            f"enough (≤ {MODE_NEAR_ENOUGH:g} sd): the tests are exact from any centre, and the control variate and "
            "the proxy barely change",
            flush=True,
        )
    elif not bool(getattr(mode, "converged", True)):
        problems.append(
            "the mode search did not converge ("
            + (
                "the Hessian of −log π is not positive definite where it ended"
                if math.isinf(off)
                else f"Newton decrement {off:.3g} posterior sd"
            )
            + f", max |∇log π| = "
            f"{mode.gradient_norm:.3g}); "
            + (
                "so no Laplace approximation is used: exact Metropolis with an adapted random walk"
                if off > MODE_OFF_LIMIT
                else "the control variate and the Laplace proposal are centred off the mode"
            )
        )
    try:
        covariance = laplace_covariance(mode) if not off > MODE_OFF_LIMIT else None  # NaN: not known to be off
    except ValueError:
        covariance = None
    dimension = int(ravel_pytree(mode.position)[0].shape[0])
    clock.lap("setup")
    run = _RunShape(
        num_samples,
        num_warmup,
        seed,
        dict(num_chains=num_chains, progress=progress, **sample_options),
        say,
        watch_kept=one_device and not {"mesh", "checkpoint", "checkpoint_every", "driver"} & set(sample_options),
        resume=resume,
    )
    switch = None
    early = outlying = None  # the looks for outlying rows, before and after warm-up (their passes counted below)
    tempered = None  # the warm-up again with the momentum tempered, where the plain move accepted too little
    tail_note = None  # what the tail-mixing problem adds, where the kept draws' tails sent the path to temper

    if covariance is None:
        decision, choice, proposal = "random walk", None, None
        if math.isinf(off):  # the decrement is undefined: the Hessian where the search ended is not positive definite
            why = (
                "the mode search ended where the Hessian of −log π is not positive definite (no mode there: a "
                "density that grows without bound, such as a horseshoe's or another scale prior's towards a scale of "
                "0, a saddle, or a flat direction)"
            )
        elif off > MODE_OFF_LIMIT:
            why = (
                f"the mode search ended {off:.3g} posterior sd from the mode (more than {MODE_OFF_LIMIT:g}: a "
                "likelihood that is not smooth, e.g. |x − θ| terms, or a flat direction)"
            )
        else:
            why = "the Hessian of −log π at the mode is not positive definite"
        reason = (
            f"{why}, so there is no Laplace approximation to build a control variate or a proxy proposal on; exact "
            "Metropolis with a random walk whose covariance warm-up adapts"
        )
        _warn_again(fallback_warnings)
        result, kept_proposal, kept_test = _random_walk_run(model, mode, reason, run)
        clock.lap("kept draws")
    else:
        if control_variate is None and found_here and getattr(mode, "likelihood_sums", None) is not None:
            control_variate = control_variate_at_mode(model, mode)  # find_mode's last pass summed what it needs
        elif control_variate is None:
            say("sample_tall: building the control variate (one pass) ...", flush=True)
            control_variate = taylor_control_variate(model, mode.position)
        if callable(bound):
            bound = _bound_for(bound, control_variate)
        clock.lap("setup")
        may_look = LOOK_FOR_OUTLYING_ROWS and bound is None and one_device
        if may_look and fallback is not None:
            # fast_setup fell back (its subsample phase did not settle, its curvature was not positive definite, its
            # second pass landed far from the mode): the usual cause is a direction few rows inform, whose rows'
            # residuals the minibatch cannot estimate either; look for them now, on Laplace draws, rather than after
            # a warm-up that would spend most of N per step on them (the sixth user-model audit: 150 passes)
            early = _outlying_look(
                model, control_variate, _laplace_pairs(mode.position, covariance, seed), batch_size, run, "early"
            )
            if early.found is not None and early.found.indices.size:
                control_variate = with_outlying_rows(control_variate, model, early.found.indices)
                # the fallback's usual cause, found and dealt with: the full-data find_mode cost passes (counted in
                # setup_passes), not accuracy, so it is said rather than warned (diagnosis.setup_fallback keeps it)
                if fallback_warnings:
                    say(
                        f"sample_tall: fast_setup fell back to find_mode ({fallback}); its usual cause, rows the "
                        f"subsamples could not estimate, is dealt with: {early.summary}",
                        flush=True,
                    )
                fallback_warnings = []
        _warn_again(fallback_warnings)
        if early is not None:
            clock.lap("look for outlying rows")
        warmed, proposal, warmup_test = _warmed_up(
            model, mode, covariance, control_variate, batch_size, minibatch_test, run
        )
        choice, minibatch, measured = _measured_choice(
            model, warmed, warmup_test, control_variate, minibatch_test, batch_size, residual_cost
        )
        clock.lap("warm-up")
        if (
            may_look
            and not control_variate.num_outlying
            and (_outlying_rows_may_pay(choice, run) or _proxy_may_misfit(choice, run))
        ):
            outlying = _with_outlying_rows(
                model, mode, covariance, control_variate, warmed, choice, batch_size, minibatch_test, residual_cost, run
            )
            if outlying.kept is not None:
                control_variate, warmed, proposal, warmup_test, choice, minibatch, measured = outlying.kept
            clock.lap("look for outlying rows")
        walk_cost = model.num_data * dimension / RANDOM_WALK_EFFICIENCY
        walk = bound is None and choice.cost > walk_cost
        # a warm-up again with the momentum tempered, from the plain warm-up (warmed) and its choice
        tempered_warmup = functools.partial(
            _with_tempered_momentum,
            model,
            mode,
            covariance,
            control_variate,
            walk_cost=walk_cost,
            batch_size=batch_size,
            minibatch_test=minibatch_test,
            residual_cost=residual_cost,
            run=run,
        )
        if (
            not walk
            and choice.metropolis_acceptance < TEMPER_BELOW
            and TEMPERED_MOMENTUM != MOMENTUM_TEMPERATURE
            and _tempering_may_pay(choice, dimension, walk_cost)
        ):
            tempered = tempered_warmup(warmed, choice)
            if tempered.kept is not None:
                warmed, proposal, warmup_test, choice, minibatch, measured = tempered.kept
            else:
                problems.append(tempered.problem)
            clock.lap("warm-up")
        if walk:
            # the Laplace approximation does not describe the posterior: its proposals are rejected so often that
            # even a random walk, which adapts to the posterior, costs less per effective draw (docs/sample_tall.md,
            # "When the posterior is far from its Laplace approximation")
            decision, proposal = "random walk", None
            reason = (
                f"warm-up with the Laplace approximation's proxy proposal accepted too little ({measured}), against "
                f"≈ {walk_cost:,.0f} plain points per effective draw for an adapted random walk (N·d/"
                f"{RANDOM_WALK_EFFICIENCY:g} at best), so the posterior is far from that approximation; exact "
                "Metropolis with a random walk whose covariance warm-up adapts"
            )
            problems.append(
                f"warm-up's proxy proposals, built on the Laplace approximation at the mode, were accepted "
                f"{100 * max(choice.minibatch_acceptance, choice.metropolis_acceptance):.3g}% of the time, so the "
                f"path fell back to an adapted random walk, exact but slow in d = {dimension}. " + FAR_FROM_LAPLACE
            )
            result, kept_proposal, kept_test = _random_walk_run(model, mode, reason, run)
            clock.lap("kept draws")
            for name, used in warmed.setup_data_used.items():
                count_pass(result, name, used, resume)
            count_pass(
                result, "warm-up with the proxy proposal (rejected)", np.sum(to_host(warmed.info["data_used"])), resume
            )
        else:  # the Laplace approximation fits: tune, measure TunaMH, keep draws
            decision, reason = _decided(choice, measured)
            tuned = _tuned(proposal, warmed)
            pilot = None
            tuna_test = None if bound is None else tuna(chi, bound, control_variate=control_variate)
            # TunaMH is Metropolis-type: measure it, and keep it where it costs less per ESS (a continuation does not:
            # the saved run's test says whether TunaMH was kept)
            if tuna_test is not None and resume is None:
                pilot, violated = _tuna_pilot(model, tuned, tuna_test, warmed, run)
                clock.lap("TunaMH pilot")
                if violated is not None:
                    problems.append(
                        f"TunaMH was not used: {violated} in its {TUNA_PILOT_STEPS}-step pilot, so the bound does not "
                        "hold (in float32 at large N, rounding of the residuals can exceed a tight bound: "
                        "docs/tuna.md, 'Bounds and float32')"
                    )
                else:
                    choice = choice.with_tuna(pilot.info)
                if violated is None and choice.tuna_cost < choice.cost:
                    decision = "tuna"
                    reason = f"TunaMH on the residuals costs the least per effective draw: {choice.describe_tuna()}; {measured}"
                else:  # the decision above stands
                    reason += (
                        f"; {choice.describe_tuna()}" if violated is None else f"; TunaMH's bound failed: {violated}"
                    )
            reason += _looks_said(early, outlying, tempered)
            # the λs the kept draws are made again at, in turn, while their tails read sticky
            sticky_rungs = (
                () if tempered is not None or bound is not None else _sticky_rungs(choice, dimension, walk_cost)
            )
            # a warm-up again at a rung's λ from the plain one and its choice, and why
            sticky_again = functools.partial(tempered_warmup, warmed, choice)
            if resume is not None and sticky_rungs and not warmup_redone(model, warmed, resume):
                # the saved run may have drawn again with the momentum tempered, its tails having mixed too slowly:
                # its warm-up draws say which rung (the kept draws that decided it are not redone)
                thrown: dict[str, int] = {}
                for temperature in sticky_rungs:
                    again = sticky_again(
                        temperature=temperature, why="the saved run's warm-up draws are not the plain warm-up's redone"
                    )
                    if again.kept is not None and warmup_redone(model, again.kept[0], resume):
                        tempered = again._replace(setup_data_used={**thrown, **again.setup_data_used})
                        warmed, proposal, warmup_test, choice, minibatch, measured = again.kept
                        decision, reason = _decided(choice, measured)
                        reason += _looks_said(early, outlying, tempered)
                        tuned = _tuned(proposal, warmed)
                        break
                    thrown.update(again.not_kept().setup_data_used)
                else:  # none is the saved run's (or did not pay): the plain one stays, these are counted
                    tempered = again.not_kept()._replace(setup_data_used=thrown)
            if resume is not None:
                result, kept_proposal, kept_test, decision, differs = resumed_kept(
                    model,
                    decision,
                    warmed,
                    proposal,
                    tuned,
                    minibatch,
                    tuna_test,
                    run.resume,
                    run.num_samples,
                    run.options,
                    run.say,
                )
                reason = f"continued from the saved run, whose setup and warm-up were redone: {reason}"
                if differs is not None:
                    problems.append(differs)
            else:
                say(f"sample_tall: {decision} — {reason}", flush=True)
                watch = _Watch(control_variate, residual_cost, choice.proposal_points)
                result, kept_proposal, kept_test, switch = _kept_run(
                    model, decision, warmed, proposal, tuned, warmup_test, minibatch, pilot, tuna_test, watch, run
                )
                if sticky_rungs and switch is None and run.watch_kept and run.num_samples >= STICKY_MIN_DRAWS:
                    diagnostics_import.wait()
                    read = []  # what each set of draws made read: "the plain draws read 0.21", ...
                    for temperature in sticky_rungs:
                        sticky = sticky_tails(result, TAIL_ESS_RATIO_LIMIT, TAIL_ESS_PER_DRAW_LIMIT)
                        if sticky is None:
                            break
                        ratio, per_draw = sticky
                        made = "the plain draws" if tempered is None else f"the draws at λ = {tempered.temperature:g}"
                        read.append(f"{made} read {ratio:.2f}")
                        clock.lap("kept draws")
                        again = _drawn_again_only_if_faster(
                            sticky_again(
                                temperature=temperature,
                                why=f"the kept draws' tails mixed far slower than their bulk ({made}: tail ESS "
                                f"{ratio:.2f} of the bulk ESS, {per_draw:.2f} per draw: chains that stick in tails "
                                "heavier than the Laplace approximation)",
                            ),
                            per_draw,
                        )
                        clock.lap("warm-up")
                        if again.kept is None:  # the draws made stay
                            reason += f"; {again.summary}"
                            if tempered is None:
                                tempered = again
                            else:
                                tempered = tempered._replace(
                                    setup_data_used={**tempered.setup_data_used, **again.setup_data_used}
                                )
                            read.append(f"a warm-up with {again.summary.removeprefix('the ')}")
                            break
                        # the draws made, and the warm-up before them, are replaced: counted as not kept
                        first = int(np.sum(to_host(result.info["data_used"])))
                        replaced = {"draws with the plain momentum (not kept)": first}
                        if tempered is not None:
                            replaced = {
                                **tempered.setup_data_used,
                                **tempered.thrown(),
                                f"draws with the momentum tempered at λ = {tempered.temperature:g} (not kept)": first,
                            }
                        tempered = again._replace(setup_data_used={**again.setup_data_used, **replaced})
                        warmed, proposal, warmup_test, choice, minibatch, measured = tempered.kept
                        decision, reason = _decided(choice, measured)
                        reason += _looks_said(early, outlying, tempered)
                        tuned = _tuned(proposal, warmed)
                        say(f"sample_tall: drawing again: {decision} — {reason}", flush=True)
                        watch = _Watch(control_variate, residual_cost, choice.proposal_points)
                        result, kept_proposal, kept_test, switch = _kept_run(
                            model, decision, warmed, proposal, tuned, warmup_test, minibatch, None, None, watch, run
                        )
                        if switch is not None:
                            break
                    tail_note = _tail_note(read, tempered)
            clock.lap("kept draws")
            if switch is not None:
                decision, reason = "minibatch, then exact", f"{reason}; {switch.reason}"
    for look in (early, outlying, tempered):  # on every path after them, the random walk's included
        if look is not None:
            for name, used in look.setup_data_used.items():
                count_pass(result, name, used, resume)
    diagnostics_import.wait()
    result.diagnosis = dataclasses.replace(
        diagnose(result, decision, reason, mode, control_variate, choice, proposal, problems, num_warmup),
        proposal=kept_proposal,
        test=kept_test,
        switched_at=None if switch is None else switch.at,
        setup_fallback=fallback,
        momentum_temperature=(
            None
            if decision == "random walk"
            else tempered.temperature
            if tempered is not None and tempered.kept is not None
            else MOMENTUM_TEMPERATURE
        ),
        seconds=clock.seconds,  # the checks below are added to it as they end
    )
    if tail_note is not None:  # the check may still read low after tempering was tried: say what was done
        result.diagnosis.problems[:] = [_with_tail_note(problem, tail_note) for problem in result.diagnosis.problems]
    rounding = float32_rounding(model, result, covariance) if result.diagnosis.problems else None
    if rounding is not None:  # its four passes ran, whatever they found
        count_pass(result, "float32 rounding check (diagnosis)", 4 * model.num_data, resume)
        if rounding.noise > ROUNDING_NOISE_LIMIT:
            result.diagnosis.problems.insert(0, rounding.problem())
    if found_here and covariance is not None and one_device:  # the chains sample one mode: is there another?
        say("sample_tall: looking for other modes (Newton from three other starts on a subsample) ...", flush=True)
        look = other_modes(model, mode, covariance, start, seed)
        if look is not None:
            count_pass(result, "other modes", look.data_used, resume)
            if look.other is not None:
                result.diagnosis.problems.insert(0, look.other.problem())
    clock.lap("checks after the draws")
    result.made_by = made_by
    if store is not None and result.last_state is not None:
        # the file sample wrote holds the kept draws; written again with the whole run (the setup's counts, the
        # diagnosis's checks), so that sample_tall(model, resume=tallmcmc.load_result(path)) continues all of it
        save_result(result, store.path, target=result.num_draws, argument="checkpoint")
    for problem in result.diagnosis.problems:
        warnings.warn(f"sample_tall: {problem}", RuntimeWarning, stacklevel=2)
    return result


def _with_tail_note(problem: str, note: str) -> str:
    """The diagnosis's tail-mixing ``problem`` with ``note`` (what tempering did after the plain draws' tails read
    low) said; other problems as they are."""
    if "tails mixed far slower than its bulk" not in problem:
        return problem
    return f"{problem}. {note} (docs/sample_tall.md, 'Drawn again, tempered')"


def _sticky_rungs(choice: TestChoice, dimension: int, walk_cost: float) -> tuple[float, ...]:
    """The λs at which the kept draws are made again, in turn, while their tails read sticky:
    :data:`STICKY_TEMPERED_MOMENTUM`, then :data:`STICKY_TEMPERED_AGAIN`, each while it may pay against a random walk
    (:func:`_tempering_may_pay`, from the plain warm-up's ``choice``); none where the first is the plain move's λ
    (the draws again turned off)."""
    rungs: list[float] = []
    for temperature in dict.fromkeys((STICKY_TEMPERED_MOMENTUM, STICKY_TEMPERED_AGAIN)):
        if temperature == MOMENTUM_TEMPERATURE or not _tempering_may_pay(choice, dimension, walk_cost, temperature):
            break
        rungs.append(temperature)
    return tuple(rungs)


def _tail_note(read: list[str], tempered: _Tempered | None) -> str | None:
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


def _drawn_again_only_if_faster(tempered: _Tempered, plain_per_draw: float) -> _Tempered:
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


def _decided(choice: TestChoice, measured: str) -> tuple[str, str]:
    """The decision the measured ``choice`` makes (``"minibatch"`` or ``"exact"``) and its reason in words."""
    if choice.minibatch:
        return "minibatch", f"the control variate pays: {measured}"
    return "exact", (
        f"the control variate cannot pay ({_CAUSES[choice.cause]}): {measured}; so the exact Metropolis test runs"
        + (
            ", at less cost per effective draw"
            if choice.cause == "residual cost"
            else " rather than spending most of N per step under a minibatch name"
        )
    )


def _tuned(proposal: Proposal, warmed: WarmupResult) -> Proposal:
    """``proposal`` tuned to the warmed chains' geometric mean step factor (the kept draws' step)."""
    factor = float(np.exp(np.mean(np.log(np.asarray(to_host(warmed.step_size_factor))))))
    return proposal.tune(to_device(factor, np.float32))


def _looks_said(*looks) -> str:
    """What the looks that ran (for outlying rows, the tempered momentum; ``None``: not run) add to the reason."""
    return "".join(f"; {look.summary}" for look in looks if look is not None)


class _RunShape(NamedTuple):
    """What every run of :func:`sample_tall`'s path shares: kept draws and warm-up steps per chain, the seed,
    :func:`tallmcmc.sample`'s options (``num_chains``, ``progress`` and the user's) and the progress printer."""

    num_samples: int
    num_warmup: int
    seed: int
    options: dict[str, Any]
    say: Callable[..., None]
    #: whether the minibatch test's kept draws are run in segments and their cost looked at (:data:`KEPT_CHECKS`):
    #: on one device, without a mesh, a checkpoint file or another driver
    watch_kept: bool = False
    #: a saved run of ``sample_tall`` that this call continues (``resume=``): the setup and warm-up are redone to
    #: rebuild its proposal and test, and its chains go on instead of new kept draws
    resume: SamplingResult | None = None


def _random_walk_run(model: Model, mode, reason: str, run: _RunShape) -> tuple[SamplingResult, Proposal, Any]:
    """Exact Metropolis with a random walk whose covariance warm-up adapts, from the mode (its search counted); the
    result, and the proposal and test that made it."""
    run.say(f"sample_tall: random walk — {reason}", flush=True)
    dimension = int(ravel_pytree(mode.position)[0].shape[0])
    proposal, test = random_walk(0.1 / math.sqrt(dimension)), exact_metropolis()
    if run.resume is not None:  # the covariance warm-up adapted is in the saved state
        check_rederived(run.resume, proposal, test)
        result = sample(model, proposal, test, resume=run.resume, num_samples=run.num_samples, **run.options)
        count_pass(result, mode.name, mode.data_used, run.resume)
        return result, proposal, test
    result = sample(
        model,
        proposal,
        test,
        initial_positions=_starts(mode.position, np.eye(dimension) * 1e-2, run.options["num_chains"], run.seed),
        num_samples=run.num_samples,
        num_warmup=max(run.num_warmup, 200),
        adapt_covariance=True,
        seed=run.seed,
        **run.options,
    )
    result.setup_data_used.setdefault(mode.name, int(mode.data_used))
    return result, proposal, test


def _warmed_up(
    model: Model,
    mode,
    covariance: np.ndarray,
    control_variate: ControlVariate,
    batch_size: int,
    minibatch_test: str,
    run: _RunShape,
    keep_going: Callable[[dict], bool] | None = None,
    momentum_temperature: float | None = None,
    test=None,
) -> tuple[WarmupResult, Proposal, Any]:
    """The warm-up: proxy HMC on the Laplace approximation under the minibatch test, from starts checked on a
    subsample (counted as ``"start check (subsample)"``); the warmed chains, the proposal and the test.
    ``keep_going``: as for :func:`tallmcmc.warmup`; ``momentum_temperature``: the move's λ (``None``:
    :data:`MOMENTUM_TEMPERATURE`); ``test``: another test than the minibatch one (``None``: the minibatch test)."""
    proposal, warmup_test, starts = _warmup_pieces(
        control_variate,
        covariance,
        mode.position,
        batch_size,
        minibatch_test,
        run.options["num_chains"],
        run.seed,
        momentum_temperature,
    )
    warmup_test = warmup_test if test is None else test
    checked = _check_starts(model, starts, run.seed)  # None: too few rows to subsample, sample's full check runs
    run.say("sample_tall: warm-up with the minibatch test, measuring what it costs ...", flush=True)
    warmed = warmup(
        model,
        proposal,
        warmup_test,
        initial_positions=starts,
        num_warmup=run.num_warmup,
        seed=run.seed,
        check_starts=checked is None,
        keep_going=keep_going,
        **{k: v for k, v in run.options.items() if k not in ("num_chunks", "checkpoint", "checkpoint_every")},
    )
    if checked is not None:
        warmed = dataclasses.replace(
            warmed, setup_data_used={"start check (subsample)": checked, **warmed.setup_data_used}
        )
    return warmed, proposal, warmup_test


def _measured_choice(
    model: Model,
    warmed: WarmupResult,
    warmup_test,
    control_variate: ControlVariate,
    minibatch_test: str,
    batch_size: int,
    residual_cost: float | None,
) -> tuple[TestChoice, Any, str]:
    """What the warm-up's measurement window says: the test choice, the minibatch test the kept draws would run
    (under ``"auto"``, the Barker test where the penalty test's CLT error bound was above
    :data:`PENALTY_ERROR_LIMIT`), and the measurement in words."""
    pool = warmed.states.cache
    window = _window(warmed)
    minibatch, note = warmup_test, ""
    if minibatch_test == "auto":
        error = float(np.mean(window["error_bound"]))
        if error > PENALTY_ERROR_LIMIT:  # Δ* too far from normal to trust the penalty: the Barker test smooths it
            minibatch = minibatch_barker(min(batch_size, model.num_data), control_variate=control_variate)
            window = {**window, "accepted": barker_acceptance(window["statistic"])}
            note = (
                f"; the minibatch test is the Barker test (its acceptance predicted from the window's Δ*): the "
                f"penalty test's mean CLT error bound in warm-up was {error:.2g} > {PENALTY_ERROR_LIMIT}"
            )
        else:
            note = f"; the minibatch test is the penalty test (mean CLT error bound {error:.2g})"
    choice = choose_test(
        window,
        model.num_data,
        to_host(pool) if hasattr(pool, "fourth") else None,
        control_variate,
        residual_cost=residual_cost,
        proposal_points=_proposal_rows(control_variate, warmed.step_size_factor),
    )
    return choice, minibatch, choice.describe(model.num_data) + note


def _proposal_rows(control_variate: ControlVariate, factors) -> float:
    """Rows the tuned proxy-HMC move reads per step, on average over the chains: (L + 1) evaluations of the outlying
    rows where its proxy follows them (``ControlVariate.outlying_in_proxy``), L the number of steps each chain's
    step factor gives (as :func:`tallmcmc.proposals.proxy.proxy_hamiltonian` tunes it); 0 otherwise."""
    if not control_variate.proposal_rows or factors is None:
        return 0.0
    factors = np.asarray(to_host(factors), np.float64)
    _, steps = tuned_step(INTEGRATION_TIME / NUM_LEAPFROG_STEPS, NUM_LEAPFROG_STEPS, factors, xp=np)
    return float(np.mean(steps + 1)) * control_variate.proposal_rows


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


class _Clock:
    """Wall time by phase: :meth:`lap` adds the time since the last lap (or the start) to a phase."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._last
        self._last = now


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


class _Tempered(NamedTuple):
    """The warm-up again with the momentum tempered: the passes of the warm-up not kept, in words, and where the
    tempered one is kept its pieces ``(warmed, proposal, warmup_test, choice, minibatch, measured)`` as
    ``sample_tall`` names them (``None`` where it is not: then ``problem`` says why that may matter)."""

    setup_data_used: dict[str, int]
    summary: str
    kept: tuple | None
    temperature: float
    problem: str = ""

    def not_kept(self) -> _Tempered:
        """This warm-up counted as not kept (``"warm-up with the momentum tempered at λ = 3 (not kept)"``, its λ
        named), the one before it staying; as it is where it was not kept already."""
        if self.kept is None:
            return self
        return self._replace(setup_data_used=self.thrown(), kept=None)

    def thrown(self) -> dict[str, int]:
        """This kept warm-up's points, named as a warm-up not kept (it is being replaced, or was not kept)."""
        return {
            f"warm-up with the momentum tempered at λ = {self.temperature:g} (not kept)": _warmup_points(self.kept[0])
        }


def _outlying_rows_may_pay(choice: TestChoice, run: _RunShape) -> bool:
    """Whether warm-up's residuals were heavy-tailed and its minibatch test cost enough to look for outlying rows (not
    where the proposals were almost never accepted)."""
    # whatever cause the window named: with one chain whose tail guard acted from its first step, the smallest
    # minibatch seen was 35,300 rows and the window said "small N" (kurtosis 4,300, N = 150,000)
    accepted = choice.cause != "rejected"
    heavy = not choice.use.kurtosis < OUTLYING_LOOK_KURTOSIS  # NaN (unmeasured) looks
    costly = not choice.minibatch or choice.use.fraction > OUTLYING_LOOK_FRACTION
    return accepted and heavy and costly and run.num_warmup >= 8


def _proxy_may_misfit(choice: TestChoice, run: _RunShape) -> bool:
    """Whether warm-up's residuals were heavy-tailed and its moves rejected as a misfitting proxy's are (Metropolis
    acceptance below :data:`PROXY_MISFIT_ACCEPTANCE`), whatever the minibatch cost: proposals almost never accepted
    included, which :func:`_outlying_rows_may_pay` leaves out (a test that rejects every move reads all of N, which
    holding rows in the test does not change; following them in the proxy may). The seventh audit's Poisson
    intercepts with τ learned, N = 10⁵: 1.0% accepted, r̂ 3.65; with the rows followed 41.7%, r̂ 1.065."""
    heavy = not choice.use.kurtosis < OUTLYING_LOOK_KURTOSIS  # NaN (unmeasured) looks
    return heavy and choice.metropolis_acceptance < PROXY_MISFIT_ACCEPTANCE and run.num_warmup >= 8


def _laplace_pairs(center: Position, covariance: np.ndarray, seed: int) -> tuple[Position, Position]:
    """:data:`tallmcmc.outlying_rows.PAIRS` pairs of independent draws from the Laplace approximation."""
    draws = _starts(center, covariance, 2 * PAIRS, seed, _OUTLYING_STREAM)
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


def _outlying_look(
    model: Model, control_variate: ControlVariate, pairs: tuple, batch_size: int, run: _RunShape, when: str
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
        # the out-of-sample prediction gates only the second warm-up after warm-up (_with_outlying_rows)
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


def _with_outlying_rows(
    model: Model,
    mode,
    covariance: np.ndarray,
    control_variate: ControlVariate,
    warmed: WarmupResult,
    choice: TestChoice,
    batch_size: int,
    minibatch_test: str,
    residual_cost: float | None,
    run: _RunShape,
) -> _Outlying:
    """After a warm-up whose residuals were heavy-tailed: look for outlying rows and, where some are found, warm up again with them
    summed exactly, kept where its measured cost per effective draw is lower (``docs/sample_tall.md``, "Rows the
    minibatch cannot estimate"). Every residual of the look and of the warm-up not kept is counted."""
    look = _outlying_look(model, control_variate, _warmup_pairs(warmed), batch_size, run, "after warm-up")
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
        counted["warm-up before the outlying rows were held"] = _warmup_points(warmed)
        summary = f"{look.summary}; before them, {choice.describe(model.num_data)}"
        return _Outlying(counted, summary, kept)
    counted["warm-up with outlying rows held (not kept)"] = _warmup_points(kept[1])
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
    run: _RunShape,
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
    landings = _starts(mode.position, covariance, PROXY_PAIRS, run.seed, _PROXY_STREAM)
    counted["rows for the proxy (look, after warm-up)"] = PROXY_PAIRS * model.num_data
    try:
        proxy = find_rows_for_the_proxy(model, control_variate, states, landings)
    except ValueError as error:  # a residual not finite at a Laplace draw: no rows for the proxy from it
        return _Outlying(counted, f"{look.summary}; no rows for the proxy ({error})")
    rows_held = np.union1d(found.indices, proxy.indices).astype(np.int32)  # the test's rows are held in it too
    if not rows_held.size:
        return _Outlying(counted, f"{look.summary}; no rows for the proxy ({proxy.describe()})")
    held = with_outlying_rows(control_variate, model, rows_held, in_proxy=True)
    rows = _proposal_rows(held, warmed.step_size_factor)
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
        counted["warm-up with outlying rows in the proxy (not kept)"] = _warmup_points(kept[1])
        summary = f"{rows_held.size:,} outlying rows followed exactly by the proxy did not pay ({measured})"
        return _Outlying(counted, summary)
    if cheaper:
        counted["warm-up before the outlying rows were held"] = _warmup_points(warmed)
        summary = (
            f"{rows_held.size:,} outlying rows are followed exactly by the proxy and summed exactly by the test "
            f"(every row's residual at {PROXY_PAIRS} pairs of a warm-up state and a Laplace draw: {proxy.describe()}; "
            f"and at {PAIRS} pairs of warm-up draws: {found.describe()}): warm-up's Metropolis "
            f"acceptance {100 * choice.metropolis_acceptance:.3g}% before, {100 * again.metropolis_acceptance:.3g}% "
            f"with them; before them, {choice.describe(model.num_data)}"
        )
        return _Outlying(counted, summary, kept)
    counted["warm-up with outlying rows in the proxy (not kept)"] = _warmup_points(kept[1])
    summary = (
        f"{rows_held.size:,} outlying rows followed exactly by the proxy did not pay (warm-up's Metropolis "
        f"acceptance {100 * choice.metropolis_acceptance:.3g}% before, {100 * again.metropolis_acceptance:.3g}% with "
        f"them; measured: {measured})"
    )
    return _Outlying(counted, summary)


def _tempering_may_pay(choice: TestChoice, dimension: int, walk_cost: float, temperature: float | None = None) -> bool:
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


def _with_tempered_momentum(
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
    run: _RunShape,
    temperature: float | None = None,
    why: str | None = None,
) -> _Tempered:
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
    per step for a choice already made (:func:`_exact_choice`)."""
    temperature = TEMPERED_MOMENTUM if temperature is None else temperature
    plain = f"warm-up's Metropolis acceptance was {100 * choice.metropolis_acceptance:.3g}% with the plain move"
    gated = why is None  # the gate on the plain warm-up's acceptance, not the kept draws' sd mixing
    why = f"{plain} (below {100 * TEMPER_BELOW:g}%)" if gated else why
    run.say(
        f"sample_tall: {why}; warming up again with the momentum tempered (λ = {temperature:g}) to reach tails the "
        "Laplace approximation misses ...",
        flush=True,
    )
    again, proposal, test = _warmed_up(
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
        tempered, minibatch, measured = _measured_choice(
            model, again, test, control_variate, minibatch_test, batch_size, residual_cost
        )
    else:
        tempered, minibatch, measured = _exact_choice(model, again, choice)
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
        return _Tempered({}, summary, pieces, temperature, problem).not_kept()
    summary = (
        f"the proxy-HMC move's momentum is tempered (λ = {temperature:g}), so that it reaches tails the Laplace "
        f"approximation misses: {acceptances}"
    )
    counted = {"warm-up with the plain momentum (not kept)": _warmup_points(warmed)}
    return _Tempered(counted, summary, (again, proposal, test, tempered, minibatch, measured), temperature)


def _exact_choice(model: Model, warmed: WarmupResult, plain: TestChoice) -> tuple[TestChoice, None, str]:
    """What a warm-up under the exact test measures, for the choice ``plain`` (the exact test) made on the first
    warm-up: its window's acceptance is the Metropolis acceptance itself, not an estimate from Δ*, and sets the exact
    test's cost per effective draw; the minibatch test's figures stay the first warm-up's. As
    :func:`_measured_choice` returns it, with no minibatch test (the kept draws run the exact test)."""
    acceptance = float(np.mean(to_host(_window(warmed)["accepted"])))
    choice = plain.with_metropolis_acceptance(acceptance, model.num_data)
    measured = (
        f"{plain.describe(model.num_data)}; warmed up again under the exact test, which accepted "
        f"{100 * acceptance:.3g}%: ≈ {choice.exact_cost:,.0f} plain points per effective draw"
    )
    return choice, None, measured


def _warmed_up_again(
    model: Model,
    mode,
    covariance: np.ndarray,
    held: ControlVariate,
    choice: TestChoice,
    batch_size: int,
    minibatch_test: str,
    residual_cost: float | None,
    run: _RunShape,
) -> tuple[tuple, bool]:
    """A warm-up again with ``held`` and the choice its window measures: ``(control_variate, warmed, proposal,
    warmup_test, choice, minibatch, measured)`` as ``sample_tall`` names them, and whether it costs less per effective
    draw than ``choice``. A warm-up whose steps read more than it could pay for stops early
    (:func:`_stops_when_it_cannot_pay`): then ``choice`` and ``minibatch`` are ``None``, ``measured`` says why, and
    it does not cost less."""
    before = choice.cost
    warmed_again, proposal, test = _warmed_up(
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
    again, minibatch, measured = _measured_choice(
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


def _warmup_points(warmed: WarmupResult) -> int:
    """Every data point a warm-up touched: its steps' and its start check's (on a subsample, or on all N where N is at
    most :data:`START_CHECK_ROWS`)."""
    steps = int(np.sum(to_host(warmed.info["data_used"])))
    checks = sum(int(warmed.setup_data_used.get(name, 0)) for name in ("start check (subsample)", "start check"))
    return steps + checks


def _tuna_pilot(model: Model, tuned: Proposal, tuna_test, warmed: WarmupResult, run: _RunShape):
    """TunaMH's pilot of :data:`TUNA_PILOT_STEPS` kept steps from the warmed chains (not checkpointed: a pilot kept
    is extended by the run that writes the checkpoint); the pilot and, where its bound failed, what failed."""
    run.say(
        f"sample_tall: measuring TunaMH on the residuals ({min(TUNA_PILOT_STEPS, run.num_samples)} steps) ...",
        flush=True,
    )
    try:
        pilot = sample(
            model,
            tuned,
            tuna_test,
            initial_positions=_positions(warmed),
            num_samples=min(TUNA_PILOT_STEPS, run.num_samples),
            seed=run.seed,
            check_starts=False,
            **{k: v for k, v in run.options.items() if k not in ("checkpoint", "checkpoint_every")},
        )
    except TunaBoundViolation as error:  # the bound failed in the pilot: TunaMH is not exact here; go on
        return error.result, error.summary
    return pilot, None


def _kept_run(
    model: Model,
    decision: str,
    warmed: WarmupResult,
    proposal: Proposal,
    tuned: Proposal,
    warmup_test,
    minibatch,
    pilot: SamplingResult | None,
    tuna_test,
    watch: _Watch,
    run: _RunShape,
) -> tuple[SamplingResult, Proposal, Any, _Switch | None]:
    """The kept draws under ``decision``, joined to the warm-up; the result, the proposal and test that made the
    last of them, and the switch to the exact test where the minibatch test's were watched and made one
    (:func:`_watched_minibatch`; a pilot measured and not kept is counted as ``"TunaMH pilot"``)."""
    switch = None
    if decision == "minibatch" and minibatch is warmup_test:
        # the warm-up continues exactly: each chain's step and the tail guard's pool
        def first(num_samples, options):
            return sample(model, proposal, minibatch, warmed, num_samples=num_samples, seed=run.seed, **options)

        result, kept_proposal, kept_test, switch = _watched_minibatch(
            model, first, proposal, minibatch, tuned, watch, run
        )
    elif decision == "tuna":  # the pilot's draws are the first kept draws
        more = run.num_samples - int(pilot.info["accepted"].shape[1])
        kept = pilot if more == 0 else sample(model, tuned, tuna_test, resume=pilot, num_samples=more, **run.options)
        result = _joined(warmed, kept)
        kept_proposal, kept_test = tuned, tuna_test
    else:  # another test (the exact one, or the Barker test after a penalty warm-up): from the final states
        kept_test = minibatch if decision == "minibatch" else exact_metropolis()

        def first(num_samples, options):
            kept = sample(
                model,
                tuned,
                kept_test,
                initial_positions=_positions(warmed),
                num_samples=num_samples,
                seed=run.seed,
                check_starts=False,
                **options,
            )
            return _joined(warmed, kept)

        if decision == "minibatch":
            result, kept_proposal, kept_test, switch = _watched_minibatch(
                model, first, tuned, kept_test, tuned, watch, run
            )
        else:
            result, kept_proposal = first(run.num_samples, run.options), tuned
    if pilot is not None and decision != "tuna":  # measured and not kept: its data are still counted
        result.setup_data_used["TunaMH pilot"] = int(np.sum(pilot.info["data_used"]))
    return result, kept_proposal, kept_test, switch


class _Watch(NamedTuple):
    """What looking at the kept draws' cost needs (:func:`_watched_minibatch`): the control variate the residuals
    come from and the price of a residual the user gave (``None``: the table's)."""

    control_variate: ControlVariate
    residual_cost: float | None
    proposal_points: float = 0.0


class _Switch(NamedTuple):
    """A switch of the kept draws to the exact test: after how many kept draws per chain, and why, in words."""

    at: int
    reason: str


def kept_looks(num_samples: int) -> list[int]:
    """The kept draws per chain after which :func:`sample_tall` looks at the minibatch test's cost
    (:data:`KEPT_CHECKS` of ``num_samples``, each segment at least :data:`KEPT_CHECK_MIN_DRAWS` draws long)."""
    looks: list[int] = []
    for fraction in KEPT_CHECKS:
        at = int(round(fraction * num_samples))
        if at - (looks[-1] if looks else 0) >= KEPT_CHECK_MIN_DRAWS and num_samples - at >= KEPT_CHECK_MIN_DRAWS:
            looks.append(at)
    return looks


def _watched_minibatch(
    model: Model,
    first: Callable[[int, dict[str, Any]], SamplingResult],
    proposal: Proposal,
    test,
    tuned: Proposal,
    watch: _Watch,
    run: _RunShape,
) -> tuple[SamplingResult, Proposal, Any, _Switch | None]:
    """The minibatch test's kept draws in segments, with a look at its cost after each (:func:`kept_looks`): where
    the latest segment cost more than :data:`KEPT_SWITCH_MARGIN` times the exact test per effective draw, the
    remaining draws run the exact Metropolis test, continuing the chains and their random keys. ``first(n, options)``
    runs the first n draws and ``sample(resume=…)`` the next, each segment in chunks of the length one call would
    use. Without a switch the draws are those of one run, bit for bit.

    The segments' own warnings are held back: the last call's result holds every draw and warns for all of them;
    after a switch, the minibatch part's warnings other than its data use (which the switch answers) are given."""
    looks = kept_looks(run.num_samples) if run.watch_kept else []
    ends = [*looks, run.num_samples]
    # one progress bar over every segment, as one call would show
    held_bar = HeldBar(run.num_samples, "kept draws") if looks and run.options.get("progress", True) else None
    shared = run.options if held_bar is None else {**run.options, "progress": held_bar}
    # each segment in chunks of the length one call would use (the same compiled loop, no more round trips)
    chunks = run.options.get("num_chunks", inspect.signature(sample).parameters["num_chunks"].default)
    length = -(-run.num_samples // chunks)
    result = None
    with held_bar or contextlib.nullcontext():
        for index, end in enumerate(ends):
            last = index == len(ends) - 1
            begun = ends[index - 1] if index else 0
            options = shared if len(ends) == 1 else {**shared, "num_chunks": -(-(end - begun) // length)}
            with warnings.catch_warnings(record=True) as held:
                if not last:
                    warnings.simplefilter("always")
                if result is None:
                    result = first(end, options)
                else:
                    result = sample(model, proposal, test, resume=result, num_samples=end - begun, **options)
            if last:
                for caught in held:
                    warnings.warn_explicit(caught.message, caught.category, caught.filename, caught.lineno)
                return result, proposal, test, None
            recent = {name: np.asarray(values)[:, begun:end] for name, values in result.info.items()}
            pool = to_host(result.final_state.cache)
            choice = choose_test(
                recent,
                model.num_data,
                pool if hasattr(pool, "fourth") else None,
                watch.control_variate,
                residual_cost=watch.residual_cost,
                proposal_points=watch.proposal_points,
            )
            if choice.minibatch_cost > KEPT_SWITCH_MARGIN * choice.exact_cost:
                for caught in held:
                    if not issubclass(caught.category, DataUseWarning):
                        warnings.warn_explicit(caught.message, caught.category, caught.filename, caught.lineno)
                reason = (
                    f"after {end:,} kept draws per chain the minibatch test was using {100 * choice.use.fraction:.3g}% of "
                    f"N per step over the last {end - begun:,} ({_CAUSES[choice.cause]}; kurtosis of the residuals ≈ "
                    f"{choice.use.kurtosis:.3g}): ≈ {choice.minibatch_cost:,.0f} plain points per effective draw against "
                    f"≈ {choice.exact_cost:,.0f} for the exact test, more than {KEPT_SWITCH_MARGIN:g} times as much, so "
                    f"the remaining {run.num_samples - end:,} ran the exact Metropolis test"
                )
                run.say(f"sample_tall: exact from here — {reason}", flush=True)
                switched, exact = _continued_exactly(model, result, tuned, run.num_samples - end, run, shared)
                return switched, tuned, exact, _Switch(end, reason)
    raise AssertionError("unreachable: the last segment returns")


def _continued_exactly(
    model: Model, result: SamplingResult, tuned: Proposal, num_samples: int, run: _RunShape, options: dict[str, Any]
) -> tuple[SamplingResult, Any]:
    """``result`` extended by ``num_samples`` draws of the exact Metropolis test with ``tuned`` (the warm-up's step,
    the chains' geometric mean factor, as for a run that chose the exact test), from each chain's last position and
    with the keys of the steps that follow (the same stream, as if one run had changed its test there); the exact
    test's first per-datum values, a pass per chain, are counted as ``"exact test's first pass (switch)"``."""
    state = result.last_state
    test = exact_metropolis()
    positions = starts_of(state)

    def initialise(data, positions):  # the data as an argument, not a constant of the program
        return jax.vmap(build_kernel(model.with_data(data), tuned, test).init)(positions)

    states = jax.jit(initialise)(model.data, positions)
    switched = state._replace(
        states=states,
        step_size_factor=None,
        adapted_covariance=None,
        test_name=test.name,
        proposal_name=tuned.name,
    )
    later = sample(model, tuned, test, resume=switched, num_samples=num_samples, **options)
    joined = result.extended_by(later)
    joined.setup_data_used["exact test's first pass (switch)"] = model.num_data * state.num_chains
    return joined, test


def default_setup(model: Model, start: Position, setup: str = "auto", say=lambda *_, **__: None):
    """The mode and, from ``fast_setup``, the control variate ``sample_tall(model, start, setup=setup)`` builds first
    (``benchmarks/`` share it).

    ``fast_setup`` where :func:`_fast_setup_pays`, else ``find_mode`` and ``None``: ``sample_tall`` builds that
    control variate from the mode's final pass (:func:`tallmcmc.control_variate.control_variate_at_mode`) once the
    Hessian there has proved positive definite (else there is no Laplace approximation and no control variate).
    ``say`` prints the phase. Returns ``(mode, control_variate, fallback)``, ``fallback`` ``fast_setup``'s reason
    for falling back to ``find_mode`` (``None`` where it did not, or did not run).
    """
    if _fast_setup_pays(setup, model, start):
        say(
            "sample_tall: fast setup (subsample Newton, then two passes for the mode and the control variate) ...",
            flush=True,
        )
        built = fast_setup(model, start)
        return built.mode, built.control_variate, built.fallback
    say("sample_tall: finding the mode ...", flush=True)
    return find_mode(model, start), None, None


def _warn_again(caught: list[warnings.WarningMessage]) -> None:
    """Issue warnings recorded earlier (``warnings.catch_warnings(record=True)``) as they were."""
    for message in caught:
        warnings.warn_explicit(message.message, message.category, message.filename, message.lineno)


def _bound_for(make_bound: Callable[[ControlVariate], TunaBound], control_variate: ControlVariate) -> TunaBound:
    """``make_bound(control_variate)``, checked to be a :class:`~tallmcmc.acceptance.tuna.TunaBound`."""
    bound = make_bound(control_variate)
    if not isinstance(bound, TunaBound):
        raise TypeError(
            "bound: a function given as bound must return a tallmcmc.acceptance.tuna.TunaBound for the control "
            f"variate it is called with (e.g. logistic_regression.tuna_bound(model, cv)); it returned "
            f"{type(bound).__name__}"
        )
    return bound


def _warmup_pieces(
    control_variate: ControlVariate,
    covariance: np.ndarray,
    center: Position,
    batch_size: int,
    minibatch_test: str,
    num_chains: int,
    seed: int,
    momentum_temperature: float | None = None,
) -> tuple[Proposal, Any, Position]:
    """The warm-up's proposal (proxy HMC preconditioned by ``covariance``, its momentum tempered by
    ``momentum_temperature``, ``None``: :data:`MOMENTUM_TEMPERATURE` as it is when called), its minibatch test and the
    chains' starts (Laplace draws around ``center``)."""
    proposal = proxy_hamiltonian(
        control_variate,
        INTEGRATION_TIME / NUM_LEAPFROG_STEPS,
        NUM_LEAPFROG_STEPS,
        preconditioner=covariance,
        step_size_jitter=STEP_SIZE_JITTER,
        integrator=INTEGRATOR,
        momentum_temperature=MOMENTUM_TEMPERATURE if momentum_temperature is None else momentum_temperature,
    )
    first_minibatch = min(batch_size, control_variate.num_data)
    warmup_test = (minibatch_barker if minibatch_test == "barker" else minibatch_penalty)(
        first_minibatch, control_variate=control_variate
    )
    return proposal, warmup_test, _starts(center, covariance, num_chains, seed)


def _compile_warmup_ahead(
    model: Model, start: Position, batch_size: int, minibatch_test: str, num_chains: int, num_warmup: int, seed: int
) -> bool:
    """Compile the warm-up's chain program on placeholders of what the setup will return (:func:`tallmcmc.fast_setup`,
    or :func:`tallmcmc.find_mode` and :func:`tallmcmc.taylor_control_variate`: the same kind of control variate),
    while it runs (:mod:`tallmcmc.sampling.ahead`); whether it compiled one."""
    placeholder = placeholder_control_variate(model, start)
    covariance = np.eye(int(ravel_pytree(start)[0].size))
    proposal, warmup_test, starts = _warmup_pieces(
        placeholder, covariance, placeholder.center, batch_size, minibatch_test, num_chains, seed
    )
    return compile_warmup(
        model, proposal, warmup_test, initial_positions=starts, num_warmup=num_warmup, num_chains=num_chains, seed=seed
    )


def _ahead_signature(
    model: Model, start: Position, batch_size: int, minibatch_test: str, num_chains: int, num_warmup: int
) -> str:
    """What the warm-up's chain program will be, as far as it is known before the setup (``ahead.signature``)."""

    def shapes(tree):
        leaves, structure = jax.tree_util.tree_flatten(tree)
        return str(structure), [(np.shape(leaf), str(getattr(leaf, "dtype", type(leaf)))) for leaf in leaves]

    return ahead.signature(
        "sample_tall warm-up",
        ahead.code_digest(unwrapped(model.log_likelihood)),
        ahead.code_digest(unwrapped(model.log_prior)),
        shapes(model.data),
        shapes(start),
        float(model.temperature),
        batch_size,
        minibatch_test,
        num_chains,
        num_warmup,
    )


def _fast_setup_pays(setup: str, model: Model, start: Position) -> bool:
    """Whether ``setup`` asks for :func:`tallmcmc.fast_setup` (``"auto"``: tall enough data on one device)."""
    if setup != "auto":
        return setup == "fast"
    dimension = int(ravel_pytree(start)[0].size)
    return (
        model.num_data >= max(FAST_SETUP_MIN_ROWS, FAST_SETUP_ROWS_PER_DIMENSION * dimension)
        and dimension <= FAST_SETUP_MAX_DIMENSION
        and row_sharding(model.data, "sample_tall") is None
    )


def _window(warmed: WarmupResult) -> dict[str, np.ndarray]:
    """The measurement window: the second half of warm-up, where the step has settled."""
    half = warmed.num_warmup // 2
    return {name: values[:, half:] for name, values in warmed.info.items()}


def _positions(warmed: WarmupResult) -> Position:
    """The chains' positions after warm-up (with a mesh, the first data shard's copy)."""
    positions = warmed.states.position
    if warmed.mesh is None:
        return positions
    return jax.tree_util.tree_map(lambda leaf: np.asarray(to_host(leaf))[0], positions)


def _joined(warmed: WarmupResult, kept: SamplingResult) -> SamplingResult:
    """One result: the warm-up's setup counts, draws and factors, and the kept run's draws."""
    setup = dict(warmed.setup_data_used)
    for name, used in kept.setup_data_used.items():  # the same objects: counted once
        setup.setdefault(name, used)
    factors = warmed.step_size_factor
    return dataclasses.replace(
        kept,
        setup_data_used=setup,
        warmup_positions=reported_draws(warmed.model, warmed.positions),
        warmup_info=warmed.info,
        step_size_factor=None if factors is None else np.asarray(to_host(factors)),
    )


def _starts(
    center: Position, covariance: np.ndarray, num_chains: int, seed: int, stream: int = _STARTS_STREAM
) -> Position:
    """One start per chain drawn from N(centre, covariance): dispersed as the posterior, so r̂ can see a stuck chain.

    Drawn on the host (NumPy, seeded by ``seed`` on a stream of its own) and shaped like ``center`` there: a few
    numbers, which JAX would compile several small programs to draw (0.4 s of a first run, measured).
    """
    leaves, structure = jax.tree_util.tree_flatten(center)
    flat = np.concatenate([np.ravel(np.asarray(leaf, np.float64)) for leaf in leaves])
    factor = np.linalg.cholesky(np.asarray(covariance, np.float64))
    noise = np.random.default_rng([stream, int(seed) % (1 << 64)]).standard_normal((num_chains, flat.size))
    draws = flat + noise @ factor.T
    parts, first = [], 0
    for leaf in leaves:
        size = int(np.size(leaf))
        dtype = jnp.result_type(leaf, float)
        parts.append(np.asarray(draws[:, first : first + size].reshape(num_chains, *np.shape(leaf)), dtype))
        first += size
    return jax.tree_util.tree_unflatten(structure, parts)


def _check_starts(model: Model, starts: Position, seed: int) -> int | None:
    """Check the model at each chain's start on :data:`START_CHECK_ROWS` fixed rows; the points touched.

    The rows are drawn once from ``seed`` (without replacement, the same for
    every start); at each start the log-prior and each of those rows'
    log-likelihoods must be finite scalars (:func:`tallmcmc.check_model` on
    them, the offending row named by its index in the data). Returns
    ``None``, checking nothing, where ``sample``'s full check is to run
    instead: N ≤ :data:`START_CHECK_ROWS` (the subsample would be every row),
    or data that this process cannot gather rows of (split over processes).
    Why a subsample is enough here: ``docs/sample_tall.md``, "The start check".

    Raises
    ------
    ValueError
        Naming the chain whose start fails, the subsample and the first
        offending row, with ``check_model``'s explanation.
    """
    num_data = model.num_data
    leaves = jax.tree_util.tree_leaves(model.data)
    if num_data <= START_CHECK_ROWS or not all(getattr(leaf, "is_fully_addressable", True) for leaf in leaves):
        return None
    generator = np.random.default_rng([_START_CHECK_STREAM, int(seed) % (1 << 64)])
    rows = np.sort(generator.choice(num_data, START_CHECK_ROWS, replace=False))
    # gathered and evaluated in blocks of fast_setup's first subsample (DEFAULT_CHUNK_ROWS rows for d ≤ 64), so that
    # the programs fast_setup compiled for its own start check serve this one too (two programs fewer per process)
    blocks = [
        rows_of(model.data, to_device(rows[first : first + _START_CHECK_BLOCK], np.int32))
        for first in range(0, len(rows), _START_CHECK_BLOCK)
    ]
    evaluate = per_datum_program(model)  # compiled once per log-likelihood in a process

    def summary(position, data):  # check_model's evaluate_data: (count, first bad row of the data, its value, sum)
        values = np.concatenate([np.asarray(evaluate(position, block)) for block in data])
        bad = np.flatnonzero(~np.isfinite(values))
        first = int(bad[0]) if bad.size else 0
        return bad.size, int(rows[first]), values[first] if bad.size else 0.0, values.sum()

    datum_shape = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype), blocks[0])
    # the model on the whole subsample (check_model names its N), joined on the host and transferred: no program
    checked = model.with_data(
        jax.tree_util.tree_map(lambda *parts: to_device(np.concatenate([np.asarray(part) for part in parts])), *blocks)
    )
    num_chains = int(jax.tree_util.tree_leaves(starts)[0].shape[0])
    for chain in range(num_chains):
        start = jax.tree_util.tree_map(lambda leaf: leaf[chain], starts)  # noqa: B023 (used within this iteration)
        try:
            check_model(
                checked,
                start,
                f"the start of chain {chain}",
                evaluate_data=summary,
                datum_shape=datum_shape,
                data=blocks,
            )
        except ValueError as error:
            raise ValueError(
                f"sample_tall: the model fails at a chain's start, checked on {len(rows):,} of the N = {num_data:,} "
                "rows (the same rows for every chain; each start is a draw from the Laplace approximation around the "
                f"mode, near which the setup's full passes found every row finite): {error}. The model breaks down within "
                "the posterior's spread around its mode: fix the log-likelihood or the prior there (log-space "
                "formulas, an unconstrained parametrisation), or run tallmcmc.sample with starts of your own"
            ) from error
    return num_chains * len(rows)
