"""What checkpoints cost (issue 24): sampling time with and without ``sample(checkpoint=...)``, and a file's size and
write time.

Usage::

    python benchmarks/bench_checkpoint.py                       # 64 chains, 2,000 draws, both drivers
    python benchmarks/bench_checkpoint.py --chains 8 --draws 5000 --every 100 500

Workload: the Section 6.1 mixture (``examples.gaussian_mixture``, N = 10⁶, K = N/100 as in ``bench_gmm.py``), random
walk 0.15, ``minibatch_barker(50)``, chains started at the true θ. For each driver and each ``--every`` (kept steps
between writes), the sampling seconds of the checkpointed run over those of the same run without one (same
process, interleaved, best of ``--repeats``): what the writes and, for the asynchronous driver, bringing the chains
level at each write (they otherwise run ahead of each other) cost; and the wall time of the call less compilation
(which includes the writes). Then the final file's size and the time
``result.save`` takes. Prints a markdown table and the machine's load; the draws are checked equal to the
unchecked run's.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import gaussian_mixture


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=64)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--every", type=int, nargs="+", default=[100, 500, 0], help="0: the default (a write a minute)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--drivers", nargs="+", default=["vmap", "asynchronous"])
    args = parser.parse_args()
    num_data = 1_000_000
    model = gaussian_mixture.model(num_data, temperature=num_data / 100.0, seed=0)
    start = jnp.asarray(gaussian_mixture.TRUE_THETA, jnp.float32)
    folder = tempfile.mkdtemp()
    print(f"{args.chains} chains x {args.draws} draws, mixture N = {num_data:,}; {load()}\n")
    print(
        "| driver | checkpoint every | sampling s (none) | sampling s (checkpointed) | ratio | wall s (none) "
        "| wall s (checkpointed) | ratio | file MB | one save s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for driver in args.drivers:

        def run(**options):
            return tallmcmc.sample(
                model,
                tallmcmc.random_walk(0.15),
                tallmcmc.minibatch_barker(50),
                start,
                num_samples=args.draws,
                num_chains=args.chains,
                seed=1,
                progress=False,
                driver=driver,
                **options,
            )

        for every in args.every:
            plain, checked, plain_wall, checked_wall = [], [], [], []
            for repeat in range(args.repeats):
                path = os.path.join(folder, f"{driver}-{every}-{repeat}.nc")
                began = time.perf_counter()
                reference = run()
                plain_wall.append(time.perf_counter() - began - reference.compile_seconds)
                began = time.perf_counter()
                checkpointed = run(checkpoint=path, checkpoint_every=every or None)
                checked_wall.append(time.perf_counter() - began - checkpointed.compile_seconds)
                assert np.array_equal(reference.positions, checkpointed.positions)
                plain.append(reference.sampling_seconds)
                checked.append(checkpointed.sampling_seconds)
            began = time.perf_counter()
            checkpointed.save(os.path.join(folder, "again.nc"))
            save_seconds = time.perf_counter() - began
            size = os.path.getsize(path) / 1e6
            print(
                f"| {driver} | {every or 'default'} | {min(plain):.3f} | {min(checked):.3f} | "
                f"{min(checked) / min(plain):.2f} | {min(plain_wall):.3f} | {min(checked_wall):.3f} | "
                f"{min(checked_wall) / min(plain_wall):.2f} | {size:.1f} | {save_seconds:.3f} |"
            )
    print(f"\n{load()}; {jax.devices()[0].platform}")


if __name__ == "__main__":
    main()
