"""Sharded (``sample(mesh=...)``) against unsharded sampling on the GMM, same run (issue 11 §3).

Usage::

    python benchmarks/bench_sharding.py                 # N = 10^6, 8 chains, 4 forced host devices
    python benchmarks/bench_sharding.py --num-data 200000 --steps 200

The script sets ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` before importing JAX (so run it as its
own process). On this 2-core CPU the four "devices" share two cores: the figures measure the **overhead** of
the sharded path (a ``shard_map``, a ``psum`` per minibatch chunk, the all-gathered partial sums of full-data
tests), not a speed-up; on several real devices the per-device work is 1/4. Each row is
``chains × draws / sampling_seconds`` (compilation excluded) from one :func:`tallmcmc.sample` chunk, best of
``--repeats``, for the GMM (Section 6.1 mixture, K = N/100 as in ``bench_gmm.py``, random walk 0.15, chains
started at the true θ) with ``minibatch_barker(50)`` and ``exact_barker``, unsharded and on a ``"data"``
mesh, a ``"chains"`` mesh and a 2 × 2 mesh. It also prints the data touched per chain-step (the same in every
layout, which the table shows) and whether the draws equal the unsharded run's.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import argparse  # noqa: E402
import platform  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import tallmcmc  # noqa: E402
from tallmcmc.examples import gaussian_mixture  # noqa: E402


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-data", type=int, default=1_000_000)
    parser.add_argument("--chains", type=int, default=8)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--exact-steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    devices = jax.devices()
    print(
        f"JAX {jax.__version__}, {len(devices)} x {devices[0].platform} devices on {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}); N = {args.num_data:,}, {args.chains} chains\n"
    )
    if len(devices) < 4:
        raise SystemExit("needs 4 devices: run as its own process (XLA_FLAGS is set before JAX starts)")
    model = gaussian_mixture.model(args.num_data, temperature=args.num_data / 100)
    start = jnp.asarray(gaussian_mixture.TRUE_THETA, jnp.float32)
    layouts = {
        "none": None,
        "data (4)": jax.make_mesh((4,), ("data",)),
        "chains (4)": jax.make_mesh((4,), ("chains",)),
        "data 2 x chains 2": jax.make_mesh((2, 2), ("data", "chains")),
    }
    tests = {
        "minibatch_barker(50)": (lambda: tallmcmc.minibatch_barker(50), args.steps),
        "exact_barker": (tallmcmc.exact_barker, args.exact_steps),
    }
    for name, (make, steps) in tests.items():
        print(f"### {name}\n\nload average before: {load()}\n")
        print("| mesh | chain-steps/s | × unsharded | points per chain-step | same draws as unsharded | compile s |")
        print("|---|---:|---:|---:|---|---:|")
        reference = base = None
        for label, mesh in layouts.items():
            best = None
            for _ in range(args.repeats):
                result = tallmcmc.sample(
                    model,
                    tallmcmc.random_walk(0.15),
                    make(),
                    start,
                    num_samples=steps,
                    num_chains=args.chains,
                    seed=0,
                    progress=False,
                    num_chunks=1,
                    mesh=mesh,
                )
                if best is None or result.chain_steps_per_second > best.chain_steps_per_second:
                    best = result
            rate = best.chain_steps_per_second
            if reference is None:
                reference, base = best, rate
            same = (
                "bit for bit"
                if np.array_equal(reference.positions, best.positions)
                else ("to 1e-5" if np.allclose(reference.positions, best.positions, rtol=1e-5, atol=1e-5) else "NO")
            )
            print(
                f"| {label} | {rate:,.0f} | {rate / base:.2f} | {np.mean(best.data_used):,.1f} | {same} | "
                f"{best.compile_seconds:.1f} |"
            )
        print(f"\nload average after: {load()}\n")


if __name__ == "__main__":
    main()
