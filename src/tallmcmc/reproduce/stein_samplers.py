"""Stein diagnostics of our own minibatch samplers against the data they touch (a new figure).

Target: the Gaussian mixture of Seita et al. (2017, Section 6.1) with the
same N/K = 100 (the tempered posterior then resembles the 100-point
Welling–Teh posterior): N = 10⁵ points and K = 10³ by default, ``--num-data
1000000`` for the paper's N = 10⁶ (K = 10⁴). Every chain runs the random walk
with standard deviation 0.15 per coordinate from θ = (0, 1) under each test:

* ``minibatch_barker(50)`` — the minibatch Barker test of Seita et al.;
* ``exact_barker()`` — the full-data Barker test (the same chain in law);
* ``austere(50, 0.05)`` and ``confidence_sampler(50)`` — AustereMH and
  MHSubLhd.

Sample quality is measured on the first n steps of each chain, for a
log-spaced set of n, by two Stein discrepancies with exact full-data
(tempered) scores ∇log π at the sample points:

* the kernel Stein discrepancy (IMQ base kernel, c = 1, β = −1/2) of all n
  points (repeats from rejections included, as weights);
* the spanner graph Stein discrepancy of the n points thinned to at most
  ``--max-graph-points`` equally spaced ones (the linear program grows
  quickly with the number of distinct points).

Each is plotted against the cumulative number of data points the chain has
touched after n steps (``result.data_used.cumsum()``), which is what a
minibatch test saves. None of the papers has this figure: Seita et al. compare
minibatch sizes and binned likelihoods, Gorham & Mackey measure SGLD and
AustereMH, not the minibatch Barker test. The default run takes a few minutes.

References
----------
.. [1] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
   minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 6.1.
.. [2] Gorham, J. and Mackey, L. (2015). Measuring sample quality with
   Stein's method. NeurIPS 28.
.. [3] Gorham, J. and Mackey, L. (2017). Measuring sample quality with
   kernels. ICML 2017.
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
from tallmcmc.reproduce._common import (
    add_common_arguments,
    format_table,
    new_figure,
    output_folder,
    print_written,
    save_figure,
    write_summary,
)
from tallmcmc.reproduce._methods import MethodSettings, add_methods_argument, display_name, method, selected
from tallmcmc.stein import graph_stein_discrepancy
from tallmcmc.stein.kernel import kernel_stein_discrepancy
from tallmcmc.stein.scores import posterior_scores

NAME = "stein-samplers"
HELP = "Graph and kernel Stein discrepancy of our minibatch samplers vs data touched (Gaussian mixture, N/K = 100)"

DATA_PER_TEMPERATURE = 100
PROPOSAL_STANDARD_DEVIATION = 0.15
BATCH_SIZE = 50
AUSTERE_EPSILON = 0.05
METHOD_KEYS = ("minibatch_barker", "exact_barker", "austere", "confidence_sampler")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the experiment's options to ``parser``."""
    parser.add_argument("--num-data", type=int, default=100_000, help="N (10^6 is the paper's); K = N/100")
    parser.add_argument("--samples", type=int, default=5000, help="steps per chain")
    parser.add_argument("--chains", type=int, default=4, help="independent chains per test (the curves are averaged)")
    parser.add_argument("--lengths", type=int, default=10, help="number of log-spaced chain lengths evaluated")
    parser.add_argument("--shortest", type=int, default=50, help="shortest chain length evaluated")
    parser.add_argument(
        "--max-graph-points",
        type=int,
        default=500,
        help="the graph Stein discrepancy uses at most this many equally spaced points of a prefix",
    )
    add_methods_argument(parser, METHOD_KEYS)
    parser.add_argument("--data-seed", type=int, default=0, help="seed of the simulated data")
    add_common_arguments(parser, NAME, seed=0, seed_help="seed of the chains")


def chain_lengths(samples: int, count: int, shortest: int) -> np.ndarray:
    """``count`` log-spaced integer lengths from ``shortest`` to ``samples`` (distinct, the last = samples)."""
    shortest = max(2, min(shortest, samples))
    return np.unique(np.round(np.geomspace(shortest, samples, max(count, 1))).astype(int))


def _unique_scores(model, points: np.ndarray) -> np.ndarray:
    unique, inverse = np.unique(points, axis=0, return_inverse=True)
    return posterior_scores(model, unique)[np.asarray(inverse).ravel()]


