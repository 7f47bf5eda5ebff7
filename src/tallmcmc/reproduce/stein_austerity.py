"""Bias–variance trade-off of approximate MH, quantified by the graph Stein discrepancy.

Gorham & Mackey (2015, Section 5.4, Figure 4). Target: Bayesian logistic
regression on the prostate-cancer nodal data (53 patients, intercept + 5
binary predictors, :func:`tallmcmc.datasets.load_nodal`) with a N(0, I)
prior. Samplers: random-walk Metropolis–Hastings with proposal variance 0.01
(standard deviation 0.1 per coordinate) under

* ε = 0: the exact test (:func:`tallmcmc.exact_metropolis`; AustereMH with
  ε = 0 never stops early, so it makes the same decision on all N points and
  :func:`tallmcmc.austere` rejects ε = 0);
* ε = 0.1 and 0.2: the AustereMH sequential t-test with batch size 2
  (:func:`tallmcmc.austere`); the paper's figure shows ε ∈ {0, 0.1}, its
  script also runs 0.2.

Each chain starts at β = 0 and runs for 10⁵ likelihood evaluations (the
cumulative ``data_used``: per-datum log-likelihood evaluations of the
proposal, the current state's being cached by the exact test; pairs of
evaluations for AustereMH). The points from the first 10³ evaluations are
discarded and the rest thinned to 1000 equally spaced points. The spanner
graph Stein discrepancy (d = 6, Stein factors (1, 1, 1), exact full-data
scores) of the first n thinned points is plotted against the number of
likelihood evaluations spent up to the n-th point. The paper finds that the
approximate sample is better for small budgets and is overtaken by the exact
one as the budget grows.

To corroborate, as the paper does, the mean error
maxⱼ|E_Q[Xⱼ] − E[Zⱼ]| / maxⱼ|E[Zⱼ]| and the second-moment error (the same
for Xⱼ²) of every prefix are computed against a surrogate of the posterior: a
Metropolis-adjusted Langevin run (:func:`tallmcmc.langevin` with
:func:`tallmcmc.exact_metropolis`, step 0.1, 4 chains; 8 × 10⁴ draws after
burn-in by default, the paper used one chain of 10⁷).

References
----------
.. [1] Gorham, J. and Mackey, L. (2015). Measuring sample quality with
   Stein's method. NeurIPS 28, Section 5.4 and Figure 4.
.. [2] Korattikara, A., Chen, Y. and Welling, M. (2014). Austerity in MCMC
   land: cutting the Metropolis-Hastings budget. ICML 2014.
.. [3] Canty, A. and Ripley, B. D. boot: Bootstrap R (S-Plus) Functions.
   R package, dataset ``nodal``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

import tallmcmc
from tallmcmc.datasets import load_nodal
from tallmcmc.examples import logistic_regression
from tallmcmc.model import Model
from tallmcmc.reproduce._common import (
    add_common_arguments,
    format_table,
    new_figure,
    output_folder,
    print_written,
    pyplot,
    save_figure,
    write_summary,
)
from tallmcmc.reproduce._methods import MethodSettings, display_name, method
from tallmcmc.stein import graph_stein_discrepancy
from tallmcmc.stein.scores import posterior_scores

NAME = "stein-austerity"
HELP = "Approximate RWMH (AustereMH) bias-variance trade-off by graph Stein discrepancy (Gorham & Mackey 2015, Fig. 4)"

PAPER_EPSILONS = (0.0, 0.1, 0.2)
PAPER_BATCH_SIZE = 2
PAPER_PROPOSAL_STANDARD_DEVIATION = 0.1  # variance 0.01
PAPER_BUDGET = 100_000
PAPER_BURN_IN = 1_000
PAPER_LENGTH = 1000
# the authors' evaluation points: 10:10:400, 420:20:600, 650:50:1000
SURROGATE_STEP_SIZE = 0.1  # MALA acceptance about 0.73 here
PAPER_PREFIXES = tuple(list(range(10, 401, 10)) + list(range(420, 601, 20)) + list(range(650, 1001, 50)))
DEFAULT_PREFIXES = (10, 20, 30, 50, 70, 100, 150, 200, 300, 400, 500, 600, 800, 1000)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the experiment's options to ``parser``."""
    parser.add_argument(
        "--epsilons",
        type=float,
        nargs="+",
        default=list(PAPER_EPSILONS),
        help="AustereMH tolerances (0 = exact MH); paper: 0, 0.1 (figure) and 0.2 (script)",
    )
    parser.add_argument("--batch-size", type=int, default=PAPER_BATCH_SIZE, help="AustereMH batch size (paper: 2)")
    parser.add_argument(
        "--budget", type=int, default=PAPER_BUDGET, help="likelihood evaluations per chain (paper: 1e5)"
    )
    parser.add_argument("--burn-in", type=int, default=PAPER_BURN_IN, help="evaluations discarded (paper: 1e3)")
    parser.add_argument("--length", type=int, default=PAPER_LENGTH, help="points kept after thinning (paper: 1000)")
    parser.add_argument(
        "--prefixes",
        type=int,
        nargs="+",
        default=list(DEFAULT_PREFIXES),
        help="numbers n of thinned points at which the discrepancy is computed",
    )
    parser.add_argument(
        "--paper-prefixes",
        action="store_true",
        help="use the authors' 58 evaluation points (10:10:400, 420:20:600, 650:50:1000)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="independent chains per ε (paper: 1)")
    parser.add_argument(
        "--surrogate-draws",
        type=int,
        default=80_000,
        help="MALA draws (after burn-in, over 4 chains) for the mean and second-moment errors; 0 skips "
        "them (paper: 1e7)",
    )
    add_common_arguments(
        parser,
        NAME,
        seed=37,
        seed_help="seed of the first chain (the authors' script uses 37); "
        "repeat r uses seed + 1000 r, the MALA surrogate seed + 7",
    )


def nodal_posterior() -> Model:
    """Logistic regression with a N(0, I) prior on the nodal data."""
    covariates, response = load_nodal()
    return logistic_regression.model(covariates, response, prior_variance=1.0)


def method_key(epsilon: float) -> str:
    """Registry key of the test at tolerance ε: ``exact_metropolis`` at ε = 0 (AustereMH's limit), else ``austere``."""
    return "exact_metropolis" if epsilon == 0 else "austere"


def test_for(epsilon: float, batch_size: int) -> tallmcmc.AcceptanceTest:
    """Exact MH for ε = 0 (AustereMH's limit), AustereMH(batch_size, ε) otherwise."""
    return method(method_key(epsilon)).build(MethodSettings(batch_size=batch_size, austere_epsilon=epsilon))


def run_chain(model: Model, epsilon: float, batch_size: int, budget: int, seed: int, progress: bool):
    """One chain from β = 0 until ``budget`` evaluations; (positions (steps, d), cumulative evaluations (steps,))."""
    dimension = model.data["covariates"].shape[1]
    cheapest = model.num_data if epsilon == 0 else batch_size
    steps = int(np.ceil(budget / cheapest)) + 1
    result = tallmcmc.sample(
        model,
        tallmcmc.random_walk(PAPER_PROPOSAL_STANDARD_DEVIATION),
        test_for(epsilon, batch_size),
        initial_position=jnp.zeros(dimension, jnp.float32),
        num_samples=steps,
        seed=seed,
        progress=progress,
    )
    positions = np.asarray(result.positions[0], dtype=np.float64)
    evaluations = np.cumsum(np.asarray(result.data_used[0], dtype=np.int64))
    keep = evaluations <= budget
    return positions[keep], evaluations[keep], float(result.acceptance_rate)


def surrogate_moments(model: Model, draws: int, seed: int, progress: bool) -> tuple[np.ndarray, np.ndarray]:
    """First and second moments of the posterior from a MALA run (4 chains, a quarter discarded as burn-in)."""
    chains = 4
    per_chain = int(np.ceil(draws / chains))
    burn_in = max(per_chain // 4, 100)
    dimension = model.data["covariates"].shape[1]
    result = tallmcmc.sample(
        model,
        tallmcmc.langevin(SURROGATE_STEP_SIZE),
        tallmcmc.exact_metropolis(),
        initial_position=jnp.zeros(dimension, jnp.float32),
        num_samples=per_chain + burn_in,
        num_chains=chains,
        seed=seed,
        progress=progress,
    )
    kept = np.asarray(result.positions, dtype=np.float64)[:, burn_in:].reshape(-1, dimension)
    return kept.mean(axis=0), (kept**2).mean(axis=0)


def moment_errors(points: np.ndarray, first: np.ndarray, second: np.ndarray) -> tuple[float, float]:
    """Gorham & Mackey's mean and second-moment errors of ``points`` against the surrogate moments."""
    mean_error = np.max(np.abs(points.mean(axis=0) - first)) / np.max(np.abs(first))
    second_error = np.max(np.abs((points**2).mean(axis=0) - second)) / np.max(np.abs(second))
    return float(mean_error), float(second_error)


def thin(positions: np.ndarray, evaluations: np.ndarray, burn_in: int, length: int):
    """Drop the steps before ``burn_in`` evaluations and keep ``length`` equally spaced ones (the authors' rule)."""
    first = int(np.argmax(evaluations >= burn_in))
    last = positions.shape[0] - 1
    count = min(last - first + 1, length)
    index = np.round(np.linspace(first, last, count)).astype(int)
    return positions[index], evaluations[index]


def run(args: argparse.Namespace) -> int:
    """Run one chain per ε and repeat, its graph Stein discrepancy at each prefix, print, write summary and figure."""
    began = time.perf_counter()
    out = output_folder(args.out)
    progress = not args.no_progress
    model = nodal_posterior()
    prefixes = sorted(set(PAPER_PREFIXES if args.paper_prefixes else args.prefixes))
    results: dict[str, dict] = {}
    for epsilon in args.epsilons:
        key = f"{epsilon:g}"
        results[key] = {"epsilon": epsilon, "repeats": []}
        for repeat in range(args.repeats):
            positions, evaluations, acceptance = run_chain(
                model, epsilon, args.batch_size, args.budget, args.seed + 1000 * repeat, progress
            )
            points, spent = thin(positions, evaluations, args.burn_in, args.length)
            results[key]["repeats"].append(
                {
                    "points": points,
                    "evaluations": spent,
                    "acceptance_rate": acceptance,
                    "steps": positions.shape[0],
                    "evaluations_per_step": evaluations[-1] / positions.shape[0],
                }
            )
    surrogate = None
    if args.surrogate_draws > 0:
        surrogate = surrogate_moments(model, args.surrogate_draws, args.seed + 7, progress)
    total = sum(len([n for n in prefixes if n <= r["points"].shape[0]]) for v in results.values() for r in v["repeats"])
    seconds = []
    with tqdm(total=total, desc="graph Stein discrepancy (d = 6)", disable=not progress, leave=False) as bar:
        for value in results.values():
            for chain in value["repeats"]:
                scores = posterior_scores(model, chain["points"])
                chain["prefixes"], chain["prefix_evaluations"], chain["discrepancy"] = [], [], []
                chain["mean_error"], chain["second_moment_error"] = [], []
                for n in prefixes:
                    if n > chain["points"].shape[0]:
                        continue
                    result = graph_stein_discrepancy(chain["points"][:n], scores[:n])
                    seconds.append(result.timings.get("total", np.nan))
                    chain["prefixes"].append(n)
                    chain["prefix_evaluations"].append(int(chain["evaluations"][n - 1]))
                    chain["discrepancy"].append(result.value)
                    if surrogate is not None:
                        errors = moment_errors(chain["points"][:n], *surrogate)
                        chain["mean_error"].append(errors[0])
                        chain["second_moment_error"].append(errors[1])
                    bar.update(1)

    print(
        f"Logistic regression on the nodal data (N = {model.num_data}, d = 6), random walk sd "
        f"{PAPER_PROPOSAL_STANDARD_DEVIATION}, budget {args.budget} evaluations, burn-in {args.burn_in}, "
        f"thinned to {args.length}"
    )
    rows = []
    for key, value in results.items():
        chain = value["repeats"][0]
        rows.append(
            [
                key,
                chain["steps"],
                f"{chain['evaluations_per_step']:.1f}",
                f"{chain['acceptance_rate']:.2f}",
                chain["points"].shape[0],
            ]
        )
    print(format_table(["ε", "steps", "evaluations/step", "acceptance", "thinned points"], rows))
    shown = sorted({n for v in results.values() for r in v["repeats"] for n in r["prefixes"]})
    table = []
    for n in shown:
        row = [n]
        for value in results.values():
            pairs = [
                (r["prefix_evaluations"][r["prefixes"].index(n)], r["discrepancy"][r["prefixes"].index(n)])
                for r in value["repeats"]
                if n in r["prefixes"]
            ]
            errors = [
                r["mean_error"][r["prefixes"].index(n)]
                for r in value["repeats"]
                if n in r["prefixes"] and r["mean_error"]
            ]
            cell = f"{np.mean([p[0] for p in pairs]):.0f}: {np.mean([p[1] for p in pairs]):.2f}" if pairs else "-"
            if pairs and errors:
                cell += f" ({np.mean(errors):.3f})"
            row.append(cell)
        table.append(row)
    print(
        "graph Stein discrepancy of the first n thinned points (evaluations spent: discrepancy (mean error vs the "
        "MALA surrogate); mean over repeats)"
    )
    print(format_table(["n"] + [f"ε = {key}" for key in results], table))
    crossing = _crossing(results)
    print(
        f"exact (ε = 0) overtakes ε = 0.1 (mean over repeats) at about {crossing if crossing else 'no point of the grid'} evaluations "
        "(paper, Figure 4: the approximate sample is better for small budgets and is overtaken by the exact one; "
        "its discrepancy axis spans about 16-24 at 3e3-1e5 evaluations)"
    )
    mean_seconds = float(np.nanmean(seconds)) if seconds else float("nan")
    print(
        f"graph Stein discrepancy: {mean_seconds:.2f} s per evaluation on average "
        "(paper, n = 1000: 1.3 s spanner + 12 s per coordinate LP)"
    )
    figure_path = _figure(out, results)
    elapsed = time.perf_counter() - began
    summary = {
        "settings": {
            "epsilons": args.epsilons,
            "batch_size": args.batch_size,
            "budget": args.budget,
            "burn_in": args.burn_in,
            "length": args.length,
            "prefixes": prefixes,
            "repeats": args.repeats,
            "seed": args.seed,
            "proposal_standard_deviation": PAPER_PROPOSAL_STANDARD_DEVIATION,
        },
        "chains": {
            key: [
                {
                    name: chain[name]
                    for name in (
                        "steps",
                        "evaluations_per_step",
                        "acceptance_rate",
                        "prefixes",
                        "prefix_evaluations",
                        "discrepancy",
                        "mean_error",
                        "second_moment_error",
                    )
                }
                for chain in value["repeats"]
            ]
            for key, value in results.items()
        },
        "exact_overtakes_approximate_at_evaluations": crossing,
        "surrogate": None
        if surrogate is None
        else {
            "mean": surrogate[0],
            "second_moment": surrogate[1],
            "draws": args.surrogate_draws,
            "step_size": SURROGATE_STEP_SIZE,
        },
        "seconds_per_discrepancy": mean_seconds,
        "seconds": elapsed,
        "figure": str(figure_path),
    }
    print_written(write_summary(out, summary), figure_path, seconds=elapsed)
    return 0


def _mean_curve(value: dict, field: str = "discrepancy") -> tuple[np.ndarray, np.ndarray]:
    """Evaluations and ``field`` averaged over repeats, at the prefixes every repeat has."""
    common = sorted(set.intersection(*(set(chain["prefixes"]) for chain in value["repeats"])))
    evaluations = [np.mean([c["prefix_evaluations"][c["prefixes"].index(n)] for c in value["repeats"]]) for n in common]
    values = [np.mean([c[field][c["prefixes"].index(n)] for c in value["repeats"]]) for n in common]
    return np.asarray(evaluations, float), np.asarray(values, float)


def _crossing(results: dict) -> int | None:
    """First evaluation count after which the exact chain's mean discrepancy stays below ε = 0.1's."""
    if "0" not in results or "0.1" not in results:
        return None
    grid, exact = _mean_curve(results["0"])
    approximate_grid, approximate = _mean_curve(results["0.1"])
    if grid.size == 0 or approximate_grid.size == 0:
        return None
    better = exact < np.interp(grid, approximate_grid, approximate)
    if not better[-1]:
        return None
    index = len(better) - 1
    while index > 0 and better[index - 1]:
        index -= 1
    return int(grid[index])


def _figure(out, results: dict) -> Path:
    panels = [("discrepancy", "spanner graph Stein discrepancy")]
    if any(chain["mean_error"] for value in results.values() for chain in value["repeats"]):
        panels += [("mean_error", "mean error (vs MALA surrogate)"), ("second_moment_error", "second moment error")]
    figure, axes = new_figure(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    colors = pyplot().rcParams["axes.prop_cycle"].by_key()["color"]
    for axis, (field, title) in zip(axes[0], panels):
        for color, (key, value) in zip(colors, results.items()):
            name = f"ε = {key} ({display_name(method_key(float(key)))})"
            several = len(value["repeats"]) > 1
            for chain in value["repeats"]:
                axis.plot(
                    chain["prefix_evaluations"],
                    chain[field],
                    "-",
                    lw=0.8,
                    color=color,
                    alpha=0.35 if several else 1.0,
                    label=None if several else name,
                )
            if several:
                evaluations, mean = _mean_curve(value, field)
                axis.plot(evaluations, mean, "o-", ms=3, lw=2, color=color, label=f"{name}, mean")
        axis.set_xscale("log")
        axis.set_xlabel("number of likelihood evaluations")
        axis.set_title(title, fontsize=9)
        axis.legend(fontsize=8)
    figure.suptitle("Bayesian logistic regression, nodal data (Gorham & Mackey 2015, Figure 4)", fontsize=10)
    return save_figure(figure, out, "figure4_austerity_tradeoff.png")
