"""Graph Stein discrepancy vs Wasserstein distance (Gorham and Mackey 2015, Section 5.2, Figure 2).

For the targets N(0, 1) (score -x, Stein factors (1, 4, 2)) and Unif(0, 1)
(score 0 on the box (0, 1), Stein factors (0.5, 0.5, 1)) and the paper's
seeds 7, 8, 9, an i.i.d. sequence is drawn from the target and, on the first
n points for n on a log grid, the complete-graph (sorted-path, d = 1) Stein
discrepancy and the exact Wasserstein distance are computed.

What the paper claims: with these Stein factors the Wasserstein distance
*lower*-bounds the (classical, hence also the complete-graph) Stein
discrepancy (Chen, Goldstein and Shao 2010 for N(0, 1); Dobler 2014 for
Unif(0, 1)); for Unif(0, 1) the classical Stein discrepancy *equals* the
Wasserstein distance because T g = g' ranges over all 1-Lipschitz
functions, and the graph Stein discrepancy (a relaxation of the classical
one) is then only slightly larger. We check Stein >= Wasserstein at every n
(up to a relative LP tolerance of 1e-6) and report the ratios.

The classical univariate Stein discrepancy (the paper's Theorem 14,
a quadratically constrained program) is not computed here.

The paper's x-axis reaches n = 10,000 (``--max-n 10000`` takes about ten
minutes on one core); the default stops at 1,000 (about a minute).

References
----------
.. [1] Gorham, J. and Mackey, L. (2015). Measuring sample quality with
   Stein's method. NeurIPS 28, Section 5.2 and Figure 2.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy import special
from tqdm import tqdm

from tallmcmc.reproduce._common import (
    add_common_arguments,
    format_table,
    log_grid,
    new_figure,
    output_folder,
    print_written,
    save_figure,
    write_summary,
)
from tallmcmc.stein.univariate import (
    GAUSSIAN_STEIN_FACTORS,
    UNIFORM_STEIN_FACTORS,
    standard_normal_cdf,
    standard_normal_cdf_integral,
    uniform_cdf,
    uniform_cdf_integral,
    wasserstein_1d,
)

NAME = "stein-compare"
HELP = "graph Stein discrepancy vs Wasserstein distance for i.i.d. N(0,1) and Unif(0,1) samples (Figure 2)"

PAPER_SEEDS = (7, 8, 9)
PAPER_MAX_N = 10_000
RELATIVE_TOLERANCE = 1e-6

TARGETS = {
    "gaussian": {
        "label": "N(0, 1)",
        "factors": GAUSSIAN_STEIN_FACTORS,
        "draw": lambda rng, n: rng.standard_normal(n),
        "score": lambda x: -x,
        "bounds": (None, None),
        "cdf": standard_normal_cdf,
        "cdf_integral": standard_normal_cdf_integral,
        "quantile": special.ndtri,
    },
    "uniform": {
        "label": "Unif(0, 1)",
        "factors": UNIFORM_STEIN_FACTORS,
        "draw": lambda rng, n: rng.uniform(size=n),
        "score": lambda x: np.zeros_like(x),
        "bounds": (0.0, 1.0),
        "cdf": uniform_cdf,
        "cdf_integral": uniform_cdf_integral,
        "quantile": lambda p: np.clip(p, 0.0, 1.0),
    },
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the experiment's options to ``parser``."""
    parser.add_argument("--max-n", type=int, default=1000, help="largest n (paper: 10000)")
    parser.add_argument("--min-n", type=int, default=30, help="smallest n")
    parser.add_argument("--grid-size", type=int, default=8, help="number of n on the log grid")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(PAPER_SEEDS), metavar="SEED",
                        help="seeds of the i.i.d. sequences, one sequence per target and seed (paper: 7 8 9)")
    add_common_arguments(parser, NAME)


