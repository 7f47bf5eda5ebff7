"""Warm-up as its own step: :func:`warmup` runs it and returns a :class:`WarmupResult` that
:func:`tallmcmc.sample` continues from (``sample(..., num_warmup=W)`` is the shorthand for both).

Warm-up runs ``num_warmup`` steps per chain from the starts. If the proposal's step size can be tuned it adapts a
per-chain factor by dual averaging (:mod:`tallmcmc.sampling.adaptation`) towards a target rate — a proxy
proposal's own data-free acceptance, otherwise the test's (``docs/warmup.md``); with ``adapt_covariance=True`` it
runs in two windows, the first half's later draws giving the covariance that reshapes the proposal for the second.
Its keys come from a stream apart from the kept draws' (``fold_in(key(seed), WARMUP_STREAM)``), so warming up
changes no kept draw's key.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc import compiler_options, flat_positions
from tallmcmc._checks import integer_at_least
from tallmcmc._device import to_device
from tallmcmc.acceptance.base import AcceptanceTest
from tallmcmc.kernel import MHInfo, MHState
from tallmcmc.model import Model, Position
from tallmcmc.proposals.base import Proposal
from tallmcmc.sampling.adaptation import DualAveraging
from tallmcmc.sampling.asynchronous import run_asynchronous
from tallmcmc.sampling.drivers import DriverCall, progress_bar
from tallmcmc.sampling.plan import RunPlan, plan_run
from tallmcmc.sampling.program import ChainProgram, chain_program, tuned_arguments
from tallmcmc.sampling.schedule import Schedule
from tallmcmc.sharding import to_host

__all__ = ["WARMUP_STREAM", "WarmupResult", "compile_warmup", "run_warmup", "warmup"]

WARMUP_STREAM = 0x7FFFFFFF  # warm-up keys come from a stream apart from the kept draws
#: An adaptive warm-up runs in compiled chunks of at least this many steps (or all its steps, if fewer).
WARMUP_CHUNK_LENGTH = 100
#: With ``keep_going``, an adaptive warm-up asks it every this many steps (its compiled chunk run that many at a call).
KEEP_GOING_STEPS = 10


@dataclasses.dataclass(frozen=True)
class WarmupResult:
    """The chains after warm-up, and what warm-up learned and cost.

    Pass it to :func:`tallmcmc.sample` as ``initial_position`` to draw from
    where warm-up left the chains, with what it adapted (the draws are those
    of ``sample(..., num_warmup=W)`` with the same seed).

    Attributes
    ----------
    states
        Each chain's state (position, log-prior, the test's cache, e.g. the
        tail guard's pool), leading axis chain (with a mesh, one copy per
        data shard first).
    proposal
        The proposal the kept draws use: the one given, reshaped by
        ``adapted_covariance`` if warm-up adapted one.
    step_size_factor
        Per chain, the adapted factor on the proposal's step size (``None``
        without adaptation).
    adapted_covariance
        The covariance estimate that reshaped the proposal, or ``None``.
    positions, info
        The warm-up draws ``(chain, draw, …)`` (on the sampling scale) and
        their step statistics, NumPy arrays.
    setup_data_used
        The start check and the one-off computations the proposal and test
        rely on, by source (counted once: ``sample`` does not count them again).
    model, test, initial_proposal, num_chains, mesh, driver, seed
        What it was run with (``sample`` refuses to continue it with others).
    program
        The compiled program of its last steps
        (:class:`~tallmcmc.sampling.program.ChainProgram`), which ``sample``
        continuing it runs (so the kept draws compile nothing more).
    compile_seconds
        Seconds spent compiling its programs.
    """

    states: MHState
    proposal: Proposal
    step_size_factor: jax.Array | None
    adapted_covariance: np.ndarray | None
    positions: Position
    info: dict[str, np.ndarray]
    setup_data_used: dict[str, int]
    model: Model
    test: AcceptanceTest
    initial_proposal: Proposal
    num_chains: int
    mesh: Any
    driver: str
    seed: int
    program: ChainProgram | None = dataclasses.field(default=None, repr=False, compare=False)
    compile_seconds: float = 0.0

    def __repr__(self) -> str:
        """A few lines: chains and steps, what it adapted, what it cost (the default dump of every state and array
        took 37,000 characters for 2 chains × 100 steps at d = 10)."""
        steps = self.num_warmup
        adapted = []
        if self.step_size_factor is not None:
            factors = np.asarray(self.step_size_factor)
            adapted.append(f"step size factors {factors.min():.3g}–{factors.max():.3g}")
        if self.adapted_covariance is not None:
            adapted.append("a covariance")
        accepted = f"; acceptance {float(np.mean(self.info['accepted'])):.3f}" if steps else ""
        return (
            f"WarmupResult: {self.num_chains} chains × {steps:,} warm-up steps, {self.driver} driver, seed {self.seed}"
            f"{accepted}\n  {self.test.name} test, {self.proposal.name} proposal; adapted "
            f"{', '.join(adapted) or 'nothing'}\n  data used {self.data_used:,} points (N = {self.model.num_data:,}); "
            f"compiling {self.compile_seconds:.3g} s"
        )

    @property
    def num_warmup(self) -> int:
        """Warm-up steps per chain."""
        return int(self.info["accepted"].shape[1])

    @property
    def data_used(self) -> int:
        """Data points its steps touched, all chains (the setup passes apart)."""
        return int(np.sum(self.info["data_used"]))


def warmup(
    model: Model,
    proposal: Proposal,
    test: AcceptanceTest,
    initial_position: Position = None,
    *,
    num_warmup: int,
    num_chains: int = 1,
    seed: int = 0,
    progress: bool = True,
    initial_positions: Position = None,
    target_acceptance: float | None = None,
    adapt_covariance: bool = False,
    driver: str = "vmap",
    mesh=None,
    check_starts: bool = True,
    keep_going: Callable[[dict[str, np.ndarray]], bool] | None = None,
) -> WarmupResult:
    """Run ``num_warmup`` warm-up steps of ``num_chains`` chains (see the module docstring).

    The arguments mean what they mean for :func:`tallmcmc.sample` (its
    ``num_warmup``, ``target_acceptance``, ``adapt_covariance``, ``driver``,
    ``mesh``, ``check_starts``), and are checked the same way.

    ``keep_going``, if given, is called every :data:`KEEP_GOING_STEPS` steps
    with the step statistics so far (``{field: array (chain, step)}``, as
    :attr:`WarmupResult.info`); where it returns ``False`` the warm-up stops
    there, and the result has fewer than ``num_warmup`` steps (what they cost
    is in its ``info``). ``sample_tall`` stops a second warm-up this way once
    what it reads shows it cannot pay. Only for a warm-up that adapts a step
    size, on the ``"vmap"`` or ``"pmap"`` driver.

    Returns
    -------
    WarmupResult
        ``sample(model, result.initial_proposal, test, result, num_samples=…,
        num_chains=…, seed=…)`` continues it.
    """
    num_warmup = integer_at_least(num_warmup, "num_warmup", 1)
    if keep_going is not None and not callable(keep_going):
        raise TypeError(f"keep_going must be a function of the step statistics so far, or None; got {keep_going!r}")
    plan = _plan(
        model,
        proposal,
        test,
        initial_position,
        initial_positions,
        num_warmup=num_warmup,
        num_chains=num_chains,
        seed=seed,
        progress=progress,
        target_acceptance=target_acceptance,
        adapt_covariance=adapt_covariance,
        driver=driver,
        mesh=mesh,
        check_starts=check_starts,
    )
    if keep_going is not None and (not plan.adapt or plan.driver == "asynchronous"):
        raise ValueError(
            "keep_going needs a warm-up that adapts a step size (a proposal with a tunable step) on the 'vmap' or "
            f"'pmap' driver; this one {'runs on the asynchronous driver' if plan.adapt else 'adapts nothing'}: "
            "leave keep_going out"
        )
    return run_warmup(plan, plan.program.initialise(plan.data, plan.starts), mesh, keep_going=keep_going)


def _plan(model, proposal, test, initial_position, initial_positions, **settings) -> RunPlan:
    """The plan of a warm-up: a run of no kept draws in one chunk, without schedules."""
    return plan_run(
        model,
        proposal,
        test,
        initial_position,
        initial_positions,
        num_samples=None,
        num_chunks=1,
        temperature_schedule=None,
        step_size_schedule=None,
        **settings,
    )


def run_warmup(plan: RunPlan, states: MHState, mesh=None, stream: int = 0, keep_going=None) -> WarmupResult:
    """``plan.num_warmup`` warm-up steps of ``plan``'s chains from ``states`` (see the module docstring).

    ``stream``: 0 for chains that have made no kept step; a resumed run that warms up again passes the steps its
    chains have made, so that its warm-up keys differ from the first warm-up's. ``keep_going``: as for
    :func:`warmup` (an adaptive warm-up only).
    """
    num_warmup = plan.num_warmup
    warmup_keys = plan.chain_keys(WARMUP_STREAM)
    if stream:
        warmup_keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(warmup_keys, stream)
    if plan.progress:
        print(f"warm-up: {num_warmup} steps{' adapting the step size' if plan.adapt else ''} ...", flush=True)
    proposal, adapted_covariance = plan.proposal, None
    if plan.adapt_covariance:
        first = num_warmup // 2
        states, factors, (early_positions, early_info), program, early_compile = _warm(
            plan, proposal, states, warmup_keys, first, keep_going
        )
        stopped = len(early_info.accepted) < first  # in the first window, or at its end:
        if stopped or (keep_going is not None and not keep_going(_statistics(early_info))):
            warm_positions, warm_info, compile_seconds = early_positions, early_info, early_compile
        else:
            adapted_covariance = _warmup_covariance(early_positions, first // 2)
            proposal = proposal.with_covariance(adapted_covariance)
            later_keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(warmup_keys, 1)
            states, factors, (late_positions, late_info), program, compile_seconds = _warm(
                plan, proposal, states, later_keys, num_warmup - first, _after(keep_going, early_info)
            )
            compile_seconds += early_compile
            warm_positions, warm_info = jax.tree_util.tree_map(
                lambda a, b: np.concatenate([np.asarray(a), np.asarray(b)], axis=0),
                (early_positions, early_info),
                (late_positions, late_info),
            )
    else:
        states, factors, (warm_positions, warm_info), program, compile_seconds = _warm(
            plan, proposal, states, warmup_keys, num_warmup, keep_going
        )
    warm_positions, warm_info = to_host((warm_positions, warm_info))
    return WarmupResult(
        states=states,
        proposal=proposal,
        step_size_factor=factors,
        adapted_covariance=adapted_covariance,
        positions=jax.tree_util.tree_map(lambda leaf: np.swapaxes(np.asarray(leaf), 0, 1), warm_positions),
        info={name: np.swapaxes(np.asarray(getattr(warm_info, name)), 0, 1) for name in MHInfo._fields},
        setup_data_used=dict(plan.setup_data_used),
        model=plan.model,
        test=plan.test,
        initial_proposal=plan.proposal,
        num_chains=plan.num_chains,
        mesh=mesh,
        driver=plan.driver,
        seed=plan.seed,
        program=program,
        compile_seconds=compile_seconds,
    )


def _statistics(*infos: MHInfo) -> dict[str, np.ndarray]:
    """Step statistics ``(step, chain)`` of consecutive steps, joined as ``keep_going`` reads them: ``(chain, step)``."""
    return {
        name: np.swapaxes(np.concatenate([np.asarray(getattr(info, name)) for info in infos]), 0, 1)
        for name in MHInfo._fields
    }


def _after(keep_going, earlier: MHInfo):
    """``keep_going`` for a later window: asked with the earlier window's steps first (``None`` without it)."""
    if keep_going is None:
        return None
    before = _statistics(earlier)
    return lambda info: keep_going({name: np.concatenate([before[name], info[name]], axis=1) for name in info})


