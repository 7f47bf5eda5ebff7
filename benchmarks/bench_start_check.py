"""sample_tall's one-off data use by source, and all-in points per effective draw (issue 26: the start check).

For each N in ``--num-data`` (default 10⁶ and 10⁷): untempered logistic regression
``logistic_regression.simulate(N, --dimension, seed=0)`` (d = 10, float32, prior N(0, I)),
``sample_tall(model, zeros(d))`` with its defaults (4 chains × 2,000 draws, 200 warm-up steps, seed 0). Prints, as
JSON lines and a Markdown table: ``result.diagnosis.setup_passes`` by source, their sum, warm-up and kept passes,
the decision, bulk ESS (min over coordinates), all-in data points per effective draw (setup, warm-up and kept
draws), r̂, and the wall time with the load (``os.getloadavg``, 1 min) around it. Points, passes and ESS do not
depend on the load; the seconds do.

To compare with the code before a change, run it with that code first on the path, e.g.::

    git archive <commit> src | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before/src python benchmarks/bench_start_check.py
    python benchmarks/bench_start_check.py
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import warnings

import jax
import jax.numpy as jnp

import tallmcmc
from tallmcmc.examples import logistic_regression


def measure(num_data: int, dimension: int) -> dict:
    model = logistic_regression.model(*logistic_regression.simulate(num_data, dimension, seed=0))
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = tallmcmc.sample_tall(model, jnp.zeros(dimension), progress=False)
    wall = time.perf_counter() - start
    diagnosis = result.diagnosis
    return {
        "N": num_data,
        "d": dimension,
        "code": os.path.dirname(tallmcmc.__file__),
        "decision": diagnosis.decision,
        "setup_passes": diagnosis.setup_passes,
        "setup_total": sum(diagnosis.setup_passes.values()),
        "warmup_passes": diagnosis.warmup_passes,
        "sampling_passes": diagnosis.sampling_passes,
        "ess_bulk_min": diagnosis.ess_bulk_min,
        "points_per_ess_all_in": result.total_data_used / diagnosis.ess_bulk_min,
        "r_hat_max": diagnosis.r_hat_max,
        "wall_seconds": wall,
        "load": [load, os.getloadavg()[0]],
        "warnings": [str(warning.message)[:160] for warning in caught],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-data", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--dimension", type=int, default=10)
    args = parser.parse_args()
    started = datetime.datetime.now(datetime.UTC)
    print(f"# {' '.join(sys.argv)}  ({started:%Y-%m-%d %H:%M} UTC, jax {jax.__version__})", flush=True)
    rows = []
    for num_data in args.num_data:
        rows.append(measure(num_data, args.dimension))
        print(json.dumps(rows[-1]), flush=True)
    print(
        "\n| N | decision | setup passes (by source) | warm-up passes | kept passes | ESS min | all-in pts/ESS | r̂ max | wall s (load) |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|---|")
    for row in rows:
        sources = ", ".join(f"{name} {passes:.3g}" for name, passes in row["setup_passes"].items())
        print(
            f"| {row['N']:.0e} | {row['decision']} | {row['setup_total']:.3g} ({sources}) | {row['warmup_passes']:.3g} | "
            f"{row['sampling_passes']:.3g} | {row['ess_bulk_min']:,.0f} | {row['points_per_ess_all_in']:,.0f} | "
            f"{row['r_hat_max']:.4f} | {row['wall_seconds']:.1f} ({row['load'][0]:.1f}–{row['load'][1]:.1f}) |"
        )


if __name__ == "__main__":
    main()
