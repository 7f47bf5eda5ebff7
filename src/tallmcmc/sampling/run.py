"""The orchestration: :func:`sample` plans a run, warms it up and runs its kept draws.

Each step is a module of this package: :mod:`~tallmcmc.sampling.plan` (every argument check, the layout, the
driver, the memory estimate), :mod:`~tallmcmc.sampling.warmup_phase` (warm-up as its own step, public as
:func:`tallmcmc.warmup`), :mod:`~tallmcmc.sampling.drivers` and :mod:`~tallmcmc.sampling.asynchronous` (the two
drivers, one calling convention), :mod:`~tallmcmc.sampling.result` (the :class:`SamplingResult`).
"""

from __future__ import annotations

import math
import os
import time
import warnings
from typing import Any

import jax
import numpy as np

from tallmcmc._checks import integer_at_least
from tallmcmc.acceptance.base import AcceptanceTest, has_step_machine
from tallmcmc.kernel import MHState
from tallmcmc.model import Model, Position, check_position_shape
from tallmcmc.proposals.base import Proposal
from tallmcmc.run_warnings import warn_if_error_bounds_vacuous, warn_if_subsampling_does_not_pay
from tallmcmc.sampling.asynchronous import run_asynchronous
from tallmcmc.sampling.checkpoint import CheckpointFile
from tallmcmc.sampling.continuation import (
    RunState,
    bind_states,
    check_resumable,
    position_kind,
    resumed_proposal,
    starts_of,
)
from tallmcmc.sampling.drivers import DriverCall, DriverOutput, HeldBar, progress_bar, run_vmapped
from tallmcmc.sampling.plan import RunPlan, plan_run
from tallmcmc.sampling.result import SamplingResult, reported_draws
from tallmcmc.sampling.warmup_phase import WarmupResult, run_warmup
from tallmcmc.sharding import to_host

__all__ = ["CHECKPOINT_SECONDS", "sample"]

#: ``sample(checkpoint=...)`` without ``checkpoint_every`` writes after the first chunk that ends this many seconds
#: after the last write (and after warm-up, at the end and on an interrupt).
CHECKPOINT_SECONDS = 60.0


