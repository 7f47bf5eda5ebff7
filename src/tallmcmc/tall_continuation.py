"""Continuing a run of :func:`tallmcmc.sample_tall`: one made in this process, a saved one, or its checkpoint file.

A run made in this process holds its proposal and test, and is extended with them (:func:`continued_in_process`).
A file holds arrays and JSON, never code, so a saved run is continued by redoing its setup and warm-up, which are
deterministic given the call's arguments (:func:`check_saved_run` refuses a call whose arguments differ from the
run's record, ``SamplingResult.made_by``), and going on from the saved chains with the test they ran
(:func:`resumed_kept`, which compares the redone warm-up's draws with the saved ones). ``checkpoint=`` writes that
record into every checkpoint, and a re-run whose arguments differ is refused before any setup
(:func:`checkpoint_file`). What a continuation redid is counted under :data:`REDONE` (:func:`count_pass`).
``docs/long_runs.md`` has the design and the measurements.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from tallmcmc.acceptance.exact import exact_metropolis
from tallmcmc.model import (
    Model,
)
from tallmcmc.proposals.base import Proposal
from tallmcmc.sampling import SamplingResult, WarmupResult, reported_draws, sample
from tallmcmc.sampling.checkpoint import CheckpointFile
from tallmcmc.sharding import to_host
from tallmcmc.tall_diagnosis import TallDiagnosis, diagnose

__all__ = [
    "REDONE",
    "check_rederived",
    "check_saved_run",
    "checkpoint_file",
    "continued_in_process",
    "count_pass",
    "made_in_this_process",
    "resumed_kept",
    "warmup_redone",
]

#: ``result.setup_data_used``'s entry for what a continuation of a saved run redid (its setup and warm-up); the saved
#: run's own entries stand as they were
REDONE = "setup and warm-up redone (continuation)"


def continued_in_process(
    model: Model, resume, num_samples: int, progress: bool, num_warmup: int, options
) -> SamplingResult:
    """``sample_tall(model, resume=result)`` for a result made in this process: the run extended with the proposal
    and test its diagnosis names, without setup or warm-up."""
    diagnosis = resume.diagnosis
    began = time.perf_counter()
    result = sample(
        model, diagnosis.proposal, diagnosis.test, resume=resume, num_samples=num_samples, progress=progress, **options
    )
    kept_seconds = time.perf_counter() - began
    result.diagnosis = dataclasses.replace(
        diagnose(
            result,
            diagnosis.decision,
            diagnosis.reason,
            diagnosis.mode,
            diagnosis.control_variate,
            diagnosis.choice,
            diagnosis.proposal,
            [],
            num_warmup,
        ),
        proposal=diagnosis.proposal,
        test=diagnosis.test,
        setup_fallback=diagnosis.setup_fallback,
        seconds={"kept draws": kept_seconds},  # this call's (the run it continues kept its own)
    )
    for problem in result.diagnosis.problems:
        warnings.warn(f"sample_tall: {problem}", RuntimeWarning, stacklevel=3)
    return result


def count_pass(result: SamplingResult, name: str, used, resume: SamplingResult | None) -> None:
    """Count ``used`` data points of a one-off pass in ``result.setup_data_used[name]`` (and its diagnosis's
    ``setup_passes``); in a continuation (``resume``), under :data:`REDONE`, added to what is there."""
    key = name if resume is None else REDONE
    used = int(used)
    result.setup_data_used[key] = used if resume is None else result.setup_data_used.get(key, 0) + used
    if isinstance(result.diagnosis, TallDiagnosis):
        result.diagnosis.setup_passes[key] = result.setup_data_used[key] / result.num_data


def made_in_this_process(resume) -> bool:
    """Whether ``resume`` is a result of ``sample_tall`` made in this process (its diagnosis holds the proposal and
    test), which :func:`continued_in_process` extends directly."""
    diagnosis = getattr(resume, "diagnosis", None)
    return isinstance(diagnosis, TallDiagnosis) and diagnosis.proposal is not None


def check_saved_run(resume, made_by: dict[str, Any]) -> None:
    """Refuse a ``resume=`` that this call cannot continue by redoing its setup and warm-up: not a result, a result
    without a state, or one that ``sample_tall`` recorded with other arguments than this call's (naming them)."""
    if not isinstance(resume, SamplingResult):
        raise TypeError(
            f"resume must be a result of sample_tall (or tallmcmc.load_result of its file); got {type(resume).__name__}"
        )
    if resume.last_state is None:
        raise ValueError(
            "resume: this result cannot be resumed (an interrupted asynchronous run whose chains could not be "
            "brought level): it has no state to go on from"
        )
    if resume.diagnosis is None and resume.final_state is not None and resume.made_by is None:
        raise ValueError(
            "resume: this result was made by tallmcmc.sample, not sample_tall; continue it with "
            "tallmcmc.sample(model, proposal, test, resume=result, num_samples=...)"
        )
    spelled = _differing_arguments(resume.made_by, made_by)
    if spelled:
        raise ValueError(
            "resume: sample_tall continues a saved run by redoing its setup and warm-up, which needs the arguments "
            f"of the call that made it, and this call's differ ({spelled}); call sample_tall as that run was "
            "called, with resume= added and num_samples the draws to add"
        )


