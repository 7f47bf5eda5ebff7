"""Where a ``sample_tall`` call's wall time goes, phase by phase: its progress lines, time-stamped.

Each run is a fresh Python process, as a user's script is, on one cache folder of its own for this command (so run 1
is a first run, with an empty cache, and the runs after it are second runs of the same script). In each,
``logistic_regression.simulate(N, d, seed=0)`` and ``sample_tall(model, num_samples=S, progress=True)``; the lines
``sample_tall`` prints as it moves from phase to phase (fast setup, warm-up, the choice of test, the kept draws, …)
are stamped with the seconds since the call began, and with the compilation seconds (JAX's own duration events:
tracing, lowering, XLA or loading from the cache) spent since the previous line — wall seconds during which at least
one compilation was under way (``_timing.CompileClock.wall_seconds``), so a compilation in a thread beside the
setup counts once. A phase's time is the span from its
line to the next. JAX dispatches asynchronously, so work queued at the end of a phase may be paid at the next
phase's first synchronisation; the spans are what a user waits for, not kernel times.

    python benchmarks/bench_phases.py --num-data 1000000 --runs 2
    python benchmarks/bench_phases.py --runs 2 --profile 60   # and the last run's functions under cProfile

For the gap on a GPU between a warm call and its compilation plus sampling (``benchmarks/device_check.sh`` runs
this there).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent

CHILD = """
import sys, time
sys.path.insert(0, {here!r})
import jax, numpy as np
from _timing import CompileClock
clock = CompileClock()
import tallmcmc
import tallmcmc.automatic
from tallmcmc.examples import logistic_regression
covariates, response = logistic_regression.simulate({n}, {d}, seed=0)
model = logistic_regression.model(covariates, response)
jax.block_until_ready(model.data)
stamps = []
began = time.perf_counter()
def stamped(*words, **_):
    stamps.append((time.perf_counter() - began, clock.wall_seconds, " ".join(str(w) for w in words)))
tallmcmc.automatic.print = stamped  # sample_tall's progress lines (its module's print)
import cProfile, pstats
profiler = cProfile.Profile() if {profile} else None
clock.reset()
began = time.perf_counter()
if profiler is not None:
    profiler.enable()
result = tallmcmc.sample_tall(model, num_samples={draws}, progress=True)
jax.block_until_ready(result.positions)
if profiler is not None:
    profiler.disable()
stamps.append((time.perf_counter() - began, clock.wall_seconds, "(returned)"))
if profiler is not None:  # the call's functions by their cumulative time (profiling slows the call itself)
    statistics = pstats.Stats(profiler)
    rows = sorted(statistics.stats.items(), key=lambda item: -item[1][3])[: {profile}]
    for (file, line, name), (_, calls, own, cumulative, _) in rows:
        where = "/".join(file.split("/")[-2:])
        print(f"PROFILE {{cumulative:.3f}} {{own:.3f}} {{calls}} {{where}}:{{line}}({{name}})")
marks = [(0.0, 0.0, "(called)"), *stamps]  # a phase runs from its line to the next
for (at, compiled, line), (until, compiled_until, _) in zip(marks, marks[1:]):
    print(f"PHASE {{until - at:.3f}} {{compiled_until - compiled:.3f}} {{line[:110]}}")
print(f"TOTAL {{stamps[-1][0]:.3f}} {{stamps[-1][1]:.3f}} {{result.sampling_seconds:.3f}}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-data", type=int, default=1_000_000)
    parser.add_argument("--dimension", type=int, default=10)
    parser.add_argument("--draws", type=int, default=2000, help="kept draws per chain")
    parser.add_argument("--runs", type=int, default=2, help="fresh processes on one cache folder (1: a first run)")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="K",
        help="run the last process under cProfile and list its K functions of most cumulative time (0: off)",
    )
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="tallmcmc-phases-")

    def code(profile: int) -> str:
        return CHILD.format(here=str(HERE), n=args.num_data, d=args.dimension, draws=args.draws, profile=profile)

    import jax  # only to name the device

    print(
        f"N = {args.num_data:,}, d = {args.dimension}, {args.draws} draws × 4 chains; device "
        f"{jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}; load "
        f"{os.getloadavg()[0]:.2f} at {time.strftime('%H:%M UTC', time.gmtime())}"
    )
    for run in range(1, args.runs + 1):
        environment = {**os.environ, "TALLMCMC_COMPILATION_CACHE": cache}
        profile = args.profile if run == args.runs else 0
        completed = subprocess.run(
            [sys.executable, "-c", code(profile)], capture_output=True, text=True, env=environment
        )
        if completed.returncode != 0:
            raise RuntimeError(completed.stderr[-3000:])
        label = "first run (empty cache)" if run == 1 else f"run {run} (cache warm)"
        print(f"\n{label}\n\n| phase (sample_tall's line) | s | of it compiling |\n|---|---:|---:|")
        for line in completed.stdout.splitlines():
            if line.startswith("PHASE "):
                _, span, compiled, text = line.split(" ", 3)
                print(f"| {text.replace('|', '/')} | {float(span):.2f} | {float(compiled):.2f} |")
            elif line.startswith("TOTAL "):
                _, total, compiled, sampling = line.split()
                print(
                    f"| **the call** | **{float(total):.2f}** | **{float(compiled):.2f}** |\n\n"
                    f"(`result.sampling_seconds` {float(sampling):.2f} s)"
                )
        profiled = [line.split(" ", 4)[1:] for line in completed.stdout.splitlines() if line.startswith("PROFILE ")]
        if profiled:
            print(
                "\nunder cProfile, by cumulative time\n\n| cumulative s | own s | calls | function |\n|---:|---:|---:|---|"
            )
            for cumulative, own, calls, where in profiled:
                print(f"| {cumulative} | {own} | {calls} | `{where}` |")


if __name__ == "__main__":
    main()
