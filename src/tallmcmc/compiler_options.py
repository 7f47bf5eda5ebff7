"""The XLA options chain programs are compiled with (layer 1: the sampling drivers and the fast setup use them).

On a CPU, XLA hands each fused kernel to LLVM at its default optimisation level; at level 1 a default
``sample_tall`` run's chain program compiles about a fifth faster and draws as fast (``docs/compilation.md``,
"Where a first run's compilation goes": the minibatch-test and exact-test steps timed at both levels). Every
program that advances chains (both drivers' loops, their starts, warm-up) is compiled with the same options, so the
drivers still draw the same bits. On other platforms (a GPU's kernels are not LLVM-optimised the same way, and
were not measured) nothing is set.

Opt out with the environment variable ``TALLMCMC_XLA_OPTIONS=default`` (read when a program is compiled): XLA's own
options everywhere. The draws of a run depend on the options (LLVM may contract a multiply and an add into one
fused operation at one level and not at the other), so two runs compare bit for bit only under the same setting.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import jax

__all__ = ["CPU_OPTIONS", "ENVIRONMENT_VARIABLE", "chain_compiler_options", "jit"]

ENVIRONMENT_VARIABLE = "TALLMCMC_XLA_OPTIONS"
#: XLA's compiler options for chain programs on a CPU.
CPU_OPTIONS = {"xla_backend_optimization_level": 1}


def chain_compiler_options() -> dict[str, Any] | None:
    """The compiler options of a chain program on the default backend (``None``: XLA's own)."""
    if os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower() == "default":
        return None
    return dict(CPU_OPTIONS) if jax.default_backend() == "cpu" else None


def jit(function: Callable, **options) -> Any:
    """``jax.jit(function)`` with :func:`chain_compiler_options`."""
    return jax.jit(function, compiler_options=chain_compiler_options(), **options)
