"""A second warm-up that cannot pay, stopped early: ``sample_tall`` with the stop and without it, same process.

After a warm-up whose proxy misfits the posterior, ``sample_tall`` may warm up again with rows followed by the proxy
(or held in the test) and keeps that warm-up only where its measured cost per effective draw is lower. Since
2026-12-01 the second warm-up stops once the points its steps read show it cannot pay
(``tallmcmc.tall_outlying_looks.SECOND_WARMUP_STOP``; ``docs/sample_tall.md``, "Rows the proxy cannot follow"). This runs
``bench_user_models.py``'s models with ``sample_tall(model, seed=0)`` twice per round, the stop on and off
(``SECOND_WARMUP_STOP = inf``), alternating, and prints per run the passes over N the second warm-up read (and
whether it was kept), the call's wall time (compilation included), and whether the kept draws are the same bit for bit.

    python benchmarks/bench_second_warmup.py                       # zero_inflation at N = 20,000, 3 rounds
    python benchmarks/bench_second_warmup.py --only zero_inflation poisson --num-data 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from bench_user_models import MODELS

import tallmcmc
import tallmcmc.automatic


def second_warmup_passes(diagnosis) -> tuple[float, str]:
    """Passes over N of the second warm-up and whether it was kept (its first warm-up then counted instead)."""
    passes = diagnosis.setup_passes
    thrown = sum(value for name, value in passes.items() if name.startswith("warm-up with outlying rows"))
    if thrown:
        return thrown, "thrown away"
    if any(name.startswith("warm-up before the outlying rows") for name in passes):
        return 0.0, "kept"
    return 0.0, "none"


def run(model, stop: float, samples: int):
    tallmcmc.tall_outlying_looks.SECOND_WARMUP_STOP = stop
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tallmcmc.sample_tall(model, seed=0, progress=False, num_samples=samples)
    return result, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=["zero_inflation"], choices=list(MODELS))
    parser.add_argument("--num-data", type=int, default=20_000)
    parser.add_argument("--num-samples", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    default = tallmcmc.tall_outlying_looks.SECOND_WARMUP_STOP
    for name in args.only:
        model_fn, positional, keywords = MODELS[name](args.num_data, np.random.default_rng(7))
        model = tallmcmc.from_numpyro(model_fn, *positional, **keywords)
        seconds = {"stop": [], "no stop": []}
        for round_ in range(args.rounds):
            results = {}
            for label, stop in (
                (("stop", default), ("no stop", np.inf))
                if round_ % 2 == 0
                else (
                    ("no stop", np.inf),
                    ("stop", default),
                )
            ):
                result, wall = run(model, stop, args.num_samples)
                results[label] = result
                seconds[label].append(wall)
                passes, fate = second_warmup_passes(result.diagnosis)
                print(
                    f"{name} N={model.num_data:,} round {round_} {label:8s}: second warm-up {passes:,.0f} passes "
                    f"({fate}), all setup {sum(result.diagnosis.setup_passes.values()):,.0f} passes, "
                    f"decision {result.diagnosis.decision}, wall {wall:.2f} s",
                    flush=True,
                )
            same = all(
                np.array_equal(np.asarray(results["stop"].positions[k]), np.asarray(results["no stop"].positions[k]))
                for k in results["stop"].positions
            )
            print(f"  kept draws the same bit for bit: {same}", flush=True)
        tallmcmc.tall_outlying_looks.SECOND_WARMUP_STOP = default
        later = slice(1, None) if args.rounds > 1 else slice(None)  # round 0's first call compiles for both
        ratio = np.median(seconds["stop"][later]) / np.median(seconds["no stop"][later])
        print(f"{name}: median wall after round 0, stop / no stop = {ratio:.2f}", flush=True)


if __name__ == "__main__":
    main()
