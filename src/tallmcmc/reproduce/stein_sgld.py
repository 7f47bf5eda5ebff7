"""SGLD step-size selection with the graph Stein discrepancy (Gorham & Mackey 2015, Section 5.3, Figure 3).

Target: the bimodal posterior of Welling & Teh (2011): 100 points from
½N(θ₁, 2) + ½N(θ₁ + θ₂, 2) with θ = (0, 1), prior N(0, diag(10, 1)),
temperature K = 1. Sampler: SGLD at constant step size ε with minibatches of
5 points (drawn without replacement), no Metropolis–Hastings correction
(:func:`tallmcmc.stochastic_gradient_langevin` with
:func:`tallmcmc.always_accept`). For each ε in the paper's grid
{5e-2, 1e-2, 5e-3, 1e-3, 5e-4, 1e-4, 5e-5, 1e-5}, independent sequences of
length n = 1000 are drawn, each started at its own x₀ ~ N(0, I) and kept
whole (no burn-in), as in the authors' experiment script.

Per sequence two quality measures are computed:

* the spanner graph Stein discrepancy (d = 2, greedy 2-spanner, Stein factors
  (1, 1, 1)) with the exact full-data scores ∇log π at the sample points;
* the effective sample size (ArviZ bulk ESS of the single sequence, the
  median over the two coordinates).

Each criterion selects the ε of best *median* quality across sequences
(largest ESS, smallest discrepancy). The paper reports that ESS selects the
largest step, 5e-2, and the Stein discrepancy 5e-3.

The discrepancy is a linear program per coordinate, so the default runs 10
sequences per step size (a few minutes); ``--sequences 50`` is the paper's
scale (about a quarter of an hour). Both select the paper's step sizes.

References
----------
.. [1] Gorham, J. and Mackey, L. (2015). Measuring sample quality with
   Stein's method. NeurIPS 28, Section 5.3 and Figure 3.
.. [2] Welling, M. and Teh, Y. W. (2011). Bayesian learning via stochastic
   gradient Langevin dynamics. ICML 2011, Section 5.1.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

import tallmcmc
from tallmcmc.examples import gaussian_mixture
from tallmcmc.interop import arviz as arviz_bridge
from tallmcmc.model import Model
from tallmcmc.reproduce._common import (
    add_common_arguments,
    format_table,
    output_folder,
    print_written,
    pyplot,
    save_figure,
    write_summary,
)
from tallmcmc.stein import graph_stein_discrepancy
from tallmcmc.stein.scores import posterior_scores

NAME = "stein-sgld"
HELP = "SGLD step-size selection by graph Stein discrepancy vs ESS (Gorham & Mackey 2015, Section 5.3, Figure 3)"

PAPER_STEP_SIZES = (5e-2, 1e-2, 5e-3, 1e-3, 5e-4, 1e-4, 5e-5, 1e-5)
PAPER_SEQUENCES = 50
PAPER_LENGTH = 1000
PAPER_NUM_DATA = 100
PAPER_BATCH_SIZE = 5
PAPER_SELECTED = {"ess": 5e-2, "stein": 5e-3}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the experiment's options to ``parser``."""
    parser.add_argument(
        "--sequences", type=int, default=10, help=f"independent SGLD sequences per step size (paper: {PAPER_SEQUENCES})"
    )
    parser.add_argument("--length", type=int, default=PAPER_LENGTH, help=f"points per sequence (paper: {PAPER_LENGTH})")
    parser.add_argument(
        "--step-sizes",
        type=float,
        nargs="+",
        default=list(PAPER_STEP_SIZES),
        help="the grid of ε (the paper's eight values)",
    )
    parser.add_argument("--batch-size", type=int, default=PAPER_BATCH_SIZE, help="SGLD minibatch size (paper: 5)")
    parser.add_argument("--num-data", type=int, default=PAPER_NUM_DATA, help="simulated data points (paper: 100)")
    parser.add_argument("--data-seed", type=int, default=1, help="seed of the simulated data set")
    add_common_arguments(
        parser,
        NAME,
        seed=0,
        seed_help="seed of the starting points and the chains; the step sizes, largest first, use seed, seed + 1, ...",
    )


def mixture_posterior(num_data: int = PAPER_NUM_DATA, data_seed: int = 1) -> Model:
    """The Welling–Teh posterior at temperature 1 over ``num_data`` simulated points."""
    data = gaussian_mixture.simulate_data(num_data, seed=data_seed)
    return Model(
        gaussian_mixture.log_likelihood, gaussian_mixture.log_prior, jnp.asarray(data), 1.0, position_shape=(2,)
    )


