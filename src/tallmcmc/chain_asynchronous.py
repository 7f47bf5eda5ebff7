"""Deprecated: the asynchronous driver moved to :mod:`tallmcmc.sampling.asynchronous` (issue 23)."""

import warnings

from tallmcmc.sampling.asynchronous import *  # noqa: F401,F403
from tallmcmc.sampling.asynchronous import (  # noqa: F401
    AsyncCarry,
    InFlight,
    StepParts,
    asynchronous_runner,
    run_asynchronous,
    step_parts,
)

warnings.warn(
    "tallmcmc.chain_asynchronous moved to tallmcmc.sampling.asynchronous; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
