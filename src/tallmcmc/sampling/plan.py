"""A run's arguments checked and laid out once (:class:`RunPlan`), before anything is compiled or sampled.

:func:`plan_run` holds every argument check of :func:`tallmcmc.sample` and :func:`tallmcmc.warmup` (in the order
the errors are raised), lays the data out over a mesh, checks the model at every start, chooses the driver, sets
the warm-up's target, counts the setup passes and estimates the device memory.
"""

from __future__ import annotations

import warnings
from functools import cache, partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc import program_cache
from tallmcmc._checks import integer_at_least, open_unit_interval
from tallmcmc._device import to_device
from tallmcmc.acceptance.base import AcceptanceTest
from tallmcmc.control_variate import ControlVariate
from tallmcmc.model import Model, Position, as_position, check_model
from tallmcmc.proposals.base import Proposal
from tallmcmc.run_warnings import InexactProposalWarning
from tallmcmc.sampling.adaptation import adapts_on_proxy
from tallmcmc.sampling.asynchronous import buffer_rows
from tallmcmc.sampling.drivers import DRIVERS, HeldBar, choose_driver
from tallmcmc.sampling.memory import check_run_memory
from tallmcmc.sampling.program import ChainProgram, chain_program
from tallmcmc.sampling.schedule import Schedule
from tallmcmc.sharding import DeviceMemoryError, check_model_on_mesh, layout_for

__all__ = ["MIN_COVARIANCE_WARMUP", "RunPlan", "plan_run", "target_acceptance_for"]

#: ``adapt_covariance=True`` needs at least this many warm-up steps (half of them estimate the covariance).
MIN_COVARIANCE_WARMUP = 40
#: Barker's optimal random-walk acceptance against Metropolis's (Agrawal et al. 2021): the default target
#: under a Barker-type test is the proposal's Metropolis target scaled by it, and at most 0.7 of the test's
#: ceiling (``AcceptanceTest.max_acceptance``, ½), since a target near the ceiling drives the step to 0.
BARKER_SCALING = 0.158 / 0.234
CEILING_FRACTION = 0.7


class RunPlan(NamedTuple):
    """Everything a run needs, checked (see :func:`plan_run`).

    ``model`` is the model as given, ``held`` the model as seen inside the mesh's
    ``shard_map`` (with its shards; the model itself without a mesh), ``data``
    the data as laid out, ``starts`` one start per chain (leading axis
    ``num_chains``). ``num_samples`` is ``None`` for a warm-up alone. ``adapt``:
    warm-up adapts the step size. ``target``: the rate it aims at.
    ``setup_data_used``: the start check and the one-off computations the
    proposal and test rely on. ``program``: the compiled pieces of the
    proposal and test (:class:`~tallmcmc.sampling.program.ChainProgram`).
    """

    model: Model
    held: Model
    proposal: Proposal
    test: AcceptanceTest
    layout: Any
    data: Any
    starts: Position
    num_chains: int
    num_samples: int | None
    num_warmup: int
    num_chunks: int
    driver: str
    schedule: Schedule
    target: float
    adapt: bool
    adapt_covariance: bool
    seed: int
    progress: bool | HeldBar
    setup_data_used: dict[str, int]
    uses_control_variate: bool
    program: ChainProgram
    #: the proposal's log ratio is not its true one (SGHMC) and a real test uses it (``allow_inexact_proposal``)
    inexact_proposal: bool = False

    @property
    def asynchronous_rows(self) -> int:
        """The asynchronous driver's draws' buffers' rows for this plan's warm-up and kept draws alike (the longer
        of the two, rounded up by :func:`~tallmcmc.sampling.asynchronous.buffer_rows`), so that both run one
        program."""
        return buffer_rows(max(self.num_samples or 0, self.num_warmup), self.starts)

    @property
    def dtype(self):
        """The floating dtype of the positions (and of the schedules' values)."""
        return jnp.result_type(*jax.tree_util.tree_leaves(self.starts), float)

    def chain_keys(self, stream: int | None = None) -> jax.Array:
        """``fold_in(key(seed), chain)`` per chain, of the kept draws or (``stream``) of another stream."""
        seed = int(self.seed)
        folds_stream, stream = stream is not None, 0 if stream is None else stream
        if not -(2**31) <= seed < 2**31:
            # a seed beyond int32 becomes a key eagerly (jax.random.key splits its bits; a traced int32 cannot hold it)
            return _chain_keys(jax.random.key(seed), folds_stream, stream, self.num_chains)
        arguments = (np.int32(seed), np.bool_(folds_stream), np.int32(stream))
        keys = _kept_chain_keys(self.num_chains)(*arguments)
        # placed as jax.jit places them, uncommitted (a compiled program's outputs are committed to its device, and a
        # chain program compiled for committed keys misses the persistent cache that an uncommitted run filled)
        return jax.random.wrap_key_data(np.asarray(jax.random.key_data(keys)), impl=jax.random.key_impl(keys))


