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
import jax.numpy as jnp
import numpy as np

from tallmcmc.acceptance.base import AcceptanceTest
from tallmcmc.kernel import MHInfo, MHState, build_kernel
from tallmcmc._checks import integer_at_least
from tallmcmc.model import Model, Position, as_position, check_model
from tallmcmc.proposals.base import Proposal


@dataclasses.dataclass
class SamplingResult:
    """Draws and per-step diagnostics of :func:`sample`.

    Attributes
    ----------
    positions
        Pytree like the position, every leaf with leading axes ``(chain, draw)``.
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
    """

    positions: Position
    info: dict[str, np.ndarray]
    num_data: int
    compile_seconds: float
    sampling_seconds: float
    final_state: MHState
    test_name: str = ""
    proposal_name: str = ""

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

    def to_inference_data(self):
        """An :class:`arviz.InferenceData` with the draws and the step statistics.

        Positions that are dicts keep their keys as variable names; a bare
        array is called ``theta``; tuples and lists become ``theta_0``, …
        Test statistics go to ``sample_stats``.
        """
        import arviz as az

        posterior = _named_variables(self.positions)
        sample_stats = {key: np.asarray(value) for key, value in self.info.items()}
        return az.from_dict(posterior=posterior, sample_stats=sample_stats, attrs=self._attrs())

    def _attrs(self) -> dict[str, Any]:
        return {
            "test": self.test_name,
            "proposal": self.proposal_name,
            "num_data": self.num_data,
            "sampling_seconds": self.sampling_seconds,
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
    num_chunks
        The run is compiled as one ``lax.scan`` over a chunk of steps and run
        ``num_chunks`` times (for the progress bar and to move draws off the
        device as they come). The draws do not depend on it: step ``t`` of
        chain ``c`` uses the key ``fold_in(fold_in(key(seed), c), t)``.

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
    if (initial_position is None) == (initial_positions is None):
        raise ValueError("give exactly one of initial_position (shared by all chains) or initial_positions (one per chain)")

    if initial_position is not None:
        start = as_position(initial_position)
        check_model(model, start, "initial_position")
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
            check_model(model, jax.tree_util.tree_map(lambda leaf: leaf[chain], starts), f"initial_positions[{chain}]")
    test.init(model, jax.tree_util.tree_map(lambda leaf: leaf[0], starts))  # settings checked before compiling

    def kernel_for(data):
        return build_kernel(model.with_data(data), proposal, test)

    @jax.jit
    def initialise(data, positions):
        return jax.vmap(kernel_for(data).init)(positions)

    def run_chunk(data, states, chain_keys, step_indices):
        step = jax.vmap(kernel_for(data).step)

        def one(carry, step_index):
            # each step's key depends only on (seed, chain, step index), never on the chunking
            keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(chain_keys, step_index)
            carry, info = step(keys, carry)
            return carry, (carry.position, info)

        return jax.lax.scan(one, states, step_indices)

    data = model.data
    states = initialise(data, starts)
    chunk = math.ceil(num_samples / num_chunks)
    lengths = [chunk] * (num_samples // chunk) + ([num_samples % chunk] if num_samples % chunk else [])
    compiled: dict[int, Any] = {}
    chain_keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.key(seed), jnp.arange(num_chains))
    compile_seconds = 0.0
    sampling_seconds = 0.0
    positions_parts: list[Any] = []
    info_parts: list[MHInfo] = []
    description = f"{test.name} x {num_chains} chain(s)"
    bar = _progress_bar(num_samples, progress, description)
    done = 0
    try:
        for length in lengths:
            step_indices = jnp.arange(done, done + length, dtype=jnp.uint32)
            if length not in compiled:
                bar.set_description(f"compiling {test.name}")
                began = time.perf_counter()
                compiled[length] = jax.jit(run_chunk).lower(data, states, chain_keys, step_indices).compile()
                compile_seconds += time.perf_counter() - began
                bar.set_description(description)
            began = time.perf_counter()
            states, (positions, info) = compiled[length](data, states, chain_keys, step_indices)
            jax.block_until_ready(states)
            sampling_seconds += time.perf_counter() - began
            positions_parts.append(jax.device_get(positions))
            info_parts.append(jax.device_get(info))
            bar.update(length)
            done += length
    except KeyboardInterrupt:
        if not info_parts:
            raise
        done = sum(part.accepted.shape[0] for part in info_parts)
        warnings.warn(f"interrupted: returning the {done} of {num_samples} draws per chain made so far", stacklevel=2)
    finally:
        bar.close()

    def stack(*parts):
        # scan stacks (draw, chain, ...); the ArviZ convention is (chain, draw, ...)
        return np.swapaxes(np.concatenate(parts, axis=0), 0, 1)

    positions = jax.tree_util.tree_map(stack, *positions_parts)
    info = {name: stack(*(getattr(part, name) for part in info_parts)) for name in MHInfo._fields}
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
    return SamplingResult(
        positions=positions,
        info=info,
        num_data=model.num_data,
        compile_seconds=compile_seconds,
        sampling_seconds=sampling_seconds,
        final_state=states,
        test_name=test.name,
        proposal_name=proposal.name,
    )


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
