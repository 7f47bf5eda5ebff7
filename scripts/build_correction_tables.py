"""Rebuild ``src/tallmcmc/data/correction_tables.npz``, the shipped correction tables.

Usage::

    python scripts/build_correction_tables.py [--method best|linprog|nnls] [--out PATH]

For each shipped sigma it runs :func:`tallmcmc.correction.solve_correction`
(default ``best``: the L-infinity linear program and NNLS, keeping the
smaller measured error), prints the achieved
``max_cdf_error`` and the solve time, and writes one ``.npz`` with the atoms,
probabilities and errors (keys ``support_<sigma:.4f>``,
``probabilities_<sigma:.4f>``, ``max_cdf_error_<sigma:.4f>``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from tallmcmc.correction.distribution import SHIPPED_SIGMAS
from tallmcmc.correction.solve import solve_correction

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src" / "tallmcmc" / "data" / "correction_tables.npz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=["best", "linprog", "nnls"], default="best")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    arrays: dict[str, np.ndarray] = {
        "sigmas": np.asarray(SHIPPED_SIGMAS, dtype=np.float64),
        "method": np.asarray(args.method),
    }
    print(f"{'sigma':>6} {'max_cdf_error':>14} {'atoms':>6} {'seconds':>8}  method")
    for sigma in SHIPPED_SIGMAS:
        t0 = time.perf_counter()
        dist = solve_correction(sigma, method=args.method, verbose=args.verbose)
        seconds = time.perf_counter() - t0
        tag = f"{sigma:.4f}"
        arrays[f"support_{tag}"] = dist.support
        arrays[f"probabilities_{tag}"] = dist.probabilities
        arrays[f"max_cdf_error_{tag}"] = np.asarray(dist.max_cdf_error)
        arrays[f"seconds_{tag}"] = np.asarray(seconds)
        arrays[f"method_{tag}"] = np.asarray(dist.method)
        print(
            f"{sigma:6.2f} {dist.max_cdf_error:14.3e} {dist.support.size:6d} {seconds:8.2f}  {dist.method}", flush=True
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **arrays)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.1f} KiB)")


if __name__ == "__main__":
    main()
