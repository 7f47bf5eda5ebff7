"""The chain-asynchronous driver: each chain starts its next step as soon as its own test has decided.

Under ``vmap`` a growing-minibatch test's ``lax.while_loop`` runs every chain
until the largest minibatch of that step is done, and the minibatch sizes
are heavy-tailed, so a batch of chains moves at the pace of its slowest
member at every step. Here one vectorised ``lax.while_loop`` iteration
advances every chain's test by one chunk of data (the test's
:class:`~tallmcmc.acceptance.base.StepMachine`); a chain whose test has
decided accepts or rejects, writes its draw into the output at its own step
index ``t`` and starts step ``t + 1`` at once, without waiting for the others.

Each chain's step ``t`` uses the key ``fold_in(fold_in(key(seed), chain), t)``,
as the vmapped driver (:func:`tallmcmc.sampling.drivers.run_vmapped`) does, and runs the same
operations (propose, prior, offset, the machine's ``start``/``advance``/
``finish``, choose) as :func:`tallmcmc.build_kernel`'s ``step``, so a chain's
draws depend neither on the other chains nor on how many there are.
:func:`step_parts` is that step cut into pieces; its ``step`` is checked
against ``build_kernel`` in the tests.

Tests without a machine of their own (the full-data tests, any test whose
``decide`` was replaced by a wrapper) run through the one-shot machine of
:func:`~tallmcmc.acceptance.base.machine_of`: one iteration per step, as in
lockstep.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from tallmcmc import compiler_options, program_cache
from tallmcmc._device import to_device
from tallmcmc.acceptance.base import AcceptanceTest, Workspace, is_workspace, machine_of
from tallmcmc.kernel import MHInfo, MHState, ProposedStep, conclude_step, propose_step
from tallmcmc.model import Model, Position
from tallmcmc.program_cache import Traced
from tallmcmc.proposals.base import Proposal
from tallmcmc.sampling.adaptation import DualAveraging, adapts_on_proxy, statistic
from tallmcmc.sampling.adaptation import update as adaptation_update
from tallmcmc.sampling.drivers import DriverCall, DriverOutput
from tallmcmc.sampling.program import bytes_per_draw, compiled_length, tuned
from tallmcmc.sharding import to_host


class InFlight(NamedTuple):
    """A step under way: the proposal (θ′, its log-prior, the data-free part of Δ) and the test's state."""

    proposed: ProposedStep
    test_state: Any


class StepParts(NamedTuple):
    """One Metropolis–Hastings step cut at the test's chunks (see :func:`step_parts`)."""

    begin: Callable[[jax.Array, MHState], InFlight]
    advance: Callable[[InFlight, MHState], InFlight]
    done: Callable[[InFlight], jax.Array]
    end: Callable[[InFlight, MHState], tuple[MHState, MHInfo]]
    step: Callable[[jax.Array, MHState], tuple[MHState, MHInfo]]


def step_parts(model: Model, proposal: Proposal, test: AcceptanceTest) -> StepParts:
    """The step of :func:`tallmcmc.build_kernel` as ``begin``, ``advance`` (one chunk), ``done``, ``end``.

    ``begin(rng_key, state)`` splits the key, proposes, evaluates the prior
    and the offset and starts the test; ``advance(flight, state)`` runs one
    chunk of the test; ``end(flight, state) -> (state, info)`` finishes the
    test and accepts or rejects. ``step`` runs them in a ``lax.while_loop``
    and equals ``build_kernel(model, proposal, test).step``.
    """
    machine = machine_of(test)

    def begin(rng_key: jax.Array, state: MHState) -> InFlight:
        test_key, proposed = propose_step(model, proposal, rng_key, state)
        test_state = machine.start(test_key, model, state.position, proposed.position, proposed.offset, state.cache)
        return InFlight(proposed, test_state)

    def advance(flight: InFlight, state: MHState) -> InFlight:
        proposed = flight.proposed
        test_state = machine.advance(
            flight.test_state, model, state.position, proposed.position, proposed.offset, state.cache
        )
        return flight._replace(test_state=test_state)

    def done(flight: InFlight) -> jax.Array:
        return machine.done(flight.test_state)

    def end(flight: InFlight, state: MHState) -> tuple[MHState, MHInfo]:
        proposed = flight.proposed
        decision = machine.finish(
            flight.test_state, model, state.position, proposed.position, proposed.offset, state.cache
        )
        return conclude_step(test, state, proposed, decision)

    def step(rng_key: jax.Array, state: MHState) -> tuple[MHState, MHInfo]:
        flight = begin(rng_key, state)
        flight = lax.while_loop(lambda f: ~done(f), lambda f: advance(f, state), flight)
        return end(flight, state)

    return StepParts(begin, advance, done, end, step)