def _differing_arguments(recorded: dict[str, Any] | None, made_by: dict[str, Any]) -> str:
    """The arguments in which this call (``made_by``) differs from a saved run's ``recorded`` ones, spelled for an
    error (``batch_size=100 there, 50 here``); empty where none does, or where the run has no record (a file of
    tallmcmc before the record was written part-way through a run: its warm-up's draws are compared instead)."""
    if recorded is None:
        return ""
    differ = [
        name
        for name, value in made_by.items()
        if name in recorded and recorded[name] != value and not (name == "chi" and not made_by["bound"])
    ]
    given = {True: "given", False: "not given"}
    return "; ".join(
        f"{name}: {given[recorded[name]]} there, {given[made_by[name]]} here"
        if isinstance(recorded[name], bool)
        else f"{name}={recorded[name]!r} there, {made_by[name]!r} here"
        for name in differ
    )


def checkpoint_file(sample_options: dict[str, Any], made_by: dict[str, Any]) -> CheckpointFile | None:
    """``checkpoint=`` (and ``checkpoint_every=``) of ``sample_options`` as the :class:`CheckpointFile` ``sample``
    writes, with this call's record of arguments in every checkpoint (those part-way through a run included); put
    back in ``sample_options``. A file there already (a re-run of a killed or finished run) is checked against the
    record before any setup: a re-run with other arguments would otherwise go on from draws another call made."""
    store = CheckpointFile.given(
        sample_options.pop("checkpoint", None), sample_options.pop("checkpoint_every", None), made_by
    )
    if store is None:
        return None
    saved = store.saved()
    spelled = "" if saved is None else _differing_arguments(saved.made_by, made_by)
    if spelled:
        raise ValueError(
            f"checkpoint={str(store.path)!r} holds a sample_tall run made with other arguments ({spelled}); a re-run "
            "goes on from its file only when called as the run was. Call sample_tall with that run's arguments, or "
            "give another checkpoint path (sample_tall(model, resume=tallmcmc.load_result(path), ...) continues the "
            "saved run, with its arguments too)"
        )
    sample_options["checkpoint"] = store
    return store


def check_rederived(resume: SamplingResult, proposal: Proposal, test) -> None:
    """Refuse to continue a saved run whose chains ran another proposal or test than the redone setup gives."""
    state = resume.last_state
    if (state.proposal_name, state.test_name) != (proposal.name, test.name):
        raise ValueError(
            f"resume: the saved run's chains ran {state.proposal_name} with {state.test_name}, but its setup and "
            f"warm-up, redone by this call, give {proposal.name} with {test.name}: the run was made with other "
            "arguments, another model or data, or another tallmcmc. Call sample_tall as that run was called, or "
            "continue it with tallmcmc.sample(model, proposal, test, resume=result) and the proposal and test "
            "that made it"
        )


def warmup_redone(model: Model, warmed: WarmupResult, resume: SamplingResult) -> bool:
    """Whether the warm-up redone to continue ``resume`` drew its warm-up draws again, bit for bit (``True`` for a
    file without warm-up draws: nothing to compare)."""
    if resume.warmup_positions is None:
        return True
    redone = jax.tree_util.tree_leaves(reported_draws(model, warmed.positions))
    saved = jax.tree_util.tree_leaves(resume.warmup_positions)
    return len(redone) == len(saved) and all(
        np.shape(a) == np.shape(b) and np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(redone, saved)
    )


def resumed_kept(
    model: Model,
    decision: str,
    warmed: WarmupResult,
    proposal: Proposal,
    tuned: Proposal,
    minibatch,
    tuna_test,
    resume: SamplingResult,
    num_samples: int,
    options: dict[str, Any],
    say: Callable[..., None],
) -> tuple[SamplingResult, Proposal, Any, str, str | None]:
    """The saved run ``resume`` continued by ``num_samples`` draws with the proposal and test the redone
    setup and warm-up rebuilt: the test its chains ran (the minibatch test, the exact one after a switch, or TunaMH),
    with the warm-up's proposal where the state carries the warm-up's step factors, else the tuned one. Returns the
    result, the proposal, the test, the decision, and a problem where the redone warm-up's draws are not the saved
    run's (then the continuation is a valid chain but not the draws one longer run would have given)."""
    state = resume.last_state
    exact = exact_metropolis()
    tests = {test.name: test for test in (minibatch, exact, tuna_test) if test is not None}
    if state.test_name not in tests and state.test_name.startswith("tuna") and tuna_test is None:
        raise ValueError(
            "bound: the saved run kept TunaMH, whose bound a file cannot hold; pass the bound= the run was made with"
        )
    test = tests.get(state.test_name, exact)  # another name: refused just below, naming both
    check_rederived(resume, tuned, test)
    say(
        f"sample_tall: continuing the saved run ({state.steps_done:,} steps a chain) with {test.name}, its setup "
        "and warm-up redone ...",
        flush=True,
    )
    kept_proposal = proposal if state.step_size_factor is not None else tuned
    result = sample(model, kept_proposal, test, resume=resume, num_samples=num_samples, **options)
    count_pass(result, REDONE, sum(warmed.setup_data_used.values()) + np.sum(to_host(warmed.info["data_used"])), resume)
    if test is tuna_test:
        decision = "tuna"
    elif test is not minibatch:
        decision = "exact" if decision == "exact" else "minibatch, then exact"
    else:
        decision = "minibatch"
    differs = None
    if not warmup_redone(model, warmed, resume):
        differs = (
            "the setup and warm-up redone to continue the saved run did not give its warm-up draws again (another "
            "tallmcmc, JAX or device, or other arguments than the run was made with): the continued draws come from "
            "a valid chain of this proposal and test from the saved chains' states, but not the draws one longer run "
            "would have given"
        )
    return result, kept_proposal, test, decision, differs