def effective_sample_size(sequence: np.ndarray) -> float:
    """ArviZ bulk ESS of one sequence (n, d): the median over coordinates."""
    return float(np.median(arviz_bridge.ess(np.asarray(sequence[None], float), method="bulk")))


def run_sgld(
    model: Model, step_size: float, batch_size: int, sequences: int, length: int, seed: int, progress: bool
) -> np.ndarray:
    """``sequences`` SGLD runs of ``length`` steps from x₀ ~ N(0, I); array (sequences, length, 2)."""
    rng = np.random.default_rng(seed)
    starts = jnp.asarray(rng.standard_normal((sequences, 2)), jnp.float32)
    result = tallmcmc.sample(
        model,
        tallmcmc.stochastic_gradient_langevin(step_size, batch_size),
        tallmcmc.always_accept(),
        initial_positions=starts,
        num_samples=length,
        num_chains=sequences,
        seed=seed,
        progress=progress,
    )
    return np.asarray(result.positions, dtype=np.float64)


def _select(step_sizes: np.ndarray, medians: np.ndarray, larger_is_better: bool) -> float:
    finite = np.isfinite(medians)
    if not finite.any():
        return float("nan")
    scores = np.where(finite, medians, -np.inf if larger_is_better else np.inf)
    index = int(np.argmax(scores) if larger_is_better else np.argmin(scores))
    return float(step_sizes[index])


def run(args: argparse.Namespace) -> int:
    """Run SGLD at every step size, score each sequence by discrepancy and ESS, print the choices, write the outputs."""
    began = time.perf_counter()
    out = output_folder(args.out)
    progress = not args.no_progress
    model = mixture_posterior(args.num_data, args.data_seed)
    step_sizes = np.asarray(sorted(args.step_sizes, reverse=True), dtype=float)
    samples: dict[float, np.ndarray] = {}
    discrepancies = np.full((step_sizes.size, args.sequences), np.nan)
    ess = np.full((step_sizes.size, args.sequences), np.nan)
    lp_seconds = []
    diverged = {}
    for i, step in enumerate(step_sizes):
        draws = run_sgld(model, float(step), args.batch_size, args.sequences, args.length, args.seed + i, progress)
        samples[float(step)] = draws
        diverged[float(step)] = int((~np.all(np.isfinite(draws), axis=(1, 2))).sum())
    total = step_sizes.size * args.sequences
    with tqdm(total=total, desc="graph Stein discrepancy", disable=not progress, leave=False) as bar:
        for i, step in enumerate(step_sizes):
            draws = samples[float(step)]
            for s in range(args.sequences):
                sequence = draws[s]
                bar.update(1)
                if not np.all(np.isfinite(sequence)):
                    continue  # a diverged sequence (the authors' script skips these too)
                scores = posterior_scores(model, sequence)
                if not np.all(np.isfinite(scores)):
                    continue
                result = graph_stein_discrepancy(sequence, scores)
                discrepancies[i, s] = result.value
                lp_seconds.append(result.timings.get("total", np.nan))
                ess[i, s] = effective_sample_size(sequence)

    median_discrepancy = np.nanmedian(discrepancies, axis=1)
    median_ess = np.nanmedian(ess, axis=1)
    selected = {
        "ess": _select(step_sizes, median_ess, larger_is_better=True),
        "stein": _select(step_sizes, median_discrepancy, larger_is_better=False),
    }
    rows = []
    for i, step in enumerate(step_sizes):
        rows.append(
            [
                f"{step:.0e}",
                f"{median_discrepancy[i]:.3f}",
                f"{np.nanmean(discrepancies[i]):.3f} ± {np.nanstd(discrepancies[i], ddof=1):.3f}",
                f"{median_ess[i]:.1f}",
                f"{np.nanmean(ess[i]):.1f} ± {np.nanstd(ess[i], ddof=1):.1f}",
                str(diverged[float(step)]),
            ]
        )
    print(
        f"SGLD on the Welling–Teh posterior (N = {args.num_data}, batch {args.batch_size}), "
        f"{args.sequences} sequences of length {args.length} per step size"
    )
    print(
        format_table(["step size", "median Stein", "Stein mean ± sd", "median ESS", "ESS mean ± sd", "diverged"], rows)
    )
    print(
        format_table(
            ["criterion", "selected ε (ours)", "selected ε (paper)"],
            [
                ["ESS (max median)", f"{selected['ess']:.0e}", f"{PAPER_SELECTED['ess']:.0e}"],
                ["graph Stein (min median)", f"{selected['stein']:.0e}", f"{PAPER_SELECTED['stein']:.0e}"],
            ],
        )
    )
    mean_seconds = float(np.nanmean(lp_seconds)) if lp_seconds else float("nan")
    print(
        f"graph Stein discrepancy: {mean_seconds:.2f} s per sequence on average "
        "(paper: 0.4 s spanner + 1.4 s per coordinate LP with Gurobi)"
    )

    figure_path = _figure(out, model, step_sizes, discrepancies, ess, samples, selected)
    elapsed = time.perf_counter() - began
    summary = {
        "settings": {
            "sequences": args.sequences,
            "length": args.length,
            "batch_size": args.batch_size,
            "num_data": args.num_data,
            "data_seed": args.data_seed,
            "seed": args.seed,
            "step_sizes": step_sizes,
        },
        "discrepancy": {f"{s:g}": discrepancies[i] for i, s in enumerate(step_sizes)},
        "ess": {f"{s:g}": ess[i] for i, s in enumerate(step_sizes)},
        "median_discrepancy": {f"{s:g}": median_discrepancy[i] for i, s in enumerate(step_sizes)},
        "median_ess": {f"{s:g}": median_ess[i] for i, s in enumerate(step_sizes)},
        "diverged_sequences": {f"{s:g}": diverged[float(s)] for s in step_sizes},
        "selected": selected,
        "paper_selected": PAPER_SELECTED,
        "seconds_per_discrepancy": mean_seconds,
        "seconds": elapsed,
        "figure": str(figure_path),
    }
    print_written(write_summary(out, summary), figure_path, seconds=elapsed)
    return 0


