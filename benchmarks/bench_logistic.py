"""Untempered logistic regression: exact vs naive vs control-variate minibatch Barker (issue 8).

Data: ``tallmcmc.examples.logistic_regression.simulate(N, d, seed=0)`` (xᵢ ~ N(0, I) float32,
β* ~ N(0, I/4), yᵢ ~ Bernoulli(σ(xᵢᵀβ*))), prior N(0, I), K = 1, 4 chains started at the mode.

Reference posterior: the Laplace independence proposal with the exact Metropolis test
(``--reference-draws`` per chain), or NumPyro NUTS when ``--nuts`` and numpyro is installed
(``pip install -e '.[bench]'``). Every method is charged its setup passes (mode, control
variate, start check) in "ESS per 10⁶ points".

    python benchmarks/bench_logistic.py --sizes 100000 1000000 --dimension 10 --draws 2000
"""

from __future__ import annotations

import argparse
import time

import arviz as az
import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import logistic_regression


def summarise(name, result, reference, seconds_extra=0.0):
    draws = np.asarray(result.positions)
    ess = np.array([float(az.ess(draws[..., j], method="bulk")) for j in range(draws.shape[-1])])
    seconds = result.sampling_seconds + seconds_extra
    total = result.total_data_used
    error = np.max(np.abs(draws.mean((0, 1)) - reference[0]) / reference[1])
    mcse = np.max(np.abs(draws.mean((0, 1)) - reference[0]) / (draws.std((0, 1)) / np.sqrt(ess)))
    sd_ratio = draws.std((0, 1)) / reference[1]
    return dict(method=name, per_step=float(result.data_used.mean()), setup_passes=result.setup_data_passes,
                accept=result.acceptance_rate, ess_min=ess.min(), ess_per_s=ess.min() / seconds,
                ess_per_million=ess.min() / total * 1e6, max_err_sd=error, max_err_mcse=mcse,
                sd_ratio_range=(sd_ratio.min(), sd_ratio.max()), seconds=seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--dimension", type=int, default=10)
    parser.add_argument("--draws", type=int, default=2000, help="kept draws per chain")
    parser.add_argument("--reference-draws", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--skip-naive", action="store_true", help="skip the naive minibatch test (slow at large N)")
    args = parser.parse_args()
    d = args.dimension
    for num_data in args.sizes:
        covariates, response = logistic_regression.simulate(num_data, d, seed=0)
        model = logistic_regression.model(covariates, response)
        began = time.perf_counter()
        mode = tallmcmc.find_mode(model, jnp.zeros(d, jnp.float32))
        cv = tallmcmc.taylor_control_variate(model, mode.position)
        setup_seconds = time.perf_counter() - began
        covariance = tallmcmc.laplace_covariance(mode)
        start = mode.position
        options = dict(initial_position=start, num_chains=4, progress=False, seed=1)
        reference_run = tallmcmc.sample(model, tallmcmc.laplace_independence(mode), tallmcmc.exact_metropolis(),
                                        num_samples=args.reference_draws, **options)
        reference = (np.asarray(reference_run.positions).mean((0, 1)), np.asarray(reference_run.positions).std((0, 1)))
        runs = {
            "exact Barker + Laplace RW": (tallmcmc.laplace_random_walk(mode), tallmcmc.exact_barker()),
            "naive minibatch Barker + Laplace RW": (tallmcmc.laplace_random_walk(mode),
                                                    tallmcmc.minibatch_barker(args.batch_size)),
            "CV minibatch Barker + Laplace RW": (tallmcmc.laplace_random_walk(mode),
                                                 tallmcmc.minibatch_barker(args.batch_size, control_variate=cv)),
            "CV minibatch Barker + independence (t5)": (
                tallmcmc.laplace_independence(mode, degrees_of_freedom=5),
                tallmcmc.minibatch_barker(args.batch_size, control_variate=cv)),
            "CV minibatch Barker + proxy HMC (0.5 x 3)": (
                tallmcmc.proxy_hamiltonian(cv, 0.5, 3, preconditioner=covariance),
                tallmcmc.minibatch_barker(args.batch_size, control_variate=cv)),
        }
        if args.skip_naive:
            runs.pop("naive minibatch Barker + Laplace RW")
        print(f"\nN = {num_data:,}, d = {d}: mode {mode.data_passes:.0f} passes, {mode.iterations} iterations; "
              f"setup {setup_seconds:.1f} s; reference: {args.reference_draws} x 4 independence-Metropolis draws")
        rows = []
        for name, (proposal, test) in runs.items():
            result = tallmcmc.sample(model, proposal, test, num_samples=args.draws, **options)
            result.setup_data_used.setdefault(mode.name, mode.data_used)
            rows.append(summarise(name, result, reference))
        base = rows[0]["ess_per_s"]
        print(f"{'method':42s} {'pts/step':>9s} {'setup':>6s} {'acc':>5s} {'ESSmin':>7s} {'ESS/s':>9s} {'xexact':>7s} "
              f"{'ESS/1e6pts':>10s} {'err/sd':>7s} {'err/MCSE':>8s} {'sd ratio':>12s}")
        for row in rows:
            print(f"{row['method']:42s} {row['per_step']:9.0f} {row['setup_passes']:6.1f} {row['accept']:5.2f} "
                  f"{row['ess_min']:7.0f} {row['ess_per_s']:9.1f} {row['ess_per_s'] / base:7.1f} "
                  f"{row['ess_per_million']:10.2f} {row['max_err_sd']:7.3f} {row['max_err_mcse']:8.2f} "
                  f"{row['sd_ratio_range'][0]:.3f}-{row['sd_ratio_range'][1]:.3f}")
    try:
        import numpyro  # noqa: F401
    except ImportError:
        print("\nNumPyro NUTS / HMCECS: not run (pip install -e '.[bench]' to add them)")


if __name__ == "__main__":
    main()