def step_key(chain_key: jax.Array, step: jax.Array) -> jax.Array:
    """The key of a chain's step ``step``: ``fold_in(chain_key, step)``, as :func:`tallmcmc.sample`'s vmapped driver."""
    return jax.random.fold_in(chain_key, step.astype(jnp.uint32))


class AsyncCarry(NamedTuple):
    """What the asynchronous loop carries: per chain (leading axis) the state, the step in flight,
    its index ``step`` (= draws recorded so far), the output buffers ``(chain, draw, ...)``, the
    number of loop ``iterations`` made (one chunk each) and, in an adaptive warm-up, each chain's
    :class:`~tallmcmc.sampling.adaptation.DualAveraging` state (else ``None``)."""

    state: MHState
    flight: InFlight
    step: jax.Array
    positions: Position
    info: MHInfo
    iterations: jax.Array
    adaptation: DualAveraging | None = None


def _select(mask: jax.Array, new, old, *, restart: bool = False):
    """Per chain (leading axis), ``new`` where ``mask`` else ``old``, for every leaf.

    With ``restart`` (``new`` a freshly begun step), a
    :class:`~tallmcmc.acceptance.base.Workspace` keeps ``old``: its stale
    contents are never read, so the restarted step may reuse the old array
    (and a pass over it is saved).
    """

    def pick(a, b):
        if is_workspace(a):
            return b if restart else Workspace(pick(a.values, b.values))
        shaped = mask.reshape(mask.shape + (1,) * (jnp.ndim(a) - 1))
        if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            return jax.random.wrap_key_data(
                jnp.where(shaped[..., None], jax.random.key_data(a), jax.random.key_data(b)),
                impl=jax.random.key_impl(a),
            )
        return jnp.where(shaped, a, b)

    return jax.tree_util.tree_map(pick, new, old, is_leaf=is_workspace)