def run(args: argparse.Namespace) -> int:
    """Compute both distances on every prefix of every sequence, print them, write summary and figure."""
    from tallmcmc.stein import graph_stein_discrepancy

    if args.min_n < 2 or args.max_n < args.min_n:
        raise ValueError(f"need 2 <= --min-n <= --max-n, got --min-n {args.min_n} and --max-n {args.max_n}")
    out = output_folder(args.out)
    sizes = log_grid(args.min_n, args.max_n, args.grid_size)
    results: dict[str, dict[str, dict[str, list]]] = {}
    failures: list[dict] = []
    progress = tqdm(total=len(TARGETS) * len(args.seeds) * len(sizes), desc=NAME, unit="n",
                    disable=args.no_progress)
    for target_name, target in TARGETS.items():
        results[target_name] = {}
        for seed in args.seeds:
            sequence = target["draw"](np.random.default_rng(seed), int(sizes[-1]))
            record = {"stein": [], "wasserstein": [], "seconds": []}
            for n in sizes:
                points = sequence[:n]
                lower, upper = target["bounds"]
                start = time.perf_counter()
                try:
                    stein = graph_stein_discrepancy(
                        points, target["score"](points), lower=lower, upper=upper,
                        stein_factors=target["factors"],
                    ).value
                except RuntimeError as error:  # solver failure: record and go on
                    failures.append({"target": target_name, "seed": seed, "n": int(n), "error": str(error)})
                    tqdm.write(f"{target_name}, seed {seed}, n = {n}: {error}")
                    stein = float("nan")
                record["seconds"].append(time.perf_counter() - start)
                record["stein"].append(stein)
                record["wasserstein"].append(
                    wasserstein_1d(points, target["cdf"], target_quantile=target["quantile"],
                                   target_cdf_integral=target["cdf_integral"])
                )
                progress.update()
            results[target_name][str(seed)] = record
    progress.close()

    summary_targets = {}
    for target_name, target in TARGETS.items():
        stein = np.array([results[target_name][str(s)]["stein"] for s in args.seeds])
        wasserstein = np.array([results[target_name][str(s)]["wasserstein"] for s in args.seeds])
        finite = np.isfinite(stein)
        ratio = stein[finite] / wasserstein[finite]
        holds = stein[finite] >= wasserstein[finite] * (1 - RELATIVE_TOLERANCE)
        summary_targets[target_name] = {
            "label": target["label"],
            "stein_factors": target["factors"],
            "stein_at_least_wasserstein_fraction": float(holds.mean()) if holds.size else None,
            "ratio_stein_over_wasserstein": {
                "min": float(ratio.min()) if ratio.size else None,
                "median": float(np.median(ratio)) if ratio.size else None,
                "max": float(ratio.max()) if ratio.size else None,
            },
            "per_seed": results[target_name],
        }
        print(f"\n{target['label']}  (Stein factors {target['factors']})")
        rows = []
        for i, n in enumerate(sizes):
            rows.append([n] + [f"{stein[k, i]:.4f} / {wasserstein[k, i]:.4f}" for k in range(len(args.seeds))])
        print(format_table(["n"] + [f"seed {s}: Stein / Wasserstein" for s in args.seeds], rows))
        print(
            f"Stein >= Wasserstein at {holds.sum()}/{holds.size} (n, seed) pairs; "
            f"Stein / Wasserstein: min {ratio.min():.3f}, median {np.median(ratio):.3f}, max {ratio.max():.3f}"
        )
    print(
        "\nPaper: Wasserstein provably lower-bounds these non-uniform Stein discrepancies; for Unif(0, 1)"
        " the classical Stein discrepancy equals Wasserstein and the graph Stein discrepancy closely tracks it."
    )
    seconds = {t: float(np.mean([results[t][str(s)]["seconds"][-1] for s in args.seeds])) for t in TARGETS}
    print(f"n went up to {sizes[-1]} (paper {PAPER_MAX_N}); seconds per Stein LP at the largest n: "
          + ", ".join(f"{t} {v:.2f}" for t, v in seconds.items()))
    summary = {
        "experiment": NAME,
        "sizes": sizes,
        "max_n": int(sizes[-1]),
        "paper_max_n": PAPER_MAX_N,
        "seeds": list(args.seeds),
        "paper_claim": "Wasserstein <= Stein with factors (1,4,2) for N(0,1) and (0.5,0.5,1) for Unif(0,1); "
                       "equality with the classical Stein discrepancy for Unif(0,1)",
        "relative_tolerance": RELATIVE_TOLERANCE,
        "targets": summary_targets,
        "seconds_per_stein_at_max_n": seconds,
        "classical_stein_discrepancy": "not computed (Theorem 14 QCQP not implemented)",
        "failures": failures,
    }
    print_written(write_summary(out, summary), _plot(out, sizes, args.seeds, results))
    return 0


def _plot(out, sizes, seeds, results) -> Path:
    figure, axes = new_figure(len(TARGETS), len(seeds), figsize=(3.6 * len(seeds), 3.2 * len(TARGETS)),
                                squeeze=False, sharex=True)
    for row, (target_name, target) in enumerate(TARGETS.items()):
        for column, seed in enumerate(seeds):
            axis = axes[row, column]
            record = results[target_name][str(seed)]
            axis.loglog(sizes, record["wasserstein"], "o-", label="Wasserstein", ms=3)
            axis.loglog(sizes, record["stein"], "s-", label="Complete graph Stein", ms=3)
            axis.set_title(f"{target['label']}, seed = {seed}", fontsize=9)
            if column == 0:
                axis.set_ylabel("Discrepancy value")
            if row == len(TARGETS) - 1:
                axis.set_xlabel("Number of sample points, n")
    axes[0, 0].legend(fontsize=8)
    return save_figure(figure, out, "comparison.png")