def run(args: argparse.Namespace) -> int:
    """Run the chosen tests' chains, compute both discrepancies on their prefixes, print, write summary and figure."""
    began = time.perf_counter()
    out = output_folder(args.out)
    progress = not args.no_progress
    temperature = args.num_data / DATA_PER_TEMPERATURE
    model = gaussian_mixture.model(args.num_data, temperature, seed=args.data_seed)
    settings = MethodSettings(batch_size=BATCH_SIZE, austere_epsilon=AUSTERE_EPSILON)
    lengths = chain_lengths(args.samples, args.lengths, args.shortest)
    start = jnp.asarray(gaussian_mixture.TRUE_THETA, jnp.float32)
    results: dict[str, dict] = {}
    for key in selected(args.methods, METHOD_KEYS):
        test = method(key).build(settings)
        result = tallmcmc.sample(
            model,
            tallmcmc.random_walk(PROPOSAL_STANDARD_DEVIATION),
            test,
            initial_position=start,
            num_samples=args.samples,
            num_chains=args.chains,
            seed=args.seed,
            progress=progress,
        )
        results[key] = {
            "positions": np.asarray(result.positions, dtype=np.float64),
            "touched": np.cumsum(np.asarray(result.data_used, dtype=np.int64), axis=1),
            "acceptance_rate": result.acceptance_rate,
            "mean_data_used": float(np.mean(result.data_used)),
            "seconds_per_step": result.seconds_per_step,
        }
    with tqdm(
        total=len(results) * args.chains * lengths.size, desc="Stein discrepancies", disable=not progress, leave=False
    ) as bar:
        for value in results.values():
            graph = np.full((args.chains, lengths.size), np.nan)
            kernel = np.full((args.chains, lengths.size), np.nan)
            for chain in range(args.chains):
                points = value["positions"][chain]
                scores = _unique_scores(model, points)
                for j, n in enumerate(lengths):
                    kernel[chain, j] = kernel_stein_discrepancy(points[:n], scores[:n]).value
                    index = np.unique(np.round(np.linspace(0, n - 1, min(n, args.max_graph_points))).astype(int))
                    graph[chain, j] = graph_stein_discrepancy(points[index], scores[index]).value
                    bar.update(1)
            value["graph"], value["kernel"] = graph, kernel
            value["touched_at"] = value["touched"][:, lengths - 1].mean(axis=0)

    print(
        f"Gaussian mixture, N = {args.num_data}, K = {temperature:g} (N/K = {DATA_PER_TEMPERATURE}), random walk sd "
        f"{PROPOSAL_STANDARD_DEVIATION}, {args.samples} steps x {args.chains} chain(s) per test"
    )
    print(
        format_table(
            ["test", "acceptance", "data/step", "s/step", "final KSD", "final graph Stein", "data touched"],
            [
                [
                    display_name(key),
                    f"{v['acceptance_rate']:.3f}",
                    f"{v['mean_data_used']:.0f}",
                    f"{v['seconds_per_step']:.2e}",
                    f"{np.nanmean(v['kernel'][:, -1]):.4f}",
                    f"{np.nanmean(v['graph'][:, -1]):.3f}",
                    f"{v['touched_at'][-1]:.3g}",
                ]
                for key, v in results.items()
            ],
        )
    )
    print("KSD at each chain length (data touched: KSD)")
    print(
        format_table(
            ["steps"] + [display_name(key) for key in results],
            [
                [int(n)] + [f"{v['touched_at'][j]:.3g}: {np.nanmean(v['kernel'][:, j]):.4f}" for v in results.values()]
                for j, n in enumerate(lengths)
            ],
        )
    )
    figure_path = _figure(out, results, args)
    elapsed = time.perf_counter() - began
    summary = {
        "settings": {
            "num_data": args.num_data,
            "temperature": temperature,
            "samples": args.samples,
            "chains": args.chains,
            "lengths": lengths,
            "max_graph_points": args.max_graph_points,
            "seed": args.seed,
            "data_seed": args.data_seed,
            "proposal_standard_deviation": PROPOSAL_STANDARD_DEVIATION,
            "batch_size": BATCH_SIZE,
            "austere_epsilon": AUSTERE_EPSILON,
        },
        "methods": {
            key: {"display_name": display_name(key)}
            | {
                name: v[name]
                for name in ("acceptance_rate", "mean_data_used", "seconds_per_step", "touched_at", "kernel", "graph")
            }
            for key, v in results.items()
        },
        "seconds": elapsed,
        "figure": str(figure_path),
    }
    print_written(write_summary(out, summary), figure_path, seconds=elapsed)
    return 0


def _figure(out, results: dict, args: argparse.Namespace) -> Path:
    figure, axes = new_figure(1, 2, figsize=(10, 4))
    for key, value in results.items():
        for axis, name in zip(axes, ("kernel", "graph")):
            axis.plot(value["touched_at"], np.nanmean(value[name], axis=0), "o-", ms=3, label=display_name(key))
    axes[0].set_ylabel("kernel Stein discrepancy (IMQ)")
    axes[1].set_ylabel(f"graph Stein discrepancy (≤ {args.max_graph_points} points)")
    for axis in axes:
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("cumulative data points touched")
        axis.legend(fontsize=8)
    figure.suptitle(
        f"Gaussian mixture, N = {args.num_data:g}, N/K = {DATA_PER_TEMPERATURE}: sample quality vs data touched",
        fontsize=10,
    )
    return save_figure(figure, out, "stein_samplers.png")