def _warm(plan: RunPlan, proposal: Proposal, states: MHState, keys: jax.Array, steps: int, keep_going=None):
    """``steps`` warm-up steps: ``(states, adapted factors or None, (positions, info), program, compile seconds)``,
    the draws ``(step, chain, …)``, ``program`` the :class:`ChainProgram` that ran them (``None`` for the asynchronous
    driver). ``keep_going`` (adaptive only) may stop it after fewer steps."""
    if plan.driver == "asynchronous":  # each chain adapts as its own steps finish
        call = DriverCall(
            plan.held,
            proposal,
            plan.test,
            plan.data,
            plan.layout,
            states,
            keys,
            None,
            [steps],
            Schedule(),
            jnp.float32,
            None,
            "",
            program=plan.program if proposal is plan.proposal else None,  # the kept draws' program, in the process
            rows=plan.asynchronous_rows,
        )
        output = run_asynchronous(call, adapt_target=plan.target if plan.adapt else None)
        positions = jax.tree_util.tree_map(lambda leaf: np.swapaxes(leaf, 0, 1), output.positions)
        info = MHInfo(**{k: np.swapaxes(v, 0, 1) for k, v in output.info.items()})
        return output.states, output.adapted_factors, (positions, info), None, output.compile_seconds
    program = plan.program if proposal is plan.proposal else chain_program(plan.held, proposal, plan.test, plan.layout)
    if plan.adapt:
        states, factors, draws, compile_seconds = _adaptive_warmup(program, plan, states, keys, steps, keep_going)
        return states, factors, draws, program, compile_seconds
    run_chunk = program.run_chunk
    began = time.perf_counter()
    compiled = (
        compiler_options.jit(
            lambda d, st, k: run_chunk(d, st, k, jnp.arange(steps, dtype=jnp.uint32), None, (None, None))
        )
        .lower(plan.data, states, keys)
        .compile()
    )
    compile_seconds = time.perf_counter() - began
    states, outputs = compiled(plan.data, states, keys)
    return states, None, outputs, program, compile_seconds


