"""How often ``sample_tall``'s kept steps grow the minibatch test's minibatch past its first stage.

A sequential minibatch test that stops on the points it averages selects a biased Δ* where the stop is random (the
first stage's Var(Δ*) near σ²) and the per-datum terms are skewed (``docs/minibatch_error.md``, "Skewed log
ratios"). This measures whether ``sample_tall``'s default path is in that regime: per model, ``sample_tall(model,
seed=0)`` with its defaults (or ``--batch-size``), and of the kept steps the fraction that read more than the first
stage and not all N ("past first"), the fraction the diagnosis counts as grown for their variance
(``TallDiagnosis.past_first_stage``: the first stage's estimated Var(Δ*) ≥ ½), and the median and 99th percentile
of the reported Var(Δ*) (σ² = 1).

Models: ``bench_user_models.py``'s seven NumPyro models, the README's logistic regression (d = 10), and
``leverage`` (``bench_kept_looks.py``'s Student-t(2) covariates, whose tail guard grows the minibatch; always at
N = 200,000).

    python benchmarks/bench_first_stage.py --num-data 50000
    python benchmarks/bench_first_stage.py --num-data 10000 --batch-size 10 --only poisson student logistic
    python benchmarks/bench_first_stage.py --only leverage --seeds 0 1 5
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from bench_kept_looks import leverage_model
from bench_user_models import MODELS

import tallmcmc
from tallmcmc.examples import logistic_regression


def build(name: str, num_data: int):
    if name == "logistic":
        return logistic_regression.model(*logistic_regression.simulate(num_data, 10, seed=0))
    if name == "leverage":
        return leverage_model(200_000)
    model_fn, positional, keywords = MODELS[name](num_data, np.random.default_rng(5))
    return tallmcmc.from_numpyro(model_fn, *positional, **keywords)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = (*MODELS, "logistic", "leverage")
    parser.add_argument("--only", nargs="+", choices=names, default=[name for name in names if name != "leverage"])
    parser.add_argument("--num-data", type=int, default=50_000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    print(
        "| model | N | seed | decision | test | first stage | past first | counted | Var(Δ*) median | q99 | problems | s |"
        "\n|---|---:|---:|---|---|---:|---:|---:|---:|---:|---|---:|",
        flush=True,
    )
    for name in args.only:
        model = build(name, args.num_data)
        for seed in args.seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                began = time.perf_counter()
                result = tallmcmc.sample_tall(model, seed=seed, batch_size=args.batch_size, progress=False)
                seconds = time.perf_counter() - began
            used = np.asarray(result.info["data_used_by_test"])
            first = int(used[used > 0].min())
            past = float(np.mean((used > first) & ~np.asarray(result.info["used_full_data"], bool)))
            variance = np.asarray(result.info["variance"], np.float64)
            diagnosis = result.diagnosis
            problems = "; ".join(" ".join(problem.split()[:5]) + " …" for problem in diagnosis.problems) or "none"
            print(
                f"| {name} | {model.num_data:,} | {seed} | {diagnosis.decision} | {result.test_name} | {first:,} | "
                f"{past:.4f} | {diagnosis.past_first_stage:.4f} | {np.median(variance):.2g} | "
                f"{np.quantile(variance, 0.99):.2g} | {problems} | {seconds:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
