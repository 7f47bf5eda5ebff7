"""Convergence rates of i.i.d., Sobol and kernel-herding sequences for Unif(0, 1)
(Gorham and Mackey 2015, Section 5.5 and appendix Figure 5).

Target Unif(0, 1): score 0 on the box (0, 1); non-uniform Stein factors
(0.5, 0.5, 1), for which the Stein discrepancy upper-bounds the Wasserstein
distance. The complete-graph (sorted-path, d = 1) Stein discrepancy of the
first n points is computed for n on a log grid up to ``--max-n`` (paper: 200)
for

* i.i.d. Unif(0, 1) sequences: the median over ``--num-sequences`` sequences
  (paper: 50);
* the (unscrambled) Sobol sequence, :class:`scipy.stats.qmc.Sobol`, whose
  first point is 0;
* the kernel-herding sequence of Chen, Welling and Smola (2010) for the RKHS
  of the paper, "defined by the norm ||h||_H^2 = int_0^1 h'(x)^2 dx": the
  periodic first-order Sobolev space on [0, 1], whose reproducing kernel on
  mean-zero functions is

      k(x, y) = {x - y}^2 - {x - y} + 1/6   ({t} = |t| - floor(|t|)),

  i.e. B_2({x - y}), with B_2 the second Bernoulli polynomial (the kernel of
  Bach, Lacoste-Julien and Obozinski 2012, Section 6, whose code the authors
  used). Its mean embedding of Unif(0, 1) is zero, so herding with step
  1/t picks x_{t+1} = argmin_x sum_{i <= t} k(x, x_i) over a grid of
  candidates (paper: the 200 points j / 200), starting at the candidate
  nearest 1/2.

The slope of the least-squares line of log discrepancy on log n is reported
beside the paper's: i.i.d. n^-0.49, Sobol n^-1, herding n^-0.96. The
default run takes about a minute.

References
----------
.. [1] J. Gorham and L. Mackey (2015). Measuring sample quality with Stein's
   method. NeurIPS 28, Section 5.5 and Figure 5.
.. [2] Y. Chen, M. Welling and A. Smola (2010). Super-samples from kernel
   herding. UAI.
.. [3] F. Bach, S. Lacoste-Julien and G. Obozinski (2012). On the equivalence
   between herding and conditional gradient algorithms. ICML.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import qmc
from tqdm import tqdm

from tallmcmc.reproduce._common import (
    add_common_arguments,
    fitted_slope,
    format_table,
    log_grid,
    new_figure,
    output_folder,
    print_written,
    save_figure,
    write_summary,
)
from tallmcmc.stein import graph_stein_discrepancy
from tallmcmc.stein.univariate import UNIFORM_STEIN_FACTORS

NAME = "stein-rates"
HELP = "Stein discrepancy rates of i.i.d., Sobol and kernel-herding sequences for Unif(0,1) (Figure 5)"

PAPER_SLOPES = {"iid": -0.49, "sobol": -1.0, "herding": -0.96}
PAPER_MAX_N = 200
PAPER_NUM_SEQUENCES = 50
PAPER_HERDING_CANDIDATES = 200
PAPER_SECONDS_AT_200 = 0.08


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the experiment's options to ``parser``."""
    parser.add_argument("--max-n", type=int, default=PAPER_MAX_N, help="largest n (paper: 200)")
    parser.add_argument("--min-n", type=int, default=10, help="smallest n")
    parser.add_argument(
        "--grid-size", type=int, default=12, help="number of n on the log grid (0: every n from --min-n to --max-n)"
    )
    parser.add_argument(
        "--num-sequences", type=int, default=PAPER_NUM_SEQUENCES, help="i.i.d. sequences, median taken (paper: 50)"
    )
    parser.add_argument(
        "--herding-candidates",
        type=int,
        default=None,
        help="herding candidate grid size (default: the larger of 200 and --max-n; paper: 200)",
    )
    add_common_arguments(parser, NAME, seed=7, seed_help="seed of the i.i.d. sequences")


def herding_kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Periodic Sobolev kernel {x - y}^2 - {x - y} + 1/6 on [0, 1] (all pairs)."""
    distance = np.abs(np.asarray(x)[:, None] - np.asarray(y)[None, :])
    fraction = distance - np.floor(distance)
    return fraction * fraction - fraction + 1.0 / 6.0


def kernel_herding(length: int, num_candidates: int) -> np.ndarray:
    """Kernel-herding sequence for Unif(0, 1) over the candidates ``j / num_candidates``.

    Greedy herding with step 1/t: the first point is the candidate nearest
    1/2, then each next point minimises ``sum_i k(x, x_i)`` (the mean
    embedding of Unif(0, 1) under :func:`herding_kernel` is zero). Ties go to
    the smallest candidate.
    """
    candidates = np.arange(num_candidates) / num_candidates
    gram = herding_kernel(candidates, candidates)
    chosen = [int(np.argmin(np.abs(candidates - 0.5)))]
    running = gram[:, chosen[0]].copy()
    for _ in range(length - 1):
        index = int(np.argmin(running))
        chosen.append(index)
        running += gram[:, index]
    return candidates[np.array(chosen)]


def sobol_sequence(length: int) -> np.ndarray:
    """First ``length`` points of the unscrambled one-dimensional Sobol sequence (starts at 0)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # balance warning for lengths that are not powers of 2
        return qmc.Sobol(d=1, scramble=False).random(length)[:, 0]


