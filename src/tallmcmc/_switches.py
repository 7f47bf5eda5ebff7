"""The environment variables that turn one of tallmcmc's defaults off, read one way.

``TALLMCMC_COMPILATION_CACHE``, ``TALLMCMC_COMPILE_AHEAD``, ``TALLMCMC_IMPORT_AHEAD`` and
``TALLMCMC_THREEFRY_STRAIGHT`` are off at ``0``,
``off``, ``false`` or ``no`` (any case, surrounding spaces ignored), and on otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["OFF", "is_off", "switched_off"]

OFF = frozenset({"0", "off", "false", "no"})


def is_off(value: str) -> bool:
    """Whether an environment variable's ``value`` says off."""
    return value.strip().lower() in OFF


def switched_off(variable: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``variable`` is set to off in ``environ`` (default: the process's environment)."""
    return is_off((os.environ if environ is None else environ).get(variable, ""))
