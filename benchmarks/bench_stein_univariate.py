"""Timings of the univariate graph Stein discrepancy: banded IPM vs Clarabel vs HiGHS.

For n i.i.d. N(0, 1) points with the N(0, 1) score b(x) = -x and the
classical Stein factors (1, 1, 1) (the setting of Gorham & Mackey 2015,
Figure 1), times :func:`tallmcmc.stein.univariate_graph_stein_discrepancy`
with each solver:

* ``ipm``: the banded interior point method (default);
* ``clarabel``: the same banded program through Clarabel (sparse LDL^T);
* ``highs``: the original path-graph program through HiGHS dual simplex.

Samples: i.i.d. N(0, 1) (``--samples gaussian``) and Student-t with 10 degrees
of freedom scaled by sqrt(8/10) to unit variance (``student-t``, the mismatched
sample of ``reproduce stein-gaussian-vs-t``), both scored against N(0, 1).
Clarabel and HiGHS are run only up to ``--clarabel-max`` and
``--highs-max`` (they grow superlinearly). Wall-clock and process CPU
seconds are printed with the 1-minute load average (the machine is shared),
the interior point iterations, and the relative difference of each value from
HiGHS where it ran (otherwise from Clarabel). Prints a markdown table at the end.

Run::

    python benchmarks/bench_stein_univariate.py
    python benchmarks/bench_stein_univariate.py --sizes 1000 10000 --highs-max 10000 --clarabel-max 0
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _timing import timed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 30000, 100000, 200000])
    parser.add_argument("--samples", nargs="+", default=["gaussian", "student-t"], choices=["gaussian", "student-t"])
    parser.add_argument("--clarabel-max", type=int, default=0, help="largest n for Clarabel")
    parser.add_argument("--highs-max", type=int, default=10000, help="largest n for HiGHS")
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args(argv)

    from tallmcmc.stein import univariate
    from tallmcmc.stein.univariate import univariate_graph_stein_discrepancy

    solve = univariate._interior_point

    def counted(*args, **kwargs):  # records the interior point iterations of the last solve
        z, y, info = solve(*args, **kwargs)
        counted.info = info
        return z, y, info

    univariate._interior_point = counted
    univariate_graph_stein_discrepancy(np.linspace(-1, 1, 20), -np.linspace(-1, 1, 20))  # compile / load numba
    rows = []
    for sample in arguments.samples:
        for n in arguments.sizes:
            rng = np.random.default_rng([arguments.seed, n])
            x = rng.standard_normal(n) if sample == "gaussian" else rng.standard_t(10, size=n) * np.sqrt(0.8)
            record = {"n": n, "sample": sample}
            for solver, limit in (("ipm", None), ("clarabel", arguments.clarabel_max), ("highs", arguments.highs_max)):
                if limit is not None and n > limit:
                    continue
                load = os.getloadavg()[0]
                counted.info = None
                result, wall, cpu = timed(lambda: univariate_graph_stein_discrepancy(x, -x, solver=solver))
                record[solver] = (result.value, wall, cpu, load)
                if solver == "ipm":
                    record["iterations"] = counted.info.iterations
                    record["converged"] = counted.info.converged
                print(
                    f"{sample:9s} n = {n:7d} {solver:9s} value {result.value:.12f}  wall {wall:8.2f} s  "
                    f"cpu {cpu:8.2f} s  load {load:.1f}"
                    + (f"  iterations {counted.info.iterations}" if solver == "ipm" else ""),
                    flush=True,
                )
            rows.append(record)

    def cell(record, solver):
        return f"{record[solver][1]:.2f} ({record[solver][2]:.2f})" if solver in record else "–"

    print()
    print(
        "| sample | n | banded IPM s | IPM iterations | Clarabel s | HiGHS (dual simplex) s | IPM value | "
        "rel. diff. IPM vs reference | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for record in rows:
        value = record["ipm"][0]
        reference = record.get("highs", record.get("clarabel"))
        difference = f"{abs(value - reference[0]) / abs(reference[0]):.1e}" if reference else "–"
        loads = [record[s][3] for s in ("ipm", "clarabel", "highs") if s in record]
        iterations = f"{record['iterations']}" + ("" if record["converged"] else " (not converged)")
        print(
            f"| {record['sample']} | {record['n']:,} | {cell(record, 'ipm')} | {iterations} | "
            f"{cell(record, 'clarabel')} | {cell(record, 'highs')} | {value:.8f} | {difference} | "
            f"{min(loads):.1f}–{max(loads):.1f} |"
        )
    print("\nseconds: wall (process CPU); reference: HiGHS where it ran, else Clarabel")


if __name__ == "__main__":
    main()
