"""Per-step cost of ``minibatch_hamiltonian`` and ``sghmc`` on the flight-delay network against one full-data gradient.

The network of ``tallmcmc reproduce nn`` (36 → 32 → 32 → 1 sigmoid, 2,273 weights, N(0, 1) prior) on the
first ``--size`` rows of the flight-delay data (training then held-out rows: 327,346 in all; default N = 3·10⁵),
temperature 1, at its starting weights. Measured in one process, interleaved, best and median of ``--repeats``,
as seconds per call of one compiled ``lax.fori_loop`` of ``--iterations`` calls (compilation excluded, the loop
carries its position):

* ``full gradient``: ``jax.grad(model.log_density)`` over all N rows, θ ← θ + 10⁻⁹·g;
* ``minibatch gradient``: ∇log p₀ + (N/b)Σ_B ∇log p(xᵢ|θ) on b fresh rows;
* ``minibatch_hamiltonian L (mode)``: one proposal (momentum, minibatch indices, L leapfrog steps, kinetic ratio),
  without the test;
* ``sghmc (fisher=…)``: one SGHMC proposal (``fisher=True`` estimates β̂ from the per-datum gradients, the 2016
  paper's choice; ``fisher=False`` takes β̂ = 0), without the test;
* ``exact test``: one full-data evaluation of the per-datum log-likelihoods, what ``exact_metropolis`` pays per
  step (it keeps the current point's values).

    python benchmarks/bench_nn.py --size 300000 --batch 200
"""

from __future__ import annotations

import argparse
import statistics

import jax
import jax.numpy as jnp
import numpy as np
from _timing import seconds_per_call
from jax.flatten_util import ravel_pytree

import tallmcmc
from tallmcmc import datasets
from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices
from tallmcmc.proposals.minibatch_hamiltonian import minibatch_gradient
from tallmcmc.reproduce import nn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--hidden", type=int, nargs=2, default=[32, 32])
    parser.add_argument("--steps", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    flights = datasets.load_flight_delays()
    x = np.concatenate([flights.x_train, flights.x_test])[: args.size]
    y = np.concatenate([flights.y_train, flights.y_test])[: args.size]
    params = nn.init_params(jax.random.key(0), (x.shape[1], *args.hidden, 1))
    flat_start, unravel = ravel_pytree(params)
    model = nn.build_model(x, y, params, 1.0, 1.0)
    flat_model = tallmcmc.Model(
        lambda th, row: nn.log_likelihood(unravel(th), row),
        lambda th: nn.gaussian_log_prior(1.0)(unravel(th)),
        model.data,
        1.0,
    )
    num_data, batch = flat_model.num_data, args.batch
    full = jax.grad(flat_model.log_density)

    def full_body(key, theta):
        return theta + 1e-9 * full(theta)

    def full_likelihood_body(key, theta):
        return theta + 1e-9 * jnp.sum(flat_model.per_datum_log_likelihood(theta))

    def minibatch_body(key, theta):
        rows = flat_model.data_at(permuted_indices(permutation_keys(key), jnp.arange(batch), num_data))
        return theta + 1e-9 * minibatch_gradient(flat_model, lambda f: f, rows, num_data / batch)(theta)

    bodies = {
        "full gradient": (full_body, num_data),
        "exact test: one full pass of log-likelihoods": (full_likelihood_body, num_data),
        "minibatch gradient": (minibatch_body, batch),
    }
    for minibatch in ("step", "trajectory"):
        for steps in args.steps:
            proposal = tallmcmc.minibatch_hamiltonian(1e-3, steps, batch, minibatch=minibatch)
            used = int(proposal.propose(jax.random.key(0), flat_start, flat_model).data_used)
            bodies[f"minibatch_hamiltonian L={steps} ({minibatch})"] = (
                lambda key, theta, p=proposal: p.propose(key, theta, flat_model).position,
                used,
            )
    for fisher in (True, False):
        proposal = tallmcmc.sghmc(1e-6, 0.1, batch, fisher=fisher)
        state = proposal.init_state(flat_start)
        bodies[f"sghmc (fisher={fisher})"] = (
            lambda key, theta, p=proposal, s=state: p.propose(key, theta, flat_model, s).position,
            batch,
        )

    seconds = seconds_per_call(
        {name: body for name, (body, _) in bodies.items()}, flat_start, args.iterations, args.repeats
    )

    best_full = min(seconds["full gradient"])
    print(
        f"N = {num_data}, d = {flat_start.size}, b = {batch}, {args.iterations} calls per loop, best / median of "
        f"{args.repeats}; JAX {jax.__version__}, devices {jax.devices()}"
    )
    print(f"{'measurement':46s} {'best':>10s} {'median':>10s} {'/ full grad':>11s} {'points / N':>11s}")
    for name, values in seconds.items():
        best, median = min(values), statistics.median(values)
        print(
            f"{name:46s} {best * 1e3:8.3f}ms {median * 1e3:8.3f}ms {best / best_full:10.4f}× "
            f"{bodies[name][1] / num_data:11.5f}"
        )


if __name__ == "__main__":
    main()