def sample(
    model: Model,
    proposal: Proposal,
    test: AcceptanceTest,
    initial_position: Position | WarmupResult = None,
    *,
    num_samples: int = 1000,
    num_chains: int | None = None,
    seed: int | None = None,
    progress: bool | HeldBar = True,
    initial_positions: Position = None,
    num_chunks: int = 20,
    num_warmup: int = 0,
    target_acceptance: float | None = None,
    temperature_schedule=None,
    step_size_schedule=None,
    adapt_covariance: bool = False,
    driver: str = "vmap",
    mesh=None,
    check_starts: bool = True,
    resume: SamplingResult | RunState | None = None,
    checkpoint: str | os.PathLike | CheckpointFile | None = None,
    checkpoint_every: int | None = None,
    allow_inexact_proposal: bool = False,
) -> SamplingResult:
    """Run ``num_chains`` Markov chains of ``num_samples`` steps each.

    Parameters
    ----------
    model
        The tempered target (:class:`tallmcmc.Model`).
    proposal
        E.g. ``tallmcmc.random_walk(0.15)``.
    test
        E.g. ``tallmcmc.minibatch_barker(batch_size=50)``.
    initial_position
        One position (pytree) where every chain starts; or a
        :class:`~tallmcmc.sampling.warmup_phase.WarmupResult` from
        :func:`tallmcmc.warmup`, to draw from where its chains are, with what
        it adapted (the same model, proposal, test and number of chains;
        ``num_warmup`` must then be 0).
    num_samples
        Steps per chain; every step's state is kept (rejections repeat it).
        With ``resume``, the steps to add; with ``checkpoint``, the run's
        total (see ``checkpoint``).
    num_chains
        Chains run together (default 1, or the number of the run resumed).
    seed
        Seed of the random stream (default 0, or the seed of the run
        resumed); the same seed gives the same draws.
        Everything after ``initial_position`` is keyword-only.
    progress
        Show a progress bar over chunks of steps; or a
        :class:`tallmcmc.sampling.drivers.HeldBar`, which the kept draws
        advance and leave open (``sample_tall`` shows one bar over its kept
        draws' segments this way).
    initial_positions
        Instead of ``initial_position``: a pytree whose leaves have a leading
        axis of length ``num_chains``, one start per chain.
    num_warmup
        Warm-up steps per chain before the kept draws. If the proposal's step
        size can be tuned (``proposal.tune``: random walks, Langevin, proxy
        proposals), warm-up adapts a per-chain factor on it by dual averaging
        (Hoffman & Gelman 2014, Algorithm 5) towards ``target_acceptance``,
        and the kept draws use the factor's running average; otherwise it is a
        plain burn-in. A proxy proposal (:func:`tallmcmc.proxy_hamiltonian`,
        :func:`tallmcmc.proxy_langevin`) is adapted on its own data-free
        acceptance on the proxy posterior (``info["proxy_acceptance"]``), not
        on the test's, and a proxy Hamiltonian move keeps its integration time
        ε·L as ε changes (``docs/warmup.md``). Warm-up draws are returned apart
        (``result.warmup_positions``, ArviZ ``warmup_posterior``) and their
        data use is counted.
    target_acceptance
        For a proxy proposal: the proxy acceptance warm-up aims at (default
        ``proposal.proxy_target``: 0.9 for the Hamiltonian move, 0.574 for
        the Langevin one), whatever the test. Otherwise the test's acceptance
        rate: by default the proposal's optimal Metropolis rate
        (``proposal.metropolis_target``: 0.234 for random walks, 0.574 for
        Langevin) under a test that can accept every proposal
        (``test.max_acceptance`` 1), and under a Barker-type test
        (``max_acceptance`` ½: its acceptance probability 1/(1 + e^{−Δ})
        tends to ½, not 1, as the step shrinks) 0.158/0.234 ≈ 0.68 of it,
        capped at 0.35 (Barker's optimal random-walk rate is 0.158, Agrawal
        et al. 2021; the factor and the cap are heuristics for other
        proposals). A target at or above ``test.max_acceptance`` is refused
        (it would drive the step to 0) and one above 0.8 of it warned about.
    adapt_covariance
        With ``num_warmup``: warm-up runs in two windows. After the first half,
        the covariance of the draws of its second half (all chains pooled,
        shrunk towards 10⁻³·I as Stan does: n/(n + 5)·Σ̂ + 10⁻³·5/(n + 5)·I)
        reshapes the proposal (``proposal.with_covariance``: a random walk
        with covariance 2.38²/d · Σ̂), and the second half adapts the step
        size of the reshaped proposal afresh. Needs a random-walk proposal.
    temperature_schedule
        Optional array of ``num_samples`` temperatures: kept step ``t`` targets
        the model at temperature K_t instead of ``model.temperature``
        (annealing, e.g. K = 100 for 400 steps then K = 1). Warm-up runs at
        ``model.temperature``. Not with a control-variate test, whose proxy
        sums are built at one temperature.
    step_size_schedule
        Optional array of ``num_samples`` positive factors: kept step ``t``
        uses the proposal's step size times this factor (times the warm-up's
        factor, if any). Needs a proposal whose step size can be tuned.
    num_chunks
        The run is compiled as one ``lax.scan`` over a chunk of steps and run
        ``num_chunks`` times (for the progress bar and to move draws off the
        device as they come). The draws do not depend on it: step ``t`` of
        chain ``c`` uses the key ``fold_in(fold_in(key(seed), c), t)``.
        The asynchronous driver returns to the host ``num_chunks`` times too
        (when every chain has reached the next multiple of the chunk).
    driver
        How the chains are run together (warm-up and kept draws).
        ``"vmap"`` (default): every step vmapped across chains, so a
        growing-minibatch test waits at each step for the chain with the
        largest minibatch. ``"asynchronous"``
        (:mod:`tallmcmc.sampling.asynchronous`): one vectorised loop advances
        every chain's test by one chunk of data per iteration, and a chain
        whose test has decided records its draw and starts its next step at
        once; in warm-up each chain adapts as its own steps finish. Both use
        the same per-chain, per-step keys and operations, so they give the
        same draws (except in the last place of the statistics with a
        ``temperature_schedule``, and AustereMH's reported ``error_bound``).
        ``"auto"``: :func:`~tallmcmc.sampling.drivers.choose_driver` picks (the
        asynchronous driver for a chunk-by-chunk test from 8 chains per device
        on, else vmap; vmap if the asynchronous driver's draws would not fit
        in device memory); ``result.driver`` says which ran. Which is faster
        when, measured: ``docs/drivers.md``.
    mesh
        Optional :class:`jax.sharding.Mesh` with axis names from
        ``{"data", "chains"}`` (:mod:`tallmcmc.sharding`, ``docs/sharding.md``).
        The data's rows are split into contiguous blocks over ``"data"``
        (padded with rows that no index draws and every full-data sum leaves
        out when ``N`` is not a multiple of its size) and the chains over
        ``"chains"`` (its size must divide ``num_chains``); a mesh with only
        ``"chains"`` copies the data to every device and splits the chains, one
        with only ``"data"`` runs every chain on every device. A minibatch is
        gathered by letting each device evaluate the indices it holds and
        summing the lanes over ``"data"``: every index lies on one device only,
        so the values, hence the draws, equal the run without a mesh bit for
        bit; full-data sums are combined from per-device partial sums and
        differ from it only by summation order. ``data_used`` does not depend
        on the mesh. Data leaves that are already global arrays laid out over
        ``"data"`` (e.g. built in every process of a multi-process run with
        :func:`jax.make_array_from_process_local_data`) are used in place and
        never brought to one host. With a mesh, ``final_state``'s leaves have
        a leading axis of one copy per data shard (a full-data test's cached
        per-datum values differ between shards). Both drivers run on a mesh;
        the asynchronous one runs one loop per device, which waits only for
        that device's chains. On a CPU with several cores, one host device
        per core (``XLA_FLAGS=--xla_force_host_platform_device_count=<cores>``
        set before JAX starts) and a ``"chains"`` mesh over them is the
        fastest layout for many chains: XLA:CPU splits the small operations of
        one device poorly over its threads (``docs/sharding.md``).

    check_starts
        ``True`` (default): evaluate the model on the full data at every
        distinct start before compiling (one pass each, counted as ``"start
        check"``). ``False`` skips it, for starts a previous run of the same
        model produced (e.g. its ``final_state.position``).
    resume
        Go on with the chains of another run: a :class:`SamplingResult` (the
        result returned is that run extended by ``num_samples`` draws), or its
        ``last_state`` (:class:`~tallmcmc.sampling.continuation.RunState`; the
        result holds only the new draws, ``result.first_draw`` says where they
        start). Each chain continues from its state (position, the test's
        cache such as the tail guard's pool, the step counter that keys its
        draws) with the step-size factor and covariance its warm-up adapted:
        a run of ``n`` draws continued by ``m`` equals one run of ``n + m``
        bit for bit, either driver, on a mesh too. It does not warm up again
        unless ``num_warmup`` asks (then only with a ``RunState``).
        ``initial_position`` and ``initial_positions`` are not needed (a
        custom-pytree position loaded from a file needs ``initial_position``
        for its structure). The same model, proposal, test, number of chains
        and mesh, or a ``ValueError`` naming the one that differs.
    checkpoint
        A file path: the run is written there (:meth:`SamplingResult.save`:
        NetCDF, atomically) after warm-up and every ``checkpoint_every``
        steps, and when it ends or is interrupted. If the file exists, the run
        resumes from it instead of starting afresh (a killed job re-run
        unchanged goes on where it stopped) and returns the whole run;
        ``num_samples`` is then the run's total, and a file that already holds
        them is returned as it is. A file from another model, test, proposal,
        seed, number of chains or library version is refused, naming what
        differs; the file is never executed (``docs/long_runs.md``). A
        :class:`~tallmcmc.sampling.checkpoint.CheckpointFile` instead of a
        path also writes its ``made_by`` record into every checkpoint
        (:func:`tallmcmc.sample_tall` passes one).
    checkpoint_every
        Kept steps per chain between writes; the chunks are shortened to
        divide it. By default, a write after the first chunk that ends a
        minute (``CHECKPOINT_SECONDS``) after the last one. Each write
        rewrites the file, and the asynchronous driver brings its chains
        level for it (they otherwise run ahead of each other): what that
        costs is measured in ``docs/long_runs.md``.

    Returns
    -------
    SamplingResult

    Notes
    -----
    The model is checked at every start before anything is compiled
    (:func:`tallmcmc.model.check_model`): non-finite log-likelihoods or
    priors, badly shaped or empty data raise a ``ValueError`` naming the
    argument. A step that meets a non-finite Δ rejects and sets
    ``info["non_finite"]``. Interrupting (Ctrl-C) returns the draws made so far.

    Before compiling, the bytes that the data and the chains' states (e.g. a
    full-data test's ``num_chains × N`` cached values, counted twice: the
    current and the proposed) and, with ``driver="asynchronous"``, all the
    draws and step statistics it keeps until the end need on one device are
    compared with what it
    has (:func:`tallmcmc.sharding.check_device_memory`); a run that cannot fit
    raises :class:`tallmcmc.sharding.DeviceMemoryError` (a ``ValueError``)
    with the estimate and the remedy (``mesh=``) before JAX runs out of memory.
    """
    store = CheckpointFile.given(checkpoint, checkpoint_every)  # a CheckpointFile: sample_tall's, with its record
    checkpoint_every = None if store is None else store.every
    num_samples = integer_at_least(num_samples, "num_samples")
    warmed = initial_position if isinstance(initial_position, WarmupResult) else None
    earlier, state = _resumed(resume, warmed)
    total = num_samples + (0 if earlier is None else earlier.num_draws)  # the run's draws per chain, all told
    saved = None if store is None else store.saved()
    if saved is not None:  # a checkpoint of this very run: go on from it
        store.check_continues(saved, model, test.name, proposal.name, num_chains, seed, total)
        if saved.num_draws == total:
            return saved
        earlier, state, num_warmup, warmed = saved, saved.last_state, 0, None  # it has warmed up already
        num_samples = total - saved.num_draws
    example = None if warmed is not None else initial_position
    if state is not None:
        num_chains = state.num_chains if num_chains is None else num_chains
        seed = state.seed if seed is None else seed
        check_resumable(state, model, proposal, test, num_chains, mesh)
        if num_warmup and earlier is not None:
            raise ValueError(
                "num_warmup: a resumed SamplingResult is extended without warming up again; to warm up "
                "again, resume from result.last_state (the result then holds only the new draws)"
            )
        initial_position, initial_positions, check_starts = None, starts_of(state, example), False
        _check_resumed_position(model, initial_positions)
    elif warmed is not None:
        num_chains = warmed.num_chains if num_chains is None else num_chains
        seed = warmed.seed if seed is None else seed
        _check_continues(warmed, model, proposal, test, num_chains, num_warmup, mesh)
        initial_position, initial_positions, check_starts = None, _first_copy(warmed), False
    num_chains = 1 if num_chains is None else num_chains
    seed = 0 if seed is None else seed
    kept_proposal = warmed.proposal if warmed is not None else proposal
    if state is not None and not num_warmup:
        kept_proposal = resumed_proposal(state, proposal)
    plan = plan_run(
        model,
        kept_proposal,
        test,
        initial_position,
        initial_positions,
        num_samples=num_samples,
        num_chains=num_chains,
        seed=seed,
        progress=progress,
        num_chunks=num_chunks,
        num_warmup=num_warmup,
        target_acceptance=target_acceptance,
        temperature_schedule=temperature_schedule,
        step_size_schedule=step_size_schedule,
        adapt_covariance=adapt_covariance,
        driver=driver,
        mesh=mesh,
        check_starts=check_starts,
        allow_inexact_proposal=allow_inexact_proposal,
    )
    first_step, factors, covariance = 0, None, None
    if state is not None:
        states = bind_states(state, jax.eval_shape(plan.program.initialise, plan.data, plan.starts))
        first_step = state.steps_done
        if not num_warmup:
            factors = None if state.step_size_factor is None else jax.device_put(np.asarray(state.step_size_factor))
            covariance = state.adapted_covariance
    elif warmed is None:
        states = plan.program.initialise(plan.data, plan.starts)
    if plan.num_warmup:
        warmed = run_warmup(plan, states, mesh, stream=first_step)
    if warmed is not None:
        states, plan = warmed.states, plan._replace(proposal=warmed.proposal)
        if warmed.program is not None and warmed.program.serves(plan.held, plan.proposal, plan.test, plan.layout):
            plan = plan._replace(program=warmed.program)  # what warm-up compiled runs the kept draws
        factors, covariance = warmed.step_size_factor, warmed.adapted_covariance
    elif earlier is not None and earlier.program is not None:
        if earlier.program.serves(plan.held, plan.proposal, plan.test, plan.layout):
            plan = plan._replace(program=earlier.program)  # what the resumed run compiled goes on running
    run = _Run(
        plan,
        warmed,
        earlier,
        first_step,
        factors,
        covariance,
        proposal.name,
        setup=state is None,
        store=store,
        total=total,
    )
    if store is not None and warmed is not None and earlier is None:  # warm-up done: never again for this run
        run.write(DriverOutput(states, *_no_draws(warmed), 0.0, 0.0))
    output = _run_kept_draws(
        plan, states, factors, first_step, *run.checkpoints(store, checkpoint_every), checkpoint_every
    )
    result = run.result(output)
    if store is not None and result.last_state is not None:
        store.write(result, total)
    _warn(plan, result, output.states)
    _check_setup_objects(plan, result)
    return result


