"""The compiled pieces every driver and warm-up share: a chain's kernel, the chains' initial states, a chunk of
vmapped steps (:class:`ChainProgram`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax

from tallmcmc.acceptance.base import AcceptanceTest
from tallmcmc.kernel import Kernel, build_kernel
from tallmcmc.model import Model
from tallmcmc.proposals.base import Proposal

__all__ = ["ChainProgram", "chain_program", "tuned"]


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
    """

    kernel_for: Callable[..., Kernel]
    initialise: Callable
    run_chunk: Callable


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

    if layout is None:
        initialise = jax.jit(initialise)
    else:
        initialise = jax.jit(layout.shard_map(initialise, ("data", "chains"), "state"))
        run_chunk = layout.shard_map(
            run_chunk, ("data", "state", "chains", "replicated", "chains", "replicated"), ("state", "draws")
        )
    return ChainProgram(kernel_for, initialise, run_chunk)
