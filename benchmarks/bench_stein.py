"""Timings of the graph Stein discrepancy (Gorham & Mackey 2015) at paper scale.

Measures, for n i.i.d. N(0, I_2) points (default n = 1000):

* the greedy L1 2-spanner alone (first call, which includes loading or
  compiling the numba code, then the median of repeated calls);
* the discrepancy end to end with the default settings (spanner + two
  coordinate linear programs solved in parallel threads);
* one coordinate linear program under each HiGHS method (with and without
  presolve), and the end-to-end time with 1 and 2 worker threads.

Wall-clock and process CPU seconds are both printed, with the 1-minute load
average: on a shared machine the wall time depends on what else runs.

Run::

    python benchmarks/bench_stein.py            # n = 1000, 5 repetitions
    python benchmarks/bench_stein.py --n 2000 --repeats 3 --skip-methods
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

import numpy as np
from _timing import timed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="sample size (default 1000)")
    parser.add_argument("--dimension", type=int, default=2, help="dimension d (default 2)")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions for medians (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-methods", action="store_true", help="skip the LP method comparison")
    arguments = parser.parse_args(argv)

    first_import = time.perf_counter()
    from scipy.optimize import linprog

    from tallmcmc.stein import graph_program, graph_stein_discrepancy
    from tallmcmc.stein import greedy_spanner as spanner

    import_seconds = time.perf_counter() - first_import

    rng = np.random.default_rng(arguments.seed)
    points = rng.standard_normal((arguments.n, arguments.dimension))
    scores = -points
    print(
        f"n = {arguments.n}, d = {arguments.dimension}, cpus = {os.cpu_count()}, "
        f"load average (1 min) = {os.getloadavg()[0]:.2f}"
    )
    print(f"import tallmcmc.stein: {import_seconds:.3f} s")

    # spanner
    (edges, _), wall, cpu = timed(lambda: spanner(points))
    print(f"spanner first call (JIT load/compile + run): wall {wall:.3f} s, cpu {cpu:.3f} s, {len(edges)} edges")
    walls, cpus = [], []
    for _ in range(arguments.repeats):
        _, wall, cpu = timed(lambda: spanner(points))
        walls.append(wall)
        cpus.append(cpu)
    print(f"spanner warm: median wall {statistics.median(walls):.3f} s, median cpu {statistics.median(cpus):.3f} s")

    # end to end, default settings
    graph_stein_discrepancy(points[:20], scores[:20])  # warm-up of the code paths
    walls, cpus, results = [], [], []
    for _ in range(arguments.repeats):
        result, wall, cpu = timed(lambda: graph_stein_discrepancy(points, scores))
        walls.append(wall)
        cpus.append(cpu)
        results.append(result)
    last = results[-1]
    print(
        f"graph_stein_discrepancy end to end (defaults): median wall {statistics.median(walls):.3f} s "
        f"(min {min(walls):.3f}), median cpu {statistics.median(cpus):.3f} s; value {last.value:.6f}, "
        f"{last.num_edges} edges"
    )
    print(
        "  last run timings: "
        + ", ".join(
            f"{key} {value:.3f}" if not isinstance(value, list) else f"{key} [{', '.join(f'{v:.3f}' for v in value)}]"
            for key, value in last.timings.items()
        )
    )
    for workers in (1, 2):
        walls = []
        for _ in range(max(1, arguments.repeats // 2)):
            _, wall, _ = timed(lambda: graph_stein_discrepancy(points, scores, workers=workers))
            walls.append(wall)
        print(f"  workers = {workers}: median wall {statistics.median(walls):.3f} s")

    if arguments.skip_methods:
        return

    # one coordinate program under each HiGHS method
    unique_points = np.unique(points, axis=0)
    weights = np.full(len(unique_points), 1.0 / len(unique_points))
    edges, _ = spanner(unique_points)
    factors = (1.0, 1.0, 1.0)
    edge_matrix, edge_rhs = graph_program._edge_rows(unique_points, edges, factors)
    infinite = np.full(arguments.dimension, np.inf)
    objective, matrix, rhs, bounds = graph_program._coordinate_program(
        0, unique_points, weights, -unique_points, -infinite, infinite, factors, edge_matrix, edge_rhs
    )
    print(f"coordinate LP: {objective.size} variables, {matrix.shape[0]} inequality rows, {matrix.nnz} nonzeros")
    for method in ("highs-ds", "highs-ipm", "highs"):
        for presolve in (True, False):
            if method != "highs-ipm" and not presolve and arguments.n > 1500:
                continue
            walls, cpus = [], []
            for _ in range(max(1, arguments.repeats // 2)):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    solution, wall, cpu = timed(
                        lambda: linprog(
                            objective,
                            A_ub=matrix,
                            b_ub=rhs,
                            bounds=bounds,
                            method=method,
                            options={"presolve": presolve},
                        )
                    )
                walls.append(wall)
                cpus.append(cpu)
            print(
                f"  {method:10s} presolve={str(presolve):5s}: median wall {statistics.median(walls):.3f} s, "
                f"median cpu {statistics.median(cpus):.3f} s, optimum {-solution.fun:.10f}, iterations {solution.nit}"
            )


if __name__ == "__main__":
    main()