def _check_resumed_position(model: Model, positions: Position) -> None:
    """Refuse a resumed state whose positions do not fit ``model.position_shape`` (it comes from another model)."""
    try:
        # one chain's shapes, not its values (indexing a device array compiles two small programs)
        one = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(np.shape(leaf)[1:], leaf.dtype), positions)
        check_position_shape(model, one, "resume")
    except ValueError as error:
        raise ValueError(
            f"resume: the run being resumed has positions of another shape than this model's "
            f"({error}); resume with the model it was made with"
        ) from None


def _resumed(resume, warmed: WarmupResult | None) -> tuple[SamplingResult | None, RunState | None]:
    """``(the result to extend or None, the state to go on from or None)`` of ``sample``'s ``resume``."""
    if resume is None:
        return None, None
    if warmed is not None:
        raise ValueError("give either resume or a WarmupResult as initial_position, not both")
    if isinstance(resume, SamplingResult):
        if resume.last_state is None:
            raise ValueError(
                "resume: this result cannot be resumed (an interrupted asynchronous run whose chains could not be "
                "brought level); start a new run from its last draws"
            )
        return resume, resume.last_state
    if isinstance(resume, RunState):
        return None, resume
    raise TypeError(f"resume must be a SamplingResult or its last_state (a RunState); got {type(resume).__name__}")


