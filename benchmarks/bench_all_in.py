"""Everything a user waits for and every point touched: ``sample_tall`` against NumPyro's HMCECS (issue 26 goals).

Each method runs in a fresh Python process, as a user's script would, and is charged from the moment it is called
(the data already simulated, the imports done) to its draws: every setup pass, the warm-up, and all compilation
(JAX's persistent cache off for both, ``TALLMCMC_COMPILATION_CACHE=0``; a second run with the cache on is printed
apart for ours). Data: ``logistic_regression.simulate(N, d, seed=0)``, prior N(0, I), 4 chains.

* **tallmcmc**: ``sample_tall(model, num_samples=S)`` with its defaults (fast setup, warm-up, the test it chooses).
  Points: ``result.total_data_used`` (setup, start check, warm-up, kept draws).
* **tallmcmc with a bound** (``--with-bound``): the same with
  ``bound=lambda cv: logistic_regression.tuna_bound(model, cv)``, so ``sample_tall`` also pilots the exact,
  Metropolis-type TunaMH test on the residuals and keeps it where it is cheaper (the bound's pass counted), in
  float64 (``jax_enable_x64`` and float64 data): in float32 the residuals' rounding exceeds the bound at N = 10⁶
  (``docs/tuna.md``, "Bounds and float32").
* **NUTS** (``--with-nuts``): NumPyro's NUTS on all the data from zeros, as a user would run it (no mode needed),
  500 warm-up and ``--hmcecs-draws`` draws per chain, chains one after the other (faster than vectorised on this
  CPU, RESULTS "Surprises"); points: N per leapfrog step, warm-up included.
* **HMCECS**: NumPyro ``HMCECS(NUTS(model), num_blocks=100, proxy=HMCECS.taylor_proxy({"beta": mode}))``, m = 1,000,
  500 warm-up and ``--hmcecs-draws`` draws per chain, chains one after the other (HMCECS cannot vectorise chains in
  numpyro 0.22). Its reference point is the mode from ``tallmcmc.fast_setup`` — the cheapest mode we know, charged
  to it in seconds and points (a user of HMCECS would need a mode from somewhere). Points as counted in
  ``bench_logistic.py`` (``run_numpyro``): the Taylor proxy's 3 passes, each step's block, estimator and NUTS
  leapfrog points, warm-up included.

Printed per N: seconds all in (and of it compilation: the wall time during which at least one of JAX's compile
events was under way, ``_timing.CompileClock.wall_seconds``), bulk ESS (min over coordinates),
ESS/s all in, ESS per 10⁶ points all in, the ratios ours / HMCECS, and the largest |mean − ref| / MCSE and
|sd / ref sd − 1| against a reference (the exact independence Metropolis sampler with the Laplace proposal,
``bench_logistic.reference_posterior``, cached in ``~/.cache/tallmcmc/bench``).

    python benchmarks/bench_all_in.py --sizes 1000000 10000000 --with-bound
    python benchmarks/bench_all_in.py --sizes 10000000 --reference-only   # build the cached reference first
    python benchmarks/bench_all_in.py --sizes 10000000 --with-bound --timeout 250 --json all_in.json  # on a GPU

``--peer-precision highest`` runs NUTS and HMCECS with ``JAX_DEFAULT_MATMUL_PRECISION=highest``: on a GPU JAX's
default float32 matrix product is TF32, and HMCECS's means were 13.7 MCSE off the reference at that default and 2.2
at full precision (``docs/precision.md``); tallmcmc's models run at full precision either way. No effect on a CPU.

Each row is printed (and, with ``--json``, written) as soon as its method finishes, so a method stopped by
``--timeout`` loses nothing before it; the header names the device JAX runs on. ``benchmarks/device_check.sh`` runs
the N = 10⁷ rows and the chain scaling on a lent GPU in one call.
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

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent

OURS = """
import tallmcmc
began = time.perf_counter()
result = tallmcmc.sample_tall(model, num_chains=4, num_samples={draws}, progress=False{options})
seconds = time.perf_counter() - began
draws = np.asarray(result.positions)
extra = dict(points=float(result.total_data_used), decision=result.diagnosis.decision,
             setup_passes=sum(result.diagnosis.setup_passes.values()), kept_compile=result.compile_seconds)
"""

HMCECS = """
import tallmcmc, jax.numpy as jnp
from bench_logistic import run_numpyro
began = time.perf_counter()
built = tallmcmc.fast_setup(model, jnp.zeros({d}))
run = run_numpyro("hmcecs", covariates, response, built.mode.position, num_warmup={warmup}, num_samples={draws}, seed=0)
seconds = time.perf_counter() - began
draws = run["draws"]
points = float(built.data_used) + run["setup_points"] + run["warmup_points"] + run["sample_points"]
extra = dict(points=points, mode_points=float(built.data_used))
"""

NUTS = """
import jax.numpy as jnp
from bench_logistic import run_numpyro
began = time.perf_counter()
run = run_numpyro("nuts", covariates, response, jnp.zeros({d}), num_warmup={warmup}, num_samples={draws}, seed=0,
                  chain_method="sequential")
