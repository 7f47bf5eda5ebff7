"""Stein discrepancies for measuring sample quality.

References
----------
.. [1] J. Gorham and L. Mackey, "Measuring Sample Quality with Stein's
   Method", Advances in Neural Information Processing Systems 28 (NIPS 2015).
"""

from tallmcmc.stein.graph import GraphSteinResult, graph_stein_discrepancy
from tallmcmc.stein.spanner import spanner

__all__ = [
    "GraphSteinResult",
    "graph_stein_discrepancy",
    "spanner",
]
