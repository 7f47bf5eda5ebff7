"""Stein discrepancies for measuring sample quality.

Every discrepancy returns a :class:`SteinResult` (value, per-coordinate parts,
solver status, timing; a one-line ``repr``; ``float(result)`` is the value),
and warns with a :class:`SteinSolverWarning` when its solver stops short of
its tolerance.

References
----------
.. [1] J. Gorham and L. Mackey, "Measuring Sample Quality with Stein's
   Method", Advances in Neural Information Processing Systems 28 (NIPS 2015).
"""

from tallmcmc.stein.classical import ClassicalSteinResult, classical_stein_discrepancy
from tallmcmc.stein.graph import GraphSteinResult, graph_stein_discrepancy
from tallmcmc.stein.kernel import (
    kernel_stein_discrepancy,
    kernel_stein_discrepancy_squared,
    stein_kernel_matrix,
)
from tallmcmc.stein.result import NON_OPTIMAL_STATUSES, STATUSES, SteinResult, SteinSolverWarning
from tallmcmc.stein.scores import posterior_scores
from tallmcmc.stein.spanner import greedy_spanner
from tallmcmc.stein.univariate import (
    GAUSSIAN_STEIN_FACTORS,
    UNIFORM_STEIN_FACTORS,
    stein_factors,
    univariate_graph_stein_discrepancy,
    wasserstein_1d,
)

__all__ = [
    "SteinResult",
    "SteinSolverWarning",
    "STATUSES",
    "NON_OPTIMAL_STATUSES",
    "ClassicalSteinResult",
    "classical_stein_discrepancy",
    "GraphSteinResult",
    "graph_stein_discrepancy",
    "greedy_spanner",
    "posterior_scores",
    "kernel_stein_discrepancy",
    "kernel_stein_discrepancy_squared",
    "stein_kernel_matrix",
    "GAUSSIAN_STEIN_FACTORS",
    "UNIFORM_STEIN_FACTORS",
    "stein_factors",
    "univariate_graph_stein_discrepancy",
    "wasserstein_1d",
]
