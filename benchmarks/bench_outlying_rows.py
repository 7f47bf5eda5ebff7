"""Outlying rows: ``sample_tall`` on rare categories with the look for outlying rows off (the path before it, bit for
bit) and on (the default), in the same process on the same data (``docs/sample_tall.md``, "Rows the minibatch cannot
estimate").

The case is the fifth user-model audit's minimal one: logistic regression with an intercept, two Gaussian covariates
and ``--levels`` indicators of ``--rows`` rows each (disjoint; effects 0.5 to 1), N = ``--num-data``. Per seed and
setting: the call's seconds with compilation (the settings alternate, so both pay or both skip the compiler: the
persistent cache is on), the decision, the data per kept step, the setup passes by source, and every coordinate's
z = (mean − ref)/MCSE and sd ratio against a float64 Laplace reference with its first-order mean correction (at 100
rows a level it is within about 1% in sd of the exact test's draws: RESULTS, "Rows the minibatch cannot estimate").

    python benchmarks/bench_outlying_rows.py                      # N = 10⁶, 6 levels of 100 rows, seeds 0 and 1
    python benchmarks/bench_outlying_rows.py --num-data 300000 --rows 30 --seeds 0
    python benchmarks/bench_outlying_rows.py --num-data 10000000 --seeds 0 --looks on   # the exact test takes minutes
    python benchmarks/bench_outlying_rows.py --leverage 200000   # what the look would hold on leverage points

``--leverage N``: instead, ``bench_kept_looks.py``'s Student-t(2)-covariate model at N rows, its default setup, and
what :func:`tallmcmc.outlying_rows.find_outlying_rows` would hold there from residuals at 4 pairs of Laplace draws
(three seeds of the pairs), with the residuals per step it predicts.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from _timing import cpu_probe_ms

import tallmcmc
import tallmcmc.tall_outlying_looks as tall_outlying_looks
from tallmcmc.examples import logistic_regression
from tallmcmc.interop import arviz as arviz_bridge


def timed(model, look: bool, seed: int):
    tall_outlying_looks.LOOK_FOR_OUTLYING_ROWS = look
    began = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = tallmcmc.sample_tall(model, seed=seed, progress=False)
    return (
        result,
        time.perf_counter() - began,
        [str(w.message)[:60] for w in caught if "fast_setup" not in str(w.message)],
    )


def leverage(num_data: int) -> None:
    from bench_kept_looks import leverage_model

    from tallmcmc.automatic import default_setup
    from tallmcmc.model import DEFAULT_START_SPREAD, default_start
    from tallmcmc.outlying_rows import find_outlying_rows
    from tallmcmc.tall_outlying_looks import laplace_pairs

    model = leverage_model(num_data)
    mode, control_variate, _ = default_setup(model, default_start(model.position_shape, 0, DEFAULT_START_SPREAD))
    if control_variate is None:
        control_variate = tallmcmc.taylor_control_variate(model, mode.position)
    covariance = tallmcmc.laplace_covariance(mode)
    for seed in range(3):
        found = find_outlying_rows(model, control_variate, *laplace_pairs(mode.position, covariance, seed))
        print(f"# leverage points, N = {num_data:,}, pairs seed {seed}: {found.describe()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-data", type=int, default=1_000_000)
    parser.add_argument("--rows", type=int, default=100, help="rows per rare level")
    parser.add_argument("--levels", type=int, default=6)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--looks", nargs="+", choices=("off", "on"), default=["off", "on"], help="off: the path before")
    parser.add_argument("--leverage", type=int, default=0, help="N for the leverage-point model instead (see above)")
    args = parser.parse_args()
    if args.leverage:
        leverage(args.leverage)
        return
    print(f"# load {os.getloadavg()[0]:.2f}, CPU probe {cpu_probe_ms():.1f} ms")
    covariates, response, rare = logistic_regression.simulate_rare_levels(args.num_data, args.rows, args.levels)
    model = logistic_regression.model(covariates, response)
    _, covariance, mean = logistic_regression.laplace_reference(covariates, response)
    sd = np.sqrt(np.diag(covariance))
    print(
        "| seed | look | decision | rows held (rare found) | s | data per kept step (% of N) | setup passes | "
        "max \\|z\\| | sd ratios |"
    )
    print("|---|---|---|---|---:|---:|---|---:|---|")
    for seed in args.seeds:
        for label in args.looks:
            look = label == "on"
            result, seconds, caught = timed(model, look, seed)
            draws = np.asarray(result.positions, np.float64)
            mcse = draws.std(axis=(0, 1)) / np.sqrt(np.ravel(arviz_bridge.ess(draws)))
            z = np.abs(draws.mean(axis=(0, 1)) - mean) / mcse
            ratio = draws.std(axis=(0, 1), ddof=1) / sd
            held = result.diagnosis.control_variate.outlying_indices
            held = np.asarray([], int) if held is None else np.asarray(held)
            used = 100 * float(np.mean(result.info["data_used"])) / model.num_data
            passes = ", ".join(f"{name} {value:.3g}" for name, value in result.diagnosis.setup_passes.items())
            print(
                f"| {seed} | {label} | {result.diagnosis.decision} | {held.size:,} ({np.isin(rare, held).sum()}) | "
                f"{seconds:.1f} | {used:.3g} | {passes} | {z.max():.2f} | {ratio.min():.3f}–{ratio.max():.3f} |"
                + (f" warnings: {caught}" if caught else ""),
                flush=True,
            )
    tall_outlying_looks.LOOK_FOR_OUTLYING_ROWS = True


if __name__ == "__main__":
    main()
