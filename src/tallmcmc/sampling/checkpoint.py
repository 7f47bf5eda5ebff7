"""Runs read back from disk (:func:`load_result`), and the checkpoint file ``sample(..., checkpoint=path)``
resumes from and writes to as it goes (:class:`CheckpointFile`). The file's format: :mod:`tallmcmc.sampling.run_file`.

Nothing in a file is ever executed: reading it parses arrays and JSON only (no pickle), so a file from someone
else is safe to open.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jax
import numpy as np

from tallmcmc.kernel import MHInfo
from tallmcmc.model import Model, Position
from tallmcmc.sampling.continuation import RunState, starts_of
from tallmcmc.sampling.result import SamplingResult
from tallmcmc.sampling.run_file import (
    FORMAT,
    FORMAT_VERSION,
    STATE_GROUP,
    check_model,
    check_writable,
    kind_from_json,
    library_version,
    save_result,
)

__all__ = ["CheckpointFile", "load_result"]


def load_result(path: str | os.PathLike, *, argument: str = "path") -> SamplingResult:
    """Read a result written by :meth:`SamplingResult.save` or ``sample(checkpoint=...)``.

    Reads arrays and JSON only: nothing in the file is executed. Returns a
    :class:`SamplingResult` whose ``final_state`` is ``None`` and whose
    ``last_state`` (if the run could be resumed) holds the state's arrays in
    order, to be given to ``sample(..., resume=result)`` (which checks them
    against the model, proposal and test it is called with). Positions are
    rebuilt as they were for arrays, dicts of arrays, tuples and lists; other
    pytrees come back as a dict ``{"theta_0": …}``. A file that is not one,
    is truncated or was written by another library version raises a
    ``ValueError`` naming ``argument``.
    """
    import xarray as xr

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{argument}={str(path)!r} does not exist")
    try:
        with xr.open_datatree(path, engine="h5netcdf") as opened:
            tree = opened.load()
        meta = json.loads(tree[STATE_GROUP].attrs["tallmcmc"])
    except Exception as error:  # noqa: BLE001 - any failure to parse is the same message
        raise ValueError(
            f"{argument}={str(path)!r} cannot be read as a tallmcmc run ({type(error).__name__}: {error}); it is "
            "truncated, corrupt or not written by tallmcmc. Delete it to start afresh"
        ) from error
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{argument}={str(path)!r} is not a tallmcmc run file of format version {FORMAT_VERSION}")
    if meta["library_version"] != library_version():
        raise ValueError(
            f"{argument}={str(path)!r} was written by tallmcmc {meta['library_version']}; this is "
            f"{library_version()}. Resume it with that version (pip install tallmcmc=={meta['library_version']}), "
            "or delete it to start afresh"
        )
    try:
        return _result_from(tree, meta)
    except (KeyError, ValueError, IndexError) as error:
        raise ValueError(
            f"{argument}={str(path)!r} is incomplete ({type(error).__name__}: {error}); delete it to start afresh"
        ) from error


def _draws(dataset, kind: list) -> Position:
    names = list(dataset.data_vars)
    values = {name: np.asarray(dataset[name].values) for name in names}
    kind = kind_from_json(kind)
    if kind[0] == "array":
        return values["theta"]
    if kind[0] == "dict":
        return {name: values[name] for name in kind[1]}
    if kind[0] in ("tuple", "list"):
        ordered = [values[f"theta_{i}"] for i in range(int(kind[1]))]
        return tuple(ordered) if kind[0] == "tuple" else ordered
    return values


def _result_from(tree, meta: dict[str, Any]) -> SamplingResult:
    stats = tree["sample_stats"].to_dataset()
    info = {name: np.asarray(stats[name].values) for name in MHInfo._fields}
    warmup_positions = warmup_info = None
    if meta["warmup_draws_kind"] is not None:
        warmup_positions = _draws(tree["warmup_posterior"].to_dataset(), meta["warmup_draws_kind"])
        warm = tree["warmup_sample_stats"].to_dataset()
        warmup_info = {name: np.asarray(warm[name].values) for name in MHInfo._fields}
    state_data = tree[STATE_GROUP].to_dataset()
    saved = meta["state"]
    last_state = factors = covariance = None
    if "step_size_factor" in state_data:
        factors = np.asarray(state_data["step_size_factor"].values)
    if "adapted_covariance" in state_data:
        covariance = np.asarray(state_data["adapted_covariance"].values)
    if saved is not None:
        leaves = []
        for index in range(saved["num_leaves"]):
            leaf = np.asarray(state_data[f"state_{index}"].values)
            impl = saved["prng_keys"].get(str(index))
            leaves.append(leaf if impl is None else jax.random.wrap_key_data(leaf, impl=impl))
        last_state = RunState(
            states=tuple(leaves),
            steps_done=saved["steps_done"],
            seed=saved["seed"],
            num_chains=saved["num_chains"],
            step_size_factor=factors,
            adapted_covariance=covariance,
            test_name=saved["test_name"],
            proposal_name=saved["proposal_name"],
            num_data=saved["num_data"],
            mesh_shape=saved["mesh_shape"],
            position_kind=kind_from_json(saved["position_kind"]),
            model=None,
            fingerprint=saved["model"],
        )
    return SamplingResult(
        positions=_draws(tree["posterior"].to_dataset(), meta["draws_kind"]),
        info=info,
        num_data=meta["num_data"],
        compile_seconds=meta["compile_seconds"],
        sampling_seconds=meta["sampling_seconds"],
        final_state=None,
        test_name=meta["test_name"],
        proposal_name=meta["proposal_name"],
        inexact_proposal=bool(meta.get("inexact_proposal", False)),
        made_by=meta.get("made_by"),
        setup_data_used=dict(meta["setup_data_used"]),
        warmup_positions=warmup_positions,
        warmup_info=warmup_info,
        step_size_factor=factors,
        adapted_covariance=covariance,
        driver=meta["driver"],
        loop_iterations=meta["loop_iterations"],
        last_state=last_state,
        first_draw=meta["first_draw"],
        target_draws=meta["target_draws"],
    )


# -------------------------------------------------------------------------------------- checkpoints as it goes


class CheckpointFile:
    """The file ``sample(..., checkpoint=path)`` resumes from and writes to (see :func:`tallmcmc.sample`).

    ``made_by``: the record of the arguments of the call that runs (``SamplingResult.made_by``), written into every
    checkpoint of the run, the ones part-way through included; :func:`tallmcmc.sample_tall` passes its own, so that
    a re-run or a continuation of a killed run is checked against the arguments that made it.
    """

    def __init__(self, path: str | os.PathLike, every: int | None, made_by: dict[str, Any] | None = None):
        self.path = Path(path)
        check_writable(self.path, "checkpoint")  # before anything is sampled, not after an hour of it
        if every is not None and (isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1):
            raise ValueError(f"checkpoint_every must be a whole number of steps >= 1; got {every!r}")
        self.every = None if every is None else int(every)
        self.made_by = made_by
        self._read: SamplingResult | None = None  # the file as read, until this object writes it

    @classmethod
    def given(
        cls, checkpoint: str | os.PathLike | CheckpointFile | None, every: int | None, made_by=None
    ) -> CheckpointFile | None:
        """A call's ``checkpoint=`` and ``checkpoint_every=`` as its file (``None`` without a checkpoint): a path
        with ``every`` and ``made_by``, or a :class:`CheckpointFile` given as it is (its own ``every``)."""
        if isinstance(checkpoint, cls):
            if every is not None:
                raise ValueError("checkpoint_every: give it to the CheckpointFile passed as checkpoint")
            return checkpoint
        if checkpoint is None:
            if every is not None:
                raise ValueError("checkpoint_every needs checkpoint (the file to write)")
            return None
        return cls(checkpoint, every, made_by)

    def saved(self) -> SamplingResult | None:
        """The run in the file, or ``None`` if there is none yet (read once: ``sample_tall`` checks the file's
        record before ``sample`` goes on from it, and a file holding all the draws may be large)."""
        if self._read is None and self.path.exists():
            self._read = load_result(self.path, argument="checkpoint")
        return self._read

    def check_continues(
        self,
        saved: SamplingResult,
        model: Model,
        test_name: str,
        proposal_name: str,
        num_chains: int | None,
        seed: int | None,
        target: int,
    ) -> None:
        """Refuse a file that is not this call's run (another model, test, proposal, seed, chains or length)."""
        state = saved.last_state
        where = f"checkpoint={str(self.path)!r}"
        if state is None:
            raise ValueError(
                f"{where} holds draws but no state to resume from (an interrupted run whose chains "
                "were not level); delete it to start afresh"
            )
        for name, given, had in (
            ("test", test_name, state.test_name),
            ("proposal", proposal_name, state.proposal_name),
            ("num_chains", num_chains, state.num_chains),
            ("seed", seed, state.seed),
        ):
            if given is not None and given != had:
                raise ValueError(
                    f"{where} was written by a run with {name}={had!r}; this call has {name}={given!r}. "
                    "Resume with the same settings, or give another checkpoint path"
                )
        if saved.target_draws is not None and saved.target_draws != target:
            raise ValueError(
                f"{where} was written by a run of {saved.target_draws} draws per chain; this call asks for {target} "
                "(num_samples). Resume with the same num_samples, or continue the loaded result with "
                "sample(..., resume=tallmcmc.load_result(path), num_samples=...) (with sample_tall(..., resume=...) "
                "for a run of sample_tall)"
            )
        if saved.num_draws > target:
            raise ValueError(f"{where} already holds {saved.num_draws} draws per chain, more than the {target} asked")
        check_model(state.fingerprint, model, jax.tree_util.tree_map(lambda leaf: leaf[0], starts_of(state)), where)

    def write(self, result: SamplingResult, target: int) -> None:
        if self.made_by is not None and result.made_by is None:
            result.made_by = self.made_by
        save_result(result, self.path, target=target, argument="checkpoint")
        self._read = None
