"""Proposals: how a candidate θ′ is drawn from θ, with its exact log proposal ratio.

Modules: :mod:`~tallmcmc.proposals.base` (the :class:`Proposal` type),
:mod:`~tallmcmc.proposals.random_walk`, :mod:`~tallmcmc.proposals.langevin`.
"""

from tallmcmc.proposals import base, langevin, random_walk

__all__ = ["base", "langevin", "random_walk"]
