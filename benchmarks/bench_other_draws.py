"""What a second process compiles when it runs the same sampler for another number of draws.

Usage::

    python benchmarks/bench_other_draws.py                      # 1,000 then 1,200 draws, no warm-up
    python benchmarks/bench_other_draws.py --draws 3000 3600 --warmup 500

Each run is a fresh process (``sample`` on a logistic regression, N = 20,000, d = 5, 4 chains, a random walk under the
minibatch Barker test, default 20 chunks) sharing one new compilation-cache folder: the first compiles everything,
the second finds what it can in the kept programs and JAX's persistent cache. Printed per run: XLA's compile seconds
and lowering seconds (JAX's own events), and the second run's compile seconds as a ratio of the first's, the same
machine in the same minute. The chain program's loop is compiled for a power of two of steps
(``tallmcmc.sampling.program.compiled_length``): chunks of 50 and 60 steps share one program.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

RUN = """
import collections, json, sys, time, warnings
import jax, jax.numpy as jnp, tallmcmc
from tallmcmc.examples import logistic_regression
seconds = collections.Counter()
jax.monitoring.register_event_duration_secs_listener(lambda event, duration, **_: seconds.update({event: duration}))
warnings.simplefilter("ignore")
draws, warmup = int(sys.argv[1]), int(sys.argv[2])
model = logistic_regression.model(*logistic_regression.simulate(20_000, 5, seed=0))
began = time.perf_counter()
tallmcmc.sample(model, tallmcmc.random_walk(0.01), tallmcmc.minibatch_barker(100), jnp.zeros(5),
                num_samples=draws, num_warmup=warmup, num_chains=4, progress=False, seed=5)
print("RESULT " + json.dumps({"call": time.perf_counter() - began,
                              "compile": seconds["/jax/core/compile/backend_compile_duration"],
                              "lower": seconds["/jax/core/compile/jaxpr_to_mlir_module_duration"]}))
"""


def run(draws: int, warmup: int, folder: str) -> dict:
    environment = {**os.environ, "TALLMCMC_COMPILATION_CACHE": folder}
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(draws), str(warmup)],
        capture_output=True,
        text=True,
        env=environment,
        check=True,
    )
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, nargs=2, default=[1000, 1200], metavar="N", help="the two runs' draws")
    parser.add_argument("--warmup", type=int, default=0, help="warm-up steps of both runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tallmcmc-other-draws-") as folder:
        first, second = (run(draws, args.warmup, folder) for draws in args.draws)
    for draws, result in zip(args.draws, (first, second)):
        print(
            f"{draws:>6} draws, warm-up {args.warmup}: XLA compile {result['compile']:.2f} s, "
            f"lowering {result['lower']:.2f} s, call {result['call']:.2f} s"
        )
    print(f"second run's XLA compile / first's: {second['compile'] / first['compile']:.2f}")


if __name__ == "__main__":
    main()
