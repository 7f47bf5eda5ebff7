"""``sample_tall``'s kept draws: after the warm-up, with the test it chose, and, for the minibatch test on one device,
watched in segments (:data:`KEPT_CHECKS`), the rest run under the exact test where the minibatch test stops paying.

``docs/sample_tall.md``, "When the minibatch grows during the kept draws", has the measurements.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from tallmcmc import tall_warmup
from tallmcmc.acceptance.exact import exact_metropolis
from tallmcmc.choice_of_test import CAUSES, choose_test
from tallmcmc.control_variate import ControlVariate
from tallmcmc.kernel import build_kernel
from tallmcmc.model import Model
from tallmcmc.proposals.base import Proposal
from tallmcmc.run_warnings import DataUseWarning
from tallmcmc.sampling import SamplingResult, WarmupResult, reported_draws, sample
from tallmcmc.sampling.continuation import starts_of
from tallmcmc.sampling.drivers import HeldBar
from tallmcmc.sharding import to_host

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
#: The exact Metropolis test's name (a warm-up that ran under it continues into the kept draws).
EXACT_TEST_NAME = exact_metropolis().name


def kept_run(
    model: Model,
    decision: str,
    warmed: WarmupResult,
    proposal: Proposal,
    tuned: Proposal,
    warmup_test,
    minibatch,
    pilot: SamplingResult | None,
    tuna_test,
    watch: Watch,
    run: tall_warmup.RunShape,
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
    elif decision == "exact" and warmup_test.name == EXACT_TEST_NAME:
        # the warm-up ran under the exact test itself (the tempered one, after a plain warm-up that chose it): it
        # continues exactly, each chain at its own step, and the program that ran it runs the kept draws
        result = sample(model, proposal, warmup_test, warmed, num_samples=run.num_samples, seed=run.seed, **run.options)
        kept_proposal, kept_test = proposal, warmup_test
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
                initial_positions=tall_warmup.final_positions(warmed),
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


class Watch(NamedTuple):
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
    watch: Watch,
    run: tall_warmup.RunShape,
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
                    f"N per step over the last {end - begun:,} ({CAUSES[choice.cause]}; kurtosis of the residuals ≈ "
                    f"{choice.use.kurtosis:.3g}): ≈ {choice.minibatch_cost:,.0f} plain points per effective draw against "
                    f"≈ {choice.exact_cost:,.0f} for the exact test, more than {KEPT_SWITCH_MARGIN:g} times as much, so "
                    f"the remaining {run.num_samples - end:,} ran the exact Metropolis test"
                )
                run.say(f"sample_tall: exact from here — {reason}", flush=True)
                switched, exact = _continued_exactly(model, result, tuned, run.num_samples - end, run, shared)
                return switched, tuned, exact, _Switch(end, reason)
    raise AssertionError("unreachable: the last segment returns")


def _continued_exactly(
    model: Model,
    result: SamplingResult,
    tuned: Proposal,
    num_samples: int,
    run: tall_warmup.RunShape,
    options: dict[str, Any],
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
