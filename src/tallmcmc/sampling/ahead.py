"""Compiling a chain program ahead, in a thread, while the caller's setup runs.

A first run of :func:`tallmcmc.sample_tall` spends most of its time compiling: the setup's own programs, then the
chain program of warm-up and kept draws (``docs/compilation.md``). The chain program takes the setup's values (the
control variate's centre and sums, the Laplace covariance, the starts) as arguments, so it can be compiled before
they exist, from placeholders of the same shapes and kinds: :func:`compile_ahead` runs such a compilation in a
thread. The thread traces one chain's step from the placeholders and computes the program key
(:func:`tallmcmc.program_cache.program_key`: the printed trace of that step, the arguments' shapes and
placements, …). Unless a program under that key is kept on disk already (the warm-up loads it itself), it compiles
the program, the key :func:`announced` meanwhile, and :func:`offer` s the executable. The real warm-up, having
traced its own step, :func:`take` s the executable under its key — waiting if the thread is still compiling that
very program. A step that traces to anything else (the setup chose another kind of control variate, say) has
another key, finds nothing and compiles as before. So what runs is what would have run without the thread; the
thread can only save time or waste it. (Where kept programs are on, the thread's program is kept on disk too, as
any chain program is.) A thread that ran to its end marks the run's :func:`signature`, so that a later run of the
same script, whose program is kept by then, starts none (:func:`compile_ahead`).

``TALLMCMC_COMPILE_AHEAD=0`` in the environment turns it off (read at each call). An exception in the thread is
logged at debug level and dropped: the run then compiles its program itself.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import logging
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tallmcmc import program_cache
from tallmcmc._switches import switched_off

__all__ = [
    "ENVIRONMENT_VARIABLE",
    "MAX_OFFERS",
    "CompiledAhead",
    "MARKS",
    "announced",
    "code_digest",
    "compile_ahead",
    "enabled",
    "offer",
    "offered",
    "signature",
    "take",
]

ENVIRONMENT_VARIABLE = "TALLMCMC_COMPILE_AHEAD"
#: The folder, inside the kept programs' folder, of the marks of signatures compiled ahead once.
MARKS = "compiled-ahead"
#: Executables offered and not (yet) taken that are held at most (the oldest is dropped first): one offered for a
#: step that the setup then changed is never taken.
MAX_OFFERS = 2

_log = logging.getLogger(__name__)
_offers: collections.OrderedDict[str, Any] = collections.OrderedDict()
_announced: dict[str, threading.Event] = {}
_offers_lock = threading.Lock()


def enabled() -> bool:
    """Whether programs are compiled ahead (unless ``TALLMCMC_COMPILE_AHEAD`` is ``0``)."""
    return not switched_off(ENVIRONMENT_VARIABLE)


@contextlib.contextmanager
def announced(key: str) -> Iterator[None]:
    """While the block runs, a thread is compiling the program ``key``: :func:`take` of that key waits for the block
    to end (and finds the executable if the block :func:`offer` ed it)."""
    done = threading.Event()
    with _offers_lock:
        _announced[key] = done
    try:
        yield
    finally:
        with _offers_lock:
            if _announced.get(key) is done:
                del _announced[key]
        done.set()


def offer(key: str, compiled: Any) -> None:
    """Hold ``compiled`` (an executable of the chain program whose key is ``key``) for :func:`take`."""
    with _offers_lock:
        _offers[key] = compiled
        while len(_offers) > MAX_OFFERS:
            _offers.popitem(last=False)


def take(key: str) -> Any:
    """The executable offered under ``key`` (waiting first while a thread compiles it, :func:`announced`), removed
    from the offers; ``None`` if there is none."""
    with _offers_lock:
        done = _announced.get(key)
    if done is not None:
        done.wait()
    with _offers_lock:
        return _offers.pop(key, None)


def offered() -> bool:
    """Whether anything is on offer or being compiled (so that a compilation computes its key to look for it)."""
    with _offers_lock:
        return bool(_offers) or bool(_announced)


class CompiledAhead:
    """A compilation running in a thread of its own (see the module docstring).

    Attributes
    ----------
    compiled
        After :meth:`join`: whether the function returned ``True`` (it compiled and kept a program).
    error
        After :meth:`join`: the exception it raised, or ``None``.
    """

    def __init__(self, function: Callable[[], bool]):
        self.compiled = False
        self.error: BaseException | None = None
        self._function = function
        # not a daemon: an interpreter that exits while XLA compiles in this thread waits for it
        self._thread = threading.Thread(target=self._run, name="tallmcmc-compile-ahead")
        self._thread.start()

    def _run(self) -> None:
        try:
            self.compiled = bool(self._function())
        except Exception as error:  # noqa: BLE001 - the run compiles its own program instead
            self.error = error
            _log.debug("compiling ahead failed: %s: %s", type(error).__name__, error)

    def join(self) -> CompiledAhead:
        """Wait until the compilation has finished; returns itself."""
        self._thread.join()
        return self


def compile_ahead(function: Callable[[], bool], signature: str | None = None) -> CompiledAhead | None:
    """Start ``function`` (which compiles a program and offers it, returning whether it did) in a thread, if
    :func:`enabled` and no earlier thread of the same ``signature`` ran to its end; ``None`` otherwise.

    ``signature`` (from :func:`signature`) stands for what the program will be, known before it is traced: a thread
    that ends without an exception marks it (a file in the kept programs' folder), and a later run of the same
    script, whose program is then kept on disk and loads in a fraction of a second, starts no thread — a thread
    would only compete with the run for the interpreter (``docs/compilation.md``). A signature that matches where the program does not (a model edited in a constant) costs that run
    the time compiling ahead would have saved, nothing else.
    """
    if not enabled():
        return None
    mark = _mark_path(signature)
    if mark is not None and mark.exists():
        return None

    def compiled_then_marked() -> bool:
        compiled = function()
        if mark is not None:
            try:
                mark.parent.mkdir(parents=True, exist_ok=True)
                mark.touch()
            except OSError:  # a read-only cache folder: the next run compiles ahead again
                pass
        return compiled

    return CompiledAhead(compiled_then_marked)


def signature(*parts: Any) -> str:
    """A digest of ``parts`` (shapes, settings, :func:`code_digest` s), tallmcmc's sources and JAX's set-up."""
    digest = hashlib.sha256(program_cache.setup_digest())
    digest.update(repr(parts).encode())
    return digest.hexdigest()


def code_digest(function: Any) -> str:
    """What a function's code says (its name, bytecode, names and literals, nested functions' too), not the values
    it closes over; a callable that is not a Python function gives its type."""
    code = getattr(function, "__code__", None)
    if not isinstance(code, types.CodeType):
        return repr(type(function))
    parts = [getattr(function, "__module__", None), getattr(function, "__qualname__", None)]

    def walk(code: types.CodeType) -> None:
        parts.append((code.co_code, code.co_names, [c for c in code.co_consts if not isinstance(c, types.CodeType)]))
        for constant in code.co_consts:
            if isinstance(constant, types.CodeType):
                walk(constant)

    walk(code)
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _mark_path(signature: str | None) -> Path | None:
    where = program_cache.folder()
    return None if signature is None or where is None else where / MARKS / signature
