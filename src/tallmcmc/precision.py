"""Float32 means float32: a model's matrix products at full precision unless the user chose otherwise.

On GPUs (and TPUs) XLA runs a float32 matrix product at JAX's *default* precision on the tensor cores, with
inputs rounded to TF32 (10 mantissa bits) or bfloat16: measured on an H200, a logistic regression's logits
``x @ beta`` over N = 10⁷ rows came out with relative errors of 10⁻¹ at the 99.9th percentile, against 2·10⁻⁵ at
full precision (``benchmarks/bench_float32_sums.py``). A posterior sampler needs the likelihood itself, not an
approximation four orders of magnitude coarser than its dtype: NumPyro's HMCECS, run on the same GPU with JAX's
defaults, gave means 13.7 Monte Carlo standard errors off the reference, and 2.2 with full precision, at the same
speed (``benchmarks/RESULTS.md``; ``docs/precision.md``).

:func:`full_float32_dots` wraps a function so that, while it is traced, every product it writes without an
explicit ``precision=`` runs at ``"highest"`` precision (``jax.default_matmul_precision``) — unless JAX's own
setting (``jax_default_matmul_precision``, from ``jax.config.update``, the ``JAX_DEFAULT_MATMUL_PRECISION``
variable, or a ``with jax.default_matmul_precision(...)`` around the call) names one, which is then used as the
user chose it. The precision is recorded in the traced program, so the wrapped function's gradients, Hessians and
``vmap`` carry it too. On a CPU nothing changes: XLA's CPU products are float32 at every setting.

:class:`tallmcmc.Model` wraps its ``log_likelihood`` and ``log_prior`` this way, so every sampler, setup pass and
diagnostic of tallmcmc evaluates a user's model at full float32 precision; :func:`unwrapped` gives back the
function the user passed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

__all__ = ["FULL_PRECISION", "full_float32_dots", "unwrapped"]

#: The precision :func:`full_float32_dots` applies when JAX's setting names none.
FULL_PRECISION = "highest"

_MARK = "_tallmcmc_full_float32_dots"


def full_float32_dots(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, with its matrix products traced at full float32 precision unless JAX's setting names one.

    Parameters
    ----------
    function
        Any function JAX traces (a per-datum log-likelihood, a log-prior, a method).

    Returns
    -------
    callable
        A wrapper with ``function``'s name and docstring and ``__wrapped__ = function``; ``function`` itself if it
        is already such a wrapper (so wrapping twice changes nothing and keeps its identity).
    """
    if getattr(function, _MARK, False):
        return function

    @functools.wraps(function)
    def at_full_precision(*args: Any, **kwargs: Any) -> Any:
        if jax.config.jax_default_matmul_precision is not None:  # the user's (or an enclosing wrapper's) choice
            return function(*args, **kwargs)
        with jax.default_matmul_precision(FULL_PRECISION):
            return function(*args, **kwargs)

    setattr(at_full_precision, _MARK, True)
    return at_full_precision


def unwrapped(function: Callable[..., Any]) -> Callable[..., Any]:
    """The function a :func:`full_float32_dots` wrapper was made from (``function`` itself if it is none)."""
    while getattr(function, _MARK, False):
        function = function.__wrapped__  # type: ignore[attr-defined]
    return function
