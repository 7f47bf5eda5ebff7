"""The one result type of the Stein discrepancies, and the warning for a solver that stopped short.

Every discrepancy of :mod:`tallmcmc.stein` (:func:`~tallmcmc.stein.graph_stein_discrepancy`,
:func:`~tallmcmc.stein.univariate_graph_stein_discrepancy`,
:func:`~tallmcmc.stein.classical_stein_discrepancy`,
:func:`~tallmcmc.stein.kernel_stein_discrepancy`) returns a :class:`SteinResult`:
the value, its per-coordinate parts where the discrepancy splits over
coordinates, the solver's status, the wall time, and the solver's details
(optimal test function, graph, iterations), which the short ``repr`` leaves out.

A solver that stops short of its tolerance but leaves a usable point (Clarabel's
``AlmostSolved``, ``MaxIterations``, ``MaxTime``, ``InsufficientProgress``; the
univariate interior point method at its iteration limit or stalled) gives a
result whose ``status`` says so (:data:`NON_OPTIMAL_STATUSES`) and a
:class:`SteinSolverWarning` naming the status and what to do. A solver that
leaves no usable point (infeasible, unbounded or numerical-error statuses, which
these always-feasible, bounded programs reach only through a numerical failure;
any HiGHS status but optimal, for which SciPy returns no point) raises a
``RuntimeError``.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "SteinResult",
    "SteinSolverWarning",
    "STATUSES",
    "NON_OPTIMAL_STATUSES",
    "CLARABEL_STATUSES",
    "warn_non_optimal",
]

#: What each value of :attr:`SteinResult.status` means.
STATUSES: dict[str, str] = {
    "optimal": "the solver reached its tolerance (HiGHS Optimal, Clarabel Solved, the banded interior point "
    "method converged)",
    "exact": "no solver: a closed form computed exactly (the kernel Stein discrepancy)",
    "approximate": "no solver: a documented approximation the caller asked for (the Nystroem kernel Stein discrepancy)",
    "almost solved": "Clarabel's AlmostSolved: within its reduced tolerance (1e-6), not the requested one",
    "iteration limit": "the solver stopped at its iteration limit (Clarabel MaxIterations, the banded interior "
    "point method's max_iter)",
    "time limit": "the solver stopped at its time limit (Clarabel MaxTime)",
    "insufficient progress": "the solver could not improve its last point (Clarabel InsufficientProgress, a "
    "numerical breakdown of the banded interior point method)",
}
#: Statuses of a solver that stopped short of its tolerance: the value may be inexact, and a
#: :class:`SteinSolverWarning` was issued.
NON_OPTIMAL_STATUSES: tuple[str, ...] = ("almost solved", "iteration limit", "time limit", "insufficient progress")

_PACKAGE_DIRECTORY = os.path.dirname(os.path.abspath(__file__)) + os.sep


class SteinSolverWarning(RuntimeWarning):
    """A Stein discrepancy's solver stopped short of its tolerance; the value may be inexact.

    The result's ``status`` (one of :data:`NON_OPTIMAL_STATUSES`) records it.
    A subclass of ``RuntimeWarning``, so ``warnings.simplefilter("error",
    RuntimeWarning)`` turns it into an error and a filter on this class alone
    silences it.
    """


def _stacklevel_outside_package() -> int:
    """The ``stacklevel`` that makes a warning point at the first caller outside ``tallmcmc.stein``."""
    frame = sys._getframe(1)  # the caller of this function (warn_non_optimal): stacklevel 1 of its warn
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIRECTORY):
        frame = frame.f_back
        level += 1
    return level


def warn_non_optimal(kind: str, status: str, what_happened: str, advice: str) -> None:
    """Issue a :class:`SteinSolverWarning` for a result of ``status`` (attributed to the user's call)."""
    if status not in NON_OPTIMAL_STATUSES:
        raise ValueError(f"not a non-optimal status: {status!r}")
    warnings.warn(
        f"{kind} Stein discrepancy: {what_happened}; the value may be inexact (result.status = {status!r}). {advice}",
        SteinSolverWarning,
        stacklevel=_stacklevel_outside_package(),
    )


def _format_number(number: float) -> str:
    return f"{number:.6g}"


@dataclass(frozen=True, repr=False, eq=False)
class SteinResult:
    """Result of every Stein discrepancy of :mod:`tallmcmc.stein`.

    ``float(result)`` is ``result.value``. The ``repr`` is one line (kind,
    value, status, n, d, seconds) whatever the sample size; the arrays are
    attributes. Replaces the former ``GraphSteinResult`` and
    ``ClassicalSteinResult`` (both names remain as aliases of this class) and
    the plain ``float`` that ``kernel_stein_discrepancy`` returned.

    Attributes
    ----------
    value : float
        The discrepancy.
    kind : {"graph", "classical", "kernel"}
        Which discrepancy: the graph Stein discrepancy (any dimension, also
        from :func:`~tallmcmc.stein.univariate_graph_stein_discrepancy`), the
        classical Stein discrepancy (one dimension), or the kernel Stein
        discrepancy.
    method : str
        What computed it: ``"highs-ds"``, ``"highs-ipm"`` or ``"highs"``
        (HiGHS linear programs), ``"ipm"`` or ``"clarabel"`` (the banded
        univariate program), ``"clarabel"`` (the classical cone program),
        ``"numba"``, ``"jax"`` or ``"nystroem"`` (the kernel sum).
    status : str
        ``"optimal"``, ``"exact"``, ``"approximate"`` or one of
        :data:`NON_OPTIMAL_STATUSES` (warned about when it happened); see
        :data:`STATUSES`.
    seconds : float
        Wall-clock seconds of the whole call.
    n : int
        Points the discrepancy was computed on: the distinct points of
        positive weight for the graph and classical programs (duplicates are
        merged), all ``n`` points for the kernel sum.
    d : int
        Dimension of the points.
    per_coordinate : ndarray of shape (d,), or None
        The parts the value is the sum of, where the discrepancy splits over
        the coordinates of the test function ``g``: the optimum of the
        ``j``-th linear program for the graph discrepancy (L1 norm on ``x``,
        Gorham & Mackey 2015), ``[value]`` for the classical one (d = 1).
        ``None`` for the kernel discrepancy, a square root of a double sum
        over pairs that does not split.

    The fields above are the ``repr``'s (``method`` and ``per_coordinate``
    aside); those below are the solver's details, ``None`` where they do not
    apply.

    points : ndarray
        The points solved on (graph: shape (n, d), merged and, for d = 1,
        sorted; classical: shape (n,), sorted).
    weights : ndarray, shape (n,)
        Their weights, summing to one.
    scores : ndarray
        The target score at those points (graph: (n, d); classical: (n,)).
    function_values : ndarray
        The optimal test function ``g`` at the points (graph: (n, d), column
        ``j`` is ``g_j``; classical: (n,)).
    gradients : ndarray, shape (n, d, d)
        Graph only: ``gradients[i, j, k] = d g_j / d x_k`` at point ``i``.
    derivatives : ndarray, shape (n,)
        Classical only: ``g'`` at the points.
    num_edges : int
        Graph only: edges of the graph carrying constraints.
    iterations : int
        Solver iterations (summed over the coordinate programs for HiGHS).
    relative_gap : float
        The solver's relative duality gap where it reports one (Clarabel, the
        banded interior point method).
    squared : float
        Kernel only: the squared discrepancy before the square root (the U
        statistic may be negative; the value is then 0).
    timings : dict
        Seconds of the parts of the call (``"total"`` equals ``seconds``).
    """

    value: float
    kind: str
    method: str
    status: str
    seconds: float
    n: int
    d: int
    per_coordinate: np.ndarray | None = None
    points: np.ndarray | None = field(default=None, repr=False)
    weights: np.ndarray | None = field(default=None, repr=False)
    scores: np.ndarray | None = field(default=None, repr=False)
    function_values: np.ndarray | None = field(default=None, repr=False)
    gradients: np.ndarray | None = field(default=None, repr=False)
    derivatives: np.ndarray | None = field(default=None, repr=False)
    num_edges: int | None = field(default=None, repr=False)
    iterations: int | None = field(default=None, repr=False)
    relative_gap: float | None = field(default=None, repr=False)
    squared: float | None = field(default=None, repr=False)
    timings: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {sorted(STATUSES)}")
        object.__setattr__(self, "value", float(self.value))
        if self.per_coordinate is not None:
            object.__setattr__(self, "per_coordinate", np.asarray(self.per_coordinate, dtype=np.float64))

    def __float__(self) -> float:
        return self.value

    def __repr__(self) -> str:
        return (
            f"SteinResult(kind={self.kind!r}, value={_format_number(self.value)}, status={self.status!r}, "
            f"n={self.n}, d={self.d}, seconds={float(f'{self.seconds:.3g}')!r})"
        )

    def operator_values(self) -> np.ndarray:
        """:math:`(T g)(x_i) = \\langle b(x_i), g(x_i)\\rangle + \\nabla\\cdot g(x_i)` for the optimal ``g``.

        The test function that best tells the sample from the target (Gorham &
        Mackey 2015, Figure 1); ``weights @ operator_values()`` is ``value``.
        Graph and classical discrepancies only.
        """
        if self.function_values is None or self.scores is None:
            raise ValueError(f"a {self.kind} Stein discrepancy has no optimal test function")
        if self.kind == "classical":
            return self.scores * self.function_values + self.derivatives
        divergence = np.trace(self.gradients, axis1=1, axis2=2)
        return np.sum(self.scores * self.function_values, axis=1) + divergence


#: Clarabel's statuses that leave a usable point, and the status they give a :class:`SteinResult`;
#: every other Clarabel status (Unsolved, (Almost)PrimalInfeasible, (Almost)DualInfeasible,
#: NumericalError, CallbackTerminated) means the solver failed.
CLARABEL_STATUSES: dict[str, str] = {
    "Solved": "optimal",
    "AlmostSolved": "almost solved",
    "MaxIterations": "iteration limit",
    "MaxTime": "time limit",
    "InsufficientProgress": "insufficient progress",
}
