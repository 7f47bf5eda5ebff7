"""Timings of the univariate classical Stein discrepancy (second-order cone program, Clarabel).

For each n (default 10^3, 10^4, 10^5) and each target of Gorham & Mackey's
Figure 2 -- N(0, 1) with Stein factors (1, 4, 2) and Unif(0, 1) on (0, 1) with
(0.5, 0.5, 1) -- draws n i.i.d. points (seed 7), and times
``classical_stein_discrepancy`` (setup and Clarabel solve, interior point
iterations) and, in the same run, ``graph_stein_discrepancy`` with the same
factors (unless ``--skip-graph-above``), so the ratio does not depend on the
machine's load. For Unif(0, 1) it also reports the relative difference from
the exact Wasserstein distance (equal in exact arithmetic). Wall-clock and
process CPU seconds are printed with the 1-minute load average before and
after each measurement.

Run::

    python benchmarks/bench_classical_stein.py
    python benchmarks/bench_classical_stein.py --sizes 1000 10000 --skip-graph-above 10000
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _timing import timed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--targets", nargs="+", default=["uniform", "gaussian"], choices=["uniform", "gaussian"])
    parser.add_argument(
        "--skip-graph-above",
        type=int,
        default=None,
        help="time the graph program only for n up to this (default: always)",
    )
    parser.add_argument("--seed", type=int, default=7)
    arguments = parser.parse_args(argv)

    from tallmcmc.stein import classical_stein_discrepancy, graph_stein_discrepancy, wasserstein_1d
    from tallmcmc.stein.univariate import (
        GAUSSIAN_STEIN_FACTORS,
        UNIFORM_STEIN_FACTORS,
        uniform_cdf,
        uniform_cdf_integral,
    )

    targets = {
        "uniform": (lambda rng, n: rng.uniform(size=n), lambda x: np.zeros_like(x), 0.0, 1.0, UNIFORM_STEIN_FACTORS),
        "gaussian": (lambda rng, n: rng.standard_normal(n), lambda x: -x, None, None, GAUSSIAN_STEIN_FACTORS),
    }
    classical_stein_discrepancy([0.5, 0.6], [0.0, 0.0])  # import and first-call costs out of the way
    print(f"cpus = {os.cpu_count()}")
    print(
        "| target | n | classical wall s | classical cpu s | setup s | iterations | graph wall s | "
        "graph / classical | value | vs Wasserstein | load before / after |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in arguments.targets:
        draw, score, lower, upper, factors = targets[name]
        for n in arguments.sizes:
            x = draw(np.random.default_rng(arguments.seed), n)
            load_before = os.getloadavg()[0]
            result, wall, cpu = timed(
                lambda: classical_stein_discrepancy(x, score(x), lower=lower, upper=upper, stein_factors=factors)
            )
            if arguments.skip_graph_above is None or n <= arguments.skip_graph_above:
                graph, graph_wall, _ = timed(
                    lambda: graph_stein_discrepancy(x, score(x), lower=lower, upper=upper, stein_factors=factors)
                )
                graph_text = f"{graph_wall:.2f}"
                ratio = f"{graph_wall / wall:.2f}"
                assert result.value <= graph.value * (1 + 1e-6), (result.value, graph.value)
            else:
                graph_text = ratio = "not run"
            load_after = os.getloadavg()[0]
            if name == "uniform":
                reference = wasserstein_1d(
                    x, uniform_cdf, target_quantile=lambda p: p, target_cdf_integral=uniform_cdf_integral
                )
                versus = f"{(result.value - reference) / reference:+.1e}"
            else:
                versus = "-"
            print(
                f"| {name} | {n} | {wall:.2f} | {cpu:.2f} | {result.timings['setup']:.2f} | {result.iterations} | "
                f"{graph_text} | {ratio} | {result.value:.6g} | {versus} | {load_before:.1f} / {load_after:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
