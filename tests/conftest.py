"""Shared pytest configuration: ``--runslow`` turns on the long statistical tests; JAX's persistent compilation
cache lives in a folder of the session's own (unless ``TALLMCMC_COMPILATION_CACHE`` is set); the default suite
compiles with XLA's quicker-to-compile CPU options (``suite_xla.SUITE_XLA_FLAGS``, unless ``XLA_FLAGS`` is set).

``tests/`` is put on ``sys.path`` so that test modules (imported with
``--import-mode=importlib``, hence not as a package) can ``import analytic_models``,
the shared analytic targets; every xdist worker loads this file first.
"""

import atexit
import os
import pathlib
import shutil
import sys
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# JAX's persistent compilation cache in a folder of this session only, shared by the xdist workers and the tests'
# subprocesses (they inherit the variable) and removed at the end: a program compiled once is loaded by every later
# test that compiles the same one (the suite measured 16% faster on test_continuation/test_checkpoint/
# test_chain_asynchronous), and the suite starts cold as on a fresh machine. The controller process loads this file
# before it starts the workers, so they all see the same folder.
if "TALLMCMC_COMPILATION_CACHE" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="tallmcmc-suite-cache-")
    os.environ["TALLMCMC_COMPILATION_CACHE"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

_TESTS_DIR = str(pathlib.Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

import pytest
from suite_xla import SUITE_XLA_FLAGS


def pytest_addoption(parser):
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="also run tests marked slow (long statistical and paper-scale runs)",
    )


def pytest_configure(config):
    # XLA's quicker-to-compile CPU options (``suite_xla``: compiling was three quarters of the default suite), set
    # before any test module imports JAX; xdist's workers start after this and inherit the variable, and so do the
    # tests' subprocesses (``forced_devices.xla_flags`` adds forced host devices to it). ``--runslow`` (the long
    # runs, whose time is sampling) keeps XLA's defaults, as a user's runs do; so does an ``XLA_FLAGS`` of your own
    # (``XLA_FLAGS= python -m pytest -n 2``: XLA's defaults).
    if not config.getoption("--runslow") and "XLA_FLAGS" not in os.environ:
        os.environ["XLA_FLAGS"] = SUITE_XLA_FLAGS


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
