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
   each checked on a fixed subsample of :data:`~tallmcmc.tall_warmup.START_CHECK_ROWS` rows
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
   was below :data:`~tallmcmc.tall_tempering.TEMPER_BELOW` and a tempered move is predicted able to
   pay, warm-up runs again with the proxy-HMC momentum tempered
   (:data:`~tallmcmc.tall_tempering.TEMPERED_MOMENTUM`: proposals √λ wider, reaching tails heavier
   than the Laplace approximation's), kept unless it costs more per
   effective draw than that random walk (``docs/sample_tall.md``, "Tails
   wider than the Laplace approximation").
6. **The kept draws**: with the minibatch test, :func:`tallmcmc.sample`
   continues the warm-up exactly (each chain's adapted step and the tail
   guard's pool carry over), and so does the exact test where the warm-up
   ran under it (the tempered one); with another test, from the warm-up's final
   states with the adapted step (the chains' geometric mean factor). The
   minibatch test's kept draws are watched (:data:`~tallmcmc.tall_kept_draws.KEPT_CHECKS`): where a
   segment of them costs more than :data:`~tallmcmc.tall_kept_draws.KEPT_SWITCH_MARGIN` times the exact
   test per effective draw, as the tail guard may find only after warm-up on
   residuals with heavy tails, the rest run the exact test. Where the kept
   draws' tails mixed far slower than their bulk (chains stuck in tails the
   plain move visits rarely) and the move was not tempered, warm-up and kept
   draws run again with the momentum tempered to
   :data:`~tallmcmc.tall_tempering.STICKY_TEMPERED_MOMENTUM`, where that can pay and is predicted to
   mix the tails faster, and once more at :data:`~tallmcmc.tall_tempering.STICKY_TEMPERED_AGAIN` where
   those draws' tails still mix slowly (``docs/sample_tall.md``, "Drawn
   again, tempered").
7. **A diagnosis** (:class:`TallDiagnosis`, ``result.diagnosis``): every setup
   pass by source, the probe's measurements and the decision with its reason,
   the data per step, the error bounds, r̂ and ESS, and whether warm-up
   settled; a run whose diagnosis says its result may be wrong warns.

The pieces live apart, this module runs the path and keeps its own decisions (the setup, the random walk's
fallback, TunaMH's pilot):

* the choice of test: :mod:`tallmcmc.choice_of_test`;
* the warm-up, the chains' starts and the choice measured on the warm-up's steps: :mod:`tallmcmc.tall_warmup`;
* the looks for outlying rows, before and after warm-up: :mod:`tallmcmc.tall_outlying_looks`;
* the tempered momentum (step 5's gate, step 6's draws again): :mod:`tallmcmc.tall_tempering`;
* the kept draws, watched: :mod:`tallmcmc.tall_kept_draws`;
* the diagnosis: :mod:`tallmcmc.tall_diagnosis`;
* the continuation of a run (in this process, from a file, from its checkpoint): :mod:`tallmcmc.tall_continuation`.

Their settings are read where they live (``tallmcmc.tall_tempering.TEMPER_BELOW``, not
``tallmcmc.automatic.TEMPER_BELOW``), and so are set there. ``docs/sample_tall.md`` has the derivations and the
measurements.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import math
import sys
import time
import types
import warnings
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from tallmcmc import flat_positions, import_ahead, tall_kept_draws, tall_outlying_looks, tall_tempering, tall_warmup
from tallmcmc._checks import integer_at_least, positive_finite
from tallmcmc._device import to_device
from tallmcmc.acceptance.exact import exact_metropolis
from tallmcmc.acceptance.tuna import TunaBound, TunaBoundViolation, tuna
from tallmcmc.choice_of_test import CAUSES, RESIDUAL_COST_MEANING, TestChoice, choose_test, residual_point_cost
from tallmcmc.control_variate import ControlVariate, control_variate_at_mode, taylor_control_variate
from tallmcmc.interop import arviz as arviz_bridge
from tallmcmc.mode import find_mode
from tallmcmc.model import DEFAULT_START_SPREAD, Model, Position, as_position, default_start
from tallmcmc.other_modes import other_modes
from tallmcmc.outlying_rows import with_outlying_rows
from tallmcmc.precision import unwrapped
from tallmcmc.proposals.base import Proposal
from tallmcmc.proposals.laplace import laplace_covariance
from tallmcmc.proposals.random_walk import random_walk
from tallmcmc.sampling import SamplingResult, WarmupResult, ahead, sample
from tallmcmc.sampling.ahead import compile_ahead
from tallmcmc.sampling.run_file import save_result
from tallmcmc.setup_fast import fast_setup
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
    kinked_coordinates,
    non_finite_curvature,
    ran_off,
    sticky_tails,
)

__all__ = ["TallDiagnosis", "TestChoice", "choose_test", "residual_point_cost", "sample_tall"]

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
#: The values of ``sample_tall``'s ``setup``.
SETUPS = ("auto", "fast", "exact")
#: The values of ``sample_tall(minibatch_test=...)``: ``"auto"`` (default) warms up with the penalty test and keeps
#: it where its CLT error bound is small (:data:`~tallmcmc.tall_warmup.PENALTY_ERROR_LIMIT`), else the Barker test.
MINIBATCH_TESTS = ("auto", "penalty", "barker")
#: SciPy's modules the setup imports on first use (``chdtri``, the trust region's ``brentq``), which ArviZ imports too:
#: imported before the diagnosis's ArviZ starts importing in a thread (:mod:`tallmcmc.import_ahead`).
_SETUP_IMPORTS = ("scipy.special", "scipy.optimize")


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
        :data:`~tallmcmc.tall_warmup.PENALTY_ERROR_LIMIT`, else continue with the Barker test. Both
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
        starts on :data:`~tallmcmc.tall_warmup.START_CHECK_ROWS` rows each, or sample's full
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
    one_device = row_sharding(model.data, "sample_tall") is None
    if mode is None and control_variate is None and one_device and not sample_options:
        # the default run's shape: its chain program compiled while the mode is found (the warm-up takes it)
        compile_ahead(
            functools.partial(
                tall_warmup.compile_warmup_ahead, model, start, batch_size, minibatch_test, num_chains, num_warmup, seed
            ),
            _ahead_signature(model, start, batch_size, minibatch_test, num_chains, num_warmup),
        )
    # the diagnosis's ArviZ imported in a thread while the run works (0.5–0.8 s in a fresh process); SciPy's modules
    # that the setup imports on first use are imported here first, so that the two threads never import one at once
    # (after the chain program's thread has started: its compilation is a first run's longest path, and it needs
    # neither)
    diagnostics_import = import_ahead.start(arviz_bridge.diagnostics_module(), first=_SETUP_IMPORTS)
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
    # a search that stopped on a Hessian that is not finite: which rows make it so (one pass, counted with the walk)
    curvature = (
        non_finite_curvature(model, mode.position)
        if one_device and math.isinf(off) and not np.all(np.isfinite(np.asarray(getattr(mode, "hessian", 0.0))))
        else None
    )
    # a search that ended with no Laplace approximation for another reason: a likelihood with a kink at every datum
    # (|y − μ| terms) is the usual one, which a subsample's second derivatives show (counted with the walk)
    kinks = (
        kinked_coordinates(model, mode.position)
        if one_device and curvature is None and (math.isinf(off) or off > MODE_OFF_LIMIT)
        else None
    )
    kinks = kinks if kinks is not None and kinks.names else None
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
                "the Hessian of −log π is not finite where it ended"
                if curvature is not None
                else "the Hessian of −log π is not positive definite where it ended"
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
            + ("" if curvature is None else f". Why: {curvature.words()}")
            + ("" if kinks is None else f". Why: {kinks.words()}")
            + (
                ""
                if (far := ran_off(model, mode.position)) is None
                else f". It ran off towards the edge of some parameters' support ({far}): a density that grows "
                "without bound there has no mode to build a Laplace approximation on, as a horseshoe's or another "
                "global-local prior's scales make (docs/sample_tall.md, 'A posterior with no mode')"
            )
        )
    try:
        covariance = laplace_covariance(mode) if not off > MODE_OFF_LIMIT else None  # NaN: not known to be off
    except ValueError:
        covariance = None
    dimension = flat_positions.dimension(mode.position)
    clock.lap("setup")
    run = tall_warmup.RunShape(
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
        if curvature is not None:
            why = "the Hessian of −log π is not finite where the mode search ended (the problems say at which rows)"
        elif kinks is not None:
            why = (
                f"the log-likelihood has a kink at every datum in {', '.join(kinks.names[:5])}"
                f"{' …' if len(kinks.names) > 5 else ''} (|y − μ| terms: its second derivatives there are 0, so the "
                "Hessian does not measure the posterior's curvature; the problems say more)"
            )
        elif math.isinf(off):  # the decrement is undefined: the Hessian where the search ended is not positive definite
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
        if curvature is not None:
            count_pass(result, "curvature check (diagnosis)", curvature.data_used, resume)
        if kinks is not None:
            count_pass(result, "kink check (diagnosis)", kinks.data_used, resume)
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
        may_look = tall_outlying_looks.LOOK_FOR_OUTLYING_ROWS and bound is None and one_device
        if may_look and fallback is not None:
            # fast_setup fell back (its subsample phase did not settle, its curvature was not positive definite, its
            # second pass landed far from the mode): the usual cause is a direction few rows inform, whose rows'
            # residuals the minibatch cannot estimate either; look for them now, on Laplace draws, rather than after
            # a warm-up that would spend most of N per step on them (the sixth user-model audit: 150 passes)
            early = tall_outlying_looks.outlying_look(
                model,
                control_variate,
                tall_outlying_looks.laplace_pairs(mode.position, covariance, seed),
                batch_size,
                run,
                "early",
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
        warmed, proposal, warmup_test = tall_warmup.warmed_up(
            model, mode, covariance, control_variate, batch_size, minibatch_test, run
        )
        choice, minibatch, measured = tall_warmup.measured_choice(
            model, warmed, warmup_test, control_variate, minibatch_test, batch_size, residual_cost
        )
        clock.lap("warm-up")
        if (
            may_look
            and not control_variate.num_outlying
            and (
                tall_outlying_looks.outlying_rows_may_pay(choice, run)
                or tall_outlying_looks.proxy_may_misfit(choice, run)
            )
        ):
            outlying = tall_outlying_looks.look_after_warmup(
                model, mode, covariance, control_variate, warmed, choice, batch_size, minibatch_test, residual_cost, run
            )
            if outlying.kept is not None:
                control_variate, warmed, proposal, warmup_test, choice, minibatch, measured = outlying.kept
            clock.lap("look for outlying rows")
        walk_cost = model.num_data * dimension / RANDOM_WALK_EFFICIENCY
        walk = bound is None and choice.cost > walk_cost
        # a warm-up again with the momentum tempered, from the plain warm-up (warmed) and its choice
        tempered_warmup = functools.partial(
            tall_tempering.with_tempered_momentum,
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
            and choice.metropolis_acceptance < tall_tempering.TEMPER_BELOW
            and tall_tempering.TEMPERED_MOMENTUM != tall_warmup.MOMENTUM_TEMPERATURE
            and tall_tempering.tempering_may_pay(choice, dimension, walk_cost)
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
                ()
                if tempered is not None or bound is not None
                else tall_tempering.sticky_rungs(choice, dimension, walk_cost)
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
                watch = tall_kept_draws.Watch(control_variate, residual_cost, choice.proposal_points)
                result, kept_proposal, kept_test, switch = tall_kept_draws.kept_run(
                    model, decision, warmed, proposal, tuned, warmup_test, minibatch, pilot, tuna_test, watch, run
                )
                if (
                    sticky_rungs
                    and switch is None
                    and run.watch_kept
                    and run.num_samples >= tall_tempering.STICKY_MIN_DRAWS
                ):
                    diagnostics_import.wait()
                    read = []  # what each set of draws made read: "the plain draws read 0.21", ...
                    for temperature in sticky_rungs:
                        # a second rung needs only the tail ESS per draw low: these draws already stuck once
                        ratio_limit = (
                            TAIL_ESS_RATIO_LIMIT if tempered is None else tall_tempering.STICKY_AGAIN_RATIO_LIMIT
                        )
                        sticky = sticky_tails(result, ratio_limit, TAIL_ESS_PER_DRAW_LIMIT)
                        if sticky is None:
                            break
                        ratio, per_draw = sticky
                        made = "the plain draws" if tempered is None else f"the draws at λ = {tempered.temperature:g}"
                        read.append(f"{made} read {ratio:.2f}")
                        clock.lap("kept draws")
                        again = tall_tempering.drawn_again_only_if_faster(
                            sticky_again(
                                temperature=temperature,
                                why=(
                                    f"the kept draws' tails mixed far slower than their bulk ({made}: tail ESS "
                                    f"{ratio:.2f} of the bulk ESS, {per_draw:.2f} per draw: chains that stick in tails "
                                    "heavier than the Laplace approximation)"
                                    if tempered is None
                                    else f"the kept draws' tails still mixed slowly ({made}: tail ESS {per_draw:.2f} "
                                    f"per draw, {ratio:.2f} of the bulk ESS; the plain draws' had stuck)"
                                ),
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
                        watch = tall_kept_draws.Watch(control_variate, residual_cost, choice.proposal_points)
                        result, kept_proposal, kept_test, switch = tall_kept_draws.kept_run(
                            model, decision, warmed, proposal, tuned, warmup_test, minibatch, None, None, watch, run
                        )
                        if switch is not None:
                            break
                    tail_note = tall_tempering.tail_note(read, tempered)
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
            else tall_warmup.MOMENTUM_TEMPERATURE
        ),
        seconds=clock.seconds,  # the checks below are added to it as they end
    )
    if tail_note is not None:  # the check may still read low after tempering was tried: say what was done
        result.diagnosis.problems[:] = [
            tall_tempering.with_tail_note(problem, tail_note) for problem in result.diagnosis.problems
        ]
    rounding = float32_rounding(model, result, covariance) if result.diagnosis.problems else None
    if rounding is not None:  # its four passes ran, whatever they found
        count_pass(result, "float32 rounding check (diagnosis)", 4 * model.num_data, resume)
        if rounding.noise > ROUNDING_NOISE_LIMIT:  # first, but after rows whose second derivatives are not finite:
            # float64 does not mend a likelihood written so (the twelfth audit's probit stayed 2.3 sd off in float64)
            result.diagnosis.problems.insert(0 if curvature is None else 1, rounding.problem())
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


def _decided(choice: TestChoice, measured: str) -> tuple[str, str]:
    """The decision the measured ``choice`` makes (``"minibatch"`` or ``"exact"``) and its reason in words."""
    if choice.minibatch:
        return "minibatch", f"the control variate pays: {measured}"
    return "exact", (
        f"the control variate cannot pay ({CAUSES[choice.cause]}): {measured}; so the exact Metropolis test runs"
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


def _random_walk_run(
    model: Model, mode, reason: str, run: tall_warmup.RunShape
) -> tuple[SamplingResult, Proposal, Any]:
    """Exact Metropolis with a random walk whose covariance warm-up adapts, from the mode (its search counted); the
    result, and the proposal and test that made it."""
    run.say(f"sample_tall: random walk — {reason}", flush=True)
    dimension = flat_positions.dimension(mode.position)
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
        initial_positions=tall_warmup.inside_support(
            model,
            mode.position,
            tall_warmup.chain_starts(mode.position, np.eye(dimension) * 1e-2, run.options["num_chains"], run.seed),
        ),
        num_samples=run.num_samples,
        num_warmup=max(run.num_warmup, 200),
        adapt_covariance=True,
        seed=run.seed,
        **run.options,
    )
    result.setup_data_used.setdefault(mode.name, int(mode.data_used))
    return result, proposal, test


class _Clock:
    """Wall time by phase: :meth:`lap` adds the time since the last lap (or the start) to a phase."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._last
        self._last = now


def _tuna_pilot(model: Model, tuned: Proposal, tuna_test, warmed: WarmupResult, run: tall_warmup.RunShape):
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
            initial_positions=tall_warmup.final_positions(warmed),
            num_samples=min(TUNA_PILOT_STEPS, run.num_samples),
            seed=run.seed,
            check_starts=False,
            **{k: v for k, v in run.options.items() if k not in ("checkpoint", "checkpoint_every")},
        )
    except TunaBoundViolation as error:  # the bound failed in the pilot: TunaMH is not exact here; go on
        return error.result, error.summary
    return pilot, None


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
    dimension = flat_positions.dimension(start)
    return (
        model.num_data >= max(FAST_SETUP_MIN_ROWS, FAST_SETUP_ROWS_PER_DIMENSION * dimension)
        and dimension <= FAST_SETUP_MAX_DIMENSION
        and row_sharding(model.data, "sample_tall") is None
    )


#: The path's settings that lived here until 2026-12-01 and now live (and are read) in their own modules.
MOVED_SETTINGS = {
    **dict.fromkeys(
        (
            "INTEGRATION_TIME",
            "NUM_LEAPFROG_STEPS",
            "INTEGRATOR",
            "MOMENTUM_TEMPERATURE",
            "STEP_SIZE_JITTER",
            "PENALTY_ERROR_LIMIT",
            "START_CHECK_ROWS",
        ),
        "tallmcmc.tall_warmup",
    ),
    **dict.fromkeys(
        (
            "TEMPERED_MOMENTUM",
            "TEMPER_BELOW",
            "TEMPER_OPTIMISM",
            "STICKY_TEMPERED_MOMENTUM",
            "STICKY_MIN_DRAWS",
            "STICKY_TEMPERED_AGAIN",
        ),
        "tallmcmc.tall_tempering",
    ),
    **dict.fromkeys(
        (
            "LOOK_FOR_OUTLYING_ROWS",
            "OUTLYING_LOOK_FRACTION",
            "PROXY_MISFIT_ACCEPTANCE",
            "OUTLYING_LOOK_KURTOSIS",
            "SECOND_WARMUP_STOP",
            "SECOND_WARMUP_LOOK",
        ),
        "tallmcmc.tall_outlying_looks",
    ),
    **dict.fromkeys(("KEPT_CHECKS", "KEPT_CHECK_MIN_DRAWS", "KEPT_SWITCH_MARGIN"), "tallmcmc.tall_kept_draws"),
}


def __getattr__(name: str):
    """A setting read here after it moved: an error that says where it lives."""
    if name in MOVED_SETTINGS:
        raise AttributeError(f"tallmcmc.automatic.{name} has moved: it is {MOVED_SETTINGS[name]}.{name}")
    raise AttributeError(f"module 'tallmcmc.automatic' has no attribute {name!r}")


class _RefusesMovedSettings(types.ModuleType):
    """This module, refusing to set a setting that moved (the path would never read it: a silent no-op)."""

    def __setattr__(self, name: str, value) -> None:
        if name in MOVED_SETTINGS:
            raise AttributeError(
                f"tallmcmc.automatic.{name} has moved, and sample_tall reads it where it lives: set "
                f"{MOVED_SETTINGS[name]}.{name} instead"
            )
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _RefusesMovedSettings
