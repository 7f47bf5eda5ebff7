"""Host values (NumPy arrays and numbers) as JAX arrays by transfer, without compiling anything.

Under JAX 0.10, ``jnp.asarray`` of a NumPy array runs ``lax.stage``, and
``jnp.asarray(x, dtype)``, ``jnp.zeros`` or ``jnp.ones`` run a conversion or
a broadcast: each an XLA program compiled once per shape and dtype in every
new process (10–30 ms each on a 2-core CPU the first time, about 10 ms when
loaded from the persistent cache). :func:`to_device` makes the array with
NumPy and transfers it (``jax.device_put``), which compiles nothing; JAX's
dtype rules apply as they do to ``jnp.asarray`` (float64 becomes float32
unless x64 is enabled). ``docs/compilation.md`` counts what it saves.
"""

from __future__ import annotations

import jax
import numpy as np

__all__ = ["jax_dtype", "to_device"]


def to_device(value, dtype=None) -> jax.Array:
    """``value`` (a NumPy array, NumPy or Python number, or nested list of numbers) as a JAX array, cast to
    ``dtype`` on the host if given: what ``jnp.asarray(value, dtype)`` gives for a host value, without an XLA
    program (the result is not weakly typed)."""
    return jax.device_put(np.asarray(value, dtype=dtype))


def jax_dtype(leaf) -> np.dtype:
    """The dtype ``leaf`` has as a JAX array: its own for a JAX array, JAX's canonical one for a host value (a NumPy
    float64 array is float32 without x64)."""
    return leaf.dtype if isinstance(leaf, jax.Array) else jax.dtypes.canonicalize_dtype(np.result_type(leaf))
