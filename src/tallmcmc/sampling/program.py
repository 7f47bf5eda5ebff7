"""The compiled pieces every driver and warm-up share: a chain's kernel, the chains' initial states, a chunk of
vmapped steps, and the tuned chunk that warm-up and the kept draws after it both run (:class:`ChainProgram`)."""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np

from tallmcmc import compiler_options, program_cache
from tallmcmc._device import to_device
from tallmcmc.acceptance.base import AcceptanceTest
from tallmcmc.kernel import Kernel, build_kernel
from tallmcmc.model import Model
from tallmcmc.program_cache import Traced
from tallmcmc.proposals.base import Proposal
from tallmcmc.sampling import ahead
from tallmcmc.sampling.adaptation import DualAveraging, adapts_on_proxy, statistic
from tallmcmc.sampling.adaptation import update as adaptation_update

__all__ = ["ChainProgram", "Traced", "TunedChunk", "chain_program", "compiled_length", "tuned"]

_log = logging.getLogger(__name__)


#: A tuned chunk's draws buffer is rounded up to a power of two of rows (:func:`compiled_length`) unless the rows
#: added would hold more than this many bytes; then it is compiled for the chunk's own length.
ROUNDING_BYTES_AT_MOST = 64 * 2**20


def compiled_length(length: int, bytes_per_step: int = 0) -> int:
    """The number of rows a tuned chunk of ``length`` steps is compiled for: ``length`` rounded up to a power of two
    (16 at least), or ``length`` itself where the added rows (``bytes_per_step`` each: every chain's position and
    step statistics) would hold more than :data:`ROUNDING_BYTES_AT_MOST`.

    The loop runs a traced number of steps up to its rows, so a run of 1,000 draws in 20 chunks (50 steps) and one of
    1,200 (60 steps) share one program of 64 rows, in this process and, through the programs kept on disk and JAX's
    persistent cache, in the next: a second run with another number of draws compiles nothing new."""
    rounded = max(16, 1 << max(0, int(length) - 1).bit_length())
    return rounded if (rounded - length) * bytes_per_step <= ROUNDING_BYTES_AT_MOST else int(length)


def _bytes_per_step(arguments: tuple) -> int:
    """The bytes one step adds to a tuned chunk's draws (:func:`bytes_per_draw` of the states' positions)."""
    return bytes_per_draw(arguments[1].position)


def bytes_per_draw(positions) -> int:
    """The bytes one draw of every chain at ``positions`` (each leaf's leading axis the chains) holds: the positions,
    and a 4-byte word per chain for each of a dozen step statistics (an upper estimate; the exact fields depend on
    the test)."""
    leaves = jax.tree_util.tree_leaves(positions)
    chains = int(np.shape(leaves[0])[0]) if leaves and np.ndim(leaves[0]) else 1
    return sum(int(np.prod(np.shape(leaf))) * np.dtype(leaf.dtype).itemsize for leaf in leaves) + 12 * 4 * chains


class TunedChunk(NamedTuple):
    """A compiled tuned chunk (:meth:`ChainProgram.tuned_chunk`): the executable, its length, its compile seconds
    (0 when an earlier call compiled it)."""

    run: Callable
    length: int
    compile_seconds: float


