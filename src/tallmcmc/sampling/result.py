"""The result of a run: :class:`SamplingResult`, draws with explicit ``(chain, draw, …)`` axes (the ArviZ convention)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from tallmcmc.kernel import MHState
from tallmcmc.model import Model, Position

__all__ = ["SamplingResult", "reported_draws"]


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

        posterior = named_variables(self.positions)
        sample_stats = {key: np.asarray(value) for key, value in self.info.items()}
        if self.warmup_info is None:
            return az.from_dict(posterior=posterior, sample_stats=sample_stats, attrs=self._attrs())
        return az.from_dict(
            posterior=posterior,
            sample_stats=sample_stats,
            warmup_posterior=named_variables(self.warmup_positions),
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


def named_variables(positions: Position) -> dict[str, np.ndarray]:
    """ArviZ variables of draws: a dict's keys, ``theta`` for one array, ``theta_0``, … for tuples and other pytrees."""
    if isinstance(positions, dict):
        return {str(key): np.asarray(value) for key, value in positions.items()}
    if isinstance(positions, (tuple, list)):
        return {f"theta_{i}": np.asarray(value) for i, value in enumerate(positions)}
    leaves, _ = jax.tree_util.tree_flatten(positions)
    if len(leaves) == 1:
        return {"theta": np.asarray(leaves[0])}
    return {f"theta_{i}": np.asarray(value) for i, value in enumerate(leaves)}


def reported_draws(model: Model, positions: Position) -> Position:
    """Draws ``(chain, draw, …)`` as the user reads them: ``model.constrain`` applied to each, if the model has one."""
    if positions is None or model.constrain is None:
        return positions
    constrained = jax.jit(jax.vmap(jax.vmap(model.constrain)))(positions)
    return jax.tree_util.tree_map(np.asarray, constrained)
