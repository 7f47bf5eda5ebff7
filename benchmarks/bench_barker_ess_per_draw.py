"""ESS per draw of Barker and Metropolis acceptance on proposals drawn from the target itself (docs/sample_tall.md).

Usage::

    python benchmarks/bench_barker_ess_per_draw.py [--steps 200000]

A 1-D standard normal target and an independence proposal equal to it, so the log acceptance ratio is 0 for every
move: Metropolis accepts all (ESS per draw 1), Barker accepts with probability ½, which gives a/(2 − a) = ⅓.
ESS is ArviZ's bulk ESS (``tallmcmc.interop.arviz.ess``).
"""

from __future__ import annotations

import argparse

import numpy as np

from tallmcmc.interop import arviz as arviz_bridge


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    proposals, uniforms = rng.standard_normal(args.steps), rng.random(args.steps)
    for rule, probability in (("Barker", 0.5), ("Metropolis", 1.0)):  # g(0) = 1/(1 + e⁰), min(1, e⁰)
        accepted = uniforms < probability
        # the chain holds the last accepted proposal (0 before the first)
        last = np.maximum.accumulate(np.where(accepted, np.arange(args.steps), -1))
        chain = np.where(last >= 0, proposals[np.maximum(last, 0)], 0.0)
        ess = float(np.ravel(arviz_bridge.ess(chain[None, :]))[0])
        print(f"{rule}: acceptance {accepted.mean():.3f}, ESS per draw {ess / args.steps:.3f}")


if __name__ == "__main__":
    main()