def asynchronous_runner(
    model: Model,
    proposal: Proposal,
    test: AcceptanceTest,
    rows: int,
    *,
    temperatures: jax.Array | None = None,
    step_factors: jax.Array | None = None,
    tuned_steps: bool = False,
):
    """The ``initialise`` and ``run`` functions of the asynchronous driver (to be jitted).

    ``initialise(data, states, chain_keys, factors, first_step, adapting) -> AsyncCarry``
    starts step 0 of every chain; ``run(data, carry, chain_keys, factors,
    first_step, until, limit, total, adapting, target) -> AsyncCarry`` iterates until every chain has
    recorded at least ``until`` draws, while chains ahead keep going up to
    ``limit`` draws (``limit = until`` leaves every chain at exactly ``until``
    draws: the chains are *level*, and their states can be saved and resumed;
    ``limit = total`` lets them run ahead); ``total`` is the run's number of draws, at most ``rows``, the
    draws' buffers' length (a compiled length, :func:`tallmcmc.sampling.program.compiled_length`, so that runs of
    other numbers of draws share the program). Draw ``t`` of a chain uses
    the key ``fold_in(chain_key, first_step + t)``: a run that continues
    chains which have made ``first_step`` steps passes it. ``temperatures`` and ``step_factors`` are per-step
    schedules of ``rows`` values (the run's own, padded with its last) or ``None``.

    With ``tuned_steps``, ``factors`` (per-chain step-size factors) is an array and the carry holds each chain's
    :class:`~tallmcmc.sampling.adaptation.DualAveraging` state: where the traced ``adapting`` is true (a warm-up),
    each chain's factor is adapted by dual averaging towards the acceptance rate ``target`` as its own steps finish
    (:mod:`tallmcmc.sampling.adaptation`, the same update as the lockstep warm-up) and ``factors`` is not read;
    where it is false (the kept draws), ``factors`` tune the steps. So a warm-up and its kept draws run one
    program, as the vmapped driver's do. Without ``tuned_steps``, ``factors`` is ``None``, the carry holds no
    adaptation, and ``adapting`` and ``target`` are not read.
    """
    machine = machine_of(test)
    on_proxy = adapts_on_proxy(proposal)

    def current_factors(adaptation, factors, adapting):
        return jnp.where(adapting, jnp.exp(adaptation.log_factor), factors) if tuned_steps else factors

    def parts_for(data, factor, step, total):
        # the same kernel the vmapped driver builds for this chain and step
        index = jnp.minimum(step, total - 1)
        temperature = None if temperatures is None else temperatures[index]
        step_factor = None if step_factors is None else step_factors[index]
        if step_factor is not None:
            factor = step_factor if factor is None else factor * step_factor
        return step_parts(*tuned(model, proposal, data, factor, temperature), test)

    def per_chain(function, factors):
        return jax.vmap(function, in_axes=(0, 0, 0, 0 if factors is not None else None))

    def begin_all(data, keys, states, steps, factors, total):
        def one(key, state, step, factor):
            return parts_for(data, factor, step, total).begin(key, state)

        return per_chain(one, factors)(keys, states, steps, factors)

    def keys_at(chain_keys, steps, first_step):
        return jax.vmap(step_key)(chain_keys, steps + first_step)

    def begin_chosen(data, chain_keys, states, steps, factors, chosen, flight, first_step, total):
        # One chain at a time, only the chosen ones: for a test whose ``start`` is a full pass, which
        # ``begin_all`` would make for every chain at every iteration where any chain finishes.
        order = jnp.nonzero(chosen, size=chosen.shape[0], fill_value=0)[0]

        def begin_one(i, flight):
            chain = order[i]
            here = jax.tree_util.tree_map(lambda leaf: leaf[chain], (chain_keys, states, steps, factors))
            key, state, step, factor = here
            began = parts_for(data, factor, step, total).begin(step_key(key, step + first_step), state)
            return jax.tree_util.tree_map(lambda leaf, value: leaf.at[chain].set(value), flight, began)

        return lax.fori_loop(0, jnp.sum(chosen, dtype=jnp.int32), begin_one, flight)

    def initialise(data, states, chain_keys, factors, first_step, adapting) -> AsyncCarry:
        num_chains = chain_keys.shape[0]
        steps = jnp.zeros((num_chains,), jnp.int32)
        total = jnp.int32(rows)  # step 0's schedule entry whatever the run's length
        adaptation = DualAveraging.start(num_chains) if tuned_steps else None
        factors = current_factors(adaptation, factors, adapting)
        flight = begin_all(data, keys_at(chain_keys, steps, first_step), states, steps, factors, total)

        def end_one(flight, state, step, factor):
            return parts_for(data, factor, step, total).end(flight, state)

        shapes = jax.eval_shape(lambda: per_chain(end_one, factors)(flight, states, steps, factors))
        buffers = jax.tree_util.tree_map(
            lambda leaf: jnp.zeros((num_chains, rows) + leaf.shape[1:], leaf.dtype), shapes
        )
        new_state, info = buffers
        return AsyncCarry(states, flight, steps, new_state.position, info, jnp.zeros((), jnp.int32), adaptation)

    def run(
        data, carry: AsyncCarry, chain_keys, factors, first_step, until, limit, total, adapting, target
    ) -> AsyncCarry:
        num_chains = chain_keys.shape[0]
        chains = jnp.arange(num_chains)

        def advance_one(flight, state, step, factor):
            return parts_for(data, factor, step, total).advance(flight, state)

        def end_one(flight, state, step, factor):
            return parts_for(data, factor, step, total).end(flight, state)

        def finish(carry: AsyncCarry, finished) -> AsyncCarry:
            factors_now = current_factors(carry.adaptation, factors, adapting)
            new_state, info = per_chain(end_one, factors_now)(carry.flight, carry.state, carry.step, factors_now)
            at = jnp.where(finished, carry.step, rows)  # out of range: dropped

            def record(buffer, value):
                return buffer.at[chains, at].set(value, mode="drop")

            positions = jax.tree_util.tree_map(record, carry.positions, new_state.position)
            infos = jax.tree_util.tree_map(record, carry.info, info)
            state = _select(finished, new_state, carry.state)
            adaptation = carry.adaptation
            if tuned_steps:
                updated = adaptation_update(
                    adaptation, carry.step, statistic(info, on_proxy), target, proposal.max_step_factor
                )
                adaptation = _select(finished & adapting, updated, adaptation)
            step = carry.step + finished.astype(jnp.int32)
            factors_next = current_factors(adaptation, factors, adapting)
            starting = finished & (step < total)
            if machine.start_is_full_pass:
                flight = begin_chosen(
                    data, chain_keys, state, step, factors_next, starting, carry.flight, first_step, total
                )
            else:
                following = begin_all(data, keys_at(chain_keys, step, first_step), state, step, factors_next, total)
                flight = _select(starting, following, carry.flight, restart=True)
            return carry._replace(
                state=state, flight=flight, step=step, positions=positions, info=infos, adaptation=adaptation
            )

        def body(carry: AsyncCarry) -> AsyncCarry:
            active = carry.step < limit  # a chain at the limit waits, its next step begun (not advanced)
            running = active & ~jax.vmap(machine.done)(carry.flight.test_state)
            factors_now = current_factors(carry.adaptation, factors, adapting)
            advanced = per_chain(advance_one, factors_now)(carry.flight, carry.state, carry.step, factors_now)
            # a machine that idles once done needs no mask (finished and parked chains are done)
            flight = advanced if machine.idle_when_done else _select(running, advanced, carry.flight)
            finished = active & jax.vmap(machine.done)(flight.test_state)
            carry = carry._replace(flight=flight, iterations=carry.iterations + 1)
            return lax.cond(jnp.any(finished), finish, lambda c, f: c, carry, finished)

        return lax.while_loop(lambda c: jnp.any(c.step < until), body, carry)

    return initialise, run


