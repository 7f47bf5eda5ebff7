"""Compilation with and without JAX's persistent cache, and where a first run's compilation goes (issue 26 item 2).

Usage::

    python benchmarks/bench_compilation.py                    # quickstart, recipe, sample_tall at N = 10⁶
    python benchmarks/bench_compilation.py --only sample_tall --where   # plus every compilation by source line
    python benchmarks/bench_compilation.py --only sample_tall --where warm   # the same for the warm (second) run
    python benchmarks/bench_compilation.py --only sample_tall --where other  # ... for the run on other data
    TALLMCMC_XLA_OPTIONS=default python benchmarks/bench_compilation.py # XLA's own options (no level-1 LLVM)
    git archive b28ec5c src | tar -x -C /tmp/before       # another tree, run alternately with this one:
    python benchmarks/bench_compilation.py --only sample_tall --against /tmp/before/src --repeats 2
    python benchmarks/bench_compilation.py --only sample_tall --num-data 10000000      # at N = 10⁷
    python benchmarks/bench_compilation.py --only sample_tall --draws 20000 --against /tmp/before/src  # sampling
    python benchmarks/bench_compilation.py --only asynchronous --against /tmp/before/src   # the other driver
    python benchmarks/bench_compilation.py --only tempered --against /tmp/before/src --repeats 3   # drawn again
    python benchmarks/bench_compilation.py --only zero_inflation --against /tmp/before/src --repeats 3  # warmed again

Scripts (each a fresh ``python`` process, so every import and compilation counts as a user waits for it):

* ``quickstart``: the README's quickstart (mixture N = 10⁵, 4 chains × 3,000 draws, minibatch Barker);
* ``recipe``: the README's control-variate recipe by hand (``find_mode``, ``taylor_control_variate``, proxy HMC,
  ``minibatch_barker(100, cv)``, 4 chains, 500 warm-up steps, 1,000 draws) on logistic regression, N = 10⁶, d = 10;
* ``sample_tall``: ``tallmcmc.sample_tall`` on ``examples.logistic_regression.simulate(N = 10⁶, d = 10)``,
  4 chains × 2,000 draws (data simulated in the process, not timed in "run s").
* ``tempered``: ``sample_tall`` on the N = 1,000 normal mixture from ``tests/test_sample_tall.py``'s start, seed 4:
  its kept draws' tails stick, and it draws again with the momentum tempered at λ = 2, then 3 (three warm-ups and
  three sets of kept draws; ``docs/compilation.md``, "One program for every λ").
* ``zero_inflation``: ``sample_tall`` on ``examples.zero_inflated_poisson`` at N = 20,000 (no zero inflation in the
  data), seed 0: its plain warm-up chooses the exact test, the proxy following its outlying rows cannot pay, and it
  warms up again with the momentum tempered under the exact test, which the kept draws continue
  (``docs/compilation.md``, "The tempered warm-up's program runs the kept draws").
* ``asynchronous``: ``find_mode``, ``taylor_control_variate``, random walk + ``minibatch_barker(100, cv)``, 8 chains,
  200 warm-up + 2,000 draws with ``driver="asynchronous"``, logistic regression N = 10⁵, d = 10.

Printed per script and run (off: ``TALLMCMC_COMPILATION_CACHE=0``; cold: an empty cache folder; warm: the same
folder again; other data: the same folder, the script's data simulated with ``seed=1`` instead of 0 — a user's
next data set of the same shapes): the process's wall seconds, the seconds of the run itself (from the first tallmcmc call to the
draws), **compilation** as JAX reports it (tracing + lowering to MLIR + XLA's compilation, or its load from the
cache: JAX's own duration events, every program of the run, added up), **compiling, wall**: the time during which
at least one compilation was under way (the union of the events' intervals: less than their sum where threads
compile at once, as ``sample_tall``'s compile-ahead thread does beside its setup), its share of the run, and
``result.sampling_seconds``.
With ``--where`` (or ``--where warm``, ``--where other``), the first (or that) run also lists every compilation by the tallmcmc source line that caused it (its
tracing, lowering and XLA seconds, and the number of XLA programs). With ``--against SRC``, every script also runs
with ``PYTHONPATH=SRC`` (another tree's ``src``, e.g. from ``git archive``), the two trees alternating ``--repeats``
times, each on a cache folder of its own. Same machine, same run; load printed.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from _timing import cpu_probe_ms

HERE = pathlib.Path(__file__).resolve().parent  # the children import _timing from here
SCRIPTS = {
    "quickstart": """
