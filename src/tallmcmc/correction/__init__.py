"""The correction variable X_corr of the minibatch Barker test.

:mod:`~tallmcmc.correction.distribution` is what sampling uses (the law C_σ,
its JAX sampler and the shipped tables); :mod:`~tallmcmc.correction.solve`
builds those tables offline.
"""

from tallmcmc.correction import distribution, solve

__all__ = ["distribution", "solve"]
