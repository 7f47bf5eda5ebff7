"""Proposals: how a candidate θ′ is drawn from θ, with its exact log proposal ratio.

Modules: :mod:`~tallmcmc.proposals.base` (the :class:`Proposal` type),
:mod:`~tallmcmc.proposals.random_walk`, :mod:`~tallmcmc.proposals.langevin`,
:mod:`~tallmcmc.proposals.laplace` (Laplace-shaped random walk and independence proposals),
:mod:`~tallmcmc.proposals.proxy` (Langevin and Hamiltonian moves on a control variate's proxy posterior),
:mod:`~tallmcmc.proposals.minibatch_hamiltonian` (a leapfrog on minibatch gradients drawn independently of the state),
:mod:`~tallmcmc.proposals.sghmc` (stochastic-gradient Hamiltonian Monte Carlo, persistent velocity; no exact ratio).
"""

from tallmcmc.proposals import base, langevin, laplace, minibatch_hamiltonian, proxy, random_walk, sghmc

__all__ = ["base", "langevin", "laplace", "minibatch_hamiltonian", "proxy", "random_walk", "sghmc"]