def run_asynchronous(call: DriverCall, adapt_target: float | None = None) -> DriverOutput:
    """Run ``call``'s steps, kept draws or a warm-up, with the asynchronous driver.

    With a layout (``call.layout``, a :class:`tallmcmc.sharding.MeshLayout`;
    ``call.held`` then carries its shards and ``call.data`` is laid out over
    the mesh), the loop runs on every device of the mesh over its own chains
    and rows: each device's loop waits only for its own chains, and devices
    that share chains (a ``"data"`` axis) make the same iterations, since
    their exact collectives give them the same values. ``call.states`` then
    has the layout's ``"state"`` form (a leading axis of one copy per data
    shard), as has the returned state. The loop returns to the host when every
    chain has reached the end of each of ``call.lengths``' chunks.

    With ``adapt_target``, each chain adapts its step-size factor as its
    steps finish (see :func:`asynchronous_runner`; ``call.factors`` must be
    ``None``). A warm-up that adapts and kept draws with step-size factors run one program (``tuned_steps``), and
    the draws' buffers have ``call.rows`` rows (at least the call's steps; rounded up as
    :func:`buffer_rows` does), so that a plan's warm-up and kept draws, and runs of other numbers of draws, share
    it: compiled once in the process (kept on ``call.program``) and once across processes (kept on disk). The
    output's ``loop_iterations`` is the most any device made
    (one chunk of data each); interrupted (Ctrl-C) after a return to the host,
    it holds the draws every chain has, with a warning.
    """
    model, proposal, test, states = call.held, call.proposal, call.test, call.states
    chain_keys, factors, bar, description = call.chain_keys, call.factors, call.bar, call.description
    num_samples = call.num_steps
    ends = [int(end) for end in np.cumsum(call.lengths)]
    dtype, data, layout = call.dtype, call.data, call.layout
    rows = call.rows if call.rows >= num_samples else buffer_rows(num_samples, states.position)
    schedule = [None if values is None else _padded(values, rows, dtype) for values in call.schedule]
    adapting = adapt_target is not None
    tuned_steps = adapting or factors is not None
    if adapting:
        if factors is not None:
            raise ValueError("an adaptive warm-up starts from no step-size factors (call.factors must be None)")
        factors = to_device(np.ones(chain_keys.shape[0], np.float32))  # not read while adapting
    compile_seconds = sampling_seconds = 0.0
    if bar is not None:
        bar.set_description(f"compiling {test.name}")
    began = time.perf_counter()
    first_step = jnp.asarray(call.first_step, jnp.int32)
    adapting_flag = to_device(adapting, bool)
    target = to_device(0.0 if adapt_target is None else adapt_target, np.float32)
    zero = jnp.asarray(0, jnp.int32)
    kept = _kept_programs(call) if all(values is None for values in schedule) else {}
    shapes = tuple((np.shape(leaf), str(leaf.dtype)) for leaf in jax.tree_util.tree_leaves((data, states, factors)))
    memo = ("asynchronous driver", rows, tuned_steps, jax.tree_util.tree_structure((data, states, factors)), shapes)
    carry = None
    if memo not in kept:
        initialise, run = asynchronous_runner(
            model, proposal, test, rows, temperatures=schedule[0], step_factors=schedule[1], tuned_steps=tuned_steps
        )
        if layout is not None:
            initialise, run = _on_mesh(layout, initialise, run)
        initialise = _compiled(
            initialise, layout, "initialise", data, states, chain_keys, factors, first_step, adapting_flag
        )
        carry = initialise(data, states, chain_keys, factors, first_step, adapting_flag)
        run = _compiled(
            run, layout, "run", data, carry, chain_keys, factors, first_step, zero, zero, zero, adapting_flag, target
        )
        kept[memo] = (initialise, run)
    initialise, run = kept[memo]
    if carry is None:
        carry = initialise(data, states, chain_keys, factors, first_step, adapting_flag)
    compile_seconds += time.perf_counter() - began
    if bar is not None:
        bar.set_description(description)

    total = jnp.asarray(num_samples, jnp.int32)

    def advance(carry, until: int, limit: int):
        return run(
            data,
            carry,
            chain_keys,
            factors,
            first_step,
            jnp.asarray(until, jnp.int32),
            jnp.asarray(limit, jnp.int32),
            total,
            adapting_flag,
            target,
        )

    recorded, level = 0, True  # draws every chain has made; whether every chain has made exactly that many
    try:
        for end in ends:
            wanted = call.on_level is not None and end < num_samples and call.level_at(end)
            levels_here = wanted or end == num_samples
            began = time.perf_counter()
            carry = advance(carry, end, end if levels_here else num_samples)
            reached = int(jnp.min(carry.step))  # blocks until the segment is done
            sampling_seconds += time.perf_counter() - began
            if bar is not None:
                bar.update(reached - recorded)
            recorded, level = reached, levels_here
            if wanted:
                call.on_level(end, carry.state, *_drawn(carry, layout, end))
    except KeyboardInterrupt:
        if recorded == 0:
            raise
        if not level:  # chains that ran ahead of the slowest: bring the others level with them, so the run resumes
            top = int(jnp.max(carry.step))
            warnings.warn(
                f"interrupted: bringing every chain to draw {top} so that the run can be resumed "
                "(Ctrl-C again to stop at once, not resumable)",
                stacklevel=4,
            )
            try:
                began = time.perf_counter()
                carry = advance(carry, top, top)
                recorded, level = int(jnp.min(carry.step)), True
                sampling_seconds += time.perf_counter() - began
            except KeyboardInterrupt:
                pass
        warnings.warn(
            f"interrupted: returning the {recorded} of {num_samples} draws per chain made so far"
            + ("" if level else " (the chains are not level: result.last_state is None, the run cannot be resumed)"),
            stacklevel=4,
        )
    finally:
        if bar is not None:
            bar.close()
    adapted = jnp.exp(carry.adaptation.log_factor_bar) if adapting else None
    if layout is not None and adapted is not None:
        adapted = jnp.asarray(np.asarray(to_host(adapted))[0])  # one copy per data shard, all equal
    iterations = to_host(carry.iterations)
    positions, info = _drawn(carry, layout, recorded)
    return DriverOutput(
        carry.state if level else None,
        positions,
        info,
        compile_seconds,
        sampling_seconds,
        int(np.max(iterations)),
        adapted,
    )


