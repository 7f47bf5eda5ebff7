"""What a point costs the minibatch tests: the keyed permutation that orders the data against the likelihood term.

Every minibatch test (and the minibatch proposals) asks the step's keyed permutation
(:mod:`tallmcmc.acceptance.subsample`: an 8-round Feistel network on ``2**k >= N`` elements, restricted to
``[0, N)`` by cycle walking) for the indices of each stage's points. This script times, in one compiled program of
``--stages`` stages of ``--batch`` points for ``--chains`` vmapped chains (a ``fori_loop``, as the tests' stage loop
is), the stage's work with and without the permutation: the indices' rows gathered and a Gaussian-mean log-ratio
term summed (about the cheapest likelihood there is). Printed per N: milliseconds a step and nanoseconds a point
(a point of one chain), the permutation's share, and the fraction of ``[0, 2**k)`` outside ``[0, N)`` that the
cycle walking must walk again (its loop runs until every index of the stage is inside, so a larger fraction costs
rounds for the whole stage). ``N = 2**k`` needs no walking.

    python benchmarks/bench_permutation.py
    python benchmarks/bench_permutation.py --num-data 100000 262144 --batch 1000 --stages 70
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc.acceptance import subsample
from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices


def step_program(data: jax.Array, batch: int, stages: int, permuted: bool):
    """One step's stage loop for vmapped chains: ``stages`` stages of ``batch`` points, summed log-ratio terms."""
    num_data = data.shape[0]

    def one_chain(key):
        round_keys = permutation_keys(key)

        def stage(i, total):
            positions = i * batch + jnp.arange(batch, dtype=jnp.int32)
            indices = permuted_indices(round_keys, positions, num_data) if permuted else positions
            x = data[indices]
            return total + jnp.sum(-0.5 * (x - 0.3) ** 2 + 0.5 * (x - 0.2) ** 2)

        return jax.lax.fori_loop(0, stages, stage, jnp.float32(0.0))

    return jax.jit(jax.vmap(one_chain))


def seconds_a_step(program, chains: int, repeats: int) -> float:
    """Mean seconds of one call after a warm call, each call on fresh keys."""
    program(jax.random.split(jax.random.key(0), chains)).block_until_ready()
    began = time.perf_counter()
    for seed in range(1, repeats + 1):
        program(jax.random.split(jax.random.key(seed), chains)).block_until_ready()
    return (time.perf_counter() - began) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-data", type=int, nargs="+", default=[100_000, 140_000, 262_144, 1_000_000])
    parser.add_argument("--batch", type=int, default=100, help="points a stage (the tests' batch_size)")
    parser.add_argument("--stages", type=int, default=700, help="stages a step (batch * stages <= every N)")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=20)
    arguments = parser.parse_args()
    points = arguments.batch * arguments.stages
    if points > min(arguments.num_data):
        parser.error(f"--batch * --stages = {points} points a step exceeds the smallest --num-data")
    print(f"{jax.devices()[0].device_kind}; {arguments.chains} chains, {arguments.stages} stages of {arguments.batch}")
    print("| N | outside [0, N) of 2^k | permuted: ms a step | ns a point | plain: ms a step | ns a point | share |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for num_data in arguments.num_data:
        data = jnp.asarray(np.random.default_rng(0).normal(size=num_data).astype(np.float32))
        timed = {
            permuted: seconds_a_step(
                step_program(data, arguments.batch, arguments.stages, permuted), arguments.chains, arguments.repeats
            )
            for permuted in (True, False)
        }
        per_point = {permuted: seconds / (points * arguments.chains) * 1e9 for permuted, seconds in timed.items()}
        # the tree before 2026-11-30 had no domain_bits: its square domain 4**h (for --against-style comparisons)
        bits = (
            subsample.domain_bits(num_data) if hasattr(subsample, "domain_bits") else 2 * subsample._half_bits(num_data)
        )
        outside = 1.0 - num_data / 2**bits
        print(
            f"| {num_data:,} | {outside:.2f} | {timed[True] * 1e3:.2f} | {per_point[True]:.1f} | "
            f"{timed[False] * 1e3:.2f} | {per_point[False]:.1f} | {1 - timed[False] / timed[True]:.0%} |"
        )


if __name__ == "__main__":
    main()
