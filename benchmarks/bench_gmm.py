"""Seconds per step and data touched per step on the Section 6.1 Gaussian mixture.

Usage::

    python benchmarks/bench_gmm.py                   # N = 1e5, 1e6, 1e7 and chain scaling
    python benchmarks/bench_gmm.py --sizes 1000000   # one N

First (``--tuna-chi``; ``--only-tuna`` for it alone), TunaMH beside MHminibatch at
N = 10^6 in the same run: points per step, acceptance, ESS/s over 4 vmapped chains.
Then, for each N, MHminibatch against the full-data Barker test measured in
the same run (the ratio is what to read: this machine is noisy), any
subsampling baselines the package has at N = 10^6, and the chain-steps per
second of MHminibatch with 1, 8 and 64 chains vmapped together. Compilation
is excluded from every timing (``SamplingResult.sampling_seconds``).
"""

from __future__ import annotations

import argparse
import platform

import jax
import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import gaussian_mixture


def model_of(num_data: int) -> tallmcmc.Model:
    # Temperature scaled so that N/K = 100 as in the paper (K = 10^4 at N = 10^6):
    # the posterior, the proposal's fit to it and so the minibatch sizes stay the same.
    return gaussian_mixture.model(num_data, temperature=num_data / 100.0, seed=0)


def measure(model, test, steps: int, chains: int = 1, seed: int = 0):
    start = jnp.asarray(gaussian_mixture.TRUE_THETA, jnp.float32)
    result = tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.15),
        test,
        initial_position=start,
        num_samples=steps,
        num_chains=chains,
        seed=seed,
        progress=False,
        num_chunks=1,
    )
    return result


