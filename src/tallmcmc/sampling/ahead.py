"""Compiling a chain program ahead, in a thread, while the caller's setup runs.

A first run of :func:`tallmcmc.sample_tall` spends most of its time compiling: the setup's own programs, then the
chain program of warm-up and kept draws (``docs/compilation.md``). The chain program takes the setup's values (the
control variate's centre and sums, the Laplace covariance, the starts) as arguments, so it can be compiled before
they exist, from placeholders of the same shapes and kinds: :func:`compile_ahead` runs such a compilation in a
thread, which :meth:`CompiledAhead.join` waits for. The thread :func:`offer` s the executable under its program key
(:func:`tallmcmc.sampling.program_cache.program_key`: the printed trace of one chain's step, the arguments' shapes
and placements, …), and the real warm-up, having traced its own step, :func:`take` s it if the keys agree; a step
that traces to anything else (the setup chose another kind of control variate, say) finds nothing under its key
and compiles as before. So what runs is what would have run without the thread; the thread can only save time or
waste it. (Where kept programs are on, the thread's program is kept on disk too, as any chain program is.)

``TALLMCMC_COMPILE_AHEAD=0`` in the environment turns it off (read at each call). An exception in the thread is
logged at debug level and dropped: the run then compiles its program itself.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["ENVIRONMENT_VARIABLE", "MAX_OFFERS", "CompiledAhead", "compile_ahead", "enabled", "offer", "take"]

ENVIRONMENT_VARIABLE = "TALLMCMC_COMPILE_AHEAD"
#: Executables offered and not (yet) taken that are held at most (the oldest is dropped first): one offered for a
#: step that the setup then changed is never taken.
MAX_OFFERS = 2

_log = logging.getLogger(__name__)
_offers: collections.OrderedDict[str, Any] = collections.OrderedDict()
_offers_lock = threading.Lock()


def enabled() -> bool:
    """Whether programs are compiled ahead (unless ``TALLMCMC_COMPILE_AHEAD`` is ``0``)."""
    return os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower() not in ("0", "false", "no", "off")


def offer(key: str, compiled: Any) -> None:
    """Hold ``compiled`` (an executable of the chain program whose key is ``key``) for :func:`take`."""
    with _offers_lock:
        _offers[key] = compiled
        while len(_offers) > MAX_OFFERS:
            _offers.popitem(last=False)


def take(key: str) -> Any:
    """The executable offered under ``key``, removed from the offers; ``None`` if there is none."""
    with _offers_lock:
        return _offers.pop(key, None)


def offered() -> bool:
    """Whether any executable is on offer (so that a compilation computes its key to look for it)."""
    with _offers_lock:
        return bool(_offers)


class CompiledAhead:
    """A compilation running in a thread of its own (see the module docstring).

    Attributes
    ----------
    compiled
        After :meth:`join`: whether the function returned ``True`` (it compiled and kept a program).
    error
        After :meth:`join`: the exception it raised, or ``None``.
    seconds
        After :meth:`join`: how long it ran.
    """

    def __init__(self, function: Callable[[], bool], name: str):
        self.compiled = False
        self.error: BaseException | None = None
        self.seconds = 0.0
        self._function = function
        # not a daemon: an interpreter that exits while XLA compiles in this thread waits for it
        self._thread = threading.Thread(target=self._run, name=name)
        self._thread.start()

    def _run(self) -> None:
        began = time.perf_counter()
        try:
            self.compiled = bool(self._function())
        except Exception as error:  # noqa: BLE001 - the run compiles its own program instead
            self.error = error
            _log.debug("compiling ahead failed: %s: %s", type(error).__name__, error)
        finally:
            self.seconds = time.perf_counter() - began

    def join(self) -> CompiledAhead:
        """Wait until the compilation has finished; returns itself."""
        self._thread.join()
        return self


def compile_ahead(function: Callable[[], bool], name: str = "tallmcmc-compile-ahead") -> CompiledAhead | None:
    """Start ``function`` (which compiles and keeps a program, returning whether it did) in a thread, if
    :func:`enabled`; ``None`` otherwise."""
    return CompiledAhead(function, name) if enabled() else None