import jax.numpy as jnp, tallmcmc
from tallmcmc.examples import gaussian_mixture
model = gaussian_mixture.model(num_data=100_000, temperature=1_000.0, seed=0)
began = time.perf_counter()
result = tallmcmc.sample(model, proposal=tallmcmc.random_walk(0.15), test=tallmcmc.minibatch_barker(batch_size=50),
                         initial_position=jnp.array([0.0, 1.0]), num_samples=3000, num_chains=4, progress=False)
""",
    "recipe": """
import jax.numpy as jnp, tallmcmc
from tallmcmc.examples import logistic_regression
model = logistic_regression.model(*logistic_regression.simulate(1_000_000, 10, seed=0))
began = time.perf_counter()
mode = tallmcmc.find_mode(model, jnp.zeros(10))
cv = tallmcmc.taylor_control_variate(model, mode.position)
proposal = tallmcmc.proxy_hamiltonian(cv, 0.5, 3, preconditioner=tallmcmc.laplace_covariance(mode))
test = tallmcmc.minibatch_barker(100, control_variate=cv)
result = tallmcmc.sample(model, proposal, test, initial_position=mode.position, num_chains=4, num_warmup=500,
                         num_samples=1000, progress=False)
""",
    "sample_tall": """
import tallmcmc
from tallmcmc.examples import logistic_regression
model = logistic_regression.model(*logistic_regression.simulate(1_000_000, 10, seed=0))
began = time.perf_counter()
result = tallmcmc.sample_tall(model, num_chains=4, num_samples=2000, progress=False)
""",
    "tempered": """
import jax.numpy as jnp, tallmcmc
from tallmcmc.examples import normal_mixture
model = normal_mixture.model(normal_mixture.simulate(1000, seed=0))
began = time.perf_counter()
result = tallmcmc.sample_tall(model, jnp.array([-1.0, 0.9, 0.0, -0.3, -0.4]), seed=4, progress=False)
""",
    "zero_inflation": """
import tallmcmc
from tallmcmc.examples import zero_inflated_poisson
model = zero_inflated_poisson.model(*zero_inflated_poisson.simulate(20_000))
began = time.perf_counter()
result = tallmcmc.sample_tall(model, seed=0, progress=False)
""",
    "asynchronous": """
import jax.numpy as jnp, tallmcmc
from tallmcmc.examples import logistic_regression
model = logistic_regression.model(*logistic_regression.simulate(100_000, 10, seed=0))
began = time.perf_counter()
mode = tallmcmc.find_mode(model, jnp.zeros(10))
cv = tallmcmc.taylor_control_variate(model, mode.position)
result = tallmcmc.sample(model, tallmcmc.random_walk(0.01), tallmcmc.minibatch_barker(100, control_variate=cv),
                         initial_position=mode.position, num_chains=8, num_warmup=200, num_samples=2000,
                         progress=False, driver="asynchronous")
""",
}
PROLOGUE = """
import json, sys, time, warnings, logging, traceback, collections
warnings.simplefilter("ignore")
import jax
sys.path.insert(0, "{here}")
from _timing import CompileClock
clock = CompileClock()  # compilation added up, and as wall time (threads compile at once)
durations = collections.defaultdict(float)
def _on(event, duration, **_):
    durations[event.rsplit("/", 1)[-1]] += duration
jax.monitoring.register_event_duration_secs_listener(_on)
places = collections.defaultdict(lambda: collections.defaultdict(float))
class _Where(logging.Handler):  # the tallmcmc frame that asked for each compilation (--where)
    def emit(self, record):
        message = record.getMessage()
        if not message.startswith("Finished"):
            return
        frames = [f for f in traceback.extract_stack() if "/tallmcmc/" in f.filename]
        where = (frames[-1].filename.split("/tallmcmc/")[-1] + f":{frames[-1].lineno} {frames[-1].name}") if frames else "?"
        kind = "trace" if "tracing" in message else "mlir" if "MLIR" in message else "xla"
        try:
            places[where][kind] += float(message.split(" in ")[-1].split()[0])
        except ValueError:
            return
        places[where]["programs"] += kind == "xla"
if {where}:
    jax.config.update("jax_log_compiles", True)
    for name in ("jax._src.interpreters.pxla", "jax._src.dispatch", "jax._src.compiler"):
        logger = logging.getLogger(name)
        logger.addHandler(_Where()); logger.setLevel(logging.DEBUG); logger.propagate = False
"""
EPILOGUE = """
seconds = time.perf_counter() - began
# backend_compile_duration wraps XLA's compilation or, on a persistent-cache hit, the load from the cache
print("RESULT " + json.dumps({"run": seconds, "compile": clock.seconds, "compile_wall": clock.wall_seconds,
                              "parts": dict(durations),
                              "sampling": result.sampling_seconds, "where": {k: dict(v) for k, v in places.items()}}))
