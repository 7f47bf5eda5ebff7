"""Seconds per data point of each kind the tests touch: a plain likelihood point against a control-variate residual.

Calibrates ``tallmcmc.choice_of_test.RESIDUAL_POINT_COST`` (the cost of one residual in plain points, which
``choose_test`` uses to weigh the minibatch test's points against the exact test's): for each d in
``--dimensions`` (default 10, 50, 100, 500), untempered logistic regression ``logistic_regression.simulate(N, d,
seed=0)`` (float32, prior N(0, I)); and for each G in ``--intercepts`` (default 100, 500; none: ``--intercepts``
with no value), the random-intercepts model ``random_intercepts.simulate(N, G, seed=0)`` (d = G + 1, a row touching
one intercept: a model whose plain point costs the same at every d); ``--chains`` chains (default 4,
``sample_tall``'s), on this CPU:

* **plain** — what the exact test does per step: the per-datum log-likelihoods at θ′ on all N rows
  (``tallmcmc.acceptance.exact.per_datum_log_likelihood``, the chains vmapped, chain by chain on a CPU) and
  Σᵢ(new − cache), the current state's values cached;
* **residual** — what the minibatch test does per chunk of ``--chunk`` (100, ``sample_tall``'s ``batch_size``)
  points: keyed-permutation indices (``permuted_indices``), then ``ResidualModel.log_likelihood_ratios_at`` (the two
  log-likelihoods minus the Taylor proxy difference, gathered rows), summed; ``--residual-chunks`` chunks per step,
  in a ``fori_loop`` as the sequential test runs them;
  for each control variate kind: ``per_datum`` (order 2, one forward-over-forward jvp per datum: ``sample_tall``'s)
  and ``gradient`` (order 1, or order 2 with a shared curvature: one jvp per datum);
* **index** — the keyed permutation's indices of those residuals alone (their share of a residual: the cycle walk
  back into [0, N) costs most where 2^k is far above N: up to 2N since 2026-11-30, 4^h = 2.6N at N = 10⁵ before).

Each kernel runs as a compiled loop of steps whose position depends on the previous step's result (nothing can be
hoisted out of the loop); the times are the best of ``--repeats`` (rotating the kernels' order between repeats, so
that a change of load touches them alike), per chain-point, in wall time and in this process's CPU time (all
threads: less sensitive to other processes' load, but it counts the plain pass's threads, which wall time on an
idle machine does not). The marginal residual cost is the slope between two
numbers of chunks (``--residual-chunks``, default 10 and 100), so the per-step work that does not grow with the
points (the proposal, the permutation keys) is left out; the plain cost is the slope between N/10 and N rows.
"cost" = marginal residual seconds / marginal plain seconds: the residual's price in plain points.

    python benchmarks/bench_point_costs.py --json point_costs.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

import tallmcmc
from tallmcmc.acceptance.exact import per_datum_log_likelihood
from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices
from tallmcmc.examples import logistic_regression, random_intercepts
from tallmcmc.model import default_start

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import timed  # noqa: E402

KINDS = {"per_datum": dict(order=2), "gradient": dict(order=1)}


def plain_loop(model, iterations: int, chains: int):
    """``run(data, cache, theta, key)``: ``iterations`` exact-test evaluations (θ′ on all rows, Σ(new − cache));
    ``theta`` is the chains' flattened positions, (chains, d)."""
    unravel = ravel_pytree(default_start(model.position_shape, 0))[1]

    def step(t, carry):
        data, cache, theta, key = carry
        held = model.with_data(data)
        noise = 1e-3 * jax.random.normal(jax.random.fold_in(key, t), theta.shape, theta.dtype)
        proposed = theta + noise
        new = jax.vmap(lambda flat: per_datum_log_likelihood(held, unravel(flat)))(proposed)
        delta = jnp.sum(new - cache, axis=1)
        return data, cache, theta + 1e-30 * delta[:, None], key

    @jax.jit
    def run(data, cache, theta, key):
        return jax.lax.fori_loop(0, iterations, step, (data, cache, theta, key))[2]

    return run


