"""Time the IMQ kernel Stein discrepancy (after compilation).

Usage::

    python benchmarks/bench_ksd.py [--sizes 1000 10000] [--dimension 2] [--repeats 20]

Prints the median and minimum wall time per call for each n; the target is
n = 1000, d = 2 in at most 50 ms after compilation.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np

from tallmcmc.stein.kernel import kernel_stein_discrepancy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--dimension", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'n':>8} {'d':>3} {'compile+first (s)':>18} {'median (ms)':>12} {'min (ms)':>10} {'KSD':>10}")
    for n in args.sizes:
        points = rng.standard_normal((n, args.dimension))
        start = time.perf_counter()
        value = kernel_stein_discrepancy(points, -points)
        first = time.perf_counter() - start
        repeats = args.repeats if n <= 10_000 else max(1, args.repeats // 10)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            kernel_stein_discrepancy(points, -points)
            times.append(time.perf_counter() - start)
        times = np.array(times) * 1e3
        print(f"{n:>8} {args.dimension:>3} {first:>18.3f} {np.median(times):>12.2f} {times.min():>10.2f} {value:>10.5f}")


if __name__ == "__main__":
    main()
