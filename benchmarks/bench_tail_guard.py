"""Decision-level accuracy and cost of the minibatch Barker test on heavy-tailed log ratios.

Model: ``tallmcmc.examples.weighted_mean.simulate(N, heavy_fraction, heavy_weight)``, K chosen so
that N²·Var(lᵢ)/100 = 3 at Δ = 2.5, step 0.01. For each pair (θ, θ′) with Δ in {−4, …, 4}: 300
sequential decisions warm the test's cache (as a chain's earlier steps would), then 20,000
vmapped decisions are compared with the Barker probability 1/(1 + e^{−Δ}). Each pair has its own key set
(seed 1000 + its index), so the pairs' errors are independent; with no error z has sd 1 over the pairs.

    python benchmarks/bench_tail_guard.py --rse none 0.5 0.35 0.25

Heavier populations (e.g. ``--heavy-fraction 0.002 --heavy-weight 1000``) admit no temperature with
Δ = ±4 and N²·Var(lᵢ)/100 = 3; the search below then pushes θ to ~10⁵, where float32 per-datum
differences are meaningless, so such runs say nothing about the test.
"""

from __future__ import annotations

import argparse
import time

import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import weighted_mean
from tallmcmc.testing import repeated_decisions

STEP = 0.01


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-data", type=int, default=20_000)
    parser.add_argument("--heavy-fraction", type=float, default=0.01)
    parser.add_argument("--heavy-weight", type=float, default=100.0)
    parser.add_argument("--rse", nargs="+", default=["none", "0.35"], help="variance_rse values ('none': off)")
    parser.add_argument("--repetitions", type=int, default=20_000)
    args = parser.parse_args()
    data = weighted_mean.simulate(args.num_data, args.heavy_fraction, args.heavy_weight)
    x, w = data.astype(np.float64).T
    mean = float(np.sum(w * x) / np.sum(w))

    def pair(delta, temperature):
        midpoint = mean - delta * temperature / (np.sum(w) * STEP)
        return np.float32(midpoint - STEP / 2), np.float32(midpoint + STEP / 2)

    def spread(temperature):  # N²·Var(lᵢ)/100 at Δ = 2.5
        theta, proposed = pair(2.5, temperature)
        return args.num_data**2 * np.var(w * (-0.5 * (x - proposed) ** 2 + 0.5 * (x - theta) ** 2) / temperature) / 100

    low, high = 1e-3, 1e9
    for _ in range(200):
        temperature = np.sqrt(low * high)
        low, high = (temperature, high) if spread(temperature) > 3.0 else (low, temperature)
    model = weighted_mean.model(data, temperature)
    print(
        f"N = {args.num_data}, heavy fraction {args.heavy_fraction}, weight {args.heavy_weight}, K = {temperature:.4g}"
    )
    for rse in args.rse:
        test = tallmcmc.minibatch_barker(100, variance_rse=None if rse == "none" else float(rse))
        began, worst, used = time.perf_counter(), 0.0, []
        zs = []
        for index, target in enumerate((-4, -2.5, -1, 0, 1, 2.5, 4)):
            theta, proposed = pair(target, temperature)
            delta = weighted_mean.log_ratio(data, float(theta), float(proposed), temperature)
            decision = repeated_decisions(
                model,
                test,
                jnp.float32(theta),
                jnp.float32(proposed),
                args.repetitions,
                warmup_decisions=300,
                seed=1000 + index,
            )
            probability = 1 / (1 + np.exp(-delta))
            frequency = float(jnp.mean(decision.accepted))
            z = (frequency - probability) / np.sqrt(probability * (1 - probability) / args.repetitions)
            worst = max(worst, abs(z))
            zs.append(z)
            used.append(float(jnp.mean(decision.info.data_used)))
            print(
                f"  rse={rse:>5s} Δ={delta:6.2f} frequency={frequency:.4f} Barker={probability:.4f} z={z:6.1f} "
                f"b={used[-1]:7.0f} mean Δ*={float(jnp.mean(decision.info.statistic)):6.2f} "
                f"pooled kurtosis={float(decision.cache.fourth[0] / jnp.maximum(decision.cache.count[0], 1)):6.1f} "
                f"error bound={float(jnp.mean(decision.info.error_bound)):.3f}"
            )
        print(
            f"rse={rse}: max |z| = {worst:.1f}, rms z {np.sqrt(np.mean(np.square(zs))):.2f}, mean points per decision "
            f"{np.mean(used):.0f} "
            f"({time.perf_counter() - began:.0f} s)"
        )


if __name__ == "__main__":
    main()
