"""Lowered programs kept between processes — the chain program, and :func:`tallmcmc.fast_setup`'s,
:func:`tallmcmc.find_mode`'s and :func:`tallmcmc.taylor_control_variate`'s data passes, ``fast_setup``'s prior terms
and the chains' keys (:class:`KeptPass`) — so that
a later run of the same script neither traces nor lowers them again (``docs/compilation.md``, "The lowered chain
program, kept"); and :class:`Traced`, the trace that keys each (layer 1: the setup's modules and the sampling
drivers use it).

JAX's persistent cache keeps compiled executables keyed by the *lowered* module, so every process still traces
the vmapped loop of a chain program and lowers it before it can look the executable up: about 0.55 s of a
second ``sample_tall`` run at N = 10⁶, d = 10 on a 2-core CPU, half of what that run spent compiling. This
module keys the lowered program by what determines it and keeps it with :mod:`jax.export`:

* one chain's step, traced unbatched (about 0.1 s): its printed jaxpr, which the loop replays with the trace's
  constants (the control variate's centre and sums, a preconditioner, …) as an argument, like the data: neither's
  values are part of the key, only their shapes, so other data of the same shapes find the same program;
* the arguments' tree, shapes, dtypes and placements, the loop's compiled length and the step variant;
* the source of every tallmcmc module (which builds the loop around the step), JAX's version, the backend and
  device kind, the XLA options and every JAX flag but those that only log (:data:`LOGGING_FLAGS`).

The setup's, ``find_mode``'s and ``taylor_control_variate``'s data passes are kept the same way (:class:`KeptPass`),
keyed by their likelihood's trace of one chunk of rows (the pass replays it with that trace's constants as an
argument), the pass's arguments and what else shapes it (chunk length; for ``find_mode`` the prior's trace and the
temperature; for the control variate the pass's name, one trace per chunk size).

A program found under its key is deserialised and compiled (a persistent-cache hit after the first run); one
not found is exported from the loop (the tracing and lowering a compilation does anyway), written, and compiled
the same way, so the first run and later ones run the same program and draw the same. The export's inputs and
outputs are flat lists of arrays (its serialisation knows only registered pytree types), rebuilt here; an entry
whose input shapes or output count do not match is exported again. The folder is ``tallmcmc-programs`` inside
JAX's cache folder (which JAX's own cache never lists); with the cache off (``TALLMCMC_COMPILATION_CACHE=0``), on
a mesh, or for a program JAX cannot export (a host callback), the loop is compiled directly, as before.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.extend
import numpy as np

from tallmcmc import compilation_cache, compiler_options, threefry_lowering
from tallmcmc._device import jax_dtype

__all__ = [
    "FOLDER_NAME",
    "LOGGING_FLAGS",
    "KeptPass",
    "Traced",
    "compile_kept",
    "compile_keyed_by_trace",
    "compile_kept_or_direct",
    "folder",
    "is_kept",
    "program_key",
    "setup_digest",
]

_log = logging.getLogger(__name__)

#: The folder, inside JAX's persistent cache folder, that holds the exported programs.
FOLDER_NAME = compilation_cache.PROGRAMS_FOLDER  # whose files the cache's bound counts and prunes


class Traced(NamedTuple):
    """A function traced once (:meth:`of`): its jaxpr, the tree and shapes of its result.

    :meth:`replay` computes the function again from the jaxpr (inlined in the calling trace) with any constants in
    place of the trace's own. The chain program replays one chain's step this way
    (:meth:`tallmcmc.sampling.program.ChainProgram.one_chain_step`) with that trace's constants — what the step closes over: the control variate's centre and sums, a
    preconditioner, … — as an argument of its loop, so that the lowered loop holds none of their values: a run on
    other data of the same shapes compiles the same program (found in the persistent cache), and the program is keyed
    by this trace without the constants' values.
    """

    jaxpr: jax.extend.core.ClosedJaxpr
    out_tree: Any
    shapes: Any

    @classmethod
    def of(cls, function: Callable, *arguments) -> Traced:
        """``function`` traced at ``arguments``' types (arrays or ``jax.ShapeDtypeStruct``)."""
        closed, shapes = jax.make_jaxpr(function, return_shape=True)(*arguments)
        return cls(closed, jax.tree_util.tree_structure(shapes), shapes)

    @property
    def constants(self) -> list:
        """The trace's constants, on the device (as a compiled program's argument)."""
        return [jax.device_put(constant) for constant in self.jaxpr.consts]

    def replay(self, constants, *arguments):
        """The function at ``arguments`` with ``constants`` for the trace's own."""
        closed = jax.extend.core.ClosedJaxpr(self.jaxpr.jaxpr, list(constants))
        flat = jax.extend.core.jaxpr_as_fun(closed)(*jax.tree_util.tree_leaves(arguments))
        return jax.tree_util.tree_unflatten(self.out_tree, flat)


