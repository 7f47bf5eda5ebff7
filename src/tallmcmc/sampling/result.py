"""The result of a run: :class:`SamplingResult`, draws with explicit ``(chain, draw, …)`` axes (the ArviZ convention)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from tallmcmc.interop.arviz import named_variables
from tallmcmc.kernel import MHState
from tallmcmc.model import Model, Position

__all__ = ["SamplingResult", "named_variables", "reported_draws"]


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
        Wall time spent compiling (the warm-up's programs included, when the
        result holds a warm-up) and running the kept draws (compilation
        excluded). An adaptive warm-up and the kept draws after it share one
        program, compiled once.
    final_state
        The chains' last :class:`~tallmcmc.kernel.MHState` (leading axis chain);
        ``None`` in a loaded result (:func:`tallmcmc.load_result`).
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
        From :func:`tallmcmc.sample_tall`: its :class:`tallmcmc.tall_diagnosis.TallDiagnosis`
        (decision, setup passes, residuals, r̂, ESS); ``None`` from :func:`sample`.
    last_state
        What ``sample(..., resume=...)`` needs to go on where this run stopped
        (:class:`~tallmcmc.sampling.continuation.RunState`: every chain's
        state, step counter and adaptation); ``None`` if an interrupted run
        could not bring its asynchronous chains level.
    first_draw
        The step index of the first draw held: 0, or for a run that
        continued ``resume=result.last_state``, the steps made before it.
    target_draws
        Loaded from a checkpoint: the draws per chain the run was asked for
        (``None`` otherwise).
    inexact_proposal
        ``True`` if a proposal without its true log ratio (SGHMC) ran under a
        real test (``sample(..., allow_inexact_proposal=True)``): the draws do
        not target the posterior.
    made_by
        From :func:`tallmcmc.sample_tall`: the arguments that shape its setup
        and warm-up (``seed``, ``num_chains``, ``num_warmup``, ``batch_size``,
        ``minibatch_test``, ``setup``, ``residual_cost``, ``chi``, and whether
        ``initial_position``, ``bound``, ``mode`` and ``control_variate``
        were given), JSON-able and saved with the run, so that
        ``sample_tall(model, resume=tallmcmc.load_result(path))`` can redo
        them in a later process; ``None`` from :func:`sample`.
    program
        The compiled pieces that made the kept draws
        (:class:`~tallmcmc.sampling.program.ChainProgram`), so that
        ``sample(..., resume=result)`` with the same model, proposal and test
        in this process compiles nothing more; ``None`` in a loaded result.
        Not saved, not compared, not shown.
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
    last_state: Any = None
    first_draw: int = 0
    target_draws: int | None = None
    inexact_proposal: bool = False
    made_by: dict[str, Any] | None = None
    program: Any = dataclasses.field(default=None, repr=False, compare=False)

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

    def __repr__(self) -> str:
        """A few lines: the draws' shape and variables, what made them, what they cost, the diagnosis if any.

        The default dataclass repr printed every array, the model's data and the state to resume from (over 100,000
        characters for a default ``sample_tall`` at N = 10⁶); the fields themselves hold all of it.
        """
        lines = [
            f"SamplingResult: {self.num_chains} chains × {self.num_draws:,} draws of {_variables(self.positions)}, "
            f"N = {self.num_data:,}",
            f"  {self.test_name or '?'} test, {self.proposal_name or '?'} proposal, {self.driver} driver"
            + (f"; acceptance {self.acceptance_rate:.3f}" if self.num_draws else ""),
        ]
        cost = []
        if self.num_draws:
            cost.append(f"data per step {100 * float(np.mean(self.data_used)) / self.num_data:.3g}% of N")
        if self.setup_data_used:
            passes = self.setup_data_passes
            cost.append(f"setup {passes:.3g} pass{'' if passes == 1 else 'es'} over N")
        cost.append(f"sampling {self.sampling_seconds:.3g} s, compiling {self.compile_seconds:.3g} s")
        lines.append("  " + "; ".join(cost))
        if self.inexact_proposal:
            lines.append("  inexact proposal under a real test: the draws do not target the posterior")
        if self.diagnosis is not None:
            lines.append(f"  diagnosis: {self.diagnosis!r}")
        return "\n".join(lines)

    def get_samples(self, group_by_chain: bool = False) -> Position:
        """The draws as NumPyro's ``MCMC.get_samples`` returns them.

        Parameters
        ----------
        group_by_chain
            ``False`` (default): every leaf of :attr:`positions` with its
            ``(chain, draw)`` axes merged into one, chains one after another,
            as NumPyro's ``MCMC.get_samples()``; ``True``: :attr:`positions`
            itself.

        Returns
        -------
        Position
            E.g. ``{"beta": (chain·draw, 5), "sigma": (chain·draw,)}`` for a
            model from :func:`tallmcmc.from_numpyro`, deterministic sites
            included; so ``numpyro.infer.Predictive(model,
            posterior_samples=result.get_samples())`` works as after NUTS
            (``docs/numpyro.md``, "After sampling").
        """
        if group_by_chain:
            return self.positions
        return jax.tree_util.tree_map(
            lambda leaf: np.reshape(np.asarray(leaf), (-1, *np.shape(leaf)[2:])), self.positions
        )

    def to_inference_data(self):
        """The draws and step statistics as the installed ArviZ's own object.

        An :class:`arviz.InferenceData` under ArviZ 0.x, the
        :class:`xarray.DataTree` of :meth:`to_datatree` under ArviZ 1.x
        (:func:`tallmcmc.interop.arviz.inference_data`, ``docs/arviz.md``).
        Positions that are dicts keep their keys as variable names; a bare
        array is called ``theta``; tuples and lists become ``theta_0``, …
        Test statistics go to ``sample_stats``.
        """
        from tallmcmc.interop.arviz import inference_data

        return inference_data(self)

    def to_datatree(self):
        """The draws and step statistics as an :class:`xarray.DataTree` with ArviZ's groups (needs only xarray)."""
        from tallmcmc.interop.arviz import to_datatree

        return to_datatree(self)

    def save(self, path) -> None:
        """Write the run to ``path`` (one NetCDF file, atomically): draws, statistics, setup counts, timings,
        the state to resume from and the library version.

        ``tallmcmc.load_result(path)`` reads it back and ``sample(...,
        resume=...)`` continues it; ``xarray.open_datatree(path)`` or ArviZ
        open it without tallmcmc (:mod:`tallmcmc.sampling.run_file`).
        """
        from tallmcmc.sampling.run_file import save_result

        save_result(self, path)

    def extended_by(self, later: SamplingResult) -> SamplingResult:
        """This run with the draws of ``later`` (a run that continued ``self.last_state``) appended.

        Setup counts and warm-up are this run's, timings and loop iterations
        the sums, the final and last states ``later``'s.
        """
        if later.first_draw != self.first_draw + self.num_draws:
            raise ValueError(
                f"extended_by: the later run starts at draw {later.first_draw}, but this one ends at draw "
                f"{self.first_draw + self.num_draws}; it does not continue this run"
            )

        def join(a, b):
            return np.concatenate([np.asarray(a), np.asarray(b)], axis=1)

        iterations = (
            None
            if self.loop_iterations is None and later.loop_iterations is None
            else (self.loop_iterations or 0) + (later.loop_iterations or 0)
        )
        return dataclasses.replace(
            self,
            positions=jax.tree_util.tree_map(join, self.positions, later.positions),
            info={name: join(self.info[name], later.info[name]) for name in self.info},
            compile_seconds=self.compile_seconds + later.compile_seconds,
            sampling_seconds=self.sampling_seconds + later.sampling_seconds,
            final_state=later.final_state,
            last_state=later.last_state,
            program=later.program,
            driver=later.driver,
            loop_iterations=iterations,
            diagnosis=None,
            target_draws=None,
        )

    def _attrs(self) -> dict[str, Any]:
        return {
            "test": self.test_name,
            "proposal": self.proposal_name,
            "num_data": self.num_data,
            "sampling_seconds": self.sampling_seconds,
            "setup_data_passes": self.setup_data_passes,
        }


