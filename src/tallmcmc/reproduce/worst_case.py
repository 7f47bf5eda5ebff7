"""The worst case of Lemma 1 (Seita et al. 2017, Section 2.2; proof in Appendix A.1).

Data xᵢ ~ N(θ, 1) with θ = 0.5, a flat prior, proposal θ′ ~ N(θ, 1/N)
(the proposal variance equals the posterior variance), for N ∈ {10³, …, 10⁶}.
Lemma 1: with probability at least c ≈ 0.0085 over (θ, θ′, u), AustereMH and
MHSubLhd must consume all N points, whatever N is: their speed-up over the
full-data test is bounded by 1/c.

We run each test as a chain at each N (started at a draw from the exact
posterior, so it is stationary from the first step), and count the fraction
of steps whose sequential test used all N points (``used_full_data``). The
fraction must not fall with N. MHminibatch runs on the same model and
proposal; its minibatch sizes are shown too. Note what the lemma's setting
means for it: Λᵢ = N(θ′−θ)(xᵢ − (θ+θ′)/2) has standard deviation about
N|θ′−θ| ≈ √N, so s²(Δ*) ≈ N/b reaches σ² = 1 only at b ≈ N — MHminibatch too
needs (nearly) all the data here; its advantage needs the variance condition
(small steps or a high temperature), which this proposal violates by design.

Settings: AustereMH with m = 50 and ε = 0.005 (the paper's Section 6.1
values); MHSubLhd with m = 50, γ = 1.5, p = 2, δ = 0.01; MHminibatch m = 50.
The default run takes about 15 minutes on two CPU cores.

References
----------
.. [1] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
   minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 2.2
   (Lemma 1) and Appendix A.1.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import gaussian_mean
from tallmcmc.reproduce._common import (
    add_common_arguments,
    format_table,
    new_figure,
    output_folder,
    print_written,
    save_figure,
    write_summary,
)
from tallmcmc.reproduce._methods import MethodSettings, display_name, method

NAME = "worst-case"
HELP = "Lemma 1's Gaussian worst case: fraction of steps that need all N points, N = 10^3..10^6"

LEMMA_CONSTANT = 0.0085
TRUE_THETA = 0.5
NEAR_FULL = 0.9  # also count steps that used at least this fraction of N
#: The tests compared, in the order of the printed columns; the first two are the lemma's.
METHOD_KEYS = ("austere", "confidence_sampler", "minibatch_barker")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the experiment's options to ``parser``."""
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000], metavar="N", help="values of N"
    )
    parser.add_argument("--steps", type=int, default=2000, help="chain steps per method and N")
    parser.add_argument("--chains", type=int, default=4, help="chains per method and N")
    parser.add_argument("--batch-size", type=int, default=50, help="m of every test (paper: 50)")
    parser.add_argument("--austere-epsilon", type=float, default=0.005, help="AustereMH's ε (paper: 0.005)")
    add_common_arguments(parser, NAME, seed=0, seed_help="seed of the data, the starting points and the chains")