def tuna_section(chis, steps: int, num_data: int = 1_000_000, chains: int = 4, timing_rounds: int = 3) -> None:
    """TunaMH beside MHminibatch in the same run (issue 10): data per step, acceptance, ESS/s (4 chains vmapped).

    Bound: ``tallmcmc.examples.gaussian_mixture.tuna_bound`` (cᵢ = |xᵢ − x̄| + 1 over K, M = ‖θ′ − θ‖·max(1, R)).
    ESS: ArviZ bulk ESS, minimum over θ₁, θ₂; seconds: sampling only (compilation excluded).
    """
    import os

    from tallmcmc.interop import arviz as arviz_bridge

    model = model_of(num_data)
    bound = gaussian_mixture.tuna_bound(model)
    print(
        f"\n## TunaMH vs MHminibatch, N = {num_data:,}, K = {model.temperature:g}, random walk 0.15, {chains} chains "
        f"x {steps} steps (load average {os.getloadavg()[0]:.1f})"
    )
    print(f"C = Σ cᵢ = {bound.total / model.temperature:.1f}; the bound's pass: {bound.data_used:,} points once")
    print(
        f"{'test':>22} {'points/step':>12} {'accept':>7} {'ESS min':>8} {'ESS/s':>9} {'ms/step':>8} "
        f"{'ESS per 10^6 step points':>25} {'setup points':>13} {'full-data steps':>16}"
    )
    tests = [("MHminibatch (m = 50)", tallmcmc.minibatch_barker(50))]
    tests += [(f"TunaMH (χ = {chi:g})", tallmcmc.tuna(chi, bound)) for chi in chis]
    for name, test in tests:
        result = measure(model, test, steps, chains=chains)
        draws = np.asarray(result.positions, np.float64)
        ess = float(arviz_bridge.ess(draws, method="bulk").min())
        points = float(result.data_used.mean())
        setup = sum(result.setup_data_used.values())
        print(
            f"{name:>22} {points:>12.1f} {result.acceptance_rate:>7.3f} {ess:>8.0f} "
            f"{ess / result.sampling_seconds:>9.1f} {result.seconds_per_step * 1e3:>8.3f} "
            f"{ess / (result.total_data_used - setup) * 1e6:>25.2f} {setup:>13,} "
            f"{result.info['used_full_data'].mean():>16.3f}",
            flush=True,
        )
    print(
        f"(load average after: {os.getloadavg()[0]:.1f}; setup points: the start check, and for TunaMH the bound's pass)"
    )
    if timing_rounds:
        # this machine is shared: ms/step again, the tests interleaved, median over rounds of 3000 steps
        times = {name: [] for name, _ in tests}
        for _ in range(timing_rounds):
            for name, test in tests:
                times[name].append(measure(model, test, 3000, chains=chains).seconds_per_step * 1e3)
        print(
            f"median ms/step over {timing_rounds} interleaved rounds of 3000 steps (load average "
            f"{os.getloadavg()[0]:.1f}): " + "; ".join(f"{name} {np.median(t):.3f}" for name, t in times.items())
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--minibatch-steps", type=int, default=3000)
    parser.add_argument("--exact-steps", type=int, default=60)
    parser.add_argument("--chains", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument(
        "--tuna-chi",
        type=float,
        nargs="*",
        default=[0.003, 0.01, 0.1],
        help="χ values of the TunaMH section (none: skip it)",
    )
    parser.add_argument("--tuna-steps", type=int, default=20000, help="steps per chain (the modes make ESS small)")
    parser.add_argument("--only-tuna", action="store_true", help="run only the TunaMH section")
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {jax.devices()[0].platform}, jax {jax.__version__}")
    if args.tuna_chi:
        tuna_section(args.tuna_chi, args.tuna_steps)
    if args.only_tuna:
        return

    print("\n## MHminibatch vs full-data Barker (1 chain)")
    print(
        f"{'N':>10} {'minibatch ms/step':>18} {'exact ms/step':>14} {'speed-up':>9} {'minibatch points/step':>22} {'exact points/step':>18}"
    )
    for num_data in args.sizes:
        model = model_of(num_data)
        mini = measure(model, tallmcmc.minibatch_barker(50), args.minibatch_steps)
        exact = measure(model, tallmcmc.exact_barker(), args.exact_steps)
        print(
            f"{num_data:>10,} {mini.seconds_per_step * 1e3:>18.4f} {exact.seconds_per_step * 1e3:>14.3f} "
            f"{exact.seconds_per_step / mini.seconds_per_step:>8.0f}x {mini.data_used.mean():>22.1f} "
            f"{exact.data_used.mean():>18.0f}"
        )

    baselines = {}
    if hasattr(tallmcmc, "austere_conservative"):
        baselines["AustereMH(c)"] = lambda n: tallmcmc.austere_conservative(error_bound=0.2, num_data=n)
    if hasattr(tallmcmc, "austere_adaptive"):
        baselines["AustereMH(nc)"] = lambda n: tallmcmc.austere_adaptive(error_bound=0.05)
    if hasattr(tallmcmc, "confidence_sampler"):
        baselines["MHSubLhd"] = lambda n: tallmcmc.confidence_sampler(50, gamma=1.5, p=2.0, delta=0.01)
    if baselines:
        num_data = 1_000_000
        model = model_of(num_data)
        mini = measure(model, tallmcmc.minibatch_barker(50), args.minibatch_steps)
        print(f"\n## Baselines at N = {num_data:,} (1 chain), against MHminibatch in the same run")
        print(f"{'method':>16} {'ms/step':>9} {'x MHminibatch':>14} {'test points/step':>17} {'all points/step':>16}")
        print(
            f"{'MHminibatch':>16} {mini.seconds_per_step * 1e3:>9.4f} {1.0:>13.0f}x "
            f"{mini.data_used_by_test.mean():>17.1f} {mini.data_used.mean():>16.1f}"
        )
        for name, make in baselines.items():
            result = measure(model, make(num_data), 200)
            print(
                f"{name:>16} {result.seconds_per_step * 1e3:>9.3f} {result.seconds_per_step / mini.seconds_per_step:>13.0f}x "
                f"{result.data_used_by_test.mean():>17.1f} {result.data_used.mean():>16.1f}"
            )

    print("\n## MHminibatch chain-steps per second, chains vmapped (N = 10^6)")
    model = model_of(1_000_000)
    base = None
    print(f"{'chains':>7} {'chain-steps/s':>14} {'x 1 chain':>10}")
    for chains in args.chains:
        result = measure(model, tallmcmc.minibatch_barker(50), 1000, chains=chains)
        rate = chains * result.num_draws / result.sampling_seconds
        base = base or rate
        print(f"{chains:>7} {rate:>14,.0f} {rate / base:>9.1f}x")


if __name__ == "__main__":
    main()