seconds = time.perf_counter() - began
draws = run["draws"]
extra = dict(points=run["setup_points"] + run["warmup_points"] + run["sample_points"])
"""

PROLOGUE = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {here!r})
import jax, numpy as np
if {x64}:  # float64 throughout (TunaMH's residual bound: float32 rounding exceeds it at large N, docs/tuna.md)
    jax.config.update("jax_enable_x64", True)
from _timing import CompileClock
clock = CompileClock()  # wall time compiling: a compilation in sample_tall's compile-ahead thread counts once
from tallmcmc.examples import logistic_regression
covariates, response = logistic_regression.simulate({n}, {d}, seed=0)
if {x64}:
    covariates, response = np.asarray(covariates, np.float64), np.asarray(response, np.float64)
model = logistic_regression.model(covariates, response)
"""

EPILOGUE = """
np.save({out!r}, draws)
print("RESULT " + json.dumps(dict(seconds=seconds, compile=clock.wall_seconds, **extra)))
"""


def run_process(
    body: str,
    n: int,
    d: int,
    cache: str | None,
    x64: bool = False,
    timeout: float | None = None,
    environment: dict | None = None,
    **fill,
) -> tuple[dict, np.ndarray]:
    """``body`` in a fresh process after the data are made (``environment`` added to its variables); its RESULT
    line and its draws (chain, draw, d)."""
    out = tempfile.mktemp(suffix=".npy")
    prologue = PROLOGUE.format(here=str(HERE), n=n, d=d, x64=x64)
    code = prologue + body.format(d=d, **fill) + EPILOGUE.format(out=out)
    variables = {**os.environ, **(environment or {}), "TALLMCMC_COMPILATION_CACHE": cache or "0"}
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=variables, timeout=timeout
    )
    if completed.returncode != 0:
        raise RuntimeError(completed.stderr[-3000:])
    line = next(line for line in completed.stdout.splitlines() if line.startswith("RESULT "))
    draws = np.load(out)
    os.unlink(out)
    return json.loads(line[len("RESULT ") :]), draws


def device_line() -> str:
    """The device the methods' processes run on (JAX's default backend), in words."""
    import jax

    device = jax.devices()[0]
    return (
        f"device: {jax.default_backend()} {device.device_kind} ({jax.device_count()} device(s)), jax {jax.__version__}"
    )


def errors(draws: np.ndarray, reference: dict) -> tuple[float, float, float]:
    """Min bulk ESS, max |mean − ref| / MCSE (both MCSEs in quadrature), max |sd / ref sd − 1|."""
    sys.path.insert(0, str(HERE))
    from bench_logistic import coordinate_stats

    ess, mcse = coordinate_stats(draws)
    z = np.abs(draws.mean((0, 1)) - reference["mean"]) / np.sqrt(mcse**2 + reference["mcse"] ** 2)
    return float(ess.min()), float(z.max()), float(np.abs(draws.std((0, 1)) / reference["sd"] - 1).max())