def run(args: argparse.Namespace) -> int:
    """Run the three tests at every N, print the fraction of steps that used all N points, write summary and figure."""
    out = output_folder(args.out)
    rng = np.random.default_rng(args.seed)
    settings = MethodSettings(batch_size=args.batch_size, austere_epsilon=args.austere_epsilon)
    tests = {key: method(key).build(settings) for key in METHOD_KEYS}
    rows: dict[str, dict[str, list]] = {
        key: {
            "full_fraction": [],
            "standard_error": [],
            "near_full_fraction": [],
            "mean_size": [],
            "mean_data_used": [],
        }
        for key in tests
    }
    histograms: dict[str, np.ndarray] = {}
    for num_data in args.sizes:
        data = rng.normal(TRUE_THETA, 1.0, num_data).astype(np.float32)
        model = gaussian_mean.model(data, prior_variance=None)
        mean, variance = gaussian_mean.posterior(data, prior_variance=None)
        starts = (mean + math.sqrt(variance) * rng.standard_normal(args.chains)).astype(np.float32)
        proposal = tallmcmc.random_walk(1.0 / math.sqrt(num_data))
        for key, test in tests.items():
            result = tallmcmc.sample(
                model,
                proposal,
                test,
                initial_positions=jnp.asarray(starts),
                num_samples=args.steps,
                num_chains=args.chains,
                seed=args.seed + num_data,
                progress=not args.no_progress,
            )
            full = result.info["used_full_data"]
            fraction = float(full.mean())
            # standard error of the fraction across chains (steps within a chain are correlated)
            per_chain = full.mean(axis=1)
            standard_error = (
                float(per_chain.std(ddof=1) / math.sqrt(per_chain.size)) if per_chain.size > 1 else float("nan")
            )
            rows[key]["full_fraction"].append(fraction)
            rows[key]["standard_error"].append(standard_error)
            rows[key]["near_full_fraction"].append(float(np.mean(result.data_used_by_test >= NEAR_FULL * num_data)))
            rows[key]["mean_size"].append(float(result.data_used_by_test.mean()))
            rows[key]["mean_data_used"].append(float(result.data_used.mean()))
            if num_data == max(args.sizes):
                histograms[key] = result.data_used_by_test.ravel() / num_data
            print(
                f"  N = {num_data:>9,} {display_name(key):>12}: all-N fraction {fraction:.4f} ± {standard_error:.4f}, "
                f"mean minibatch {rows[key]['mean_size'][-1]:,.0f} ({rows[key]['mean_size'][-1] / num_data:.3f} N)",
                flush=True,
            )

    table = []
    for i, num_data in enumerate(args.sizes):
        row = [f"{num_data:,}"]
        for key in tests:
            row.append(f"{rows[key]['full_fraction'][i]:.4f} ± {rows[key]['standard_error'][i]:.4f}")
        for key in tests:
            row.append(f"{rows[key]['near_full_fraction'][i]:.4f}")
        for key in tests:
            row.append(f"{rows[key]['mean_size'][i] / num_data:.3f}")
        table.append(row)
    print(
        f"\nLemma 1: fraction of steps using all N points (paper: at least c ≈ {LEMMA_CONSTANT} for AustereMH and MHSubLhd, for every N)"
    )
    print(
        format_table(
            ["N"]
            + [f"{display_name(k)} all-N" for k in tests]
            + [f"{display_name(k)} ≥{NEAR_FULL:.0%} N" for k in tests]
            + [f"{display_name(k)} size/N" for k in tests],
            table,
        )
    )
    print(
        "(all-N: the sequential test used exactly N points; with the finite-population correction a test can stop a"
        " stage short of N when the gap is tiny, so the ≥90% column shows the steps that needed essentially all data)"
    )
    for key in ("austere", "confidence_sampler"):
        fractions = rows[key]["full_fraction"]
        verdict = "does not fall" if fractions[-1] >= 0.5 * fractions[0] else "FALLS"
        print(
            f"{display_name(key)}: all-N fraction {verdict} with N ({fractions[0]:.4f} → {fractions[-1]:.4f}); "
            f"{'above' if min(fractions) >= LEMMA_CONSTANT else 'not always above'} c = {LEMMA_CONSTANT}"
        )

    summary = {
        "N": list(args.sizes),
        "display_names": {key: display_name(key) for key in tests},
        "full_fraction": {key: rows[key]["full_fraction"] for key in tests},
        "standard_errors": {key: rows[key]["standard_error"] for key in tests},
        "mean_size": {key: rows[key]["mean_size"] for key in tests},
        "near_full_fraction": {key: rows[key]["near_full_fraction"] for key in tests},
        "mean_data_used": {key: rows[key]["mean_data_used"] for key in tests},
        "lemma_constant": LEMMA_CONSTANT,
        "settings": {
            "steps": args.steps,
            "chains": args.chains,
            "batch_size": args.batch_size,
            "austere_epsilon": args.austere_epsilon,
            "seed": args.seed,
        },
    }
    path = write_summary(out, summary)
    print_written(path, plot(out, args.sizes, rows, histograms, tests))
    return 0


def plot(out, sizes, rows, histograms, tests) -> Path:
    """Fractions of full-data steps against N (left), minibatch sizes at the largest N (right); the figure's path."""
    figure, (left, right) = new_figure(1, 2, figsize=(10, 3.8))
    for index, key in enumerate(tests):
        color = f"C{index}"
        left.errorbar(
            sizes,
            rows[key]["full_fraction"],
            yerr=rows[key]["standard_error"],
            marker="o",
            capsize=3,
            color=color,
            label=f"{display_name(key)}: all N",
        )
        left.plot(
            sizes,
            rows[key]["near_full_fraction"],
            marker="s",
            linestyle="--",
            color=color,
            label=f"{display_name(key)}: ≥{NEAR_FULL:.0%} of N",
        )
    left.axhline(LEMMA_CONSTANT, color="k", linestyle="--", label=f"Lemma 1: c ≈ {LEMMA_CONSTANT}")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("N")
    left.set_ylabel("fraction of steps")
    left.set_title("steps whose test needed (nearly) all the data", fontsize=10)
    left.legend(fontsize=8)
    bins = np.logspace(-4, 0, 41)
    for key in tests:
        if key in histograms:
            right.hist(
                np.maximum(histograms[key], 1e-4), bins=bins, histtype="step", linewidth=1.5, label=display_name(key)
            )
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel(f"minibatch size / N (N = {max(sizes):,})")
    right.set_ylabel("steps")
    right.legend(fontsize=8)
    return save_figure(figure, out, "worst_case.png")
