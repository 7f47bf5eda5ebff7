"""Stein discrepancies for measuring sample quality.

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