def warmup_chunk_length(plan: RunPlan, steps: int) -> int:
    """Steps per compiled chunk of an adaptive warm-up: the kept draws' chunk if the plan has kept draws, and at
    least :data:`WARMUP_CHUNK_LENGTH` (or ``steps``, if fewer), so that the kept draws run on the same program."""
    kept = 0 if plan.num_samples is None else math.ceil(plan.num_samples / plan.num_chunks)
    return max(kept, min(steps, WARMUP_CHUNK_LENGTH))


def _warmup_covariance(positions, skip: int) -> np.ndarray:
    """Regularised covariance of warm-up draws (steps, chains, ...) after the first ``skip`` steps.

    All chains pooled, shrunk towards 10⁻³·I as Stan does: n/(n + 5)·Σ̂ + 10⁻³·5/(n + 5)·I.
    """
    # flattened on the host (an eager vmap of ravel_pytree compiled reshape and concatenate programs in every run
    # that adapts its covariance: sample_tall's random-walk fallback among them)
    flat = flat_positions.flat_draws(positions)
    draws = flat[skip:].reshape(-1, flat.shape[-1])
    count = draws.shape[0]
    estimate = np.atleast_2d(np.cov(draws, rowvar=False))
    return count / (count + 5.0) * estimate + 1e-3 * 5.0 / (count + 5.0) * np.eye(estimate.shape[0])


