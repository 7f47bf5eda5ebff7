"""Compilation with and without JAX's persistent cache (issue 26 item 2): the same script run twice in fresh
processes, the cache folder empty before the first run.

Usage::

    python benchmarks/bench_compilation.py                    # quickstart and sample_tall at N = 10⁶
    python benchmarks/bench_compilation.py --only quickstart

Scripts (each a fresh ``python`` process, so every import and compilation counts as a user waits for it):

* ``quickstart``: the README's quickstart (mixture N = 10⁵, 4 chains × 3,000 draws, minibatch Barker);
* ``sample_tall``: ``tallmcmc.sample_tall`` on ``examples.logistic_regression.simulate(N = 10⁶, d = 10)``,
  4 chains × 2,000 draws (data simulated in the process, not timed in "run s").

Printed per script and run (cold: empty cache; warm: the same folder again; off: ``TALLMCMC_COMPILATION_CACHE=0``):
the process's wall seconds, the seconds of the run itself (the ``sample``/``sample_tall`` call), the kept draws'
``compile_seconds`` as ``SamplingResult`` reports it, and the sampling seconds. Same machine, same run; load printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SCRIPTS = {
    "quickstart": """
import jax.numpy as jnp, tallmcmc
from tallmcmc.examples import gaussian_mixture
model = gaussian_mixture.model(num_data=100_000, temperature=1_000.0)
began = time.perf_counter()
result = tallmcmc.sample(model, proposal=tallmcmc.random_walk(0.15), test=tallmcmc.minibatch_barker(batch_size=50),
                         initial_position=jnp.array([0.0, 1.0]), num_samples=3000, num_chains=4, progress=False)
""",
    "sample_tall": """
import tallmcmc
from tallmcmc.examples import logistic_regression
model = logistic_regression.model(*logistic_regression.simulate(1_000_000, 10, seed=0))
began = time.perf_counter()
result = tallmcmc.sample_tall(model, num_chains=4, num_samples=2000, progress=False)
""",
}
EPILOGUE = """
seconds = time.perf_counter() - began
print("RESULT " + json.dumps({"run": seconds, "compile": result.compile_seconds, "sampling": result.sampling_seconds}))
"""


def run(name: str, environment: dict[str, str]) -> dict:
    code = "import json, time, warnings\nwarnings.simplefilter('ignore')\n" + SCRIPTS[name] + EPILOGUE
    began = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **environment}, timeout=1200
    )
    wall = time.perf_counter() - began
    if completed.returncode != 0:
        raise RuntimeError(completed.stderr[-3000:])
    line = next(line for line in completed.stdout.splitlines() if line.startswith("RESULT "))
    return {"wall": wall, **json.loads(line[len("RESULT ") :])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=list(SCRIPTS), choices=list(SCRIPTS))
    args = parser.parse_args()
    print("load {:.2f} {:.2f} {:.2f}\n".format(*os.getloadavg()))
    print("| script | cache | process s | run s | kept draws' compile s | sampling s |")
    print("|---|---|---|---|---|---|")
    for name in args.only:
        folder = tempfile.mkdtemp(prefix="tallmcmc-cache-")
        for label, environment in (
            ("off", {"TALLMCMC_COMPILATION_CACHE": "0"}),
            ("cold", {"TALLMCMC_COMPILATION_CACHE": folder}),
            ("warm", {"TALLMCMC_COMPILATION_CACHE": folder}),
        ):
            out = run(name, environment)
            print(
                f"| {name} | {label} | {out['wall']:.2f} | {out['run']:.2f} | {out['compile']:.2f} | "
                f"{out['sampling']:.2f} |",
                flush=True,
            )
    print("\nload {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
