"""What bounding the compilation cache's folder costs: tallmcmc's daily prune against JAX's bound at every write.

Usage::

    python benchmarks/bench_cache_bound.py                       # folders of 700 and 10,000 entries
    python benchmarks/bench_cache_bound.py --entries 700 10000 30000
    pip install filelock && python benchmarks/bench_cache_bound.py   # also JAX's own LRU bound, for comparison

For each folder size (entries of ``--entry-bytes`` each, in a temporary folder): ``prune_if_due`` when not due (what
every ``import tallmcmc`` pays), when due and under the bound (once a day: list and stat the folder), and pruning to a
third of the folder's size; then, if ``filelock`` is installed, JAX's ``LRUCache.put`` of a 1 MB program into the same
folder (what ``jax_compilation_cache_max_size`` pays at every write: it lists the whole folder each time). Same
machine, same run; the median of ``--repeats``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from tallmcmc import compilation_cache


def fill(folder: Path, entries: int, entry_bytes: int, with_access_files: bool) -> None:
    """``entries`` files named as JAX names its entries (and its LRU's access-time files, for JAX's bound)."""
    folder.mkdir(parents=True, exist_ok=True)
    payload = os.urandom(entry_bytes)
    stamp = time.time_ns().to_bytes(8, "little")
    for index in range(entries):
        (folder / f"jit_program-{index:06d}-cache").write_bytes(payload)
        if with_access_files:
            (folder / f"jit_program-{index:06d}-atime").write_bytes(stamp)


def seconds(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[700, 10_000])
    parser.add_argument("--entry-bytes", type=int, default=30_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    try:
        import filelock  # noqa: F401  (JAX's bound needs it)
        from jax._src.lru_cache import LRUCache
    except ImportError:
        LRUCache = None
    print(f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}; entries of {args.entry_bytes} bytes")
    print()
    print(
        "| entries | folder MB | prune_if_due, not due s | due, under the bound s | prune to a third s | "
        "JAX's bound: one write s |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for entries in args.entries:
        root = Path(tempfile.mkdtemp(prefix="bench-cache-bound-"))
        try:
            folder = root / "tallmcmc"
            fill(folder, entries, args.entry_bytes, with_access_files=False)
            size = entries * args.entry_bytes
            stamp = folder / compilation_cache.STAMP_NAME

            def due():
                stamp.unlink(missing_ok=True)
                compilation_cache.prune_if_due(folder, 10 * size)

            under = seconds(due, args.repeats)
            not_due = seconds(lambda: compilation_cache.prune_if_due(folder, 10 * size), args.repeats)
            began = time.perf_counter()
            pruned = compilation_cache.prune(folder, size // 3)
            prune_seconds = time.perf_counter() - began
            assert pruned.kept_bytes <= compilation_cache.PRUNED_FRACTION * size // 3
            jax_write = "(filelock not installed)"
            if LRUCache is not None:
                jax_folder = root / "jax"
                fill(jax_folder, entries, args.entry_bytes, with_access_files=True)
                cache = LRUCache(str(jax_folder), max_size=100 * size)
                program = os.urandom(1_000_000)
                counter = iter(range(10**9))
                jax_write = f"{seconds(lambda: cache.put(f'new-{next(counter)}', program), args.repeats):.3f}"
            print(
                f"| {entries:,} | {size / 1e6:.0f} | {not_due:.1e} | {under:.3f} | {prune_seconds:.3f} | {jax_write} |"
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