def _kept_programs(call: DriverCall) -> dict:
    """Where this process keeps the driver's compiled programs for ``call``: ``call.program``'s table if it is the
    program of ``call``'s model, proposal, test and layout (the very objects: the programs close over them), else a
    table of this call's own. Not used with schedules, whose values the programs hold."""
    program = call.program
    if program is None or not program.is_for(call.held, call.proposal, call.test, call.layout):
        return {}
    return program.compiled


def buffer_rows(steps: int, positions) -> int:
    """The rows of the asynchronous driver's draws' buffers for runs of up to ``steps`` draws of chains at
    ``positions`` (every leaf's leading axis the chains, or a copy per data shard then the chains on a mesh):
    :func:`~tallmcmc.sampling.program.compiled_length` of ``steps``, a row's bytes counted as the vmapped driver
    counts them (:func:`~tallmcmc.sampling.program.bytes_per_draw`)."""
    return compiled_length(steps, bytes_per_draw(positions))


def _padded(values, rows: int, dtype) -> jax.Array:
    """A per-step schedule of ``rows`` values: ``values`` and its last value repeated (never read: a chain's step
    reads the schedule at its index, which the run's own length bounds)."""
    values = np.asarray(values, dtype)
    return to_device(np.concatenate([values, np.repeat(values[-1:], rows - len(values))]))