def folder() -> Path | None:
    """Where exported programs are kept: ``tallmcmc-programs`` in JAX's persistent cache folder, or ``None``
    when that cache is off or not a local folder."""
    directory = jax.config.jax_compilation_cache_dir
    if not directory or "://" in str(directory):
        return None
    return Path(directory) / FOLDER_NAME


@functools.cache
def _source_digest() -> bytes:
    """A digest of every tallmcmc module's source (the loop around the step is built by them)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.digest()


#: JAX flags that only log, left out of the key (so that ``jax_log_compiles``, which ``bench_compilation.py --where``
#: turns on, still finds the kept program).
LOGGING_FLAGS = frozenset({"jax_log_compiles", "jax_explain_cache_misses"})


def _environment() -> str:
    """JAX's and jaxlib's versions, the backend, the device kind, the XLA options, the Threefry lowering
    (:mod:`tallmcmc.threefry_lowering`) and every JAX flag but those that only log."""
    device = jax.devices()[0]
    flags = sorted((name, repr(value)) for name, value in jax.config.values.items() if name not in LOGGING_FLAGS)
    return repr(
        (
            jax.__version__,
            importlib.metadata.version("jaxlib"),
            jax.default_backend(),
            device.device_kind,
            jax.device_count(),
            compiler_options.chain_compiler_options(),
            threefry_lowering.APPLIED,
            flags,
        )
    )


def setup_digest() -> bytes:
    """A digest of what every kept program depends on beyond its own trace: tallmcmc's sources, JAX's and jaxlib's
    versions, the backend and devices, the XLA options and JAX's flags."""
    digest = hashlib.sha256(_source_digest())
    digest.update(_environment().encode())
    return digest.digest()


def program_key(step: jax.extend.core.ClosedJaxpr, arguments: tuple, variant: tuple) -> str:
    """The key of the loop that replays ``step`` (one chain's step, traced unbatched, the data an argument) for
    ``arguments`` (the loop's, ``step``'s constants among them, whose values do not matter, only their tree, shapes,
    dtypes and placements) and ``variant`` (the loop's compiled length and anything else of its own that shapes
    it). ``step`` enters by its printed jaxpr, which names its operations, literals and constants' types but no
    constant's value: the loop takes those as an argument."""
    digest = hashlib.sha256(setup_digest())
    digest.update(repr(variant).encode())
    digest.update(str(step.jaxpr).encode())
    leaves, tree = jax.tree_util.tree_flatten(arguments)
    digest.update(str(tree).encode())
    for leaf in leaves:
        digest.update(
            f"{_shape_and_dtype(leaf)}|{getattr(leaf, 'weak_type', None)}|{getattr(leaf, 'sharding', None)}".encode()
        )
    return digest.hexdigest()


def _shape_and_dtype(leaf) -> tuple[tuple[int, ...], str]:
    """A leaf's shape and dtype as JAX sees it (a NumPy float64 leaf is float32 without x64)."""
    return tuple(np.shape(leaf)), str(jax_dtype(leaf))


def _load(path: Path, leaves: list, num_outputs: int):
    """The exported program at ``path``, or ``None`` if absent, unreadable or not the one these arguments need."""
    try:
        exported = jax.export.deserialize(bytearray(path.read_bytes()))
    except Exception:  # absent, half-written by a process that died, from another flatbuffers: export it again
        return None
    if [(tuple(aval.shape), str(aval.dtype)) for aval in exported.in_avals] != [_shape_and_dtype(x) for x in leaves]:
        return None
    if len(exported.out_avals) != num_outputs:
        return None
    return exported


