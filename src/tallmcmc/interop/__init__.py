"""Other libraries' objects: models written in other probabilistic programming languages, results for ArviZ.

:mod:`tallmcmc.interop.numpyro` builds a model from a NumPyro model function
(:func:`from_numpyro`, re-exported as ``tallmcmc.from_numpyro``). NumPyro itself
is imported only when a model is built, so ``import tallmcmc`` does not pay
for it.

:mod:`tallmcmc.interop.arviz` is the bridge to whichever ArviZ line is
installed (0.x or 1.x): results as an :class:`xarray.DataTree`
(:func:`~tallmcmc.interop.arviz.to_datatree`) or the installed line's own
object, and ArviZ's ESS, r̂, MCSE and ECDF plot on NumPy arrays. xarray and
ArviZ are imported only when one of its functions is called.
"""

from tallmcmc.interop import arviz, numpyro
from tallmcmc.interop.numpyro import from_numpyro

__all__ = ["arviz", "from_numpyro", "numpyro"]