def _adapting_arguments(plan: RunPlan, chain_keys: jax.Array) -> Callable:
    """``(states, adaptation, first, length) ->`` the arguments of an adapting tuned chunk."""
    unused = to_device(np.ones((chain_keys.shape[0],), np.float32))  # the kept draws' factors, unused while adapting

    def arguments(states, adaptation, first, length):
        return tuned_arguments(plan.data, states, adaptation, chain_keys, first, length, unused, True, plan.target)

    return arguments


def compile_warmup(
    model: Model,
    proposal: Proposal,
    test: AcceptanceTest,
    *,
    initial_positions: Position,
    num_warmup: int,
    num_chains: int,
    seed: int,
) -> bool:
    """Compile the chain program :func:`warmup` would run with these arguments, and run no step of it.

    For compiling ahead (``sample_tall`` does it in a thread while its setup passes run, from placeholders of the
    setup's values with the shapes the setup will give): the executable is offered under its program key
    (:mod:`tallmcmc.sampling.ahead`), and a later :func:`warmup` in this process whose chains' step traces to the
    same program takes it instead of compiling its own. The default shape of a warm-up only (one device, the
    vmapped driver, step-size adaptation without a covariance window); returns whether it compiled one (not where
    the program is kept on disk already: the warm-up loads it itself).
    """
    plan = _plan(
        model,
        proposal,
        test,
        None,
        initial_positions,
        num_warmup=num_warmup,
        num_chains=num_chains,
        seed=seed,
        progress=False,
        target_acceptance=None,
        adapt_covariance=False,
        driver="vmap",
        mesh=None,
        check_starts=False,
    )
    if not plan.adapt:
        return False
    states = plan.program.initialise(plan.data, plan.starts)
    # placeholder keys: the program depends on their type, shape and placement, not their values, and deriving the
    # real ones (RunPlan.chain_keys) compiles a program of its own on this thread's way to the compiler
    key_data = jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0)))
    placeholder_keys = jax.random.wrap_key_data(to_device(np.zeros((num_chains, *key_data.shape), key_data.dtype)))
    arguments = _adapting_arguments(plan, placeholder_keys)
    adaptation = DualAveraging.start(num_chains)
    return plan.program.compile_ahead(arguments(states, adaptation, 0, 0), warmup_chunk_length(plan, plan.num_warmup))


