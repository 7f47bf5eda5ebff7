"""Per-step cost of ``tallmcmc.minibatch_hamiltonian`` against one full-data gradient (issue 25, item 2).

Data: ``tallmcmc.examples.logistic_regression.simulate(N, d, seed=0)`` (xᵢ ~ N(0, I_d) float32, yᵢ 0/1), the
shipped ``logistic_regression.model`` (β ~ N(0, I), K = 1), position at the mode (``tallmcmc.find_mode``), the
Laplace covariance as preconditioner.

Measured in one process, the measurements interleaved and the best and the median of ``--repeats`` reported, each
as seconds per call of one compiled ``lax.fori_loop`` of ``--iterations`` calls (compilation excluded, the loop
carries its position so that nothing is hoisted out of it):

* ``full gradient``: ``jax.grad(model.log_density)`` (all N points), θ ← θ + 10⁻⁹·g;
* ``minibatch gradient``: the minibatch estimate ∇log p₀ + (N/b)Σ_B ∇log p(xᵢ|θ) on b fresh points per call;
* ``rows only``: drawing n indices of a keyed permutation (``acceptance/subsample.py``) and gathering their rows,
  for n = b and n = b·max(L) (what a ``"step"`` trajectory reads), without any gradient;
* ``minibatch_hamiltonian``: one proposal (momentum draw, minibatch indices, L leapfrog steps, kinetic ratio) of
  ``minibatch_hamiltonian(ε, L, b, preconditioner=Laplace covariance, minibatch=mode)``, θ ← the proposal, for each
  L of ``--steps`` and each mode; the proposal only, without the acceptance test (the test's cost is that of the
  test chosen, the same for every proposal).

Printed: seconds per call (best, median), the ratio to the full gradient (best/best), and the points touched
(``data_used``) as a fraction of N.

With ``--moves``, what the minibatch noise leaves of the move (``docs/minibatch_hamiltonian.md``): for each L and mode,
``tallmcmc.sample`` with ``exact_metropolis()``, 4 chains from the mode, ``--warmup`` steps of warm-up adapting ε
(towards the acceptance 0.234), then ``--draws`` kept; printed: the acceptance, the adapted ε·L, and the mean
whitened jump ‖C^{-1/2}(θ_{t+1} − θ_t)‖ per step (C the Laplace covariance: posterior standard deviations moved),
beside √(b·L_eff/N) with L_eff = 1 (trajectory) or L (step), the scale the derivation predicts.

    python benchmarks/bench_minibatch_hamiltonian.py --size 300000 --dimension 10 --batch 200 --moves
"""

from __future__ import annotations

import argparse
import statistics

import jax
import jax.numpy as jnp
import numpy as np
from _timing import seconds_per_call

import tallmcmc
from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices
from tallmcmc.examples import logistic_regression
from tallmcmc.proposals.minibatch_hamiltonian import minibatch_gradient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=300_000)
    parser.add_argument("--dimension", type=int, default=10)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--step-size", type=float, default=0.2)
    parser.add_argument("--steps", type=int, nargs="+", default=[1, 3, 10])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--moves", action="store_true", help="also measure acceptance and jump size (exact test)")
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--draws", type=int, default=300)
    args = parser.parse_args()

    covariates, response = logistic_regression.simulate(args.size, args.dimension, seed=0)
    model = logistic_regression.model(covariates, response)
    mode = tallmcmc.find_mode(model, jnp.zeros(args.dimension, jnp.float32))
    covariance = tallmcmc.laplace_covariance(mode)
    start = jnp.asarray(mode.position, jnp.float32)
    num_data, batch = model.num_data, args.batch

    full = jax.grad(model.log_density)

    def full_body(key, theta):
        return theta + 1e-9 * full(theta)

    def minibatch_body(key, theta):
        rows = model.data_at(permuted_indices(permutation_keys(key), jnp.arange(batch), num_data))
        return theta + 1e-9 * minibatch_gradient(model, lambda flat: flat, rows, num_data / batch)(theta)

    def rows_body(count):
        def body(key, theta):
            rows = model.data_at(permuted_indices(permutation_keys(key), jnp.arange(count), num_data))
            return theta + 1e-9 * sum(jnp.sum(leaf) for leaf in jax.tree_util.tree_leaves(rows))

        return body

    bodies = {"full gradient": (full_body, num_data), "minibatch gradient": (minibatch_body, batch)}
    for count in sorted({batch, batch * max(args.steps)}):
        bodies[f"rows only: {count} indices + gather"] = (rows_body(count), count)
    for minibatch in ("step", "trajectory"):
        for steps in args.steps:
            proposal = tallmcmc.minibatch_hamiltonian(
                args.step_size, steps, batch, preconditioner=covariance, minibatch=minibatch
            )
            used = int(proposal.propose(jax.random.key(0), start, model).data_used)
            bodies[f"minibatch_hamiltonian L={steps} ({minibatch})"] = (
                lambda key, theta, p=proposal: p.propose(key, theta, model).position,
                used,
            )

    seconds = seconds_per_call({name: body for name, (body, _) in bodies.items()}, start, args.iterations, args.repeats)

    best_full = min(seconds["full gradient"])
    print(
        f"N = {num_data}, d = {args.dimension}, b = {batch}, ε = {args.step_size}, {args.iterations} calls per "
        f"loop, best / median of {args.repeats}; JAX {jax.__version__}, devices {jax.devices()}"
    )
    print(f"{'measurement':44s} {'best':>10s} {'median':>10s} {'/ full grad':>11s} {'points / N':>11s}")
    for name, values in seconds.items():
        best, median = min(values), statistics.median(values)
        print(
            f"{name:44s} {best * 1e6:8.1f}µs {median * 1e6:8.1f}µs {best / best_full:10.3f}× "
            f"{bodies[name][1] / num_data:11.4f}"
        )

    if args.moves:
        whiten = np.linalg.inv(np.linalg.cholesky(np.asarray(covariance, np.float64)))
        print(f"\nmoves: exact_metropolis, 4 chains from the mode, {args.warmup} warm-up + {args.draws} draws")
        print(f"{'proposal':44s} {'accept':>7s} {'ε·L':>8s} {'jump (sd)':>10s} {'√(bL_eff/N)':>12s}")
        for minibatch in ("step", "trajectory"):
            for steps in args.steps:
                proposal = tallmcmc.minibatch_hamiltonian(
                    args.step_size, steps, batch, preconditioner=covariance, minibatch=minibatch
                )
                result = tallmcmc.sample(
                    model,
                    proposal,
                    tallmcmc.exact_metropolis(),
                    start,
                    num_chains=4,
                    num_warmup=args.warmup,
                    num_samples=args.draws,
                    seed=1,
                    progress=False,
                )
                draws = np.asarray(result.positions, np.float64)
                jumps = np.linalg.norm(np.diff(draws, axis=1) @ whiten.T, axis=-1).mean()
                factor = np.mean(np.asarray(result.step_size_factor))
                effective = steps if minibatch == "step" else 1
                print(
                    f"minibatch_hamiltonian L={steps} ({minibatch}){'':16s}"[:44] + f" {result.acceptance_rate:7.3f} "
                    f"{args.step_size * factor * steps:8.4f} {jumps:10.4f} {np.sqrt(batch * effective / num_data):12.4f}"
                )


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    main()
