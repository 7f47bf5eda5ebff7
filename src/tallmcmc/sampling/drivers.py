"""The drivers that run a batch of chains: both take a :class:`DriverCall` and return a :class:`DriverOutput`.

* ``"vmap"`` (:func:`run_vmapped`): every step vmapped across chains, compiled as a ``lax.scan`` over a chunk of
  steps and run chunk after chunk (for the progress bar and to move draws off the device as they come).
* ``"asynchronous"`` (:func:`tallmcmc.sampling.asynchronous.run_asynchronous`): each chain starts its next step as
  soon as its own test has decided.

Both use the key ``fold_in(fold_in(key(seed), chain), t)`` for step ``t`` of a chain and the same operations, so they
give the same draws; which is faster when: ``docs/drivers.md``. :func:`choose_driver` is ``driver="auto"``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from tallmcmc import compiler_options
from tallmcmc.acceptance.base import AcceptanceTest, has_step_machine
from tallmcmc.kernel import MHInfo, MHState
from tallmcmc.model import Model, Position
from tallmcmc.proposals.base import Proposal
from tallmcmc.sampling.adaptation import DualAveraging
from tallmcmc.sampling.program import ChainProgram, chain_program, tuned_arguments
from tallmcmc.sampling.schedule import Schedule
from tallmcmc.sharding import to_host

__all__ = ["AUTO_ASYNCHRONOUS_CHAINS", "DRIVERS", "DriverCall", "DriverOutput", "choose_driver", "run_vmapped"]

DRIVERS = ("vmap", "asynchronous")
#: ``driver="auto"`` runs the asynchronous driver from this many chains per loop (per device of a ``"chains"``
#: mesh) on (``docs/drivers.md`` has the measurement behind it).
AUTO_ASYNCHRONOUS_CHAINS = 8


class DriverCall(NamedTuple):
    """What a driver runs: ``num_steps`` steps of every chain from ``states``.

    held
        The model as seen inside the mesh's ``shard_map`` (with its shards), or the model.
    proposal, test
        The kernel's parts (the proposal as given: ``factors`` tune it per chain).
    data, layout
        The data as laid out (over the mesh, with ``layout`` its
        :class:`~tallmcmc.sharding.MeshLayout`, or ``None``).
    states, chain_keys, factors
        Per chain: the start states, the keys ``fold_in(key, chain)`` of the
        stream, and step-size factors (or ``None``).
    lengths
        The chunks of steps, summing to the number of steps; the vmapped driver
        compiles one ``lax.scan`` per distinct length, the asynchronous one
        returns to the host after each.
    schedule
        Temperatures and step-size factors per step (:class:`Schedule`).
    dtype
        Of the schedules' values.
    bar, description
        A progress bar (``update``, ``set_description``, ``close``) and its label.
    first_step
        Steps these chains have already made: step ``t`` of this call uses the
        key of step ``first_step + t`` (a continued run draws what one longer
        run would have).
    level_at, on_level
        ``level_at(steps)``, asked before each chunk that ends before the
        last step: whether every chain must end it having made exactly
        ``steps`` steps, and ``on_level(steps, states, positions, info)`` be
        called with the chains' states and the draws so far (e.g. to write a
        checkpoint). The vmapped driver's chains are always level; the
        asynchronous driver's chains otherwise run ahead of each other.
    program
        The :class:`~tallmcmc.sampling.program.ChainProgram` of ``held``,
        ``proposal``, ``test`` and ``layout`` to run, with what it has
        compiled (a warm-up's); ``None`` (or a program of other objects: a
        proposal whose covariance a warm-up adapted) builds one (the vmapped
        driver) or keeps nothing in the process (the asynchronous one).
    rows
        The asynchronous driver's draws' buffers' rows (at least ``num_steps``;
        a plan's warm-up and kept draws pass the same, so that they share a
        program); 0: the call's own.
    """

    held: Model
    proposal: Proposal
    test: AcceptanceTest
    data: Any
    layout: Any
    states: MHState
    chain_keys: jax.Array
    factors: jax.Array | None
    lengths: list[int]
    schedule: Schedule
    dtype: Any
    bar: Any
    description: str
    first_step: int = 0
    level_at: Callable[[int], bool] | None = None
    on_level: Callable[..., None] | None = None
    program: ChainProgram | None = None
    rows: int = 0

    @property
    def num_steps(self) -> int:
        return int(sum(self.lengths))


class DriverOutput(NamedTuple):
    """What a driver returns.

    states
        The chains' last states (with a mesh, the layout's ``"state"`` form),
        after exactly as many steps as there are draws; ``None`` if an
        interrupted asynchronous run could not bring its chains level.
    positions, info
        The draws and each step's :class:`~tallmcmc.kernel.MHInfo` fields,
        NumPy arrays ``(chain, draw, …)``; fewer draws than asked if interrupted.
    compile_seconds, sampling_seconds
        Compiling, and running (compilation excluded).
    loop_iterations
        The asynchronous driver's vectorised loop iterations (``None`` for vmap).
    adapted_factors
        Each chain's exp(log ε̄) after an adaptive warm-up (``None`` otherwise).
    """

    states: MHState
    positions: Position
    info: dict[str, np.ndarray]
    compile_seconds: float
    sampling_seconds: float
    loop_iterations: int | None = None
    adapted_factors: jax.Array | None = None


def choose_driver(test: AcceptanceTest, num_chains: int, chain_shards: int = 1) -> str:
    """The driver ``sample(..., driver="auto")`` runs: ``"asynchronous"`` or ``"vmap"``.

    ``"asynchronous"`` for a test that decides chunk by chunk (it has a
    :class:`~tallmcmc.acceptance.base.StepMachine`: the minibatch Barker
    test, AustereMH and its designs, MHSubLhd, TunaMH) when each loop runs at
    least :data:`AUTO_ASYNCHRONOUS_CHAINS` chains (``num_chains /
    chain_shards``, the chains per device of a ``"chains"`` mesh); otherwise
    ``"vmap"``: one chain, few chains, and full-data tests gain nothing from
    the asynchronous loop. Both drivers give the same draws, so the choice
    changes only the time (and the asynchronous driver keeps the draws on the
    device until the run ends). A rule of thumb measured on a 2-core CPU, with
    one known exception (``docs/drivers.md``).
    """
    if has_step_machine(test) and num_chains // max(1, chain_shards) >= AUTO_ASYNCHRONOUS_CHAINS:
        return "asynchronous"
    return "vmap"


def run_vmapped(call: DriverCall) -> DriverOutput:
    """The steps with every step vmapped across chains, in ``lax.scan`` chunks of ``call.lengths``.

    Without a schedule the chunks run the program's tuned chunk, not
    adapting — one compiled loop of a traced number of steps for chunks of
    any length up to its own (longer ones are split): after an adaptive
    warm-up, the program warm-up compiled (``call.program``), so the run
    compiles nothing more; without step-size factors, the plain step (on a
    mesh, the scan below). With a schedule, ``lax.scan`` chunks, one
    compilation per distinct length. Interrupted (Ctrl-C) after at least
    one chunk, it returns the draws made so far with a warning.
    """
    program = call.program
    if program is None or not program.is_for(call.held, call.proposal, call.test, call.layout):
        # e.g. a warm-up on a mesh adapted the proposal's covariance: the plan's program has the proposal before it
        program = chain_program(call.held, call.proposal, call.test, call.layout)
    states, factors, bar = call.states, call.factors, call.bar
    # one compiled loop of a traced number of steps serves chunks of every length (the plain scan compiles once
    # per distinct length); with a schedule, or without factors on a mesh, the scan
    tuned = (
        call.schedule.temperatures is None
        and call.schedule.step_factors is None
        and (factors is not None or call.layout is None)
    )
    compiled: dict[int, Any] = {}
    compile_seconds = 0.0
    sampling_seconds = 0.0
    positions_parts: list[Any] = []
    info_parts: list[MHInfo] = []
    lengths = list(call.lengths)
    if tuned:
        adaptation = DualAveraging.start(call.chain_keys.shape[0])  # carried, not used: the factors are fixed

        def arguments(states, first, length):
            return tuned_arguments(call.data, states, adaptation, call.chain_keys, first, length, factors, False, 0.0)

        bar.set_description(f"compiling {call.test.name}")
        chunk = program.tuned_chunk(arguments(states, call.first_step, 0), max(lengths))
        bar.set_description(call.description)
        compile_seconds += chunk.compile_seconds
        lengths = [piece for length in lengths for piece in _pieces(length, chunk.length)]
    done = 0
    try:
        for length in lengths:
            first = call.first_step + done
            began = time.perf_counter()
            if tuned:
                (following, _), (positions, info) = chunk.run(*arguments(states, first, length))
            else:
                step_indices = jnp.arange(first, first + length, dtype=jnp.uint32)
                schedule = call.schedule.window(done, length, call.dtype)
                if length not in compiled:
                    bar.set_description(f"compiling {call.test.name}")
                    compiled[length] = (
                        compiler_options.jit(program.run_chunk)
                        .lower(call.data, states, call.chain_keys, step_indices, factors, schedule)
                        .compile()
                    )
                    compile_seconds += time.perf_counter() - began
                    bar.set_description(call.description)
                    began = time.perf_counter()
                following, (positions, info) = compiled[length](
                    call.data, states, call.chain_keys, step_indices, factors, schedule
                )
            jax.block_until_ready(following)
            sampling_seconds += time.perf_counter() - began
            positions, info = jax.tree_util.tree_map(lambda leaf: leaf[:length], to_host((positions, info)))  # noqa: B023
            # the states and the draws move on together, so that an interrupt leaves them consistent
            states = following
            positions_parts.append(positions)
            info_parts.append(info)
            bar.update(length)
            done += length
            if call.on_level is not None and done < call.num_steps and call.level_at(done):
                call.on_level(done, states, *_stacked(positions_parts, info_parts))
    except KeyboardInterrupt:
        if not info_parts:
            raise
        done = sum(part.accepted.shape[0] for part in info_parts)
        warnings.warn(
            f"interrupted: returning the {done} of {call.num_steps} draws per chain made so far", stacklevel=4
        )
    finally:
        bar.close()
    positions, info = _stacked(positions_parts, info_parts)
    return DriverOutput(states, positions, info, compile_seconds, sampling_seconds)


def _pieces(length: int, most: int) -> list[int]:
    """``length`` steps as chunks of at most ``most``."""
    return [most] * (length // most) + ([length % most] if length % most else [])


def _stacked(positions_parts: list, info_parts: list) -> tuple[Position, dict[str, np.ndarray]]:
    """The chunks' draws and step statistics joined, ``(chain, draw, …)`` (a scan stacks ``(draw, chain, …)``)."""

    def stack(*parts):
        return np.swapaxes(np.concatenate(parts, axis=0), 0, 1)

    positions = jax.tree_util.tree_map(stack, *positions_parts)
    return positions, {name: stack(*(getattr(part, name) for part in info_parts)) for name in MHInfo._fields}


class NoBar:
    """A progress bar that shows nothing."""

    def update(self, n: int) -> None:
        pass

    def set_description(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


class HeldBar:
    """A progress bar that several runs advance in turn (``sample_tall``'s kept draws, run in segments): each run
    updates it and sets its label, none closes it, and whoever made it calls :meth:`finish` (or holds it in a
    ``with`` block, which does). Pass it as ``sample``'s ``progress``."""

    def __init__(self, total: int, description: str):
        self._bar = tqdm(total=total, desc=description, unit="step", leave=False)

    def update(self, n: int) -> None:
        self._bar.update(n)

    def set_description(self, text: str) -> None:
        self._bar.set_description(text)

    def close(self) -> None:
        """A run's end: the bar stays for the next."""

    def finish(self) -> None:
        self._bar.close()

    def __enter__(self) -> HeldBar:
        return self

    def __exit__(self, *_) -> None:
        self.finish()


def progress_bar(total: int, enabled: bool | HeldBar, description: str):
    """A tqdm bar over ``total`` steps, the :class:`HeldBar` given, or :class:`NoBar`."""
    if isinstance(enabled, HeldBar):
        return enabled
    if not enabled:
        return NoBar()
    return tqdm(total=total, desc=description, unit="step", leave=False)
