"""The driver: run chains of a kernel with ``lax.scan``, ``vmap`` across chains.

:func:`sample` checks the model once, compiles one chunk of steps, runs the
chunks under a progress bar, and returns a :class:`SamplingResult` whose
arrays have explicit ``(chain, draw, …)`` axes (the ArviZ convention).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from typing import Any

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from tallmcmc.acceptance.base import AcceptanceTest, has_step_machine
from tallmcmc.adaptation import DualAveraging, adapts_on_proxy, statistic
from tallmcmc.adaptation import update as adaptation_update
from tallmcmc.kernel import MHInfo, MHState, build_kernel
from tallmcmc._checks import integer_at_least, open_unit_interval
from tallmcmc.model import Model, Position, as_position, check_model
from tallmcmc.proposals.base import Proposal
from tallmcmc.run_warnings import (  # noqa: F401  (VACUOUS_ERROR_BOUND: re-exported, its old home)
    VACUOUS_ERROR_BOUND,
    warn_if_error_bounds_vacuous,
    warn_if_subsampling_does_not_pay,
)
from tallmcmc.sharding import DeviceMemoryError, check_device_memory, to_host, tree_bytes


@dataclasses.dataclass
class SamplingResult:
    """Draws and per-step diagnostics of :func:`sample`.

    Attributes
    ----------
    positions
        Pytree like the position, every leaf with leading axes ``(chain, draw)``
        (what ``model.constrain`` makes of each position, if the model has one:
        e.g. NumPyro sites on their constrained scale).
    info
        Per-step fields of :class:`tallmcmc.kernel.MHInfo`, each ``(chain, draw)``.
    num_data
        N of the model sampled.
    compile_seconds, sampling_seconds
        Wall time spent compiling and running (compilation excluded from the latter).
    final_state
        The chains' last :class:`~tallmcmc.kernel.MHState` (leading axis chain).
    test_name, proposal_name
        What produced the draws.
    setup_data_used
        Data points touched once before sampling, by source: ``"start check"``
        (one pass per distinct start), and each one-off computation the proposal
        and test rely on (a mode, a control variate), counted once each.
    warmup_positions, warmup_info
        The warm-up draws and their step statistics (``None`` without warm-up),
        kept apart from the draws above.
    step_size_factor
        Per chain, the factor warm-up applied to the proposal's step size
        (``None`` without adaptation).
    adapted_covariance
        The covariance estimate that reshaped the proposal in warm-up
        (``adapt_covariance=True``), else ``None``.
    driver
        ``"vmap"`` or ``"asynchronous"``: which driver ran the kept draws.
    loop_iterations
        With the asynchronous driver, the vectorised loop iterations the kept
        draws took (each advances every chain's test by one chunk); else ``None``.
    diagnosis
        From :func:`tallmcmc.sample_tall`: its :class:`tallmcmc.automatic.TallDiagnosis`
        (decision, setup passes, residuals, r̂, ESS); ``None`` from :func:`sample`.
    """

    positions: Position
    info: dict[str, np.ndarray]
    num_data: int
    compile_seconds: float
    sampling_seconds: float
    final_state: MHState
    test_name: str = ""
    proposal_name: str = ""
    setup_data_used: dict[str, int] = dataclasses.field(default_factory=dict)
    warmup_positions: Position = None
    warmup_info: dict[str, np.ndarray] | None = None
    step_size_factor: np.ndarray | None = None
    adapted_covariance: np.ndarray | None = None
    driver: str = "vmap"
    loop_iterations: int | None = None
    diagnosis: Any = None

    @property
    def setup_data_passes(self) -> float:
        """One-off data use before sampling (mode, control variate, start checks), in passes over N."""
        return sum(self.setup_data_used.values()) / self.num_data

    @property
    def total_data_used(self) -> int:
        """Everything touched: setup passes, warm-up steps and kept steps, all chains."""
        warmup = 0 if self.warmup_info is None else int(np.sum(self.warmup_info["data_used"]))
        return sum(self.setup_data_used.values()) + warmup + int(np.sum(self.data_used))

    @property
    def accepted(self) -> np.ndarray:
        """Whether each step accepted its proposal, ``(chain, draw)``."""
        return self.info["accepted"]

    @property
    def data_used(self) -> np.ndarray:
        """Data points touched by each step (everything, full passes included), ``(chain, draw)``."""
        return self.info["data_used"]

    @property
    def data_used_by_test(self) -> np.ndarray:
        """Data points in each step's sequential-test minibatch, ``(chain, draw)``."""
        return self.info["data_used_by_test"]

    @property
    def num_chains(self) -> int:
        return int(self.accepted.shape[0])

    @property
    def num_draws(self) -> int:
        return int(self.accepted.shape[1])

    @property
    def acceptance_rate(self) -> float:
        return float(np.mean(self.accepted))

    @property
    def seconds_per_step(self) -> float:
        """Sampling seconds per step (all chains advance together in one step)."""
        return self.sampling_seconds / max(self.num_draws, 1)

    @property
    def chain_steps_per_second(self) -> float:
        """Steps of all chains together per sampling second (compilation excluded)."""
        return self.num_chains * self.num_draws / max(self.sampling_seconds, 1e-12)

    def to_inference_data(self):
        """An :class:`arviz.InferenceData` with the draws and the step statistics.

        Positions that are dicts keep their keys as variable names; a bare
        array is called ``theta``; tuples and lists become ``theta_0``, …
        Test statistics go to ``sample_stats``.
        """
        import arviz as az

        posterior = _named_variables(self.positions)
        sample_stats = {key: np.asarray(value) for key, value in self.info.items()}
        if self.warmup_info is None:
            return az.from_dict(posterior=posterior, sample_stats=sample_stats, attrs=self._attrs())
        return az.from_dict(
            posterior=posterior,
            sample_stats=sample_stats,
            warmup_posterior=_named_variables(self.warmup_positions),
            warmup_sample_stats={key: np.asarray(value) for key, value in self.warmup_info.items()},
            save_warmup=True,
            attrs=self._attrs(),
        )

    def _attrs(self) -> dict[str, Any]:
        return {
            "test": self.test_name,
            "proposal": self.proposal_name,
            "num_data": self.num_data,
            "sampling_seconds": self.sampling_seconds,
            "setup_data_passes": self.setup_data_passes,
        }


def _named_variables(positions: Position) -> dict[str, np.ndarray]:
    if isinstance(positions, dict):
        return {str(key): np.asarray(value) for key, value in positions.items()}
    if isinstance(positions, (tuple, list)):
        return {f"theta_{i}": np.asarray(value) for i, value in enumerate(positions)}
    leaves, _ = jax.tree_util.tree_flatten(positions)
    if len(leaves) == 1:
        return {"theta": np.asarray(leaves[0])}
    return {f"theta_{i}": np.asarray(value) for i, value in enumerate(leaves)}


def sample(
    model: Model,
    proposal: Proposal,
    test: AcceptanceTest,
    initial_position: Position = None,
    num_samples: int = 1000,
    num_chains: int = 1,
    seed: int = 0,
    progress: bool = True,
    *,
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
        One position (pytree) where every chain starts.
    num_samples
        Steps per chain; every step's state is kept (rejections repeat it).
    num_chains
        Chains run together (``vmap``).
    seed
        Seed of the random stream; the same seed gives the same draws.
    progress
        Show a progress bar over chunks of steps.
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
        How the chains of the kept draws are run together. ``"vmap"``: every
        step is vmapped across chains, so a growing-minibatch test waits at
        each step for the chain with the largest minibatch.
        ``"asynchronous"`` (:mod:`tallmcmc.chain_asynchronous`): one
        vectorised loop advances every chain's test by one chunk of data per
        iteration, and a chain whose test has decided records its draw and
        starts its next step at once. Both use the same per-chain, per-step
        keys and the same operations, so they give the same draws whatever
        the number of chains (bit for bit in the tests, except that with a
        ``temperature_schedule`` each chain's temperature is batched and the
        statistics may differ in the last place, and AustereMH's reported
        ``error_bound`` may too). Warm-up runs with the same driver: with
        ``"asynchronous"`` each chain adapts its step size as its own steps
        finish (:mod:`tallmcmc.adaptation`), with the lockstep warm-up's
        factors and draws. The
        asynchronous driver pays where minibatch sizes vary from step to step
        and many chains run (measured on the paper's mixture at 64 chains:
        about 2-3x the vmapped chain-steps/s, ``benchmarks/RESULTS.md``); with
        one chain, a full-data test, or a test whose minibatch never grows
        (e.g. a good control variate) it only adds overhead. A test that
        makes a full pass before its minibatch loop (AustereMH(nc),
        ``confidence_sampler`` without a ``bound``) starts the steps of the
        chains that finished one at a time, so each step pays its pass once
        (on the mixture, N = 10⁵, 16 chains: 0.27x the vmapped driver's time
        per step for AustereMH(nc), 0.46x for the confidence sampler); where
        the pass for many chains is one matrix product (logistic regression
        on MNIST-13k, 10 chains: AustereMH(nc) 2.63 against 1.22 ms per
        chain-step) the vmapped driver's batched starts are cheaper.
        ``"auto"``: :func:`choose_driver` picks (the asynchronous driver for
        a chunk-by-chunk test from 8 chains per device on, else vmap; vmap if
        the asynchronous driver's draws would not fit in device memory);
        ``result.driver`` says which ran.
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
    num_samples = integer_at_least(num_samples, "num_samples")
    num_chains = integer_at_least(num_chains, "num_chains")
    num_chunks = integer_at_least(num_chunks, "num_chunks")
    if not isinstance(model, Model):
        raise TypeError(f"model must be a tallmcmc.Model; got {type(model).__name__}")
    if not (isinstance(proposal, Proposal)):
        raise TypeError("proposal must be a tallmcmc proposal, e.g. tallmcmc.random_walk(0.1)")
    if not isinstance(test, AcceptanceTest):
        raise TypeError("test must be a tallmcmc acceptance test, e.g. tallmcmc.minibatch_barker(batch_size=50)")
    if driver not in (*DRIVERS, "auto"):
        raise ValueError(f"driver must be one of {(*DRIVERS, 'auto')}; got {driver!r}")
    if (initial_position is None) == (initial_positions is None):
        raise ValueError("give exactly one of initial_position (shared by all chains) or initial_positions (one per chain)")
    layout = None
    data = model.data
    check = lambda position, name: check_model(model, position, name)  # noqa: E731
    if mesh is not None:
        from tallmcmc.sharding import check_model_on_mesh, layout_for

        layout = layout_for(mesh, model.num_data, num_chains, driver)
        data = layout.distribute(model.data)
        check = check_model_on_mesh(model, layout, data)  # every datum checked where it lives
    chosen_automatically = driver == "auto"
    if chosen_automatically:
        driver = choose_driver(test, num_chains, 1 if layout is None else layout.num_chain_shards)

    if initial_position is not None:
        start = as_position(initial_position)
        if check_starts:
            check(start, "initial_position")
        starts = jax.tree_util.tree_map(lambda leaf: jnp.broadcast_to(leaf, (num_chains,) + leaf.shape), start)
    else:
        starts = as_position(initial_positions)
        for leaf in jax.tree_util.tree_leaves(starts):
            if leaf.ndim == 0 or leaf.shape[0] != num_chains:
                raise ValueError(
                    f"initial_positions leaves need a leading axis of length num_chains = {num_chains} "
                    f"(one start per chain); got shape {leaf.shape}"
                )
        for chain in range(num_chains):
            one = jax.tree_util.tree_map(lambda leaf: leaf[chain], starts)
            if check_starts:
                check(one, f"initial_positions[{chain}]")
    if layout is None:
        test.init(model, jax.tree_util.tree_map(lambda leaf: leaf[0], starts))  # settings checked before compiling
    else:  # the same checks, on shapes only (the data may live in other processes)
        first_start = jax.tree_util.tree_map(lambda leaf: leaf[0], starts)
        jax.eval_shape(lambda position: test.init(model, position), first_start)
    num_warmup = integer_at_least(num_warmup, "num_warmup", 0)
    target = _target_acceptance(target_acceptance, proposal, test)
    distinct_starts = (1 if initial_position is not None else num_chains) if check_starts else 0
    setup_data_used = {"start check": distinct_starts * model.num_data, **_setup_costs(proposal, test)}
    if not check_starts:
        del setup_data_used["start check"]

    adapt = num_warmup > 0 and proposal.tune is not None
    if adapt_covariance:
        if proposal.with_covariance is None:
            raise ValueError(
                f"adapt_covariance=True needs a proposal that a covariance can reshape (tallmcmc.random_walk, "
                f"tallmcmc.laplace_random_walk); {proposal.name!r} is not one"
            )
        if num_warmup < _MIN_COVARIANCE_WARMUP:
            raise ValueError(
                f"adapt_covariance=True needs num_warmup >= {_MIN_COVARIANCE_WARMUP} (half of it estimates the "
                f"covariance); got num_warmup={num_warmup}"
            )
    temperatures = _schedule(temperature_schedule, "temperature_schedule", num_samples, "temperatures K_t > 0")
    step_factors = _schedule(step_size_schedule, "step_size_schedule", num_samples, "step-size factors > 0")
    if step_factors is not None and proposal.tune is None:
        raise ValueError(
            f"step_size_schedule needs a proposal whose step size can be tuned (random walks, Langevin, proxy "
            f"proposals); {proposal.name!r} has none"
        )
    from tallmcmc.control_variate import ControlVariate

    uses_control_variate = any(isinstance(source, ControlVariate) for source in test.setup)
    if temperatures is not None and uses_control_variate:
        raise ValueError(
            "temperature_schedule cannot be used with a control-variate test: its proxy sums were built at "
            f"temperature {model.temperature}; run one sample() per temperature with a control variate for each"
        )

    held = model if layout is None else model.with_shards(layout.shards)  # the model inside the mesh's shard_map

    def kernel_for(data, factor=None, temperature=None):
        tuned = proposal if factor is None else proposal.tune(factor)
        tempered = held.with_data(data)
        if temperature is not None:
            tempered = tempered.with_temperature(temperature)
        return build_kernel(tempered, tuned, test)

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

    if layout is None:
        initialise = jax.jit(initialise)
    else:
        initialise = jax.jit(layout.shard_map(initialise, ("data", "chains"), "state"))
        run_chunk = layout.shard_map(
            run_chunk, ("data", "state", "chains", "replicated", "chains", "replicated"), ("state", "draws")
        )
    draws_on_device = num_chains * max(num_samples, num_warmup) if driver == "asynchronous" else 0
    try:
        _check_memory(model, layout, data, initialise, starts, draws_on_device)
    except DeviceMemoryError:
        if not (chosen_automatically and draws_on_device):
            raise
        driver = "vmap"  # "auto": the vmapped driver brings the draws home chunk by chunk
        _check_memory(model, layout, data, initialise, starts, 0)
    states = initialise(data, starts)
    base_key = jax.random.key(seed)
    chain_keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(base_key, jnp.arange(num_chains))
    warmup_positions = warmup_info = factors = adapted_covariance = None
    if num_warmup:
        warmup_keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(
            jax.random.fold_in(base_key, _WARMUP_STREAM), jnp.arange(num_chains)
        )
        if progress:
            print(f"warm-up: {num_warmup} steps{' adapting the step size' if adapt else ''} ...", flush=True)

        def warm(states, keys, steps: int, proposal_now):
            """``steps`` warm-up steps: ``(states, adapted factors or None, (positions, info))``, ``(step, chain, …)``."""
            if driver == "asynchronous":  # each chain adapts as its own steps finish
                from tallmcmc.chain_asynchronous import run_asynchronous

                states, positions, info, *_, adapted = run_asynchronous(
                    held, proposal_now, test, states, keys, None, steps, [steps], data=data, layout=layout,
                    adapt_target=target if adapt else None,
                )
                positions = jax.tree_util.tree_map(lambda leaf: np.swapaxes(leaf, 0, 1), positions)
                return states, adapted, (positions, MHInfo(**{k: np.swapaxes(v, 0, 1) for k, v in info.items()}))
            if adapt:
                return _adaptive_warmup(
                    kernel_for, data, states, keys, steps, target, layout, adapts_on_proxy(proposal_now)
                )
            states, outputs = jax.jit(
                lambda d, st, k: run_chunk(d, st, k, jnp.arange(steps, dtype=jnp.uint32), None, (None, None))
            )(data, states, keys)
            return states, None, outputs

        if adapt_covariance:
            first = num_warmup // 2
            states, _, (early_positions, early_info) = warm(states, warmup_keys, first, proposal)
            adapted_covariance = _warmup_covariance(early_positions, first // 2)
            proposal = proposal.with_covariance(adapted_covariance)
            states, factors, (late_positions, late_info) = warm(
                states, jax.vmap(jax.random.fold_in, in_axes=(0, None))(warmup_keys, 1), num_warmup - first, proposal
            )
            warm_positions, warm_info = jax.tree_util.tree_map(
                lambda a, b: jnp.concatenate([a, b], axis=0), (early_positions, early_info), (late_positions, late_info)
            )
        else:
            states, factors, (warm_positions, warm_info) = warm(states, warmup_keys, num_warmup, proposal)
        warm_positions, warm_info = to_host((warm_positions, warm_info))
        warmup_positions = jax.tree_util.tree_map(lambda leaf: np.swapaxes(np.asarray(leaf), 0, 1), warm_positions)
        warmup_info = {name: np.swapaxes(np.asarray(getattr(warm_info, name)), 0, 1) for name in MHInfo._fields}
    dtype = jnp.result_type(*jax.tree_util.tree_leaves(starts), float)  # of the schedules' values
    chunk = math.ceil(num_samples / num_chunks)
    lengths = [chunk] * (num_samples // chunk) + ([num_samples % chunk] if num_samples % chunk else [])
    description = f"{test.name} x {num_chains} chain(s)"
    bar = _progress_bar(num_samples, progress, description)
    loop_iterations = None
    if driver == "asynchronous":
        from tallmcmc.chain_asynchronous import run_asynchronous

        try:
            states, positions, info, compile_seconds, sampling_seconds, loop_iterations, *_ = run_asynchronous(
                held,
                proposal,
                test,
                states,
                chain_keys,
                factors,
                num_samples,
                list(np.cumsum(lengths)),
                temperatures=temperatures,
                step_factors=step_factors,
                dtype=dtype,
                bar=bar,
                description=description,
                data=data,
                layout=layout,
            )
        finally:
            bar.close()
    else:
        states, positions, info, compile_seconds, sampling_seconds = _run_vmapped(
            run_chunk, data, states, chain_keys, factors, lengths, temperatures, step_factors, dtype, bar, description,
            test.name, num_samples,
        )
    if layout is not None:  # one copy per data shard: the position is the same in all, the cache is each shard's
        states = MHState(*layout.first_copy((states.position, states.log_prior)), states.cache)
    non_finite = int(info["non_finite"].sum())
    if non_finite:
        warnings.warn(
            f"{non_finite} step(s) met a non-finite log acceptance ratio and rejected their proposal "
            "(see info['non_finite']); check the log-likelihood for overflow or invalid parameters, "
            "and the proposal: one without a log proposal ratio (NaN, e.g. stochastic_gradient_langevin) "
            "can only be run with tallmcmc.always_accept()",
            RuntimeWarning,
            stacklevel=2,
        )
    warn_if_error_bounds_vacuous(info)
    if has_step_machine(test):  # a subsampling test: did it pay, and if not, why
        pool = to_host(states.cache) if hasattr(states.cache, "fourth") else None  # the tail guard's, if any
        warn_if_subsampling_does_not_pay(test.name, info, model.num_data, pool, uses_control_variate)
    result = SamplingResult(
        positions=reported_draws(model, positions),
        info=info,
        num_data=model.num_data,
        compile_seconds=compile_seconds,
        sampling_seconds=sampling_seconds,
        final_state=states,
        test_name=test.name,
        proposal_name=proposal.name,
        setup_data_used=setup_data_used,
        warmup_positions=reported_draws(model, warmup_positions),
        warmup_info=warmup_info,
        step_size_factor=None if factors is None else np.asarray(to_host(factors)),
        adapted_covariance=adapted_covariance,
        driver=driver,
        loop_iterations=loop_iterations,
    )
    for source in (*proposal.setup, *test.setup):  # e.g. a TunaMH bound raises if a step found it violated
        if hasattr(source, "check_info"):
            for checked in (warmup_info, info):
                if checked is None:
                    continue
                try:
                    source.check_info(checked)
                except ValueError as error:  # nothing computed is lost: the run rides on the error
                    error.result = result
                    error.add_note("the run's draws and step statistics are on this exception's `result` attribute")
                    raise
    return result


def reported_draws(model: Model, positions: Position) -> Position:
    """Draws ``(chain, draw, …)`` as the user reads them: ``model.constrain`` applied to each, if the model has one."""
    if positions is None or model.constrain is None:
        return positions
    constrained = jax.jit(jax.vmap(jax.vmap(model.constrain)))(positions)
    return jax.tree_util.tree_map(np.asarray, constrained)


def _run_vmapped(
    run_chunk, data, states, chain_keys, factors, lengths, temperatures, step_factors, dtype, bar, description, name,
    num_samples,
):
    """The kept draws with every step vmapped across chains, in ``lax.scan`` chunks of ``lengths``."""
    compiled: dict[int, Any] = {}
    compile_seconds = 0.0
    sampling_seconds = 0.0
    positions_parts: list[Any] = []
    info_parts: list[MHInfo] = []
    done = 0
    try:
        for length in lengths:
            step_indices = jnp.arange(done, done + length, dtype=jnp.uint32)
            schedule = tuple(
                None if values is None else jnp.asarray(values[done : done + length], dtype)
                for values in (temperatures, step_factors)
            )
            if length not in compiled:
                bar.set_description(f"compiling {name}")
                began = time.perf_counter()
                compiled[length] = (
                    jax.jit(run_chunk).lower(data, states, chain_keys, step_indices, factors, schedule).compile()
                )
                compile_seconds += time.perf_counter() - began
                bar.set_description(description)
            began = time.perf_counter()
            states, (positions, info) = compiled[length](data, states, chain_keys, step_indices, factors, schedule)
            jax.block_until_ready(states)
            sampling_seconds += time.perf_counter() - began
            positions_parts.append(to_host(positions))
            info_parts.append(to_host(info))
            bar.update(length)
            done += length
    except KeyboardInterrupt:
        if not info_parts:
            raise
        done = sum(part.accepted.shape[0] for part in info_parts)
        warnings.warn(f"interrupted: returning the {done} of {num_samples} draws per chain made so far", stacklevel=3)
    finally:
        bar.close()

    def stack(*parts):
        # scan stacks (draw, chain, ...); the ArviZ convention is (chain, draw, ...)
        return np.swapaxes(np.concatenate(parts, axis=0), 0, 1)

    positions = jax.tree_util.tree_map(stack, *positions_parts)
    info = {name: stack(*(getattr(part, name) for part in info_parts)) for name in MHInfo._fields}
    return states, positions, info, compile_seconds, sampling_seconds


DRIVERS = ("vmap", "asynchronous")
#: ``driver="auto"`` runs the asynchronous driver from this many chains per loop (per device of a
#: ``"chains"`` mesh) on: measured with the drivers interleaved, from 8 chains the asynchronous one was
#: never slower (the mixture: 1.2-1.4x faster at 8 chains, 1.5-2.7x at 64), below it level with a control variate
#: (``benchmarks/RESULTS.md``, ``docs/drivers.md``).
AUTO_ASYNCHRONOUS_CHAINS = 8


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
    device until the run ends). A rule of thumb measured on a 2-core CPU; one
    known exception: a full pass at the start of every step that is one
    matrix product over many chains (AustereMH(nc) on logistic regression)
    is cheaper vmapped (``docs/drivers.md``).
    """
    if has_step_machine(test) and num_chains // max(1, chain_shards) >= AUTO_ASYNCHRONOUS_CHAINS:
        return "asynchronous"
    return "vmap"


def _check_memory(model: Model, layout, data, initialise, starts, held_draws: int = 0) -> None:
    """Refuse, before compiling, a run whose data and chain states cannot fit on one device (estimate only).

    Per device: the data (its block of rows with a mesh) and the chains'
    states counted twice (the current state and the proposed one, e.g. a
    full-data test's ``num_chains × N`` per-datum values and their
    replacement), from the shapes alone (``jax.eval_shape``); and
    ``held_draws`` draws (position and step statistics) kept on the device
    until the run ends (the asynchronous driver's output buffers).
    """
    states = jax.eval_shape(initialise, data, starts)
    one_start = tree_bytes(starts) // max(1, jax.tree_util.tree_leaves(starts)[0].shape[0])
    draw_bytes = held_draws * (one_start + 4 * len(MHInfo._fields))
    if layout is None:
        devices = {device for leaf in jax.tree_util.tree_leaves(data) if isinstance(leaf, jax.Array)
                   for device in leaf.devices()}
        device = min(devices, key=lambda d: d.id) if devices else jax.devices()[0]
        data_bytes = tree_bytes(data)
        state_bytes = tree_bytes(states)
    else:
        device = layout.local_device()
        data_bytes = tree_bytes(data) // layout.num_data_shards
        state_bytes = tree_bytes(states) // (layout.num_data_shards * layout.num_chain_shards)
        draw_bytes //= layout.num_chain_shards
    parts = {"data": data_bytes, "chain states (current and proposed)": 2 * state_bytes}
    if draw_bytes:
        parts["draws held on the device (asynchronous driver)"] = draw_bytes
    check_device_memory(parts, device, resident=data_bytes if layout is None else 0, mesh_given=layout is not None)

_WARMUP_STREAM = 0x7FFFFFFF  # warm-up keys come from a stream apart from the kept draws


_MIN_COVARIANCE_WARMUP = 40


def _warmup_covariance(positions, skip: int) -> np.ndarray:
    """Regularised covariance of warm-up draws (steps, chains, ...) after the first ``skip`` steps."""
    flat = jax.vmap(jax.vmap(lambda position: jax.flatten_util.ravel_pytree(position)[0]))(positions)
    draws = np.asarray(flat, np.float64)[skip:].reshape(-1, flat.shape[-1])
    count = draws.shape[0]
    estimate = np.atleast_2d(np.cov(draws, rowvar=False))
    return count / (count + 5.0) * estimate + 1e-3 * 5.0 / (count + 5.0) * np.eye(estimate.shape[0])


def _schedule(values, name: str, num_samples: int, what: str) -> np.ndarray | None:
    """A per-step schedule as a float64 array of length ``num_samples``, or a ``ValueError`` naming it."""
    if values is None:
        return None
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (num_samples,):
        raise ValueError(f"{name} must have one value per kept step, shape ({num_samples},); got shape {array.shape}")
    if not np.all(np.isfinite(array) & (array > 0)):
        raise ValueError(f"{name} must hold finite {what}; step {int(np.argmin(np.isfinite(array) & (array > 0)))} is not")
    return array


#: Barker's optimal random-walk acceptance against Metropolis's (Agrawal et al. 2021): the default target
#: under a Barker-type test is the proposal's Metropolis target scaled by it, and at most 0.7 of the test's
#: ceiling (``AcceptanceTest.max_acceptance``, ½), since a target near the ceiling drives the step to 0.
_BARKER_SCALING = 0.158 / 0.234
_CEILING_FRACTION = 0.7


def _target_acceptance(target: float | None, proposal: Proposal, test: AcceptanceTest) -> float:
    """The rate warm-up aims at: the proxy acceptance's for a proxy proposal, else the test's acceptance's."""
    if adapts_on_proxy(proposal):  # data-free: the same target under every test
        if target is None:
            return proposal.proxy_target
        return open_unit_interval(target, "target_acceptance", "the proxy acceptance rate warm-up aims at")
    ceiling = float(test.max_acceptance)
    if target is None:
        if ceiling >= 1.0:
            return proposal.metropolis_target
        return min(proposal.metropolis_target * _BARKER_SCALING, _CEILING_FRACTION * ceiling)
    target = open_unit_interval(target, "target_acceptance", "the acceptance rate warm-up aims at")
    if target >= ceiling:
        raise ValueError(
            f"target_acceptance={target:g} cannot be reached under {test.name}, which accepts at most about "
            f"{ceiling:g} of proposals however small the step (a Barker-type test accepts with 1/(1 + e^{{−Δ}})); "
            f"warm-up would shrink the step towards 0. Leave it out (default "
            f"{min(proposal.metropolis_target * _BARKER_SCALING, _CEILING_FRACTION * ceiling):.3g}) or pass a "
            f"value below {_CEILING_FRACTION * ceiling:g}"
        )
    if target > 0.8 * ceiling:
        warnings.warn(
            f"target_acceptance={target:g} is close to the most {test.name} accepts ({ceiling:g}): warm-up will "
            "shrink the step until the proposals barely move. Leave target_acceptance out for the default",
            UserWarning,
            stacklevel=3,
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


def _adaptive_warmup(
    kernel_for, data, states, chain_keys, num_warmup: int, target: float, layout=None, on_proxy: bool = False
):
    """Dual averaging of log(step-size factor) per chain (:mod:`tallmcmc.adaptation`), all chains in lockstep.

    The statistic is each step's acceptance indicator, or with ``on_proxy``
    its proxy acceptance (:func:`tallmcmc.adaptation.statistic`). Returns the
    states after warm-up, the per-chain factor exp(x̄) (the running average),
    and the warm-up draws and infos.
    """
    def one(data, chain_keys, carry, t):
        states, adaptation = carry
        keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(chain_keys, t)
        step = jax.vmap(lambda key, state, log_f: kernel_for(data, jnp.exp(log_f)).step(key, state))
        states, info = step(keys, states, adaptation.log_factor)
        updated = adaptation_update(adaptation, t, statistic(info, on_proxy), target)
        return (states, updated), (states.position, info)

    def run(data, states, chain_keys):
        steps = jnp.arange(num_warmup, dtype=jnp.uint32)
        return jax.lax.scan(
            lambda carry, t: one(data, chain_keys, carry, t), (states, DualAveraging.start(chain_keys.shape[0])), steps
        )

    if layout is None:  # the keys are closed over (constants of the compiled loop), as they always were
        (states, adaptation), outputs = jax.jit(lambda data, states: run(data, states, chain_keys))(data, states)
    else:  # the same loop on every device of the mesh, over its own chains and rows
        kinds = (("state", DualAveraging("chains", "chains", "chains")), "draws")
        (states, adaptation), outputs = jax.jit(layout.shard_map(run, ("data", "state", "chains"), kinds))(
            data, states, chain_keys
        )
    return states, jnp.exp(adaptation.log_factor_bar), outputs


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def set_description(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(total: int, enabled: bool, description: str):
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=description, unit="step", leave=False)
