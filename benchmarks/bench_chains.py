"""Chain-steps per second against the number of chains run together (issue 11).

Usage::

    python benchmarks/bench_chains.py                          # everything, default driver
    python benchmarks/bench_chains.py --driver asynchronous    # when tallmcmc.sample has that driver
    python benchmarks/bench_chains.py --only exact --exact-repeats 7

Three measurements, each read as same-run ratios (this machine's 2 cores are shared and its wall times move
with the load, which is printed before and after every table):

1. **GMM** (Section 6.1 mixture, N = 10⁶, K = N/100 as in ``bench_gmm.py``): random walk 0.15 and
   ``minibatch_barker(50)``, chains started at the true θ, for 1, 8, 64 and 512 chains.
2. **Logistic + control variate** (``examples.logistic_regression.simulate(N = 10⁶, d = 10)``): the mode
   (``find_mode``), ``taylor_control_variate`` at it, the Laplace random walk and ``minibatch_barker(100,
   control_variate=...)``, chains started at the mode, for the same chain counts.
3. **Full-data test, 1 vs 4 chains**: ``exact_barker`` with the Laplace random walk on the logistic model at
   N = 2·10⁵, d = 10: wall time per step of 4 chains over that of 1 chain (goal ≤ 1.5×), alternating 1 and 4
   chains ``--exact-repeats`` times.

``--only drivers`` (not in the default set) compares the two drivers, interleaved, on TunaMH (``tuna(1.0)`` with the
mixture's bound, N = 10⁶) and the tests with a full pass before their minibatch (``austere_adaptive(0.05)``,
``confidence_sampler(100)``, N = ``--driver-num-data``) for ``--driver-chains`` chains.

Every figure is ``chains × draws / sampling_seconds`` (compilation excluded) from :func:`tallmcmc.sample` with
one chunk, best of ``--repeats`` runs. ``--host-devices 2`` gives XLA one host device per core and runs the chain
counts that 2 divides on a ``"chains"`` mesh (one asynchronous loop per device), the others (1 chain) on one device.
Goals (issue 11, this 2-core CPU): 64 chains ≥ 8× the chain-steps/s of 1 chain, and ≤ 5 µs per chain-step at 64
chains. The script prints markdown tables.

One chain run the same way is a weak baseline on a CPU: XLA:CPU splits each small operation of a single chain over
its threads, which costs more than it gains, and the figure moves by up to 2× between runs (31–57 µs per step on
the mixture in two runs a minute apart). ``--pinned-baseline`` also measures the fastest single chain: one chain in a
child process pinned to one core (``os.sched_setaffinity``), with each driver, best of ``--repeats``; the goals line
then gives the ratio against it too.
"""

from __future__ import annotations

import argparse
import inspect
import os
import platform
import sys
import time

# --pin-core (the --pinned-baseline child) and --host-devices must act before JAX starts its threads
if "--pin-core" in sys.argv:
    os.sched_setaffinity(0, {int(sys.argv[sys.argv.index("--pin-core") + 1])})
# one XLA host device per core
if "--host-devices" in sys.argv:
    _devices = sys.argv[sys.argv.index("--host-devices") + 1]
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={_devices}"

import jax
import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import gaussian_mixture, logistic_regression


def drivers() -> tuple[str, ...]:
    """The drivers ``tallmcmc.sample`` accepts (``("vmap",)`` before it had a ``driver`` argument)."""
    if "driver" not in inspect.signature(tallmcmc.sample).parameters:
        return ("vmap",)
    from tallmcmc import sampling

    return tuple(getattr(sampling, "DRIVERS", ("vmap",)))


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def chains_mesh(chains: int):
    """A ``"chains"`` mesh over every device when there are several and they divide ``chains``, else ``None``."""
    devices = jax.devices()
    if len(devices) == 1 or chains % len(devices):
        return None
    return jax.sharding.Mesh(np.array(devices), ("chains",))


