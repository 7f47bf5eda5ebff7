"""JAX's persistent compilation cache, on by default: a script run a second time loads its compiled programs from
disk instead of compiling them again.

``import tallmcmc`` points JAX's cache (``jax_compilation_cache_dir``) at a folder in the user's cache directory
(:func:`default_directory`, e.g. ``~/.cache/tallmcmc/jax`` on Linux), caches every compilation however short
(JAX's own default keeps only those over a second, and most of a run's programs compile faster). The folder is
not bounded: JAX's LRU bound (``jax_compilation_cache_max_size``) stopped the cache from writing anything with
JAX 0.10.2 on CPU (measured), so it is left at JAX's default; delete the folder to clear it (a small run's
programs take about 0.5 MB). It changes nothing if the cache is
already configured (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config.update("jax_compilation_cache_dir", …)`` before
the import). It never starts JAX's backend, so ``tallmcmc.distributed.initialize`` can still run after the import.

Opt out, or choose the folder, with the environment variable ``TALLMCMC_COMPILATION_CACHE``: ``0`` (or ``off``,
``false``, ``no``) leaves JAX's cache off; a path puts the cache there. Measured: ``docs/compilation.md``.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

from tallmcmc._switches import is_off

__all__ = ["ENVIRONMENT_VARIABLE", "configure", "default_directory"]

ENVIRONMENT_VARIABLE = "TALLMCMC_COMPILATION_CACHE"


def default_directory() -> Path:
    """The user's cache directory for tallmcmc's compiled programs (``platformdirs.user_cache_dir``)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("tallmcmc")) / "jax"


def configure(environ: dict[str, str] | None = None) -> Path | None:
    """Turn JAX's persistent compilation cache on (see the module docstring); returns its folder, or ``None``.

    ``None`` when ``TALLMCMC_COMPILATION_CACHE`` opts out, or when JAX's cache
    was configured before (it is then left as it is, and its folder returned).
    """
    environ = os.environ if environ is None else environ
    already = jax.config.jax_compilation_cache_dir
    if already:
        return Path(already)
    value = environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if is_off(value):
        return None
    directory = Path(value).expanduser() if value else default_directory()
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return directory
