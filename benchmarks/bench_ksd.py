"""Time the IMQ kernel Stein discrepancy: old XLA path vs the numba path, and the Nystroem option.

Usage::

    python benchmarks/bench_ksd.py [--sizes 1000 10000 100000] [--dimension 2]
        [--repeats 5] [--old-max-n 10000] [--old-rev 29a9608]
        [--nystroem-sizes 10000 100000] [--landmarks 100 400 1600]
        [--jax-max-n 10000] [--float32-probe]

For each n (N(0, I_d) sample, scores -x, beta = -1/2, c = 1, V-statistic):

* ``new``: :func:`tallmcmc.stein.kernel_stein_discrepancy_squared` as it is
  now (default backend; numba on a CPU), first call (with compilation, or
  loading numba's on-disk cache) and the median of ``--repeats`` calls;
* ``old``: the module as it was at git revision ``--old-rev`` (float64 XLA,
  ``exp``/``log`` per pair, all n^2 pairs), one call including compilation,
  for n <= ``--old-max-n``; and the relative difference of the two values;
* for n <= ``--jax-max-n``: the same module with ``backend="jax"`` (XLA,
  all n^2 pairs, ``rsqrt`` for beta = -1/2), compiled;
* with ``--float32-probe``: a float32 variant of the numba loop (float64 row
  sums) in this file, its time and relative error against the float64 value;
* Nystroem (``method="nystroem"``) on three samples (i.i.d. N(0, I), mean
  shifted by 0.5 in the first coordinate, scale 1.3), relative error against
  the exact V-statistic and time, for each number of landmarks.

Every timing line carries ``os.getloadavg()`` at its end: the machine is
shared, so wall times are comparable only within one run.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np

from tallmcmc.stein.kernel import kernel_stein_discrepancy_squared

ROOT = Path(__file__).resolve().parents[1]


def load_old(revision: str):
    """Import src/tallmcmc/stein/kernel.py as it was at ``revision`` (a module of its own)."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:src/tallmcmc/stein/kernel.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_kernel.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f}/{five:.1f}/{fifteen:.1f}"