def _adaptive_warmup(
    program: ChainProgram, plan: RunPlan, states: MHState, chain_keys: jax.Array, steps: int, keep_going=None
):
    """Dual averaging of log(step-size factor) per chain (:mod:`tallmcmc.sampling.adaptation`), all chains in
    lockstep, in chunks of the program's tuned chunk (``ChainProgram.run_tuned_chunk``, adapting).

    The statistic is each step's acceptance indicator, or for a proposal that
    reports one its proxy acceptance (:func:`tallmcmc.sampling.adaptation.statistic`).
    Returns the states after warm-up, the per-chain factor exp(x̄) (the
    running average), the warm-up draws and infos (NumPy, ``(step, chain, …)``)
    and the seconds spent compiling (0 if the program had compiled its chunk).
    With ``keep_going`` each call of the chunk runs :data:`KEEP_GOING_STEPS`
    steps, and it stops after the call where ``keep_going`` returns ``False``.
    """
    adaptation = DualAveraging.start(chain_keys.shape[0])
    arguments = _adapting_arguments(plan, chain_keys)
    chunk = program.tuned_chunk(arguments(states, adaptation, 0, 0), warmup_chunk_length(plan, steps))
    # the compiled chunk runs any number of steps up to its length: asking every few steps compiles nothing more
    stride = chunk.length if keep_going is None else min(chunk.length, KEEP_GOING_STEPS)
    bar = progress_bar(steps, plan.progress, "warm-up")
    parts = []
    try:
        for first in range(0, steps, stride):
            length = min(stride, steps - first)
            (states, adaptation), draws = chunk.run(*arguments(states, adaptation, first, length))
            parts.append(jax.tree_util.tree_map(lambda leaf: leaf[:length], to_host(draws)))  # noqa: B023
            bar.update(length)
            if keep_going is not None and first + length < steps:
                if not keep_going(_statistics(*(info for _, info in parts))):
                    break
    finally:
        bar.close()
    draws = jax.tree_util.tree_map(lambda *leaves: np.concatenate(leaves, axis=0), *parts)
    log_factors = adaptation.log_factor_bar
    if getattr(log_factors, "is_fully_addressable", True):  # on the host: a few numbers, which jnp.exp would compile
        on_host = np.asarray(log_factors)
        factors = np.exp(on_host.astype(np.float64)).astype(on_host.dtype)
    else:  # split over processes: on the devices, where they are
        factors = jnp.exp(log_factors)
    return states, factors, draws, chunk.compile_seconds