def run(model, proposal, test, start, chains: int, steps: int, driver: str, seed: int = 0):
    options = {"driver": driver} if "driver" in inspect.signature(tallmcmc.sample).parameters else {}
    if chains_mesh(chains) is not None:
        options["mesh"] = chains_mesh(chains)
    return tallmcmc.sample(
        model,
        proposal,
        test,
        initial_position=start,
        num_samples=steps,
        num_chains=chains,
        seed=seed,
        progress=False,
        num_chunks=1,
        **options,
    )


def steps_for(chains: int, chain_steps: int, least: int, most: int) -> int:
    return int(min(most, max(least, chain_steps // chains)))


def pinned_single_chain(workload: str, args) -> float:
    """µs per step of the fastest single chain: a child process pinned to one core, each driver, best of repeats."""
    import subprocess

    core = min(os.sched_getaffinity(0))
    best = float("inf")
    for driver in drivers():
        command = [
            sys.executable,
            os.path.abspath(__file__),
            "--only",
            workload,
            "--chains",
            "1",
            "--driver",
            driver,
            "--repeats",
            str(args.repeats),
            "--num-data",
            str(args.num_data),
            "--dimension",
            str(args.dimension),
            "--chain-steps",
            str(args.chain_steps),
            "--max-steps",
            str(args.max_steps),
            "--pin-core",
            str(core),
        ]
        environment = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
        child = subprocess.run(command, capture_output=True, text=True, env=environment, check=True)
        rows = [line for line in child.stdout.splitlines() if line.startswith("| 1 |")]
        best = min(best, float(rows[0].split("|")[5]))
    return best


def chain_table(title: str, make, chain_counts, args, workload: str) -> None:
    model, proposal, test, start = make()
    print(f"\n### {title} (driver {args.driver})\n")
    print(f"load average before: {load()}\n")
    print("| chains | steps | chain-steps/s | × 1 chain | µs per chain-step | points per chain-step | accept |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    base = None
    rates = {}
    for chains in chain_counts:
        steps = steps_for(chains, args.chain_steps, args.min_steps, args.max_steps)
        best = None
        for repeat in range(args.repeats):
            result = run(model, proposal, test, start, chains, steps, args.driver, seed=repeat)
            rate = chains * result.num_draws / result.sampling_seconds
            if best is None or rate > best[0]:
                best = (rate, result)
        rate, result = best
        base = base or rate
        rates[chains] = rate
        print(
            f"| {chains} | {steps} | {rate:,.0f} | {rate / base:.2f} | {1e6 / rate:.1f} | "
            f"{result.data_used.mean():.0f} | {result.acceptance_rate:.2f} |",
            flush=True,
        )
    print(f"\nload average after: {load()}")
    if 1 in rates and 64 in rates:
        speedup, micro = rates[64] / rates[1], 1e6 / rates[64]
        print(
            f"\nGoals at 64 chains: {speedup:.1f}× one chain run the same way (goal ≥ 8×: "
            f"{'met' if speedup >= 8 else 'NOT met'}); {micro:.1f} µs per chain-step (goal ≤ 5 µs: "
            f"{'met' if micro <= 5 else 'NOT met'})"
        )
    if args.pinned_baseline and 64 in rates and not hasattr(os, "sched_setaffinity"):
        print("Fastest single chain: not measured (--pinned-baseline needs os.sched_setaffinity, i.e. Linux)")
    elif args.pinned_baseline and 64 in rates:
        single = pinned_single_chain(workload, args)
        speedup = single / (1e6 / rates[64])
        print(
            f"Fastest single chain (pinned to one core, best driver): {single:.1f} µs per step; 64 chains "
            f"{speedup:.1f}× its chain-steps/s (goal ≥ 8×: {'met' if speedup >= 8 else 'NOT met'}); load {load()}"
        )


def gmm():
    num_data = 1_000_000
    model = gaussian_mixture.model(num_data, temperature=num_data / 100.0, seed=0)
    start = jnp.asarray(gaussian_mixture.TRUE_THETA, jnp.float32)
    return model, tallmcmc.random_walk(0.15), tallmcmc.minibatch_barker(50), start


def logistic_setup(num_data: int, dimension: int):
    covariates, response = logistic_regression.simulate(num_data, dimension, seed=0)
    model = logistic_regression.model(covariates, response)
    mode = tallmcmc.find_mode(model, jnp.zeros(dimension, jnp.float32))
    return model, mode


def logistic_cv(num_data: int, dimension: int):
    def make():
        model, mode = logistic_setup(num_data, dimension)
        control_variate = tallmcmc.taylor_control_variate(model, mode.position)
        test = tallmcmc.minibatch_barker(100, control_variate=control_variate)
        return model, tallmcmc.laplace_random_walk(mode), test, mode.position

    return make


def exact_one_vs_four(args) -> None:
    model, mode = logistic_setup(args.exact_num_data, args.dimension)
    proposal = tallmcmc.laplace_random_walk(mode)
    test = tallmcmc.exact_barker()
    print(
        f"\n### exact_barker, 1 vs 4 chains, logistic N = {args.exact_num_data:,}, d = {args.dimension} "
        f"(driver {args.driver})\n"
    )
    print(f"load average before: {load()}\n")
    times = {1: [], 4: []}
    for repeat in range(args.exact_repeats):
        for chains in (1, 4):
            result = run(model, proposal, test, mode.position, chains, args.exact_steps, args.driver, seed=repeat)
            times[chains].append(result.seconds_per_step)
    one, four = min(times[1]), min(times[4])
    ratios = [b / a for a, b in zip(times[1], times[4])]
    print("| chains | ms per step (best) | ms per step (median) | µs per chain-step (best) |")
    print("|---:|---:|---:|---:|")
    for chains, values in times.items():
        print(
            f"| {chains} | {min(values) * 1e3:.3f} | {np.median(values) * 1e3:.3f} | {min(values) * 1e6 / chains:.0f} |"
        )
    print(
        f"\n4 chains / 1 chain per step: {four / one:.2f}× (best of each); per repeat "
        f"{', '.join(f'{r:.2f}' for r in ratios)}; goal ≤ 1.5×: {'met' if four / one <= 1.5 else 'NOT met'}"
    )
    print(f"\nload average after: {load()}")


def driver_tests(num_data: int):
    """The tests compared driver against driver (``--only drivers``): ``name -> (model, test, chain-steps per run)``."""
    tall = gaussian_mixture.model(1_000_000, temperature=1_000_000 / 100.0, seed=0)
    small = gaussian_mixture.model(num_data, temperature=num_data / 100.0, seed=0)
    return {
        "tuna(1.0), N = 10⁶": (tall, tallmcmc.tuna(1.0, gaussian_mixture.tuna_bound(tall)), 4000),
        f"austere_adaptive(0.05), N = {num_data:,}": (small, tallmcmc.austere_adaptive(0.05), 1600),
        f"confidence_sampler(100), N = {num_data:,}": (small, tallmcmc.confidence_sampler(100), 1600),
    }


def driver_table(args) -> None:
    """TunaMH and the full-pass tests: µs per chain-step with each driver, interleaved, best of ``--repeats``."""
    if len(drivers()) < 2:
        print("\n(--only drivers: this tallmcmc.sample has one driver)")
        return
    print("\n### TunaMH and the tests with a full pass: vmap against asynchronous (GMM, random walk 0.15)\n")
    print(f"load average before: {load()}\n")
    print(
        "| test | chains | vmap µs per chain-step | asynchronous µs per chain-step | asynchronous / vmap | "
        "points per chain-step |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    start = jnp.asarray(gaussian_mixture.TRUE_THETA, jnp.float32)
    for name, (model, test, chain_steps) in driver_tests(args.driver_num_data).items():
        for chains in args.driver_chains:
            steps = steps_for(chains, chain_steps, 40, 2000)
            best: dict[str, float] = {}
            for repeat in range(args.repeats):
                for driver in ("vmap", "asynchronous"):  # interleaved, so that the load moves both alike
                    result = run(model, tallmcmc.random_walk(0.15), test, start, chains, steps, driver, seed=repeat)
                    micro = result.sampling_seconds / (chains * result.num_draws) * 1e6
                    best[driver] = min(best.get(driver, np.inf), micro)
            print(
                f"| {name} | {chains} | {best['vmap']:,.0f} | {best['asynchronous']:,.0f} | "
                f"{best['asynchronous'] / best['vmap']:.2f} | {result.data_used.mean():,.0f} |",
                flush=True,
            )
    print(f"\nload average after: {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--driver", choices=drivers(), default=drivers()[0], help="how sample() runs the chains")
    parser.add_argument(
        "--host-devices",
        type=int,
        default=1,
        help="XLA host devices (one per core); with more than one, chain counts they divide run on a "
        "'chains' mesh over them (one loop per device), the others on one device",
    )
    parser.add_argument(
        "--only",
        choices=["gmm", "logistic", "exact", "drivers"],
        nargs="+",
        default=["gmm", "logistic", "exact"],
        help="drivers (not run by default): TunaMH and the full-pass tests with both drivers",
    )
    parser.add_argument(
        "--driver-chains", type=int, nargs="+", default=[1, 16, 64], help="chain counts of --only drivers"
    )
    parser.add_argument(
        "--driver-num-data", type=int, default=100_000, help="N of the full-pass tests in --only drivers"
    )
    parser.add_argument("--chains", type=int, nargs="+", default=[1, 8, 64, 512])
    parser.add_argument(
        "--chain-steps",
        type=int,
        default=64_000,
        help="chain-steps per run; steps = this / chains, clipped to [--min-steps, --max-steps]",
    )
    parser.add_argument("--min-steps", type=int, default=100)
    parser.add_argument("--max-steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="runs per chain count; the fastest is reported")
    parser.add_argument("--num-data", type=int, default=1_000_000, help="N of the logistic control-variate runs")
    parser.add_argument("--dimension", type=int, default=10)
    parser.add_argument("--exact-num-data", type=int, default=200_000)
    parser.add_argument("--exact-steps", type=int, default=200)
    parser.add_argument("--exact-repeats", type=int, default=5)
    parser.add_argument("--pin-core", type=int, help=argparse.SUPPRESS)  # the --pinned-baseline child's core
    parser.add_argument(
        "--pinned-baseline",
        action="store_true",
        help="also time one chain pinned to one core in a child process (each driver, best of "
        "--repeats) and give the 64-chain ratio against it",
    )
    args = parser.parse_args()
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {jax.devices()[0].platform}, "
        f"jax {jax.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print(
        f"# drivers of tallmcmc.sample: {', '.join(drivers())}; this run: {args.driver}; {len(jax.devices())} "
        f"device(s){': chain counts they divide run on a chains mesh' if len(jax.devices()) > 1 else ''}"
    )
    if jax.devices()[0].platform == "cpu":
        print("# GPU figures: not measured (no accelerator here)")
    if "gmm" in args.only:
        chain_table("GMM, N = 10⁶, minibatch_barker(50), random walk 0.15", gmm, args.chains, args, "gmm")
    if "logistic" in args.only:
        chain_table(
            f"logistic, N = {args.num_data:,}, d = {args.dimension}, control variate + minibatch_barker(100), "
            "Laplace random walk",
            logistic_cv(args.num_data, args.dimension),
            args.chains,
            args,
            "logistic",
        )
    if "exact" in args.only:
        exact_one_vs_four(args)
    if "drivers" in args.only:
        driver_table(args)


if __name__ == "__main__":
    main()