class ChainProgram(NamedTuple):
    """What a run of ``proposal`` and ``test`` on a model compiles.

    kernel_for
        ``kernel_for(data, factor=None, temperature=None) -> Kernel``: the
        kernel on ``data`` (the model's rows, or this device's block inside a
        mesh's ``shard_map``), with the proposal's step size times ``factor``
        and the model at ``temperature`` if given.
    initialise
        ``initialise(data, positions) -> MHState``, jitted (and mapped over
        the mesh), one state per chain.
    run_chunk
        ``run_chunk(data, states, chain_keys, step_indices, factors,
        schedule) -> (states, (positions, info))``: a ``lax.scan`` over
        ``step_indices``, every step vmapped across chains; step ``t`` of a
        chain uses the key ``fold_in(chain_key, t)``, so draws never depend on
        the chunking. Not jitted (the drivers compile it for their shapes).
    run_tuned_chunk
        ``run_tuned_chunk(length, one=None)(data, states, adaptation,
        chain_keys, first_step, num_steps, factors, adapting, target,
        constants=()) -> ((states, adaptation), (positions, info))``: with
        ``one`` (a :class:`Traced` step), the step replayed from that trace
        with ``constants`` for its constants, else traced from the kernel;
        ``num_steps ≤ length`` steps
        ``first_step, first_step + 1, …`` in a loop compiled once for
        ``length``, every chain's step size times ``factors`` or, while
        ``adapting`` (a traced flag), times exp(log ε) of its dual averaging
        ``adaptation``, which it then updates towards ``target``
        (:mod:`tallmcmc.sampling.adaptation`). The draws fill the first
        ``num_steps`` of ``length`` rows. Warm-up runs it adapting and the kept
        draws after it not adapting, so one compilation serves both
        (:meth:`tuned_chunk`).
    one_chain_step
        ``one_chain_step(arguments) -> Traced``: the step
        ``run_tuned_chunk``'s loop runs for ``arguments`` (its own), for one
        chain, traced unbatched with the data as an argument: what the loop
        replays and what keys the kept lowered loop
        (:mod:`tallmcmc.program_cache`).
    source
        ``(held, proposal, test, layout)``: what it was built from.
    compiled
        The tuned chunks compiled so far (see :meth:`tuned_chunk`).
    """

    kernel_for: Callable[..., Kernel]
    initialise: Callable
    run_chunk: Callable
    run_tuned_chunk: Callable[[int], Callable]
    one_chain_step: Callable[[tuple], Traced]
    source: tuple
    compiled: dict

    def serves(self, held: Model, proposal: Proposal, test: AcceptanceTest, layout) -> bool:
        """Whether this program is the one of ``held``, ``proposal`` and ``test`` without a mesh (so a run
        continuing a warm-up can use what its warm-up compiled)."""
        mine = self.source
        return layout is None and mine[3] is None and mine[0] is held and mine[1] is proposal and mine[2] is test

    def is_for(self, held: Model, proposal: Proposal, test: AcceptanceTest, layout) -> bool:
        """Whether this program was made for these very objects (mesh or not): its steps close over them."""
        return all(mine is given for mine, given in zip(self.source, (held, proposal, test, layout)))

    def tuned_chunk(self, arguments: tuple, length: int | None = None) -> TunedChunk:
        """The tuned chunk for ``arguments`` (``run_tuned_chunk``'s, after ``length``), compiled once per argument
        shapes: its length is that of the first compilation for these shapes (``length`` when given, which it must
        be then, rounded up by :func:`compiled_length`), so that warm-up and kept draws of any chunk lengths share
        one program, and so do runs of other numbers of draws."""
        signature = tuple((leaf.shape, leaf.dtype) for leaf in jax.tree_util.tree_leaves(arguments))
        key = (jax.tree_util.tree_structure(arguments), signature)
        if key in self.compiled:
            run, known = self.compiled[key]
            return TunedChunk(run, known, 0.0)
        if length is None:
            raise ValueError("the first tuned chunk for these shapes needs its length")
        length = compiled_length(length, _bytes_per_step(arguments))
        began = time.perf_counter()
        with _collector_paused():
            run = self._compile_tuned(arguments, length)
        self.compiled[key] = (run, length)
        return TunedChunk(run, length, time.perf_counter() - began)

    def compile_ahead(self, arguments: tuple, length: int) -> bool:
        """Compile the tuned chunk of ``length`` for ``arguments`` and offer it to other runs of this process under
        its program key (:mod:`tallmcmc.sampling.ahead`: a thread compiling from placeholders); ``False`` without
        compiling where the program is kept on disk already (the run that needs it loads it itself), on a mesh, or
        where it has no key."""
        if self.source[3] is not None:
            return False
        length = compiled_length(length, _bytes_per_step(arguments))
        loop, full, key, where, out_tree = self._prepared(arguments, length, needs_key=True)
        if key is None or (where is not None and program_cache.is_kept(key, where)):
            return False
        with ahead.announced(key):  # a warm-up that traces to this program waits for it rather than compiling it
            ahead.offer(key, self._compiled(loop, full, key, where, out_tree))
        return True

    def _prepared(self, arguments: tuple, length: int, needs_key: bool = False):
        """The loop around one chain's step traced once, its full arguments (the trace's constants last), its
        program key (``None`` if not needed: no cache folder, nothing on offer), the cache folder and the loop's
        output tree."""
        _, proposal, _, _ = self.source
        one = self.one_chain_step(arguments)
        loop = self.run_tuned_chunk(length, one)
        full = (*arguments, one.constants)
        where = program_cache.folder()
        key = None
        if needs_key or where is not None or ahead.offered():
            try:
                variant = (length, arguments[6] is None, adapts_on_proxy(proposal))
                key = program_cache.program_key(one.jaxpr, full, variant)
            except Exception as error:  # noqa: BLE001 - the program compiles without its key
                _log.debug("no program key: %s: %s", type(error).__name__, error)
        _, states, adaptation = arguments[:3]
        state, info = one.shapes
        out_tree = jax.tree_util.tree_structure(((states, adaptation), (state.position, info)))
        return loop, full, key, where, out_tree

    def _compiled(self, loop: Callable, full: tuple, key: str | None, where, out_tree) -> Any:
        """``loop`` compiled for ``full``: through the lowered program kept between processes where there is a cache
        folder and a key (:mod:`tallmcmc.program_cache`), else directly (and whenever keeping it fails: a
        host callback cannot be exported)."""
        return program_cache.compile_kept_or_direct(loop, full, out_tree, key, where, "chain program")

    def _compile_tuned(self, arguments: tuple, length: int) -> Callable:
        """``run_tuned_chunk(length)`` compiled for ``arguments``.

        Without a mesh, the loop replays one chain's step traced once (:class:`Traced`) and takes that trace's
        constants as an argument, so the lowered loop holds no value the setup computed. It is the executable a
        thread of this process compiled ahead under the same program key (:meth:`compile_ahead`), if one was
        offered or is being compiled, else :meth:`_compiled`. On a mesh the loop is traced from the kernel and
        compiled directly."""
        _, _, _, layout = self.source
        if layout is not None:
            return compiler_options.jit(self.run_tuned_chunk(length)).lower(*arguments).compile()
        loop, full, key, where, out_tree = self._prepared(arguments, length)
        compiled = None if key is None else ahead.take(key)
        if compiled is None:
            compiled = self._compiled(loop, full, key, where, out_tree)
        constants = full[-1]  # the trace's constants, on the device (``_prepared`` put them there)

        def run(*again):
            return compiled(*again, constants)

        return run


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector paused (if it was on) while JAX traces and lowers a chain program."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def traced_once(function: Callable, *arguments) -> tuple[Callable, Any]:
    """``function`` traced once at ``arguments``' types: a function that replays that trace (inlined in the
    calling trace, as ``function`` itself would be) and the shapes of its result (``jax.eval_shape``'s)."""
    traced = Traced.of(function, *arguments)
    return (lambda *again: traced.replay(traced.jaxpr.consts, *again)), traced.shapes


