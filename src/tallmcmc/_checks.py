"""Argument checks shared by every factory: each returns the clean value or raises a ``ValueError`` naming the argument.

And :func:`removed_name`, the ``AttributeError`` of a module's ``__getattr__`` for names removed from it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np


def integer_at_least(value: Any, name: str, minimum: int = 1, why: str = "") -> int:
    """``value`` as an ``int`` ≥ ``minimum``, or a ``ValueError`` naming ``name``.

    Booleans and floats are refused (``2.5`` is not a batch size, nor is ``True``).
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        reason = f" ({why})" if why else ""
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {kind}{reason}; got {value!r}")
    return int(value)


def optional_integer_at_least(value: Any, name: str, minimum: int = 1) -> int | None:
    """Like :func:`integer_at_least`, letting ``None`` through."""
    return None if value is None else integer_at_least(value, name, minimum)


def open_unit_interval(value: Any, name: str, meaning: str) -> float:
    """``value`` as a ``float`` in (0, 1), or a ``ValueError`` naming ``name`` and saying what it means."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (0.0 < number < 1.0):
        raise ValueError(f"{name} must lie in (0, 1) ({meaning}); got {value!r}")
    return number


def error_probability(value: Any, name: str = "error_bound") -> float:
    """A bound on the probability of a wrong accept/reject decision, in (0, 1)."""
    return open_unit_interval(value, name, "a probability of a wrong decision")


def positive_finite(value: Any, name: str, meaning: str) -> float:
    """``value`` as a finite ``float`` > 0, or a ``ValueError`` naming ``name``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be a finite number > 0 ({meaning}); got {value!r}")
    return number


def removed_name(module: str, name: str, moved: Mapping[str, str]) -> AttributeError:
    """The ``AttributeError`` for ``module.name`` (a module's PEP 562 ``__getattr__`` raises it): where ``name`` is
    one of ``moved`` (old name → its new home's full name), removed after 0.1.0 and where it is now; otherwise the
    usual "no attribute". Nothing is imported, so a core module can name an example's function this way."""
    if name in moved:
        message = f"{module}.{name} was removed after 0.1.0 (deprecated there): use {moved[name]} (the same function)"
    else:
        message = f"module {module!r} has no attribute {name!r}"
    return AttributeError(message, name=name, obj=sys.modules[module])
