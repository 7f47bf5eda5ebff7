"""Deprecated: step-size adaptation moved to :mod:`tallmcmc.sampling.adaptation` (issue 23)."""

import warnings

from tallmcmc.sampling.adaptation import *  # noqa: F401,F403
from tallmcmc.sampling.adaptation import GAMMA, KAPPA, MU, T0, DualAveraging, adapts_on_proxy, statistic, update  # noqa: F401

warnings.warn(
    "tallmcmc.adaptation moved to tallmcmc.sampling.adaptation; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