def _compiled(function: Callable, layout, what: str, *arguments) -> Callable:
    """``function`` (the driver's ``initialise`` or ``run``, named ``what``) compiled for ``arguments``.

    Without a mesh it is traced once, with the arrays it closes over (the control variate, a preconditioner, …) as
    an argument rather than constants of the program, so that other data of the same shapes find it in the
    persistent cache; and its lowered program is kept between processes like the vmapped driver's
    (:mod:`tallmcmc.program_cache`), under the key of that whole trace — the program itself, its constants'
    values apart — so that a later process neither lowers it again nor traces more than the driver's loop once
    (``docs/compilation.md``, "The asynchronous driver's programs kept"). On a mesh it is compiled directly."""
    if layout is not None:
        return compiler_options.jit(function).lower(*arguments).compile()
    traced = Traced.of(function, *arguments)
    constants = traced.constants

    def replayed(*again):
        return traced.replay(again[-1], *again[:-1])

    compiled = program_cache.compile_keyed_by_trace(
        replayed,
        (*arguments, constants),
        traced.out_tree,
        traced.jaxpr,
        ("asynchronous driver", what),
        f"asynchronous driver's {what}",
    )
    return lambda *again: compiled(*again, constants)


def _drawn(carry: AsyncCarry, layout, count: int) -> tuple[Position, dict[str, np.ndarray]]:
    """The first ``count`` draws of every chain and their step statistics, NumPy arrays ``(chain, draw, …)``."""
    positions, info = to_host((carry.positions, carry.info))
    if layout is not None:  # one copy per data shard, all equal (exact collectives): keep the first
        positions, info = jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[0], (positions, info))
    positions = jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[:, :count], positions)
    return positions, {name: np.asarray(getattr(info, name))[:, :count] for name in MHInfo._fields}


def _on_mesh(layout, initialise_one, run_one):
    """``initialise`` and ``run`` as one ``shard_map`` each over ``layout``'s mesh.

    Every per-chain value travels in the layout's ``"state"`` form (one copy
    per data shard: the cache of a full-data test differs between shards);
    the loop's iteration count is kept per device.
    """

    def initialise_here(data, states, chain_keys, factors, first_step, adapting):
        carry = initialise_one(data, states, chain_keys, factors, first_step, adapting)
        return carry._replace(iterations=carry.iterations[None])

    def run_here(
        data,
        state,
        flight,
        step,
        positions,
        info,
        iterations,
        adaptation,
        chain_keys,
        factors,
        first_step,
        until,
        limit,
        total,
        adapting,
        target,
    ):
        carry = AsyncCarry(state, flight, step, positions, info, iterations[0], adaptation)
        carry = run_one(data, carry, chain_keys, factors, first_step, until, limit, total, adapting, target)
        return carry._replace(iterations=carry.iterations[None])

    carry_kinds = AsyncCarry("state", "state", "state", "state", "state", "chains", "state")
    initialise = layout.shard_map(
        initialise_here, ("data", "state", "chains", "chains", "replicated", "replicated"), carry_kinds
    )
    replicated = ("replicated",) * 6  # first_step, until, limit, total, adapting, target
    run_fields = layout.shard_map(run_here, ("data", *carry_kinds, "chains", "chains", *replicated), carry_kinds)

    def run(data, carry, chain_keys, factors, first_step, until, limit, total, adapting, target):
        return run_fields(data, *carry, chain_keys, factors, first_step, until, limit, total, adapting, target)

    return initialise, run
