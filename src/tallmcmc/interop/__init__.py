"""Models written in other probabilistic programming languages, as :class:`tallmcmc.Model`.

:mod:`tallmcmc.interop.numpyro` builds a model from a NumPyro model function
(:func:`from_numpyro`, re-exported as ``tallmcmc.from_numpyro``). NumPyro itself
is imported only when a model is built, so ``import tallmcmc`` does not pay
for it.
"""

from tallmcmc.interop import numpyro
from tallmcmc.interop.numpyro import from_numpyro

__all__ = ["from_numpyro", "numpyro"]
