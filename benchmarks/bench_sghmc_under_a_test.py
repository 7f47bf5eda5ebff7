"""SGHMC with and without a Metropolis–Hastings test on an exact Gaussian posterior (issue 25).

Usage::

    python benchmarks/bench_sghmc_under_a_test.py

The registry's tempered Gaussian (``tests/analytic_models.TEMPERED_2D``: N = 10⁴, K = 100, d = 2), 4 chains ×
2,000 steps from exact posterior draws, seed 3; SGHMC with α = 0.1, b = 200 at η·λ = 0.01, 0.05, 0.2 (λ the
posterior precision), under ``always_accept`` (plain SGHMC), ``minibatch_barker(50)`` and ``exact_metropolis``
with the proposal ratio taken as 0 (``allow_inexact_proposal=True``, as Chen et al. 2016 ran it). Prints each
run's variance ratio per coordinate, its moment check and its acceptance (``docs/minibatch_hamiltonian.md``).
"""

from __future__ import annotations

import pathlib
import sys
import warnings

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from analytic_models import TEMPERED_2D as TARGET

import tallmcmc
from tallmcmc.testing import run_and_check


def main() -> None:
    precision = 1.0 / float(np.min(TARGET.variance))
    starts = TARGET.starts(None, 4)
    print("| η·λ | test | variance / true | check | acceptance |")
    print("|---|---|---|---|---|")
    for step in (0.01, 0.05, 0.2):
        for test, options in (
            (tallmcmc.always_accept(), {}),
            (tallmcmc.minibatch_barker(50), {"allow_inexact_proposal": True}),
            (tallmcmc.exact_metropolis(), {"allow_inexact_proposal": True}),
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result, check = run_and_check(
                    TARGET.model,
                    tallmcmc.sghmc(step / precision, 0.1, 200),
                    test,
                    TARGET.mean,
                    TARGET.variance,
                    initial_positions=starts,
                    num_samples=2000,
                    seed=3,
                    **options,
                )
            draws = np.asarray(result.positions).reshape(-1, TARGET.mean.size)
            ratios = ", ".join(f"{value:.2f}" for value in draws.var(axis=0) / TARGET.variance)
            verdict = "passes" if check.passed else "fails"
            print(
                f"| {step} | {test.name} | {ratios} | {verdict} | {np.mean(result.info['accepted']):.3f} |", flush=True
            )


if __name__ == "__main__":
    main()
