"""The correction variable X_corr of the minibatch Barker test.

:mod:`~tallmcmc.correction.distribution` is what sampling uses (the shipped
tables of the law C_σ, or one solved on demand); :mod:`~tallmcmc.correction.solve`
builds those tables offline; :mod:`~tallmcmc.correction.base` holds what both
use (the law's type :class:`~tallmcmc.correction.base.CorrectionDistribution`,
with its JAX sampler, and its CDF error), so neither imports the other back.
"""

from tallmcmc.correction import base, distribution, solve

__all__ = ["base", "distribution", "solve"]
