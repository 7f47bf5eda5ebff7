"""Continuing a run: :class:`RunState` (``result.last_state``), what ``sample(..., resume=...)`` needs to go on
exactly where another run stopped, and the checks that it goes on with the same chains.

A chain's draw ``t`` uses the key ``fold_in(fold_in(key(seed), chain), t)`` and depends otherwise only on the
chain's state (position, log-prior, the test's cache: e.g. the tail guard's pooled moments, a full-data test's
per-datum values), the step-size factor warm-up adapted and the proposal's shape (an adapted covariance). A
:class:`RunState` holds all of these and the number of steps made, so a run of ``n`` draws continued by ``m``
draws what one run of ``n + m`` draws would, bit for bit, with either driver (the asynchronous driver brings its
chains level before it hands a state out: :mod:`tallmcmc.sampling.asynchronous`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc.acceptance.base import AcceptanceTest
from tallmcmc.kernel import MHState
from tallmcmc.model import Model, Position
from tallmcmc.proposals.base import Proposal

__all__ = ["RunState", "bind_states", "check_resumable", "position_kind", "resumed_proposal", "starts_of"]


class RunState(NamedTuple):
    """Everything a run needs to go on where another stopped: pass it (or its result) as ``sample(resume=...)``.

    Attributes
    ----------
    states
        Each chain's :class:`~tallmcmc.kernel.MHState` (leading axis chain;
        with a mesh, the layout's form: one copy per data shard first), after
        ``steps_done`` kept steps. Loaded from a file
        (:func:`tallmcmc.load_result`), the state's leaves in order (a tuple);
        ``sample`` gives them their structure from the model and test it is
        called with, checking every shape and dtype.
    steps_done
        Kept steps each chain has made: the next one uses the key of step
        ``steps_done`` (warm-up keys are a stream apart).
    seed, num_chains
        The run's seed and number of chains.
    step_size_factor
        Per chain, the step-size factor warm-up adapted (``None`` if none).
    adapted_covariance
        The covariance warm-up reshaped the proposal with (``None`` if none):
        the continuation reshapes the proposal it is given with it.
    test_name, proposal_name
        Names of the test and of the proposal as given (before any reshaping).
    num_data
        N of the model.
    mesh_shape
        ``{axis name: size}`` of the mesh the chains ran on, or ``None``.
    position_kind
        How the position is built from its leaves (:func:`position_kind`).
    model
        The model (in the process that ran it; ``None`` once loaded from a file).
    fingerprint
        Loaded from a file: what identified the model that made it
        (:func:`tallmcmc.sampling.checkpoint.model_fingerprint`), checked
        against the model a resumed run is given; else ``None``.
    """

    states: Any
    steps_done: int
    seed: int
    num_chains: int
    step_size_factor: np.ndarray | None
    adapted_covariance: np.ndarray | None
    test_name: str
    proposal_name: str
    num_data: int
    mesh_shape: dict[str, int] | None
    position_kind: tuple
    model: Model | None = None
    fingerprint: dict | None = None

    @property
    def leaves(self) -> list:
        """The state's arrays in order (position leaves, log-prior, the test's cache)."""
        return jax.tree_util.tree_leaves(self.states)


def position_kind(position: Position) -> tuple:
    """How a position is rebuilt from its leaves without running code: ``("array",)``, ``("dict", keys)``,
    ``("tuple", n)``, ``("list", n)``, or ``("pytree", n)`` (rebuilt only with an example position)."""
    if (
        isinstance(position, dict)
        and all(isinstance(key, str) for key in position)
        and all(not isinstance(value, (dict, list, tuple)) for value in position.values())
    ):
        return ("dict", tuple(sorted(position)))  # jax flattens a dict in sorted key order
    if (
        isinstance(position, (tuple, list))
        and type(position) in (tuple, list)
        and all(not isinstance(value, (dict, list, tuple)) for value in position)
    ):
        return (type(position).__name__, len(position))
    leaves = jax.tree_util.tree_leaves(position)
    if len(leaves) == 1 and not isinstance(position, (dict, list, tuple)):
        return ("array",)
    return ("pytree", len(leaves))


def _num_position_leaves(kind: tuple) -> int:
    return 1 if kind[0] == "array" else len(kind[1]) if kind[0] == "dict" else int(kind[1])


def _rebuild(kind: tuple, leaves: list, example: Position | None) -> Position:
    if kind[0] == "array":
        return leaves[0]
    if kind[0] == "dict":
        return dict(zip(kind[1], leaves))
    if kind[0] in ("tuple", "list"):
        return tuple(leaves) if kind[0] == "tuple" else list(leaves)
    if example is None:
        raise ValueError(
            "resume: this state's position is a custom pytree, which a file cannot rebuild safely; pass "
            "initial_position (any position of the model's structure, e.g. the one the run started from) with resume"
        )
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(example), leaves)


def starts_of(state: RunState, example: Position | None = None) -> Position:
    """Each chain's position (leading axis chain) as a pytree: the start of the continued run's plan."""
    if isinstance(state.states, MHState):
        positions = state.states.position
        if state.mesh_shape is not None:  # one copy per data shard first
            positions = jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[0], positions)
        return positions
    leaves = list(state.states)[: _num_position_leaves(state.position_kind)]
    if state.mesh_shape is not None:
        leaves = [np.asarray(leaf)[0] for leaf in leaves]
    return _rebuild(state.position_kind, [jnp.asarray(leaf) for leaf in leaves], example)


def bind_states(state: RunState, expected: Any) -> MHState:
    """``state``'s states as the run's :class:`MHState`, checked leaf by leaf against ``expected`` (shapes and dtypes
    of the states the continuing run would make: ``jax.eval_shape`` of its initialisation)."""
    leaves = state.leaves
    wanted, structure = jax.tree_util.tree_flatten(expected)
    if len(leaves) != len(wanted):
        raise ValueError(
            f"resume: the state holds {len(leaves)} arrays but this model, proposal and test keep {len(wanted)} per "
            "chain state: it comes from another model or test; resume with the ones it was made with"
        )
    bound = []
    for index, (leaf, shape) in enumerate(zip(leaves, wanted)):
        dtype = getattr(leaf, "dtype", None)
        if jax.dtypes.issubdtype(shape.dtype, jax.dtypes.prng_key):
            if dtype is None or not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
                raise ValueError(f"resume: state array {index} should hold random keys; it comes from another test")
            bound.append(leaf)
            continue
        if tuple(np.shape(leaf)) != tuple(shape.shape) or np.dtype(dtype) != np.dtype(shape.dtype):
            ends = np.cumsum([len(jax.tree_util.tree_leaves(part)) for part in expected])
            what = ("the position", "the log-prior", "the test's cache", "the proposal's state")[
                int(np.searchsorted(ends, index, side="right"))
            ]
            raise ValueError(
                f"resume: state array {index} ({what}) has shape {tuple(np.shape(leaf))} and dtype {np.dtype(dtype)}, "
                f"but this call's chains need {tuple(shape.shape)} {np.dtype(shape.dtype)}: the state comes from "
                "another model, test, number of chains or mesh; resume with the ones it was made with"
            )
        bound.append(leaf)
    return jax.tree_util.tree_unflatten(structure, bound)


def check_resumable(
    state: RunState, model: Model, proposal: Proposal, test: AcceptanceTest, num_chains: int, mesh
) -> None:
    """Refuse to continue ``state`` with another test, proposal, N, number of chains or mesh, naming the argument."""
    mesh_shape = None if mesh is None else dict(mesh.shape)
    mismatches = [
        ("test", test.name, state.test_name),
        ("proposal", proposal.name, state.proposal_name),
        ("num_chains", num_chains, state.num_chains),
        ("model", f"N = {model.num_data}", f"N = {state.num_data}"),
        ("mesh", mesh_shape, state.mesh_shape),
    ]
    for name, given, saved in mismatches:
        if given != saved:
            raise ValueError(
                f"resume: {name} is {given!r} here but the run being resumed had {saved!r}; continue a run with the "
                "same model, proposal, test, num_chains and mesh"
            )


def resumed_proposal(state: RunState, proposal: Proposal) -> Proposal:
    """The proposal the continued draws use: ``proposal`` reshaped by the covariance warm-up adapted, if any."""
    if state.adapted_covariance is None:
        return proposal
    return proposal.with_covariance(np.asarray(state.adapted_covariance))