@cache
def _kept_chain_keys(num_chains: int) -> program_cache.KeptPass:
    """:func:`_chain_keys` for an int32 seed, kept between processes like the chain program
    (:class:`~tallmcmc.program_cache.KeptPass`): a later process loads it instead of lowering it — lowering the
    random hash took about 0.1 s of a second ``sample_tall`` run on a 2-core CPU (``docs/compilation.md``)."""

    def keys(seed, folds_stream, stream):
        return _chain_keys(seed, folds_stream, stream, num_chains)

    types = (jax.ShapeDtypeStruct((), np.int32), jax.ShapeDtypeStruct((), np.bool_), jax.ShapeDtypeStruct((), np.int32))
    traced = program_cache.Traced.of(keys, *types)
    return program_cache.KeptPass(keys, traced, ("chain keys", num_chains), traced.out_tree)


@partial(jax.jit, static_argnums=3)
def _chain_keys(seed, folds_stream, stream, num_chains: int) -> jax.Array:
    """:meth:`RunPlan.chain_keys` as one compiled program for both streams (eagerly, the seed, the stream's fold
    and the chains' folds are seven small programs, each compiled on a first run; with the stream static, the kept
    draws' and the warm-up's keys were two: ``docs/compilation.md``). ``seed`` is an int32 seed or a key;
    ``folds_stream``: whether ``stream`` is folded in."""
    base_key = seed if jax.dtypes.issubdtype(seed.dtype, jax.dtypes.prng_key) else jax.random.key(seed)
    folded = jax.random.fold_in(base_key, stream)
    base_key = jax.random.wrap_key_data(
        jnp.where(folds_stream, jax.random.key_data(folded), jax.random.key_data(base_key)),
        impl=jax.random.key_impl(base_key),
    )
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(base_key, jnp.arange(num_chains))


