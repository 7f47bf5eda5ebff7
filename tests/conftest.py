"""Shared pytest configuration: ``--runslow`` turns on the long statistical tests; JAX's persistent compilation
cache stays off (``TALLMCMC_COMPILATION_CACHE=0``) unless the environment says otherwise.

``tests/`` is put on ``sys.path`` so that test modules (imported with
``--import-mode=importlib``, hence not as a package) can ``import analytic_models``,
the shared analytic targets; every xdist worker loads this file first.
"""

import os
import pathlib
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# the suite compiles afresh (its timings stay those of a fresh machine); tests/test_compilation_cache.py turns the
# persistent cache on in subprocesses of its own
os.environ.setdefault("TALLMCMC_COMPILATION_CACHE", "0")

_TESTS_DIR = str(pathlib.Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="also run tests marked slow (long statistical and paper-scale runs)",
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
