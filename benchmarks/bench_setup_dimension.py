"""sample_tall's setup at d between 100 and 200: fast_setup or find_mode (``FAST_SETUP_MAX_DIMENSION``).

Logistic regression (``logistic_regression.simulate``), N rows, d coordinates; for each limit given, in this
process, ``sample_tall`` with its defaults with ``automatic.FAST_SETUP_MAX_DIMENSION`` set to it (d above the limit:
``find_mode``), timed with compilation, with the setup passes by source, and every coordinate's
|mean − ref|/MCSE and sd ratio against ``logistic_regression.laplace_reference`` (float64). Run each limit in a
fresh process on an empty cache folder for first-run figures:

    TALLMCMC_COMPILATION_CACHE=/tmp/a python benchmarks/bench_setup_dimension.py 1500000 150 100
    TALLMCMC_COMPILATION_CACHE=/tmp/b python benchmarks/bench_setup_dimension.py 1500000 150 200
"""

import sys
import time
import warnings

import numpy as np

import tallmcmc
import tallmcmc.automatic as automatic
from tallmcmc.examples import logistic_regression
from tallmcmc.interop import arviz as arviz_bridge


def main() -> None:
    num_data, dimension = int(sys.argv[1]), int(sys.argv[2])
    covariates, response = logistic_regression.simulate(num_data, dimension, seed=0)
    model = logistic_regression.model(covariates, response)
    _, covariance, mean = logistic_regression.laplace_reference(covariates, response)
    sd = np.sqrt(np.diag(covariance))
    for limit in [int(value) for value in sys.argv[3:]]:
        automatic.FAST_SETUP_MAX_DIMENSION = limit
        began = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = tallmcmc.sample_tall(model, progress=False)
        seconds = time.perf_counter() - began
        draws = np.asarray(result.positions, np.float64)
        ess = np.ravel(arviz_bridge.ess(draws))
        z = np.abs(draws.mean((0, 1)) - mean) / (draws.std((0, 1)) / np.sqrt(ess))
        ratio = draws.std((0, 1), ddof=1) / sd
        passes = result.diagnosis.setup_passes
        print(
            f"limit {limit}: {seconds:.1f} s, {result.diagnosis.decision}, setup {sum(passes.values()):.2f} passes "
            f"{ {name: round(value, 2) for name, value in passes.items()} }, max |z| {z.max():.2f}, sd ratio "
            f"{ratio.min():.3f}–{ratio.max():.3f}, ESS min {ess.min():.0f}, warnings {[str(w.message)[:60] for w in caught]}",
            flush=True,
        )


if __name__ == "__main__":
    main()