def reference_for(n: int, d: int, draws: int) -> dict:
    sys.path.insert(0, str(HERE))
    import jax.numpy as jnp
    from bench_logistic import reference_posterior

    import tallmcmc
    from tallmcmc.examples import logistic_regression

    covariates, response = logistic_regression.simulate(n, d, seed=0)
    model = logistic_regression.model(covariates, response)
    mode = tallmcmc.find_mode(model, jnp.zeros(d))
    reference, path = reference_posterior(
        "independence",
        model,
        mode,
        covariates,
        response,
        draws=draws,
        warmup=1000,
        seed=0,
        cache_dir="~/.cache/tallmcmc/bench",
        chain_method="sequential",
    )
    print(f"reference N = {n:,}: {'cached' if reference['cached'] else 'built'} ({path.name})", flush=True)
    return reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--dimension", type=int, default=10)
    parser.add_argument("--draws", type=int, default=2000, help="sample_tall's kept draws per chain")
    parser.add_argument("--hmcecs-draws", type=int, default=1000)
    parser.add_argument("--hmcecs-warmup", type=int, default=500)
    parser.add_argument("--reference-draws", type=int, default=None, help="default 10,000 (N ≤ 10⁶), 1,000 above")
    parser.add_argument("--reference-only", action="store_true")
    parser.add_argument("--skip-hmcecs", action="store_true")
    parser.add_argument("--with-nuts", action="store_true", help="also NumPyro NUTS on all the data")
    parser.add_argument("--with-bound", action="store_true", help="also sample_tall with the logistic residual bound")
    parser.add_argument("--timeout", type=float, default=None, help="seconds allowed each method's process")
    parser.add_argument("--json", default=None, help="write every finished row here as it finishes")
    parser.add_argument(
        "--peer-precision",
        default=None,
        help="JAX_DEFAULT_MATMUL_PRECISION for NUTS and HMCECS (e.g. highest; default: JAX's, as a user runs them). "
        "On a GPU JAX's default is TF32, which biased HMCECS by 13.7 MCSE (docs/precision.md); no effect on a CPU",
    )
    args = parser.parse_args()
    d = args.dimension
    everything: dict[str, dict] = {}
    for n in args.sizes:
        reference_draws = args.reference_draws or (10_000 if n <= 1_000_000 else 1_000)
        reference = reference_for(n, d, reference_draws)
        if args.reference_only:
            continue
        print(
            f"\nN = {n:,}, d = {d}; {device_line()}; load {os.getloadavg()[0]:.2f} at "
            f"{time.strftime('%H:%M UTC', time.gmtime())}",
            flush=True,
        )
        print(
            "| method | s all in | of it compiling | bulk ESS min | ESS/s | ESS per 10⁶ points | "
            "max \\|z\\| mean | max \\|sd ratio − 1\\| | notes |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|", flush=True)
        rows: dict[str, dict] = {}

        peer_environment = {"JAX_DEFAULT_MATMUL_PRECISION": args.peer_precision} if args.peer_precision else None

        def record(name: str, body: str, cache: str | None = None, x64: bool = False, environment=None, **fill) -> None:
            """Run one method, print its row at once (a later method that runs out of time loses nothing)."""
            try:
                row, draws = run_process(
                    body, n, d, cache, x64=x64, timeout=args.timeout, environment=environment, **fill
                )
            except subprocess.TimeoutExpired:
                print(f"| {name} | > {args.timeout:.0f} (stopped) | | | | | | | timed out |", flush=True)
                return
            ess, z, sd_error = errors(draws, reference)
            row.update(
                ess=ess,
                z=z,
                sd_error=sd_error,
                ess_per_second=ess / row["seconds"],
                ess_per_million_points=ess / row["points"] * 1e6,
            )
            rows[name] = row
            notes = f"{row['decision']}; setup {row['setup_passes']:.2f} passes" if "decision" in row else ""
            if environment:
                notes = f"matmul precision {args.peer_precision}"
            print(
                f"| {name} | {row['seconds']:.2f} | {row['compile']:.2f} | {ess:,.0f} | {row['ess_per_second']:,.0f} | "
                f"{row['ess_per_million_points']:,.1f} | {z:.2f} | {sd_error:.3f} | {notes} |",
                flush=True,
            )
            if args.json:
                everything.setdefault(str(n), {})[name] = row
                pathlib.Path(args.json).write_text(json.dumps(dict(device=device_line(), rows=everything), indent=1))

        record("sample_tall (first run)", OURS, draws=args.draws, options="")
        cache = tempfile.mkdtemp(prefix="tallmcmc-cache-")
        atexit.register(shutil.rmtree, cache, ignore_errors=True)  # the cache of this run only
        run_process(OURS, n, d, cache, draws=args.draws, options="")  # fills the cache
        record("sample_tall (second run, cache)", OURS, cache, draws=args.draws, options="")
        if args.with_bound:
            bounded = ", bound=lambda cv: logistic_regression.tuna_bound(model, cv)"
            record("sample_tall with a bound, float64 (first run)", OURS, x64=True, draws=args.draws, options=bounded)
        if args.with_nuts:
            record(
                "NUTS (all data)",
                NUTS,
                environment=peer_environment,
                draws=args.hmcecs_draws,
                warmup=args.hmcecs_warmup,
            )
        if not args.skip_hmcecs:
            record(
                "HMCECS (mode by fast_setup)",
                HMCECS,
                environment=peer_environment,
                draws=args.hmcecs_draws,
                warmup=args.hmcecs_warmup,
            )
        for peer, label in (("HMCECS (mode by fast_setup)", "HMCECS"), ("NUTS (all data)", "NUTS")):
            if peer not in rows:
                continue
            theirs = rows[peer]
            for name in [name for name in rows if name.startswith("sample_tall")]:
                mine = rows[name]
                print(
                    f"{name} / {label}: ESS/s {mine['ess_per_second'] / theirs['ess_per_second']:.2f}×, "
                    f"ESS per 10⁶ points {mine['ess_per_million_points'] / theirs['ess_per_million_points']:.2f}×"
                )
        if "sample_tall (first run)" not in rows:
            continue
        first = rows["sample_tall (first run)"]
        print(f"compilation share of sample_tall's first run: {first['compile'] / first['seconds']:.0%}")


if __name__ == "__main__":
    main()
