"""How often a step's minibatch ends with Var(Δ*) above σ² = 1, with and without ``pilot=True``.

The minibatch Barker test adds X_nc ~ N(0, σ² − s²) to Δ* and cannot take noise away: a step whose estimated
Var(Δ*) is above σ² decides with more noise than the Barker test allows, which flattens its decision (and widens
the chain). Without the pilot the stop itself requires s² < σ² of the averaged points; with it, the size is chosen
from the pilot's variance and the points after the pilot may come out above; the stop's margin on the pilot's
prediction (``PILOT_MARGIN``, ``--margin`` to try another) keeps that rare (``docs/minibatch_error.md``, "Skewed log
ratios"). Runs ``tallmcmc reproduce bias``'s target (8 chains, the reproduction's run length, starts and step)
with ``minibatch_barker`` and ``minibatch_barker_pilot`` and prints, over the subsampled steps after burn-in, the
fraction with Var(Δ*) > 1 and > 1.5, the mean excess E[max(s² − 1, 0)] and the median s².

    python benchmarks/bench_pilot_variance.py --target heavy
    python benchmarks/bench_pilot_variance.py --target gmm --seed 3
    python benchmarks/bench_pilot_variance.py --target heavy --margin 0   # the pilot as first built
"""

from __future__ import annotations

import argparse

import numpy as np

from tallmcmc.acceptance import minibatch_barker
from tallmcmc.reproduce import bias


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="heavy", choices=("heavy", "small", "gmm"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--margin", type=float, default=None, help=f"the pilot's PILOT_MARGIN (default {minibatch_barker.PILOT_MARGIN})"
    )
    args = parser.parse_args()
    if args.margin is not None:
        minibatch_barker.PILOT_MARGIN = args.margin
    defaults = argparse.ArgumentParser()
    bias.add_arguments(defaults)
    (target,) = bias.build_targets(defaults.parse_args(["--targets", args.target]), [args.target])
    for key in ("minibatch_barker", "minibatch_barker_pilot"):
        result = bias.sample_target(target, bias.METHODS[key].build(target.settings, target), 8, args.seed)
        variance = np.asarray(result.info["variance"], np.float64)[:, target.burn_in :]
        subsampled = ~np.asarray(result.info["used_full_data"], bool)[:, target.burn_in :]
        variance = variance[subsampled]
        print(
            f"{key:24s} Var(Δ*) > σ²: {np.mean(variance > 1):.4f}, > 1.5: {np.mean(variance > 1.5):.4f}, "
            f"E[max(s² − 1, 0)] {np.mean(np.maximum(variance - 1, 0)):.4f}, median s² {np.median(variance):.3f}, "
            f"points {float(np.mean(result.info['data_used_by_test'])):,.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