def residual_loop(model, control_variate, iterations: int, chunks: int, chunk: int, index_only: bool = False):
    """``run(data, theta, key)``: ``iterations`` steps of ``chunks`` chunks of ``chunk`` residuals per chain (with
    ``index_only``, only the keyed permutation's indices of those residuals)."""
    num_data = model.num_data
    lanes = jnp.arange(chunk, dtype=jnp.int32)
    unravel = ravel_pytree(default_start(model.position_shape, 0))[1]

    def one_chain(held, theta, key):
        proposed = theta + 1e-3 * jax.random.normal(key, theta.shape, theta.dtype)
        round_keys = permutation_keys(jax.random.fold_in(key, 1))
        residuals = control_variate.residual_model(held)

        def body(c, total):
            indices = permuted_indices(round_keys, c * chunk + lanes, num_data)
            if index_only:
                return total + 1e-30 * jnp.sum(indices).astype(total.dtype)
            ratios = residuals.log_likelihood_ratios_at(unravel(theta), unravel(proposed), indices)
            return total + jnp.sum(ratios)

        return jax.lax.fori_loop(0, chunks, body, jnp.zeros((), theta.dtype))

    def step(t, carry):
        data, theta, key = carry
        held = model.with_data(data)
        keys = jax.random.split(jax.random.fold_in(key, t), theta.shape[0])
        totals = jax.vmap(lambda position, k: one_chain(held, position, k))(theta, keys)
        return data, theta + 1e-30 * totals[:, None], key

    @jax.jit
    def run(data, theta, key):
        return jax.lax.fori_loop(0, iterations, step, (data, theta, key))[1]

    return run


def best_seconds(calls: dict, repeats: int) -> tuple[dict[str, float], dict[str, float]]:
    """The best of ``repeats`` wall and CPU times of each ``calls[name]()`` (compiled first), the order rotated."""
    for call in calls.values():
        jax.block_until_ready(call())
    names = list(calls)
    wall = {name: [] for name in names}
    cpu = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            _, seconds, cpu_seconds = timed(lambda call=calls[name]: jax.block_until_ready(call()))
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
    return {name: min(values) for name, values in wall.items()}, {name: min(values) for name, values in cpu.items()}