def run(args: argparse.Namespace) -> int:
    """Compute the discrepancy of every sequence's prefixes, fit the rates, print them, write summary and figure."""
    if args.min_n < 2 or args.max_n < args.min_n:
        raise ValueError(f"need 2 <= --min-n <= --max-n, got --min-n {args.min_n} and --max-n {args.max_n}")
    out = output_folder(args.out)
    if args.grid_size <= 0:
        sizes = np.arange(args.min_n, args.max_n + 1)
    else:
        sizes = log_grid(args.min_n, args.max_n, args.grid_size)
    max_n = int(sizes[-1])
    candidates = args.herding_candidates or max(PAPER_HERDING_CANDIDATES, max_n)
    rng = np.random.default_rng(args.seed)
    sequences = {
        "sobol": [sobol_sequence(max_n)],
        "herding": [kernel_herding(max_n, candidates)],
        "iid": [rng.uniform(size=max_n) for _ in range(args.num_sequences)],
    }
    values = {name: np.full((len(seqs), len(sizes)), np.nan) for name, seqs in sequences.items()}
    seconds = {name: np.full((len(seqs), len(sizes)), np.nan) for name, seqs in sequences.items()}
    failures: list[dict] = []
    progress = tqdm(
        total=sum(len(s) for s in sequences.values()) * len(sizes), desc=NAME, unit="LP", disable=args.no_progress
    )
    for name, seqs in sequences.items():
        for k, sequence in enumerate(seqs):
            for i, n in enumerate(sizes):
                points = sequence[:n]
                start = time.perf_counter()
                try:
                    values[name][k, i] = graph_stein_discrepancy(
                        points,
                        np.zeros_like(points),
                        lower=0.0,
                        upper=1.0,
                        stein_factors=UNIFORM_STEIN_FACTORS,
                    ).value
                except RuntimeError as error:  # solver failure: record and go on
                    failures.append({"sequence": name, "index": k, "n": int(n), "error": str(error)})
                    tqdm.write(f"{name} #{k}, n = {n}: {error}")
                seconds[name][k, i] = time.perf_counter() - start
                progress.update()
    progress.close()

    curves = {
        "iid": np.nanmedian(values["iid"], axis=0),
        "sobol": values["sobol"][0],
        "herding": values["herding"][0],
    }
    slopes = {name: fitted_slope(sizes, curve) for name, curve in curves.items()}
    print(
        format_table(
            ["n", "i.i.d. (median)", "Sobol", "herding"],
            [
                [n, f"{curves['iid'][i]:.5f}", f"{curves['sobol'][i]:.5f}", f"{curves['herding'][i]:.5f}"]
                for i, n in enumerate(sizes)
            ],
        )
    )
    print()
    print(
        format_table(
            ["sequence", "fitted slope (ours)", "paper"],
            [[name, f"{slopes[name][0]:.3f}", f"{PAPER_SLOPES[name]}"] for name in ("iid", "sobol", "herding")],
        )
    )
    mean_seconds_at_max = float(np.nanmean(np.concatenate([seconds[name][:, -1] for name in sequences])))
    print(
        f"n went up to {max_n} (paper {PAPER_MAX_N}); mean seconds per discrepancy at n = {max_n}: "
        f"{mean_seconds_at_max:.3f} (paper: {PAPER_SECONDS_AT_200} s at n = 200, Gurobi)"
    )
    summary = {
        "experiment": NAME,
        "target": "Unif(0, 1)",
        "stein_factors": UNIFORM_STEIN_FACTORS,
        "sizes": sizes,
        "max_n": max_n,
        "paper_max_n": PAPER_MAX_N,
        "num_iid_sequences": args.num_sequences,
        "herding_kernel": "k(x, y) = {x-y}^2 - {x-y} + 1/6 (periodic Sobolev, ||h||^2 = int h'^2; Bach et al. 2012)",
        "herding_candidates": candidates,
        "discrepancy": curves,
        "iid_all": values["iid"],
        "fitted_slope": {name: slopes[name][0] for name in curves},
        "fitted_intercept": {name: slopes[name][1] for name in curves},
        "paper_slope": PAPER_SLOPES,
        "mean_seconds_at_max_n": mean_seconds_at_max,
        "paper_seconds_at_200": PAPER_SECONDS_AT_200,
        "failures": failures,
    }
    print_written(write_summary(out, summary), _plot(out, sizes, curves, slopes))
    return 0


def _plot(out, sizes, curves, slopes) -> Path:
    labels = {"iid": "i.i.d. (median)", "sobol": "Sobol", "herding": "Kernel herding"}
    figure, axes = new_figure(1, 3, figsize=(11, 3.4), sharey=True)
    for axis, name in zip(axes, ("iid", "sobol", "herding")):
        slope, intercept = slopes[name]
        axis.loglog(sizes, curves[name], "o", ms=4)
        if np.isfinite(slope):
            axis.loglog(sizes, np.exp(intercept) * sizes**slope, "-", alpha=0.7)
        axis.set_title(f"{labels[name]}: slope {slope:.2f} (paper {PAPER_SLOPES[name]})", fontsize=9)
        axis.set_xlabel("Number of sample points, n")
    axes[0].set_ylabel("Stein discrepancy")
    return save_figure(figure, out, "rates.png")
