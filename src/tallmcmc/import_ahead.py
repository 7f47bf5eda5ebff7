"""Importing a slow library in a thread while a run works, so that the run's end does not wait for the import.

:func:`tallmcmc.sample_tall` ends by diagnosing its chains with ArviZ (r̂, ESS). Importing ``arviz_stats`` (with
xarray, pandas and scipy.stats behind it) takes 0.5–0.8 s in a fresh process on a 2-core CPU, which was a third of a
second run of the same script (``docs/compilation.md``, "What a run waits for besides compiling"). Most of a run is
spent where Python lets other threads run (XLA compiling, the data passes, the chains), so :func:`start` imports
the library in a thread from the run's first line, and the run :func:`Importing.wait` s for it just before it needs
it, usually finding it done.

Two threads that import at once can deadlock only on a circular import between modules both are initialising.
:func:`start` therefore first imports, in the calling thread, the modules named in ``first``: those the run itself
imports on first use and that the library imports too (SciPy's ``special`` and ``optimize``); what the run imports
besides (JAX's MLIR dialects when it lowers a program, its own modules) is not among the library's. An import that
fails in the thread is dropped (logged at debug level): the run's own import then raises as it would have.

``TALLMCMC_IMPORT_AHEAD=0`` in the environment turns it off (read at each call).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import threading
from collections.abc import Iterable

from tallmcmc._switches import switched_off

__all__ = ["ENVIRONMENT_VARIABLE", "Importing", "start"]

ENVIRONMENT_VARIABLE = "TALLMCMC_IMPORT_AHEAD"

_log = logging.getLogger(__name__)


class Importing:
    """An import running in a thread (or none: a library already imported, absent, or the switch off)."""

    def __init__(self, thread: threading.Thread | None = None) -> None:
        self.thread = thread

    def wait(self) -> None:
        """Until the import has ended (at once where none runs)."""
        if self.thread is not None:
            self.thread.join()


def _import(name: str) -> None:
    try:
        importlib.import_module(name)
    except Exception:  # the run's own import raises it again, where the run needs the library
        _log.debug("importing %s ahead failed", name, exc_info=True)


def start(name: str | None, first: Iterable[str] = ()) -> Importing:
    """Import ``name`` in a thread, after importing ``first`` here.

    Parameters
    ----------
    name
        The module to import (``None``: none).
    first
        Modules the caller imports on first use during its run and ``name`` imports too: imported here, in the
        calling thread, before the thread starts (see the module docstring).

    Returns
    -------
    Importing
        Whose :meth:`~Importing.wait` returns once the import has ended.
    """
    if name is None or name in sys.modules or switched_off(ENVIRONMENT_VARIABLE):
        return Importing()
    if importlib.util.find_spec(name.partition(".")[0]) is None:
        return Importing()
    for module in first:
        importlib.import_module(module)
    # not a daemon: a run that raises before it waits leaves the import to end on its own, and the interpreter waits
    # for it at exit (at most the import's own time) rather than stopping it part-way through a module's body
    thread = threading.Thread(target=_import, args=(name,), name=f"tallmcmc-import-{name}", daemon=False)
    thread.start()
    return Importing(thread)
