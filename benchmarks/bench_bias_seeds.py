"""One target of ``tallmcmc reproduce bias`` over many chain seeds, pooled: errors too small for one run to settle.

Each seed is the reproduction run with ``--seed S`` (8 chains, the same data); the variance z of each
coordinate is summed over seeds and divided by √(seeds) (the seeds' chains are independent), and the
sd ratios are averaged with their standard error.

    python benchmarks/bench_bias_seeds.py --target gmm --seeds 0-12 \\
        --methods minibatch_barker_pilot minibatch_barker exact_barker
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def seed_list(text: str) -> list[int]:
    if "-" in text:
        first, last = (int(part) for part in text.split("-"))
        return list(range(first, last + 1))
    return [int(part) for part in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="gmm", choices=("heavy", "small", "gmm"))
    parser.add_argument("--seeds", type=seed_list, default=seed_list("0-12"), help="e.g. 0-12 or 1,2,3")
    parser.add_argument("--methods", nargs="+", default=["minibatch_barker_pilot", "minibatch_barker", "exact_barker"])
    args = parser.parse_args()
    rows: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for seed in args.seeds:
            out = Path(folder) / str(seed)
            command = [sys.executable, "-m", "tallmcmc", "reproduce", "bias", "--targets", args.target, "--methods"]
            command += [*args.methods, "--seed", str(seed), "--out", str(out)]
            subprocess.run(command, check=True, capture_output=True)
            methods = json.loads((out / "summary.json").read_text())["targets"][args.target]["methods"]
            for key, summary in methods.items():
                rows.setdefault(key, []).append(summary)
            line = "  ".join(
                f"{key} {' '.join(f'{z:+.1f}' for z in summary['variance_z'])}" for key, summary in methods.items()
            )
            print(f"seed {seed:3d}: var z  {line}", flush=True)
    count = len(args.seeds)
    print(f"\npooled over {count} seeds ({args.target}):")
    for summaries in rows.values():
        variance_z = np.array([summary["variance_z"] for summary in summaries])
        ratios = np.array([summary["sd_ratio"] for summary in summaries])
        points = np.mean([summary["data_per_step"] for summary in summaries])
        pooled = variance_z.sum(0) / np.sqrt(count)
        spread = ratios.std(0, ddof=1) / np.sqrt(count)
        print(
            f"  {summaries[0]['display_name']:28s} pooled var z {' '.join(f'{z:+.1f}' for z in pooled)}  sd ratio "
            f"{' '.join(f'{r:.3f} ± {s:.3f}' for r, s in zip(ratios.mean(0), spread))}  points/step {points:,.0f}"
        )


if __name__ == "__main__":
    main()
