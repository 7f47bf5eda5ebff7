"""Acceptance tests: the swappable rule that decides whether θ′ replaces θ.

Modules: :mod:`~tallmcmc.acceptance.base` (the types every test shares),
:mod:`~tallmcmc.acceptance.exact` (full-data Metropolis and Barker),
:mod:`~tallmcmc.acceptance.sequential` (the growing-minibatch core shared by
the subsampling tests), :mod:`~tallmcmc.acceptance.subsample` (drawing without
replacement), :mod:`~tallmcmc.acceptance.minibatch_barker`,
:mod:`~tallmcmc.acceptance.penalty` (the minibatch penalty test),
:mod:`~tallmcmc.acceptance.austere` and :mod:`~tallmcmc.acceptance.austere_design`
(AustereMH), :mod:`~tallmcmc.acceptance.confidence` (MHSubLhd).
"""

from tallmcmc.acceptance import (
    austere,
    austere_design,
    base,
    confidence,
    exact,
    minibatch_barker,
    penalty,
    sequential,
    subsample,
)

__all__ = [
    "austere",
    "austere_design",
    "base",
    "confidence",
    "exact",
    "minibatch_barker",
    "penalty",
    "sequential",
    "subsample",
]