def models(args):
    """(label, d, the model on N rows, the same on the first N/10) for each row of the table."""
    num_data = args.num_data
    for dimension in args.dimensions:
        covariates, response = logistic_regression.simulate(num_data, dimension, seed=0)
        yield (
            "logistic",
            dimension,
            logistic_regression.model(covariates, response),
            logistic_regression.model(covariates[: num_data // 10], response[: num_data // 10]),
        )
    for num_groups in args.intercepts:
        groups, response = random_intercepts.simulate(num_data, num_groups, seed=0)
        yield (
            f"intercepts G={num_groups}",
            num_groups + 1,
            random_intercepts.model(groups, response, num_groups),
            random_intercepts.model(groups[: num_data // 10], response[: num_data // 10], num_groups),
        )


def measure(model, small, args) -> dict:
    num_data, chains = args.num_data, args.chains
    flat_start, unravel = ravel_pytree(default_start(model.position_shape, 0))
    dimension = flat_start.shape[0]
    centre = unravel(jnp.zeros(dimension, jnp.float32))
    theta = jnp.asarray(np.random.default_rng(1).normal(size=(chains, dimension)) / np.sqrt(num_data), jnp.float32)
    key = jax.random.key(0)
    calls, points = {}, {}
    for name, held in (("plain N", model), ("plain N/10", small)):
        cache = jax.vmap(lambda flat, held=held: held.per_datum_log_likelihood(unravel(flat)))(theta)
        run = plain_loop(held, args.iterations, chains)
        calls[name] = lambda run=run, held=held, cache=cache: run(held.data, cache, theta, key)
        points[name] = held.num_data
    for kind, options in KINDS.items():
        control_variate = tallmcmc.taylor_control_variate(model, centre, batch_size=8192, **options)
        for count in args.residual_chunks:
            run = residual_loop(model, control_variate, args.iterations, count, args.chunk)
            name = f"{kind} x{count}"
            calls[name] = lambda run=run: run(model.data, theta, key)
            points[name] = count * args.chunk
    for count in args.residual_chunks:  # the keyed permutation's share: the indices alone
        run = residual_loop(model, control_variate, args.iterations, count, args.chunk, index_only=True)
        calls[f"index x{count}"] = lambda run=run: run(model.data, theta, key)
        points[f"index x{count}"] = count * args.chunk
    load = os.getloadavg()[0]
    wall, cpu = best_seconds(calls, args.repeats)
    row = {"d": dimension, "load_start": load, "load_end": os.getloadavg()[0]}
    low, high = args.residual_chunks
    for clock, seconds in (("wall", wall), ("cpu", cpu)):
        row[f"{clock}_per_point"] = {name: seconds[name] / (args.iterations * chains * points[name]) for name in calls}
        plain = (seconds["plain N"] - seconds["plain N/10"]) / (args.iterations * chains * (num_data - num_data // 10))
        row[f"{clock}_plain_marginal"] = plain
        for kind in (*KINDS, "index"):
            marginal = (seconds[f"{kind} x{high}"] - seconds[f"{kind} x{low}"]) / (
                args.iterations * chains * (high - low) * args.chunk
            )
            row[f"{clock}_{kind}_marginal"] = marginal
            row[f"{clock}_{kind}_cost"] = marginal / plain
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dimensions", type=int, nargs="*", default=[10, 50, 100, 500])
    parser.add_argument("--intercepts", type=int, nargs="*", default=[100, 500])
    parser.add_argument("--num-data", type=int, default=100_000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--residual-chunks", type=int, nargs=2, default=[10, 100])
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    started = datetime.datetime.now(datetime.UTC)
    print(f"# {' '.join(sys.argv)}  ({started:%Y-%m-%d %H:%M} UTC, jax {jax.__version__}, {jax.devices()[0]})")
    print(
        "| model | d | plain ns/pt, marginal (wall; CPU) | per_datum residual ns/pt, marginal (wall; CPU) | cost (wall; CPU) | "
        "gradient residual ns/pt (wall; CPU) | cost (wall; CPU) | of which the index, ns/pt (wall; CPU) | load |"
    )
    print("|---|---:|---|---|---|---|---|---|---|")
    rows = []
    for label, dimension, model, small in models(args):
        started_here = time.perf_counter()
        row = measure(model, small, args)
        row["model"] = label
        row["seconds"] = time.perf_counter() - started_here
        rows.append(row)
        print(
            f"| {label} | {dimension} | {1e9 * row['wall_plain_marginal']:.2f}; {1e9 * row['cpu_plain_marginal']:.2f} | "
            f"{1e9 * row['wall_per_datum_marginal']:.1f}; {1e9 * row['cpu_per_datum_marginal']:.1f} | "
            f"{row['wall_per_datum_cost']:.1f}; {row['cpu_per_datum_cost']:.1f} | "
            f"{1e9 * row['wall_gradient_marginal']:.1f}; {1e9 * row['cpu_gradient_marginal']:.1f} | "
            f"{row['wall_gradient_cost']:.1f}; {row['cpu_gradient_cost']:.1f} | "
            f"{1e9 * row['wall_index_marginal']:.1f}; {1e9 * row['cpu_index_marginal']:.1f} | "
            f"{row['load_start']:.1f}–{row['load_end']:.1f} |",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"command": " ".join(sys.argv), "started": started.isoformat(), "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
