"""Gaussian mixture at tall scale (Seita et al. 2017, Section 6.1; Tables 1 and 4; Figures 1 and 2).

N = 1,000,000 points from ½N(θ₁, 2) + ½N(θ₁+θ₂, 2), θ = (0, 1), prior
N(0, diag(10, 1)), temperature K = 10,000, random walk with standard
deviation 0.15 per coordinate (the paper writes "covariance diag(0.15,
0.15)"; its minibatch sizes are reproduced with a standard deviation of
0.15), m = 50, 3000 samples per trial.

Trials share one simulated data set (seed ``--data-seed``) and differ in the
chains' random seeds: the paper fixes θ and one data set of 10⁶ points, and
the spread over trials it reports is the samplers' own, so the data are not
redrawn (redrawing would add the data's variability to the exact posterior
and cost a reference computation per trial).

Every chain starts at the data-generating θ = (0, 1), which lies in one of
the two posterior modes, and keeps all its samples.

The Eq. (39) log-likelihood and the chi-squared statistic are computed on
0.1 × 0.1 bins over [−1.5, 2.5] × [−3, 3] (the paper does not state its
bins); the exact bin probabilities come from the tempered log posterior on a
grid of 5 × 5 points per bin (midpoint rule). Samples outside the box form
one more bin. Pearson's chi-squared pools the bins whose expected count is
below 5 into one.

The default run (10 trials of the four tests at N = 10⁶) takes about 15
minutes on two CPU cores.

References
----------
.. [1] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
   minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 6.1,
   Tables 1 and 4, Figures 1 and 2.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from scipy import special

import tallmcmc
from tallmcmc.examples import gaussian_mixture
from tallmcmc.reproduce._common import (
    add_common_arguments,
    format_table,
    mean_pm_std,
    new_figure,
    output_folder,
    print_written,
    save_figure,
    write_summary,
)
from tallmcmc.reproduce._methods import MethodSettings, add_methods_argument, display_name, method, selected

NAME = "gmm"
HELP = "Gaussian mixture, N = 10^6 (Section 6.1): Tables 1 and 4, Figures 1 and 2"

METHOD_KEYS = ("minibatch_barker", "austere_conservative", "confidence_sampler", "exact_barker")
PAPER_TABLE_1 = {  # average minibatch size, mean ± std over 10 trials
    "minibatch_barker": (182.3, 11.4),
    "austere_conservative": (13540.5, 1521.4),
    "confidence_sampler": (65758.9, 3222.6),
}
PAPER_TABLE_4 = {  # (Eq. 39 mean, std), (chi-squared mean, std)
    "minibatch_barker": ((-1307.0, 229.5), (4502.3, 1821.8)),
    "austere_conservative": ((-1386.9, 322.4), (5216.9, 3315.8)),
    "confidence_sampler": ((-1295.1, 278.0), (3462.3, 1519.5)),
}
BOX = ((-1.5, 2.5), (-3.0, 3.0))
BIN_WIDTH = 0.1
POINTS_PER_BIN = 5
CHAIN_SEED = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the experiment's options to ``parser``."""
    parser.add_argument("--trials", type=int, default=10, help="independent chains per method (paper: 10)")
    parser.add_argument("--samples", type=int, default=3000, help="samples per trial (paper: 3000)")
    parser.add_argument("--num-data", type=int, default=gaussian_mixture.PAPER_NUM_DATA, help="N (paper: 10^6)")
    parser.add_argument("--temperature", type=float, default=gaussian_mixture.PAPER_TEMPERATURE, help="K (paper: 10^4)")
    parser.add_argument("--batch-size", type=int, default=50, help="m for MHminibatch and MHSubLhd (paper: 50)")
    parser.add_argument("--step-size", type=float, default=0.15, help="random-walk standard deviation per coordinate")
    parser.add_argument(
        "--austere-error-bound",
        type=float,
        default=0.2,
        help="bound on AustereMH(c)'s worst-case per-test error for its (m, ε) grid search (0.2 gives the paper's "
        "ε = 0.005)",
    )
    add_methods_argument(parser, METHOD_KEYS)
    parser.add_argument("--data-seed", type=int, default=0, help="seed of the simulated data set")
    add_common_arguments(
        parser,
        NAME,
        seed=CHAIN_SEED,
        seed_help="seed of the first trial's chain; trial i uses seed + i (every method sees the same seeds)",
    )


