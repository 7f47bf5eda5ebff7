"""Simulation-based calibration of every acceptance test: p-values, ranks and wall times.

Runs the configurations of ``tests/test_sbc.py`` (loaded from that file, so the settings are the
tests' own: Gaussian mean N = 10⁴, d = 1, K = 100, prior N(0, 0.1), random walk of 2 posterior sd,
seed 1804, level 0.01, 10 bins) and prints each result, with the load average before it:

    python benchmarks/bench_sbc.py --size full exact_metropolis minibatch_barker wrong tuna
    python benchmarks/bench_sbc.py --size small exact_metropolis minibatch_barker wrong

``small``: L = 500 × 19 kept draws (thin 10, warm-up 50), the default suite's; ``full``:
L = 1000 × 99 kept draws (thin 10, warm-up 100), the slow suite's. Names: the keys of
``EVERY_TEST`` in the test file, ``tuna`` and ``wrong`` (minibatch Barker without X_corr).
Results and their reading: ``docs/calibration.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import sys
import time
import warnings

import tallmcmc

TESTS = pathlib.Path(__file__).resolve().parent.parent / "tests"


def load_tests():
    sys.path.insert(0, str(TESTS))
    spec = importlib.util.spec_from_file_location("test_sbc", TESTS / "test_sbc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="+")
    parser.add_argument("--size", choices=("small", "full"), default="small")
    args = parser.parse_args()
    t = load_tests()
    settings = t.FULL if args.size == "full" else t.SMALL
    for name in args.names:
        began, load = time.time(), os.getloadavg()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if name == "tuna":
                result = t.calibrate(t.tuna_for(t.TUNA_PROBLEM), settings, t.TUNA_PROBLEM)
            elif name == "wrong":
                result = t.calibrate(tallmcmc.minibatch_barker(50, correction=t._ZeroCorrection()), settings)
            else:
                result = t.calibrate(t.EVERY_TEST[name](), settings)
        print(f"=== {name} ({args.size}) load average before {load} wall {time.time() - began:.1f} s", flush=True)
        print(result, flush=True)
        for warning in caught:
            print("WARNING:", warning.message, flush=True)


if __name__ == "__main__":
    main()