def float32_probe():
    """A float32 copy of the d = 2, beta = -1/2 numba loop with float64 row sums."""
    from numba import njit, prange

    fastmath = {"contract", "reassoc", "nsz", "arcp", "nnan", "ninf"}

    @njit(fastmath=fastmath, error_model="numpy", boundscheck=False)
    def row(i, xs0, xs1, bs0, bs1, w):
        x0, x1, b0, b1 = xs0[i], xs1[i], bs0[i], bs1[i]
        total = 0.0
        one, two, three = np.float32(1.0), np.float32(2.0), np.float32(3.0)
        for j in range(i + 1, xs0.shape[0]):
            dx0 = x0 - xs0[j]
            dx1 = x1 - xs1[j]
            r2 = dx0 * dx0 + dx1 * dx1
            bb = b0 * bs0[j] + b1 * bs1[j]
            bdr = (b0 - bs0[j]) * dx0 + (b1 - bs1[j]) * dx1
            q = one / (one + r2)
            s = np.sqrt(q)
            total += np.float64(w[j] * (s * (bb + q * (bdr + two - three * r2 * q))))
        return total

    @njit(parallel=True)
    def upper(xs0, xs1, bs0, bs1, w):
        n = xs0.shape[0]
        half = (n + 1) // 2
        partial = np.zeros(half)
        for p in prange(half):
            i = np.int64(p)
            value = np.float64(w[i]) * row(i, xs0, xs1, bs0, bs1, w)
            k = n - 1 - i
            if k != i:
                value += np.float64(w[k]) * row(k, xs0, xs1, bs0, bs1, w)
            partial[p] = value
        return np.sum(partial)

    def squared(points, scores):
        n = points.shape[0]
        w = np.full(n, 1.0 / n)
        columns = [
            np.ascontiguousarray(a, dtype=np.float32) for a in (points[:, 0], points[:, 1], scores[:, 0], scores[:, 1])
        ]
        diagonal = np.sum(w**2 * (np.sum(scores * scores, axis=1) + 2.0))
        return 2.0 * upper(*columns, w.astype(np.float32)) + diagonal

    return squared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--dimension", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--old-max-n", type=int, default=10000)
    parser.add_argument("--old-rev", default="29a9608")
    parser.add_argument("--nystroem-sizes", type=int, nargs="*", default=[])
    parser.add_argument("--landmarks", type=int, nargs="+", default=[100, 400, 1600])
    parser.add_argument("--float32-probe", action="store_true")
    parser.add_argument("--jax-max-n", type=int, default=10000)
    args = parser.parse_args()
    d = args.dimension
    old = load_old(args.old_rev) if args.old_max_n > 0 else None
    probe = float32_probe() if args.float32_probe and d == 2 else None
    exact = {}

    print(
        "| n | d | new: first call (s) | new: median (s) | new: CPU s per call | old: first call (s) "
        "| old: warm call (s) | old: CPU s per call | old / new (CPU) | rel. difference | load (1/5/15 min) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for n in args.sizes:
        points = np.random.default_rng(0).standard_normal((n, d))
        start = time.perf_counter()
        value = kernel_stein_discrepancy_squared(points, -points)
        first = time.perf_counter() - start
        repeats = args.repeats if n <= 10_000 else max(1, args.repeats // 5)
        times = []
        cpu_start = time.process_time()
        for _ in range(repeats):
            start = time.perf_counter()
            kernel_stein_discrepancy_squared(points, -points)
            times.append(time.perf_counter() - start)
        cpu = (time.process_time() - cpu_start) / repeats  # all threads of this process
        median = float(np.median(times))
        exact[n] = value
        old_first = old_warm = old_cpu = ratio = difference = "-"
        if old is not None and n <= args.old_max_n:
            start, cpu_start = time.perf_counter(), time.process_time()
            old_value = old.kernel_stein_discrepancy_squared(points, -points)
            elapsed, elapsed_cpu = time.perf_counter() - start, time.process_time() - cpu_start
            old_first = f"{elapsed:.3g}"
            if n <= 10_000:  # a second (compiled) call where it is cheap
                start, cpu_start = time.perf_counter(), time.process_time()
                old.kernel_stein_discrepancy_squared(points, -points)
                elapsed, elapsed_cpu = time.perf_counter() - start, time.process_time() - cpu_start
                old_warm = f"{elapsed:.3g}"
            old_cpu = f"{elapsed_cpu:.3g}"
            ratio = f"{elapsed_cpu / cpu:.0f}x"
            difference = f"{abs(value - old_value) / abs(old_value):.1e}"
        print(
            f"| {n} | {d} | {first:.3g} | {median:.3g} | {cpu:.3g} | {old_first} | {old_warm} | {old_cpu} "
            f"| {ratio} | {difference} | {load()} |",
            flush=True,
        )
        if n <= args.jax_max_n:  # the XLA path of this module (backend="jax"), compiled
            kernel_stein_discrepancy_squared(points, -points, backend="jax")
            start, cpu_start = time.perf_counter(), time.process_time()
            value_jax = kernel_stein_discrepancy_squared(points, -points, backend="jax")
            elapsed, elapsed_cpu = time.perf_counter() - start, time.process_time() - cpu_start
            print(
                f"| {n} (backend='jax') | {d} | | {elapsed:.3g} | {elapsed_cpu:.3g} | | | | "
                f"{elapsed_cpu / cpu:.1f}x numba (CPU) | {abs(value_jax - value) / abs(value):.1e} "
                f"| {load()} |",
                flush=True,
            )
        if probe is not None:
            probe(points[:100], -points[:100])  # compile
            start = time.perf_counter()
            value32 = probe(points, -points)
            elapsed = time.perf_counter() - start
            print(
                f"| {n} (float32 probe) | {d} | | {elapsed:.3g} | | | | | {median / elapsed:.2f}x faster (wall) | "
                f"{abs(value32 - value) / abs(value):.1e} | {load()} |",
                flush=True,
            )

    if args.nystroem_sizes:
        print()
        print("| n | sample | landmarks m | exact V | Nystroem V | rel. error | Nystroem time (s) | load |")
        print("|---:|---|---:|---:|---:|---:|---:|---|")
    for n in args.nystroem_sizes:
        base = np.random.default_rng(0).standard_normal((n, d))
        samples = {
            "iid N(0,I)": base,
            "mean +0.5": base + np.eye(d)[0] * 0.5,
            "scale 1.3": 1.3 * base,
        }
        for name, points in samples.items():
            if name == "iid N(0,I)" and n in exact:
                reference = exact[n]
            else:
                reference = kernel_stein_discrepancy_squared(points, -points)
            for m in args.landmarks:
                # compile for this m (the column blocks have one shape for n >= 4096)
                kernel_stein_discrepancy_squared(points[:4096], -points[:4096], method="nystroem", landmarks=m)
                start = time.perf_counter()
                value = kernel_stein_discrepancy_squared(points, -points, method="nystroem", landmarks=m)
                elapsed = time.perf_counter() - start
                print(
                    f"| {n} | {name} | {m} | {reference:.4e} | {value:.4e} | "
                    f"{abs(value - reference) / reference:.1e} | {elapsed:.3g} | {load()} |",
                    flush=True,
                )


if __name__ == "__main__":
    sys.exit(main())