def plan_run(
    model: Model,
    proposal: Proposal,
    test: AcceptanceTest,
    initial_position: Position,
    initial_positions: Position,
    *,
    num_samples: int | None,
    num_chains: int,
    seed: int,
    progress: bool | HeldBar,
    num_chunks: int,
    num_warmup: int,
    target_acceptance: float | None,
    temperature_schedule,
    step_size_schedule,
    adapt_covariance: bool,
    driver: str,
    mesh,
    check_starts: bool,
    allow_inexact_proposal: bool = False,
) -> RunPlan:
    """Check a run's arguments and lay it out (see the module docstring); every error names its argument."""
    if num_samples is not None:
        num_samples = integer_at_least(num_samples, "num_samples")
    num_chains = integer_at_least(num_chains, "num_chains")
    num_chunks = integer_at_least(num_chunks, "num_chunks")
    if not isinstance(model, Model):
        raise TypeError(f"model must be a tallmcmc.Model; got {type(model).__name__}")
    if not isinstance(proposal, Proposal):
        raise TypeError("proposal must be a tallmcmc proposal, e.g. tallmcmc.random_walk(0.1)")
    if not isinstance(test, AcceptanceTest):
        raise TypeError("test must be a tallmcmc acceptance test, e.g. tallmcmc.minibatch_barker(batch_size=50)")
    if driver not in (*DRIVERS, "auto"):
        raise ValueError(f"driver must be one of {(*DRIVERS, 'auto')}; got {driver!r}")
    if (initial_position is None) == (initial_positions is None):
        raise ValueError(
            "give exactly one of initial_position (shared by all chains) or initial_positions (one per chain)"
        )
    layout = None
    data = model.data
    check = lambda position, name: check_model(model, position, name)  # noqa: E731
    if mesh is not None:
        layout = layout_for(mesh, model.num_data, num_chains, driver)
        data = layout.distribute(model.data)
        check = check_model_on_mesh(model, layout, data)  # every datum checked where it lives
    chosen_automatically = driver == "auto"
    if chosen_automatically:
        driver = choose_driver(test, num_chains, 1 if layout is None else layout.num_chain_shards)
    starts = _starts(initial_position, initial_positions, num_chains, check if check_starts else None)
    # the test's settings checked before compiling, on shapes only: on a mesh the data may live in other processes,
    # and an eager initial state would compile a program for each of its operations
    first_start = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype), starts)
    jax.eval_shape(lambda position: test.init(model, position), first_start)
    num_warmup = integer_at_least(num_warmup, "num_warmup", 0)
    inexact_proposal = _check_inexact_proposal(proposal, test, allow_inexact_proposal)
    target = target_acceptance_for(target_acceptance, proposal, test)
    setup_data_used = _setup_costs(proposal, test)
    if check_starts:
        distinct_starts = 1 if initial_position is not None else num_chains
        setup_data_used = {"start check": distinct_starts * model.num_data, **setup_data_used}
    if adapt_covariance:
        if proposal.with_covariance is None:
            raise ValueError(
                f"adapt_covariance=True needs a proposal that a covariance can reshape (tallmcmc.random_walk, "
                f"tallmcmc.laplace_random_walk); {proposal.name!r} is not one"
            )
        if num_warmup < MIN_COVARIANCE_WARMUP:
            raise ValueError(
                f"adapt_covariance=True needs num_warmup >= {MIN_COVARIANCE_WARMUP} (half of it estimates the "
                f"covariance); got num_warmup={num_warmup}"
            )
    uses_control_variate = any(isinstance(source, ControlVariate) for source in test.setup)
    schedule = (
        Schedule.checked(
            temperature_schedule, step_size_schedule, num_samples, proposal, uses_control_variate, model.temperature
        )
        if num_samples is not None
        else Schedule()
    )
    held = model if layout is None else model.with_shards(layout.shards)  # the model inside the mesh's shard_map
    program = chain_program(held, proposal, test, layout)
    # the asynchronous driver's draws' buffers (RunPlan.asynchronous_rows) stay on the device for the whole run
    held_rows = buffer_rows(max(num_samples or 0, num_warmup), starts)
    draws_on_device = num_chains * held_rows if driver == "asynchronous" else 0
    try:
        check_run_memory(data, program.initialise, starts, layout, draws_on_device)
    except DeviceMemoryError:
        if not (chosen_automatically and draws_on_device):
            raise
        driver = "vmap"  # "auto": the vmapped driver brings the draws home chunk by chunk
        check_run_memory(data, program.initialise, starts, layout, 0)
    return RunPlan(
        model=model,
        held=held,
        proposal=proposal,
        test=test,
        layout=layout,
        data=data,
        starts=starts,
        num_chains=num_chains,
        num_samples=num_samples,
        num_warmup=num_warmup,
        num_chunks=num_chunks,
        driver=driver,
        schedule=schedule,
        target=target,
        adapt=num_warmup > 0 and proposal.tune is not None,
        adapt_covariance=bool(adapt_covariance),
        seed=seed,
        progress=progress,
        setup_data_used=setup_data_used,
        uses_control_variate=uses_control_variate,
        program=program,
        inexact_proposal=inexact_proposal,
    )


def _check_inexact_proposal(proposal: Proposal, test: AcceptanceTest, allowed: bool) -> bool:
    """Whether a proposal without its true log ratio (SGHMC) meets a real test; refused unless ``allowed``."""
    if proposal.exact_ratio or test.name == "always_accept":
        return False
    if not allowed:
        raise ValueError(
            f"{proposal.name} reports no true log proposal ratio (its density is a mixture over minibatches), so "
            f"{test.name} cannot make the chain target the posterior. Run it with tallmcmc.always_accept() (plain "
            "SGHMC), use tallmcmc.minibatch_hamiltonian (the exact counterpart), or pass "
            "allow_inexact_proposal=True to sample() to run the heuristic test as Chen et al. (2016) did"
        )
    warnings.warn(
        f"allow_inexact_proposal=True: {test.name} on {proposal.name} takes the proposal ratio as 0, so the chain's "
        "target is not the posterior (result.inexact_proposal is True)",
        InexactProposalWarning,
        stacklevel=4,
    )
    return True


