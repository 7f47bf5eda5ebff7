"""The minibatch penalty test against the minibatch Barker test inside ``sample_tall`` (docs/penalty.md).

Usage::

    python benchmarks/bench_penalty.py                               # logistic regression, N = 10⁵ and 10⁶
    python benchmarks/bench_penalty.py --target mixture --draws 16000 --seeds 5 6

``--target logistic``: ``sample_tall(model, minibatch_test=...)`` on ``logistic_regression.simulate(N, 10,
seed=0)`` with each of ``"penalty"`` and ``"barker"`` (4 chains, ``--draws`` kept per chain, the same seed), and
what each kept: acceptance, points per kept step, bulk and tail ESS per draw (min over coordinates), the mean CLT
error bound of its kept steps, and max |mean − ref| / MCSE and |sd / ref sd − 1| against the cached reference of
``bench_all_in.py`` where there is one (``~/.cache/tallmcmc/bench``).

``--target mixture``: the two-component normal mixture at N = 1,000 (``tests/test_sample_tall.py``'s target, its
reference a long NUTS run in ``tests/data/reference_posteriors.json``), the minibatch path forced with
``residual_cost=1.0``: each test's sd / reference sd per coordinate and its z, with the exact test beside them —
where the normal approximation of Δ* is weakest (Var(Δ*) up to 1 in the posterior's tails).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
import warnings

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
warnings.simplefilter("ignore")

import tallmcmc  # noqa: E402
from tallmcmc.examples import logistic_regression, normal_mixture  # noqa: E402
from tallmcmc.interop import arviz as arviz_bridge  # noqa: E402


def per_draw(draws: np.ndarray) -> tuple[float, float]:
    """Min over coordinates of bulk and tail ESS per draw; ``draws`` (chain, draw, d)."""
    count = draws.shape[0] * draws.shape[1]
    bulk = np.ravel(arviz_bridge.ess(draws, method="bulk")).min() / count
    tail = np.ravel(arviz_bridge.ess(draws, method="tail")).min() / count
    return float(bulk), float(tail)


def logistic(args) -> None:
    from bench_logistic import coordinate_stats

    print(
        "| N | test | acceptance | points per kept step | bulk ESS/draw | tail ESS/draw | mean error bound | "
        "max \\|z\\| mean | max \\|sd/ref − 1\\| | s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        covariates, response = logistic_regression.simulate(n, 10, seed=0)
        model = logistic_regression.model(covariates, response)
        cached = sorted(pathlib.Path("~/.cache/tallmcmc/bench").expanduser().glob(f"reference_independence_N{n}_d10_*"))
        reference = np.load(cached[-1]) if cached else None
        for test in ("penalty", "barker"):
            began = time.perf_counter()
            result = tallmcmc.sample_tall(model, num_samples=args.draws, minibatch_test=test, progress=False, seed=0)
            seconds = time.perf_counter() - began
            draws = np.asarray(result.positions, np.float64)
            bulk, tail = per_draw(draws)
            z = sd_error = float("nan")
            if reference is not None:
                _, mcse = coordinate_stats(draws)
                z = float(np.max(np.abs(draws.mean((0, 1)) - reference["mean"]) / np.hypot(mcse, reference["mcse"])))
                sd_error = float(np.max(np.abs(draws.std((0, 1)) / reference["sd"] - 1)))
            info = result.info
            print(
                f"| {n:,} | {test} ({result.diagnosis.decision}) | {np.mean(info['accepted']):.3f} | "
                f"{np.mean(info['data_used']):.1f} | {bulk:.3f} | {tail:.3f} | {np.mean(info['error_bound']):.2g} | "
                f"{z:.2f} | {sd_error:.3f} | {seconds:.1f} |",
                flush=True,
            )


def mixture(args) -> None:
    sys.path.insert(0, str(HERE.parent / "tests"))
    reference = json.loads((HERE.parent / "tests" / "data" / "reference_posteriors.json").read_text())
    moments = [reference["normal_mixture"]["moments"][name] for name in normal_mixture.COORDINATES]
    mean, sd = (np.array([row[key] for row in moments]) for key in ("mean", "sd"))
    mcse_sd = np.array([row["mcse_sd"] for row in moments])
    model = normal_mixture.model(normal_mixture.simulate(1000, seed=0))
    start = np.array([-1.0, 0.9, 0.0, -0.3, -0.4], np.float32)
    print(f"normal mixture, N = 1,000, 4 × {args.draws:,} kept draws; sd / reference sd per coordinate (z)")
    print("| test | seed | sd / ref sd (z) | max \\|z\\| mean | r̂ max | acceptance | mean error bound |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for test in ("penalty", "barker", "exact"):
        for seed in args.seeds:
            options = dict(residual_cost=1e6) if test == "exact" else dict(residual_cost=1.0, minibatch_test=test)
            result = tallmcmc.sample_tall(model, start, num_samples=args.draws, seed=seed, progress=False, **options)
            draws = np.asarray(result.positions, np.float64)
            flat = draws.reshape(-1, draws.shape[-1])
            ess = np.ravel(arviz_bridge.ess(draws, method="bulk"))
            got = flat.std(0)
            kurtosis = np.mean((flat - flat.mean(0)) ** 4, 0) / got**4
            z_sd = (got - sd) / np.hypot(got * np.sqrt((kurtosis - 1) / (4 * ess)), mcse_sd)
            z_mean = np.abs(flat.mean(0) - mean) / np.hypot(got / np.sqrt(ess), [row["mcse_mean"] for row in moments])
            ratios = ", ".join(f"{r:.3f} ({z:+.1f})" for r, z in zip(got / sd, z_sd, strict=True))
            rhat = float(np.max(arviz_bridge.rhat(draws)))
            print(
                f"| {test} ({result.diagnosis.decision}) | {seed} | {ratios} | {z_mean.max():.1f} | {rhat:.3f} | "
                f"{np.mean(result.info['accepted']):.3f} | {np.mean(result.info['error_bound']):.2g} |",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=["logistic", "mixture"], default="logistic")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[5, 6])
    args = parser.parse_args()
    (logistic if args.target == "logistic" else mixture)(args)


if __name__ == "__main__":
    main()