def _store(path: Path, exported) -> None:
    """Writes ``exported`` to ``path`` whole or not at all (a temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".writing-")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(exported.serialize())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def is_kept(key: str, where: Path) -> bool:
    """Whether a program is kept under ``key`` in ``where`` (it may still fail to load: :func:`compile_kept`
    exports it again then)."""
    return (where / f"{key}.jaxexport").is_file()


def compile_kept(loop: Callable, arguments: tuple, out_tree, key: str, where: Path) -> Callable:
    """``loop`` compiled for ``arguments`` through the exported program kept under ``key`` in ``where`` (exported
    and written first if absent); returns a function of the loop's arguments that gives its outputs as the tree
    ``out_tree``."""
    leaves = jax.tree_util.tree_leaves(arguments)
    path = where / f"{key}.jaxexport"
    exported = _load(path, leaves, out_tree.num_leaves)
    if exported is None:
        in_tree = jax.tree_util.tree_structure(arguments)

        traced = {}

        def flat(*flat_arguments):
            outputs, traced["tree"] = jax.tree_util.tree_flatten(
                loop(*jax.tree_util.tree_unflatten(in_tree, flat_arguments))
            )
            return tuple(outputs)

        exported = jax.export.export(jax.jit(flat))(*leaves)
        if traced["tree"] != out_tree:  # a later run rebuilds the outputs with out_tree: it must be the loop's own
            raise ValueError(f"the loop's outputs are {traced['tree']}, not {out_tree}")
        try:
            _store(path, exported)
        except OSError:  # a read-only or full cache folder: this run still has its program
            pass
    compiled = compiler_options.jit(exported.call).lower(*leaves).compile()

    def run(*again: Any):
        return jax.tree_util.tree_unflatten(out_tree, compiled(*jax.tree_util.tree_leaves(again)))

    return run


def compile_kept_or_direct(
    function: Callable, arguments: tuple, out_tree, key: str | None, where: Path | None, what: str
) -> Callable:
    """``function`` compiled for ``arguments``: through the lowered program kept under ``key`` in ``where``
    (:func:`compile_kept`) where both are given, else — and wherever keeping fails: a host callback cannot be
    exported — directly; with the chain programs' XLA options either way (:mod:`tallmcmc.compiler_options`).
    ``what`` names the program in the debug log."""
    if key is not None and where is not None:
        try:
            return compile_kept(function, arguments, out_tree, key, where)
        except Exception as error:  # noqa: BLE001 - what the direct compilation does not raise too is ours to skip
            _log.debug("%s compiled directly, not kept: %s: %s", what, type(error).__name__, error)
    return compiler_options.jit(function).lower(*arguments).compile()


def compile_keyed_by_trace(
    function: Callable, arguments: tuple, out_tree, trace: jax.extend.core.ClosedJaxpr, variant: tuple, what: str
) -> Callable:
    """:func:`compile_kept_or_direct` of ``function`` under the :func:`program_key` of ``trace``, ``arguments`` and
    ``variant`` where JAX's cache has a folder (directly where it has none, or where the key cannot be made)."""
    where, key = folder(), None
    if where is not None:
        try:
            key = program_key(trace, arguments, variant)
        except Exception as error:  # noqa: BLE001 - the program compiles without its key
            _log.debug("%s: no program key: %s: %s", what, type(error).__name__, error)
    return compile_kept_or_direct(function, arguments, out_tree, key, where, what)


class KeptPass:
    """A data pass ``function(*arguments)`` compiled at its first call: through the lowered program kept under the
    key of ``trace`` (the pass's likelihood traced on one chunk of rows, whose constants the pass takes as an
    argument) and ``variant`` (what else shapes the pass) where JAX's cache has a folder, else — and wherever
    keeping fails — directly; with the chain programs' XLA options either way (a plain data pass: level-1 LLVM costs
    it nothing, :mod:`tallmcmc.compiler_options`). ``out_tree``: the tree of the pass's outputs. Compiled once per
    argument signature (tree, shapes, dtypes), as ``jax.jit`` would.
    :func:`tallmcmc.fast_setup`, :func:`tallmcmc.find_mode` and :func:`tallmcmc.taylor_control_variate` keep their
    passes with it, ``fast_setup`` its prior's terms and :meth:`tallmcmc.sampling.plan.RunPlan.chain_keys` the
    chains' keys."""

    def __init__(self, function: Callable, trace, variant: tuple, out_tree):
        self._function, self._trace, self._variant, self._out_tree = function, trace, variant, out_tree
        self._compiled: dict[tuple, Callable] = {}

    def __call__(self, *arguments):
        leaves, tree = jax.tree_util.tree_flatten(arguments)
        signature = (tree, tuple(_shape_and_dtype(leaf) for leaf in leaves))
        if signature not in self._compiled:
            self._compiled[signature] = self._compile(arguments)
        return self._compiled[signature](*arguments)

    def _compile(self, arguments: tuple) -> Callable:
        return compile_keyed_by_trace(
            self._function, arguments, self._out_tree, self._trace.jaxpr, self._variant, self._variant[0]
        )
