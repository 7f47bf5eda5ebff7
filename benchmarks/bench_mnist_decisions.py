"""Is Algorithm 1 as printed biased on the paper's own MNIST target (K = 100)? Decision-level check.

The tail guard of ``minibatch_barker`` (``variance_rse=0.35``) raises MHminibatch's mean minibatch on
MNIST-13k from ≈ 122 to ≈ 716 points (docs/REPRODUCTIONS.md). This asks whether the printed algorithm's
decisions are off there. Pairs (θ, θ′): θ from an exact-Barker chain on the paper's target (flat prior,
K = 100, random walk with standard deviation 0.05 per coordinate, from θ = 0, every 20th of the last
1000 of 2000 steps), θ′ = θ + 0.05·ξ. For each pair the exact Δ (float64, NumPy) and, per variant,
the acceptance frequency of ``--repetitions`` vmapped decisions (the guarded variant after 300 warming
decisions at the pair, as a chain's earlier steps would) against 1/(1 + e^{−Δ}). Each pair has its own key set
(seed 1000 + its index), so the pairs' errors are independent; with no error z has sd 1 over the pairs.

    python benchmarks/bench_mnist_decisions.py --pairs 50 --repetitions 4000
"""

from __future__ import annotations

import argparse
import time

import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.reproduce import mnist
from tallmcmc.testing import repeated_decisions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--repetitions", type=int, default=4000)
    parser.add_argument("--step-size", type=float, default=0.05)
    args = parser.parse_args()
    x_train, y_train, _, _ = mnist.load_data("13k", None, None, progress=False)
    model = mnist.build_model(x_train, y_train, 100.0)
    chain = tallmcmc.sample(
        model,
        tallmcmc.random_walk(args.step_size),
        tallmcmc.exact_barker(),
        initial_position=jnp.zeros(784, jnp.float32),
        num_samples=2000,
        progress=False,
        seed=11,
    )
    thetas = np.asarray(chain.positions)[0, -1000::20][: args.pairs]
    rng = np.random.default_rng(12)
    proposals = (thetas + args.step_size * rng.standard_normal(thetas.shape)).astype(np.float32)
    x, y = x_train.astype(np.float64), y_train.astype(np.float64)

    def exact_delta(theta, proposed):
        def log_lik(beta):
            logits = x @ beta
            return y * -np.logaddexp(0, -logits) + (1 - y) * -np.logaddexp(0, logits)

        return float(np.sum(log_lik(proposed.astype(np.float64)) - log_lik(theta.astype(np.float64))) / 100.0)

    deltas = np.array([exact_delta(t, p) for t, p in zip(thetas, proposals)])
    print(
        f"{len(deltas)} pairs, Δ from {deltas.min():.2f} to {deltas.max():.2f} (median |Δ| {np.median(np.abs(deltas)):.2f})"
    )
    for label, rse in (("Algorithm 1 as printed", None), ("tail guard 0.35", 0.35)):
        test = tallmcmc.minibatch_barker(100, variance_rse=rse)

        began, z, used, bounds = time.perf_counter(), [], [], []
        for index, (theta, proposed, delta) in enumerate(zip(thetas, proposals, deltas)):
            theta, proposed = jnp.asarray(theta), jnp.asarray(proposed)
            decision = repeated_decisions(
                model,
                test,
                theta,
                proposed,
                args.repetitions,
                warmup_decisions=300 if rse is not None else 0,
                seed=1000 + index,
            )
            probability = 1 / (1 + np.exp(-delta))
            frequency = float(jnp.mean(decision.accepted))
            z.append(
                (frequency - probability) / np.sqrt(max(probability * (1 - probability), 1e-12) / args.repetitions)
            )
            used.append(float(jnp.mean(decision.info.data_used)))
            bounds.append(float(jnp.median(decision.info.error_bound)))
        z = np.array(z)
        print(
            f"{label:24s}: pairs beyond 4 SE {np.sum(np.abs(z) > 4)}/{len(z)}, max |z| {np.max(np.abs(z)):.1f}, "
            f"median |z| {np.median(np.abs(z)):.2f}, sd of z {np.std(z):.2f}, mean points {np.mean(used):.0f}, "
            f"median error bound {np.median(bounds):.3f} ({time.perf_counter() - began:.0f} s)"
        )
        order = np.argsort(deltas)
        print("   Δ and z by Δ:", " ".join(f"{deltas[i]:+.1f}:{z[i]:+.1f}" for i in order))


if __name__ == "__main__":
    main()