"""


def run(
    name: str, environment: dict[str, str], where: bool = False, num_data: int = 1_000_000, seed: int = 0, draws=2000
) -> dict:
    script = SCRIPTS[name].replace("1_000_000", f"{num_data:_}")  # the recipe's and sample_tall's N
    script = script.replace("num_samples=2000", f"num_samples={draws}")  # sample_tall's draws per chain
    script = script.replace("seed=0", f"seed={seed}")
    code = PROLOGUE.replace("{where}", str(where)).replace("{here}", str(HERE)) + script + EPILOGUE
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
    parser.add_argument("--only", nargs="+", default=["quickstart", "recipe", "sample_tall"], choices=list(SCRIPTS))
    parser.add_argument(
        "--where",
        nargs="?",
        const="first",
        choices=("first", "warm", "other"),
        help="list the first (default), the warm or the other data's run's compilations by source line",
    )
    parser.add_argument("--against", metavar="SRC", help="also run another tree's src (PYTHONPATH), alternating")
    parser.add_argument("--repeats", type=int, default=1, help="rounds of the trees, alternating (default 1)")
    parser.add_argument("--num-data", type=int, default=1_000_000, help="N of the recipe and sample_tall scripts")
    parser.add_argument("--draws", type=int, default=2000, help="sample_tall's draws per chain (its sampling speed)")
    args = parser.parse_args()
    print(
        "load {:.2f} {:.2f} {:.2f}; CPU probe {:.1f} ms (_timing.cpu_probe_ms); TALLMCMC_XLA_OPTIONS={}\n".format(
            *os.getloadavg(), cpu_probe_ms(), os.environ.get("TALLMCMC_XLA_OPTIONS", "")
        )
    )
    trees = [("this", {})] + ([("against", {"PYTHONPATH": args.against})] if args.against else [])
    print(
        "| script | tree | cache | process s | run s | compilation s | compiling, wall s | share of run (wall) | "
        "sampling s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    breakdowns = {}
    for name in args.only:
        for _ in range(args.repeats):
            for tree, source in trees:
                folder = tempfile.mkdtemp(prefix="tallmcmc-cache-")
                atexit.register(shutil.rmtree, folder, ignore_errors=True)  # the cache of this run only
                for label, environment in (
                    ("off", {"TALLMCMC_COMPILATION_CACHE": "0"}),
                    ("cold", {"TALLMCMC_COMPILATION_CACHE": folder}),
                    ("warm", {"TALLMCMC_COMPILATION_CACHE": folder}),
                    ("other data", {"TALLMCMC_COMPILATION_CACHE": folder}),
                ):
                    out = run(
                        name,
                        {**environment, **source},
                        where={"first": "off", "warm": "warm", "other": "other data"}.get(args.where) == label
                        and not source,
                        num_data=args.num_data,
                        seed=1 if label == "other data" else 0,
                        draws=args.draws,
                    )
                    if out["where"]:
                        breakdowns[name] = out["where"]
                    print(
                        f"| {name} | {tree} | {label} | {out['wall']:.2f} | {out['run']:.2f} | {out['compile']:.2f} | "
                        f"{out['compile_wall']:.2f} | {out['compile_wall'] / out['run']:.0%} | {out['sampling']:.2f} |",
                        flush=True,
                    )
    for name, places in breakdowns.items():
        programs = sum(int(parts.get("programs", 0)) for parts in places.values())
        run_name = {"warm": "warm run", "other": "run on other data"}.get(args.where, "first run")
        print(f"\n{name}, {run_name}: {programs} XLA programs; compilations by source line (seconds; XLA programs)\n")
        print("| source | total | tracing | lowering | XLA | programs |")
        print("|---|---:|---:|---:|---:|---:|")
        ranked = sorted(
            places.items(), key=lambda item: -(item[1].get("trace", 0) + item[1].get("mlir", 0) + item[1].get("xla", 0))
        )
        for where, parts in ranked:
            total = parts.get("trace", 0.0) + parts.get("mlir", 0.0) + parts.get("xla", 0.0)
            if total < 0.02:
                continue
            print(
                f"| `{where}` | {total:.3f} | {parts.get('trace', 0):.3f} | {parts.get('mlir', 0):.3f} | "
                f"{parts.get('xla', 0):.3f} | {int(parts.get('programs', 0))} |"
            )
    print("\nload {:.2f} {:.2f} {:.2f}; CPU probe {:.1f} ms".format(*os.getloadavg(), cpu_probe_ms()))


if __name__ == "__main__":
    main()