def _figure(out, model: Model, step_sizes, discrepancies, ess, samples, selected) -> Path:
    figure = pyplot().figure(figsize=(13, 4.2))
    grid = figure.add_gridspec(2, 4, width_ratios=[1.2, 1, 1, 1])
    for row, (values, label, better) in enumerate(
        [(ess, "ESS", "max"), (discrepancies, "graph Stein discrepancy", "min")]
    ):
        axis = figure.add_subplot(grid[row, 0])
        mean = np.nanmean(values, axis=1)
        spread = np.nanstd(values, axis=1, ddof=1) if values.shape[1] > 1 else np.zeros_like(mean)
        axis.errorbar(step_sizes, mean, yerr=spread, marker="o", capsize=3, label="mean ± sd")
        axis.plot(step_sizes, np.nanmedian(values, axis=1), "s--", color="tab:orange", label="median")
        key = "ess" if row == 0 else "stein"
        axis.axvline(selected[key], color="tab:green", lw=1, label=f"selected ({better}) {selected[key]:.0e}")
        axis.axvline(PAPER_SELECTED[key], color="grey", lw=1, ls=":", label=f"paper {PAPER_SELECTED[key]:.0e}")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_ylabel(label)
        axis.legend(fontsize=6)
        if row == 1:
            axis.set_xlabel("step size ε")

    shown = []
    for step in (step_sizes.min(), selected["stein"], selected["ess"]):
        if np.isfinite(step) and step not in shown:
            shown.append(float(step))
    sequences = [samples[step][0] for step in shown]
    finite = np.concatenate([s[np.all(np.isfinite(s), axis=1)] for s in sequences])
    low = np.minimum(finite.min(axis=0), [-2.0, -3.0]) - 0.2
    high = np.maximum(finite.max(axis=0), [2.5, 3.0]) + 0.2
    theta1 = np.linspace(low[0], high[0], 150)
    theta2 = np.linspace(low[1], high[1], 150)
    data = np.asarray(model.data, float)
    log_density = gaussian_mixture.log_posterior_grid(data, 1.0, theta1, theta2, data_bin_width=1e-4)
    log_density -= log_density.max()
    for column, (step, sequence) in enumerate(zip(shown, sequences)):
        axis = figure.add_subplot(grid[:, column + 1])
        axis.contour(theta1, theta2, log_density.T, levels=[-6, -3, -1, -0.3], cmap="autumn", linewidths=0.8)
        axis.plot(sequence[:, 0], sequence[:, 1], ".", ms=1.5, color="black")
        tags = [name for name, key in (("Stein", "stein"), ("ESS", "ess")) if selected[key] == step]
        title = f"ε = {step:.0e}" + (f" (selected by {', '.join(tags)})" if tags else " (smallest)")
        axis.set_title(title, fontsize=9)
        axis.set_xlim(low[0], high[0])
        axis.set_ylim(low[1], high[1])
        axis.set_xlabel("θ₁")
        if column == 0:
            axis.set_ylabel("θ₂")
    figure.suptitle(
        "SGLD step-size selection (Gorham & Mackey 2015, Figure 3): first sequence of each shown ε, "
        "log-posterior contours at max − {0.3, 1, 3, 6}",
        fontsize=9,
    )
    return save_figure(figure, out, "figure3_sgld_step_size.png")