def _variables(positions: Position) -> str:
    """The draws' variables and their shapes per draw: ``10 parameters`` for a bare array, else each leaf's path."""
    leaves = jax.tree_util.tree_leaves_with_path(positions)
    count = sum(int(np.prod(np.shape(leaf)[2:])) for _, leaf in leaves)
    counted = f"{count:,} parameter{'' if count == 1 else 's'}"
    if len(leaves) == 1 and not leaves[0][0]:
        shape = np.shape(leaves[0][1])[2:]
        return counted + (f" {shape}" if len(shape) > 1 else "")
    named = ", ".join(f"{jax.tree_util.keystr(path).strip('[]')} {np.shape(leaf)[2:]}" for path, leaf in leaves)
    return f"{counted} ({named})"


def reported_draws(model: Model, positions: Position) -> Position:
    """Draws ``(chain, draw, …)`` as the user reads them: ``model.constrain`` applied to each, if the model has one."""
    if positions is None or model.constrain is None:
        return positions
    if jax.tree_util.tree_leaves(positions)[0].shape[1] == 0:  # no draws yet (a checkpoint right after warm-up)
        one = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[2:], leaf.dtype), positions)
        shapes = jax.eval_shape(model.constrain, one)
        chains = jax.tree_util.tree_leaves(positions)[0].shape[0]
        return jax.tree_util.tree_map(lambda shape: np.zeros((chains, 0, *shape.shape), shape.dtype), shapes)
    constrained = jax.jit(jax.vmap(jax.vmap(model.constrain)))(positions)
    return jax.tree_util.tree_map(np.asarray, constrained)