def _broadcast_start(leaf: jax.Array, num_chains: int) -> jax.Array:
    """``leaf`` repeated for ``num_chains`` chains along a new leading axis: on the host where that gives the same
    array (``jnp.broadcast_to`` compiles a program of its own; a weakly typed leaf stays so, and a leaf committed to
    a device stays there, only with it)."""
    if not isinstance(leaf, jax.Array) or leaf.weak_type or leaf.committed or not leaf.is_fully_addressable:
        return jnp.broadcast_to(leaf, (num_chains, *leaf.shape))
    return to_device(np.broadcast_to(np.asarray(leaf), (num_chains, *np.shape(leaf))))


def _starts(initial_position, initial_positions, num_chains: int, check) -> Position:
    """One start per chain (leading axis ``num_chains``), each checked by ``check(position, name)`` unless ``None``."""
    if initial_position is not None:
        start = as_position(initial_position)
        if check is not None:
            check(start, "initial_position")
        return jax.tree_util.tree_map(lambda leaf: _broadcast_start(leaf, num_chains), start)
    starts = as_position(initial_positions, "initial_positions")
    for leaf in jax.tree_util.tree_leaves(starts):
        if leaf.ndim == 0 or leaf.shape[0] != num_chains:
            raise ValueError(
                f"initial_positions leaves need a leading axis of length num_chains = {num_chains} "
                f"(one start per chain); got shape {leaf.shape}"
            )
    if check is not None:
        for chain in range(num_chains):
            check(jax.tree_util.tree_map(lambda leaf: leaf[chain], starts), f"initial_positions[{chain}]")  # noqa: B023 (used within this iteration)
    return starts


def target_acceptance_for(target: float | None, proposal: Proposal, test: AcceptanceTest) -> float:
    """The rate warm-up aims at: the proxy acceptance's for a proxy proposal, else the test's acceptance's.

    See ``sample``'s ``target_acceptance`` and ``docs/warmup.md``.
    """
    if adapts_on_proxy(proposal):  # data-free: the same target under every test
        if target is None:
            return proposal.proxy_target
        return open_unit_interval(target, "target_acceptance", "the proxy acceptance rate warm-up aims at")
    ceiling = float(test.max_acceptance)
    default = (
        proposal.metropolis_target
        if ceiling >= 1.0
        else min(proposal.metropolis_target * BARKER_SCALING, CEILING_FRACTION * ceiling)
    )
    if target is None:
        return default
    target = open_unit_interval(target, "target_acceptance", "the acceptance rate warm-up aims at")
    if target >= ceiling:
        raise ValueError(
            f"target_acceptance={target:g} cannot be reached under {test.name}, which accepts at most about "
            f"{ceiling:g} of proposals however small the step (a Barker-type test accepts with 1/(1 + e^{{−Δ}})); "
            f"warm-up would shrink the step towards 0. Leave it out (default {default:.3g}) or pass a value below "
            f"{CEILING_FRACTION * ceiling:g}"
        )
    if target > 0.8 * ceiling:
        warnings.warn(
            f"target_acceptance={target:g} is close to the most {test.name} accepts ({ceiling:g}): warm-up will "
            "shrink the step until the proposals barely move. Leave target_acceptance out for the default",
            UserWarning,
            stacklevel=4,
        )
    return target


def _setup_costs(proposal: Proposal, test: AcceptanceTest) -> dict[str, int]:
    """One-off data use of the objects the proposal and test rely on, each counted once."""
    costs: dict[str, int] = {}
    seen: set[int] = set()
    for source in (*proposal.setup, *test.setup):
        if id(source) in seen:
            continue
        seen.add(id(source))
        label = getattr(source, "name", type(source).__name__)
        costs[label] = costs.get(label, 0) + int(source.data_used)
    return costs
