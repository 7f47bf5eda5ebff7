"""Reproductions of the papers' experiments, one module each.

A module here is an experiment when it defines

``NAME``
    the command-line name (``tallmcmc reproduce NAME``);
``HELP``
    a one-line description;
``add_arguments(parser)``
    adds its options to an :class:`argparse.ArgumentParser`;
``run(args)``
    runs it, prints the paper's numbers beside ours, writes figures and
    ``summary.json`` under ``args.out``, and returns an exit status.

Modules are discovered, so adding an experiment touches no other file.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def experiments() -> dict[str, ModuleType]:
    """Map each experiment's command-line name to its module."""
    found: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        name = getattr(module, "NAME", None)
        if name is not None:
            if name in found:
                raise RuntimeError(f"two experiments are called {name!r}")
            found[name] = module
    return found
