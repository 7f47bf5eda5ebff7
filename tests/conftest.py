"""Shared pytest configuration: ``--runslow`` turns on the long statistical tests."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

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