def bin_probabilities(data: np.ndarray, temperature: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exact posterior mass of each 0.1 × 0.1 bin, plus the fine grid's log posterior for plots."""
    fine = BIN_WIDTH / POINTS_PER_BIN
    axes = [np.arange(low + fine / 2, high, fine) for low, high in BOX]
    log_posterior = gaussian_mixture.log_posterior_grid(data, temperature, axes[0], axes[1])
    density = np.exp(log_posterior - log_posterior.max())
    density /= density.sum()
    shape = (density.shape[0] // POINTS_PER_BIN, POINTS_PER_BIN, density.shape[1] // POINTS_PER_BIN, POINTS_PER_BIN)
    probabilities = density.reshape(shape).sum(axis=(1, 3))
    return probabilities, axes[0], axes[1], log_posterior


def bin_counts(samples: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, int]:
    """Counts of (n, 2) samples in the box's bins, and the number outside the box."""
    index = np.floor((samples - np.array([BOX[0][0], BOX[1][0]])) / BIN_WIDTH).astype(int)
    inside = np.all((index >= 0) & (index < np.array(shape)), axis=1)
    counts = np.zeros(shape)
    np.add.at(counts, (index[inside, 0], index[inside, 1]), 1)
    return counts, int((~inside).sum())


def poisson_log_likelihood(counts: np.ndarray, probabilities: np.ndarray) -> float:
    """Eq. (39): Σⱼ cⱼ log(nPⱼ) − nPⱼ − log Γ(cⱼ + 1) (bins with Pⱼ = 0 and cⱼ > 0 give −inf)."""
    n = counts.sum()
    expected = n * probabilities
    with np.errstate(divide="ignore"):
        terms = special.xlogy(counts, expected) - expected - special.gammaln(counts + 1)
    return float(terms.sum())


def chi_squared(counts: np.ndarray, probabilities: np.ndarray, minimum_expected: float = 5.0) -> tuple[float, int]:
    """Pearson's statistic, bins with expected count < ``minimum_expected`` pooled; (value, degrees of freedom)."""
    n = counts.sum()
    expected = n * probabilities
    small = expected < minimum_expected
    observed = np.append(counts[~small], counts[small].sum())
    expected = np.append(expected[~small], expected[small].sum())
    keep = expected > 0
    value = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    return value, int(keep.sum() - 1)


def run(args: argparse.Namespace) -> int:
    """Run every chosen test for ``args.trials`` trials, print Tables 1 and 4, write the summary and figures."""
    out = output_folder(args.out)
    data = gaussian_mixture.simulate_data(args.num_data, seed=args.data_seed)
    model = tallmcmc.Model(
        gaussian_mixture.log_likelihood,
        gaussian_mixture.log_prior,
        jnp.asarray(data),
        args.temperature,
        position_shape=(2,),
    )
    keys = selected(args.methods, METHOD_KEYS)
    settings = MethodSettings(
        batch_size=args.batch_size, austere_error_bound=args.austere_error_bound, num_data=args.num_data
    )
    print(f"Exact posterior on {BIN_WIDTH}-wide bins (N = {args.num_data:,}, K = {args.temperature:g}) ...", flush=True)
    began = time.perf_counter()
    probabilities, axis1, axis2, log_posterior = bin_probabilities(data, args.temperature)
    print(f"  done in {time.perf_counter() - began:.1f} s")
    start = jnp.asarray(gaussian_mixture.TRUE_THETA, jnp.float32)
    proposal = tallmcmc.random_walk(args.step_size)

    per_method: dict[str, dict] = {}
    first_trial: dict[str, dict] = {}
    for key in keys:
        test = method(key).build(settings)
        trials = []
        for trial in range(args.trials):
            result = tallmcmc.sample(
                model,
                proposal,
                test,
                initial_position=start,
                num_samples=args.samples,
                seed=args.seed + trial,
                progress=not args.no_progress,
            )
            samples = result.positions[0]
            counts, outside = bin_counts(samples, probabilities.shape)
            all_probabilities = np.append(probabilities, 0.0)
            all_counts = np.append(counts, outside)
            chi2, dof = chi_squared(all_counts, all_probabilities)
            trials.append(
                {
                    "minibatch_size": float(result.data_used_by_test.mean()),
                    "data_used": float(result.data_used.mean()),
                    "acceptance_rate": result.acceptance_rate,
                    "seconds_per_step": result.seconds_per_step,
                    "full_data_fraction": float(result.info["used_full_data"].mean()),
                    "poisson_log_likelihood": poisson_log_likelihood(all_counts, all_probabilities),
                    "chi_squared": chi2,
                    "chi_squared_dof": dof,
                    "outside_box": outside,
                }
            )
            if trial == 0:
                first_trial[key] = {"samples": samples, "sizes": result.data_used_by_test[0]}
            print(
                f"  {display_name(key):>16} trial {trial + 1}/{args.trials}: mean minibatch "
                f"{trials[-1]['minibatch_size']:.1f}, accept {trials[-1]['acceptance_rate']:.3f}, "
                f"{trials[-1]['seconds_per_step'] * 1e3:.3f} ms/step",
                flush=True,
            )
        per_method[key] = {"display_name": display_name(key), **summarise(trials)}

    summary = {
        "settings": {
            "num_data": args.num_data,
            "temperature": args.temperature,
            "trials": args.trials,
            "samples": args.samples,
            "batch_size": args.batch_size,
            "step_size": args.step_size,
            "austere_error_bound": args.austere_error_bound,
            "data_seed": args.data_seed,
            "seed": args.seed,
            "bins": {"box": BOX, "width": BIN_WIDTH, "count": int(probabilities.size) + 1},
        },
        "methods": per_method,
        "paper": {"table_1": PAPER_TABLE_1, "table_4": PAPER_TABLE_4},
    }
    print_tables(per_method)
    path = write_summary(out, summary)
    print_written(path, *plot_figures(out, first_trial, axis1, axis2, log_posterior))
    return 0


def summarise(trials: list[dict]) -> dict:
    """Means and standard deviations over trials of one test's per-trial statistics (the trials kept too)."""

    def values(name):
        return np.array([trial[name] for trial in trials], dtype=float)

    def spread(name):
        v = values(name)
        return float(v.std(ddof=1)) if v.size > 1 else 0.0

    return {
        "mean_minibatch_size": float(values("minibatch_size").mean()),
        "std_minibatch_size": spread("minibatch_size"),
        "mean_data_used": float(values("data_used").mean()),
        "std_data_used": spread("data_used"),
        "acceptance_rate": float(values("acceptance_rate").mean()),
        "seconds_per_step": float(values("seconds_per_step").mean()),
        "full_data_fraction": float(values("full_data_fraction").mean()),
        "poisson_log_likelihood": float(values("poisson_log_likelihood").mean()),
        "std_poisson_log_likelihood": spread("poisson_log_likelihood"),
        "chi_squared": float(values("chi_squared").mean()),
        "std_chi_squared": spread("chi_squared"),
        "trials": trials,
    }


def _paper(value: tuple[float, float] | None) -> str:
    return "—" if value is None else f"{value[0]:.1f} ± {value[1]:.1f}"


def print_tables(per_method: dict[str, dict]) -> None:
    """Print Table 1 (minibatch sizes) and Table 4 (Eq. 39 and chi-squared), the paper's numbers beside ours."""
    rows = []
    for key, stats in per_method.items():
        sizes = [t["minibatch_size"] for t in stats["trials"]]
        used = [t["data_used"] for t in stats["trials"]]
        rows.append(
            [
                display_name(key),
                _paper(PAPER_TABLE_1.get(key)),
                mean_pm_std(sizes),
                mean_pm_std(used),
                f"{stats['acceptance_rate']:.3f}",
                f"{stats['seconds_per_step'] * 1e3:.3f}",
            ]
        )
    print("\nTable 1: average minibatch size (± std over trials); 'all data used' adds full passes")
    print(
        format_table(["method", "paper", "ours (test's minibatch)", "ours (all data used)", "accept", "ms/step"], rows)
    )
    rows = []
    for key, stats in per_method.items():
        paper = PAPER_TABLE_4.get(key)
        ll = [t["poisson_log_likelihood"] for t in stats["trials"]]
        chi = [t["chi_squared"] for t in stats["trials"]]
        rows.append(
            [
                display_name(key),
                _paper(paper[0] if paper else None),
                mean_pm_std(ll),
                _paper(paper[1] if paper else None),
                mean_pm_std(chi),
            ]
        )
    print("\nTable 4: Eq. (39) Poisson log-likelihood and chi-squared against the exact posterior (± std over trials)")
    print(format_table(["method", "Eq. 39 paper", "Eq. 39 ours", "chi² paper", "chi² ours"], rows))
    print(
        "(our bins: 0.1 x 0.1 over [-1.5, 2.5] x [-3, 3]; the paper's bins are not stated, so only the ordering compares)"
    )


def plot_figures(out, first_trial: dict[str, dict], axis1, axis2, log_posterior) -> tuple[Path, Path]:
    """Figure 1 (the first trial's samples on the exact posterior) and Figure 2 (its minibatch sizes); their paths."""
    keys = list(first_trial)
    figure, axes = new_figure(1, len(keys) + 1, figsize=(3.6 * (len(keys) + 1), 3.6), sharex=True, sharey=True)
    levels = log_posterior.max() - np.array([30.0, 20, 12, 8, 5, 3, 2, 1, 0.5])  # increasing
    for axis, key in zip(axes[:-1], keys):
        axis.contour(axis1, axis2, log_posterior.T, levels=levels, colors="0.6", linewidths=0.6)
        samples = first_trial[key]["samples"]
        axis.scatter(samples[:, 0], samples[:, 1], s=2, alpha=0.15, color="C0")
        axis.set_title(display_name(key))
        axis.set_xlabel("θ₁")
    axes[0].set_ylabel("θ₂")
    shown = axes[-1].contourf(
        axis1, axis2, np.maximum(log_posterior.T - log_posterior.max(), -30), levels=30, cmap="viridis"
    )
    axes[-1].set_title("exact log posterior")
    axes[-1].set_xlabel("θ₁")
    figure.colorbar(shown, ax=axes[-1], shrink=0.8)
    for axis in axes:
        axis.set_xlim(-1.5, 2.5)
        axis.set_ylim(-3, 3)
    posterior_path = save_figure(figure, out, "figure1_posterior.png")

    sized = keys
    figure, axes = new_figure(1, len(sized), figsize=(3.6 * len(sized), 3.2), sharex=True, sharey=True)
    axes = np.atleast_1d(axes)
    largest = max(float(first_trial[key]["sizes"].max()) for key in sized)
    bins = np.logspace(1, math.log10(largest) + 0.2, 40)
    for axis, key in zip(axes, sized):
        sizes = first_trial[key]["sizes"]
        axis.hist(sizes, bins=bins, color="C1")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(f"{display_name(key)} (mean {sizes.mean():.0f})")
        axis.set_xlabel("minibatch size")
    axes[0].set_ylabel("steps")
    return posterior_path, save_figure(figure, out, "figure2_minibatch_sizes.png")
