"""Proposals: how a candidate θ′ is drawn from θ, with its exact log proposal ratio.

Modules: :mod:`~tallmcmc.proposals.base` (the :class:`Proposal` type),
:mod:`~tallmcmc.proposals.random_walk`, :mod:`~tallmcmc.proposals.langevin`,
:mod:`~tallmcmc.proposals.laplace` (Laplace-shaped random walk and independence proposals),
:mod:`~tallmcmc.proposals.proxy` (Langevin and Hamiltonian moves on a control variate's proxy posterior).
"""

from tallmcmc.proposals import base, langevin, laplace, proxy, random_walk

__all__ = ["base", "langevin", "laplace", "proxy", "random_walk"]