def tuned(held: Model, proposal: Proposal, data, factor=None, temperature=None) -> tuple[Model, Proposal]:
    """The model and proposal of one chain's step: ``held`` on ``data`` (at ``temperature`` if given) and
    ``proposal`` with its step size times ``factor`` (if given). Both drivers build their steps from it."""
    model = held.with_data(data)
    if temperature is not None:
        model = model.with_temperature(temperature)
    return model, proposal if factor is None else proposal.tune(factor)


def chain_program(held: Model, proposal: Proposal, test: AcceptanceTest, layout=None) -> ChainProgram:
    """The :class:`ChainProgram` of ``proposal`` and ``test`` on ``held`` (the model as seen inside the mesh)."""

    def kernel_for(data, factor=None, temperature=None):
        return build_kernel(*tuned(held, proposal, data, factor, temperature), test)

    def initialise(data, positions):
        return jax.vmap(kernel_for(data).init)(positions)

    def run_chunk(data, states, chain_keys, step_indices, factors, schedule=(None, None)):
        def one(carry, inputs):
            step_index, temperature, step_factor = inputs
            # each step's key depends only on (seed, chain, step index), never on the chunking
            keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(chain_keys, step_index)

            def chain_step(key, state, factor):
                if step_factor is not None:
                    factor = step_factor if factor is None else factor * step_factor
                return kernel_for(data, factor, temperature).step(key, state)

            step = jax.vmap(chain_step, in_axes=(0, 0, 0 if factors is not None else None))
            carry, info = step(keys, carry, factors)
            return carry, (carry.position, info)

        return jax.lax.scan(one, states, (step_indices, *schedule))

    on_proxy = adapts_on_proxy(proposal)

    def run_tuned_chunk(length: int, one: Traced | None = None):
        def run(data, states, adaptation, chain_keys, first_step, num_steps, factors, adapting, target, constants=()):
            def kernel_step(key, state, factor):
                if one is not None:  # replayed from its trace, the trace's constants the loop's argument
                    return one.replay(constants, data, key, state, factor)
                return kernel_for(data, factor).step(key, state)

            def step(states, adaptation, step_index):
                keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(chain_keys, step_index)
                if factors is None:  # a run without step-size factors: the plain step, nothing adapted
                    states, info = jax.vmap(lambda key, state: kernel_step(key, state, None))(keys, states)
                    return states, adaptation, (states.position, info)
                factor = jnp.where(adapting, jnp.exp(adaptation.log_factor), factors)
                states, info = jax.vmap(kernel_step)(keys, states, factor)
                updated = adaptation_update(
                    adaptation, step_index, statistic(info, on_proxy), target, proposal.max_step_factor
                )
                kept = jax.tree_util.tree_map(lambda new, old: jnp.where(adapting, new, old), updated, adaptation)
                return states, kept, (states.position, info)

            # traced once: the draws' shapes and the loop's body come from one trace of the step (tracing it for
            # each, or calling it as a nested jit, cost 0.2-0.3 s more of a first and of every later run)
            first_index = first_step.astype(jnp.uint32)
            step, shapes = traced_once(step, states, adaptation, first_index)
            shapes = shapes[2]
            draws = jax.tree_util.tree_map(lambda leaf: jnp.zeros((length, *leaf.shape), leaf.dtype), shapes)

            def body(i, carry):  # a loop of num_steps (traced) steps: one compiled program for any chunk ≤ length
                states, adaptation, draws = carry
                states, adaptation, drawn = step(states, adaptation, first_index + i.astype(jnp.uint32))
                draws = jax.tree_util.tree_map(lambda all_, one: all_.at[i].set(one), draws, drawn)
                return states, adaptation, draws

            states, adaptation, draws = jax.lax.fori_loop(0, num_steps, body, (states, adaptation, draws))
            return (states, adaptation), draws

        if layout is None:
            return run
        kinds = ("data", "state", "chains", "chains", "replicated", "replicated", "chains", "replicated", "replicated")
        return layout.shard_map(run, kinds, (("state", "chains"), "draws"))

    def one_chain_step(arguments):
        data, states, _, chain_keys, _, _, factors = arguments[:7]

        def shapes(tree, drop: int):
            return jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[drop:], leaf.dtype), tree)

        factor = None if factors is None else jax.ShapeDtypeStruct((), factors.dtype)
        one = (shapes(data, 0), shapes(chain_keys, 1), shapes(states, 1), factor)
        return Traced.of(lambda data, key, state, factor: kernel_for(data, factor).step(key, state), *one)

    if layout is None:
        initialise = compiler_options.jit(initialise)
    else:
        initialise = compiler_options.jit(layout.shard_map(initialise, ("data", "chains"), "state"))
        run_chunk = layout.shard_map(
            run_chunk, ("data", "state", "chains", "replicated", "chains", "replicated"), ("state", "draws")
        )
    return ChainProgram(
        kernel_for, initialise, run_chunk, run_tuned_chunk, one_chain_step, (held, proposal, test, layout), {}
    )


def tuned_arguments(
    data,
    states,
    adaptation: DualAveraging,
    chain_keys,
    first_step: int,
    num_steps: int,
    factors,
    adapting: bool,
    target: float,
) -> tuple[Any, ...]:
    """``run_tuned_chunk``'s arguments, the scalars as the arrays it is compiled for."""
    return (
        data,
        states,
        adaptation,
        chain_keys,
        to_device(first_step, np.uint32),  # transfers, not compiled conversions (tallmcmc._device)
        to_device(num_steps, np.int32),
        factors,
        to_device(adapting, bool),
        to_device(target, np.float32),
    )