def _no_draws(warmed: WarmupResult) -> tuple[Position, dict[str, np.ndarray]]:
    """Zero kept draws shaped like the warm-up's: what a checkpoint written right after warm-up holds."""
    positions = jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[:, :0], warmed.positions)
    return positions, {name: np.asarray(value)[:, :0] for name, value in warmed.info.items()}


class _Run:
    """What ``sample`` knows between planning and the result: builds results, partial or whole, and checkpoints."""

    def __init__(
        self, plan: RunPlan, warmed, earlier, first_step, factors, covariance, proposal_name, *, setup, store, total
    ):
        self.plan, self.warmed, self.earlier, self.first_step = plan, warmed, earlier, first_step
        self.factors, self.covariance, self.proposal_name = factors, covariance, proposal_name
        self.setup, self.store, self.total = setup, store, total
        self.written_at = time.monotonic()

    def checkpoints(self, store, every) -> tuple[Any, Any]:
        """``(level_at, on_level)`` for the driver: whether a checkpoint is written after a chunk, and the writer.

        With ``checkpoint_every``, after every chunk that ends a multiple of it
        (rounded down to whole chunks); by default after a chunk when the last
        write is :data:`CHECKPOINT_SECONDS` old, so that a long run's writes (each
        rewrites the whole file) and the asynchronous driver's levelling cost
        little.
        """
        if store is None:
            return None, None
        if every is not None:
            chunk = _chunk_length(self.plan.num_samples, self.plan.num_chunks, every)
            every = chunk * max(1, every // chunk)
            return (lambda steps: steps % every == 0), self.write_partial
        return (lambda steps: time.monotonic() - self.written_at >= CHECKPOINT_SECONDS), self.write_partial

    def write_partial(self, steps: int, states: MHState, positions, info) -> None:
        self.write(DriverOutput(states, positions, info, 0.0, 0.0))

    def write(self, output: DriverOutput) -> None:
        self.store.write(self.result(output), self.total)
        self.written_at = time.monotonic()

    def result(self, output: DriverOutput) -> SamplingResult:
        plan, warmed = self.plan, self.warmed
        states = output.states
        final = last = None
        if states is not None:
            final = states
            if plan.layout is not None:  # one copy per data shard: the position is the same in all
                position, log_prior, proposal_state = plan.layout.first_copy(
                    (states.position, states.log_prior, states.proposal_state)
                )
                final = MHState(position, log_prior, states.cache, proposal_state)
            num_new = int(jax.tree_util.tree_leaves(output.info)[0].shape[1])
            last = RunState(
                states=states,
                steps_done=self.first_step + num_new,
                seed=plan.seed,
                num_chains=plan.num_chains,
                step_size_factor=None if self.factors is None else np.asarray(to_host(self.factors)),
                adapted_covariance=self.covariance,
                test_name=plan.test.name,
                proposal_name=self.proposal_name,
                num_data=plan.model.num_data,
                mesh_shape=None if plan.layout is None else dict(plan.layout.mesh.shape),
                position_kind=position_kind(plan.starts),  # the structure, which the chains' starts share
                model=plan.model,
            )
        setup = {}
        if self.setup:
            setup = dict(plan.setup_data_used) if warmed is None else {**warmed.setup_data_used, **plan.setup_data_used}
        result = SamplingResult(
            positions=reported_draws(plan.model, output.positions),
            info=output.info,
            num_data=plan.model.num_data,
            compile_seconds=output.compile_seconds + (0.0 if warmed is None else warmed.compile_seconds),
            sampling_seconds=output.sampling_seconds,
            final_state=final,
            test_name=plan.test.name,
            proposal_name=plan.proposal.name,
            setup_data_used=setup,
            warmup_positions=None if warmed is None else reported_draws(plan.model, warmed.positions),
            warmup_info=None if warmed is None else warmed.info,
            step_size_factor=None if self.factors is None else np.asarray(to_host(self.factors)),
            adapted_covariance=self.covariance,
            driver=plan.driver,
            loop_iterations=output.loop_iterations,
            last_state=last,
            first_draw=self.first_step,
            inexact_proposal=plan.inexact_proposal,
            program=plan.program,
        )
        return result if self.earlier is None else self.earlier.extended_by(result)


def _check_continues(warmed: WarmupResult, model, proposal, test, num_chains, num_warmup, mesh) -> None:
    """Refuse to continue a warm-up with another model, proposal, test, chain count or mesh, naming the argument."""
    if num_warmup:
        raise ValueError("num_warmup must be 0 when initial_position is a WarmupResult (warm-up has run)")
    mismatches = [
        ("model", model is not warmed.model),
        ("proposal", proposal is not warmed.initial_proposal and proposal is not warmed.proposal),
        ("test", test is not warmed.test),
        ("num_chains", num_chains != warmed.num_chains),
        ("mesh", mesh is not warmed.mesh),
    ]
    for name, differs in mismatches:
        if differs:
            raise ValueError(
                f"{name} differs from the one the WarmupResult given as initial_position was made with; continue a "
                f"warm-up with the same model, proposal, test, num_chains and mesh"
            )


def _first_copy(warmed: WarmupResult) -> Position:
    """The warm-up's positions (one per chain), as starts; with a mesh, the first data shard's copy."""
    positions = warmed.states.position
    if warmed.mesh is None:
        return positions
    return jax.tree_util.tree_map(lambda leaf: to_host(leaf)[0], positions)


def _chunk_length(num_samples: int, num_chunks: int, checkpoint_every: int | None) -> int:
    """Steps per chunk: ``num_samples / num_chunks`` rounded up, at most ``checkpoint_every``."""
    chunk = math.ceil(num_samples / num_chunks)
    return chunk if checkpoint_every is None else max(1, min(chunk, checkpoint_every))


def _run_kept_draws(
    plan: RunPlan,
    states: MHState,
    factors,
    first_step: int = 0,
    level_at=None,
    on_level=None,
    checkpoint_every: int | None = None,
) -> DriverOutput:
    """The kept draws with the plan's driver, in chunks, under a progress bar (steps ``first_step`` on)."""
    chunk = _chunk_length(plan.num_samples, plan.num_chunks, checkpoint_every if on_level is not None else None)
    lengths = [chunk] * (plan.num_samples // chunk) + ([plan.num_samples % chunk] if plan.num_samples % chunk else [])
    description = f"{plan.test.name} x {plan.num_chains} chain(s)"
    call = DriverCall(
        plan.held,
        plan.proposal,
        plan.test,
        plan.data,
        plan.layout,
        states,
        plan.chain_keys(),
        factors,
        lengths,
        plan.schedule,
        plan.dtype,
        progress_bar(plan.num_samples, plan.progress, description),
        description,
        first_step,
        level_at,
        on_level,
        plan.program,
        plan.asynchronous_rows if plan.driver == "asynchronous" else 0,
    )
    return run_asynchronous(call) if plan.driver == "asynchronous" else run_vmapped(call)


def _warn(plan: RunPlan, result: SamplingResult, states: MHState) -> None:
    """The warnings a run's own statistics call for (non-finite steps, vacuous error bounds, data use)."""
    info = result.info
    non_finite = int(info["non_finite"].sum())
    if non_finite:
        warnings.warn(
            f"{non_finite} step(s) met a non-finite log acceptance ratio and rejected their proposal "
            "(see info['non_finite']); check the log-likelihood for overflow or invalid parameters, "
            "and the proposal: one without a log proposal ratio (NaN, e.g. stochastic_gradient_langevin) "
            "can only be run with tallmcmc.always_accept()",
            RuntimeWarning,
            stacklevel=3,
        )
    warn_if_error_bounds_vacuous(info, stacklevel=4)
    if states is not None and plan.proposal.state_problem is not None:
        problem = plan.proposal.state_problem(to_host(states.proposal_state))
        if problem:
            warnings.warn(f"{plan.proposal.name}: {problem}", RuntimeWarning, stacklevel=3)
    if has_step_machine(plan.test):  # a subsampling test: did it pay, and if not, why
        pool = to_host(states.cache) if states is not None and hasattr(states.cache, "fourth") else None
        warn_if_subsampling_does_not_pay(
            plan.test.name, info, plan.model.num_data, pool, plan.uses_control_variate, stacklevel=4
        )


def _check_setup_objects(plan: RunPlan, result: SamplingResult) -> None:
    """Let setup objects check the run (a TunaMH bound raises if a step found it violated), the result attached."""
    for source in (*plan.proposal.setup, *plan.test.setup):
        if hasattr(source, "check_info"):
            for checked in (result.warmup_info, result.info):
                if checked is None:
                    continue
                try:
                    source.check_info(checked)
                except ValueError as error:  # nothing computed is lost: the run rides on the error
                    error.result = result
                    error.add_note("the run's draws and step statistics are on this exception's `result` attribute")
                    raise
