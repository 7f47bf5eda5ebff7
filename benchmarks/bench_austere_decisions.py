"""AustereMH(c) and (nc) decision by decision against the exact Metropolis test, on the bias reproduction's *small* target.

Usage::

    python benchmarks/bench_austere_decisions.py                  # 20,000 pairs, the real per-datum terms
    python benchmarks/bench_austere_decisions.py --gaussian       # the same pairs, Gaussian terms of equal mean and sd
    python benchmarks/bench_austere_decisions.py --chains         # chains: the real tests against an "oracle"

Why: ``tallmcmc reproduce bias`` finds both AustereMH tests widening the posterior of the *small* target
(logistic regression, d = 2, N = 1,000, K = 1, random-walk steps of 2.5 posterior sds) far beyond Monte Carlo
error. This script asks whether each decision errs as often as the test's design says it may. Pairs (θ, θ′):
θ drawn from the target's exact (quadrature) posterior, θ′ = θ + 2.5 sds × N(0, I). For each pair the exact
decision (all N points) and each test's ``decide`` use the same key, hence the same u. Printed per bin of the
standardized gap μ_std = (μ − μ₀)√(N − 1)/σ_l: the exact acceptance, each test's wrong-decision rate, the error its
design predicts from the central-limit random walk (``tallmcmc.acceptance.austere_design``), and wrong accepts /
wrong rejects. ``--gaussian`` gives the test Gaussian terms with each pair's mean and sd (same μ_std and u), which
isolates the implementation from the shape of the real terms: its rates should equal the design's within Monte
Carlo error.

``--chains`` runs 8 chains × 3,500 steps (500 burn-in) per seed, as the reproduction does, in two ways per test:
the real test, and an *oracle* that takes the exact decision and flips it with exactly the probability the test's
design gives at that step's μ_std (no AustereMH code at all), and prints each run's posterior sd over the exact
posterior's. If the oracle widens the posterior as much as the real test, the widening is what a test with that
design's error does to this target, not a fault of the implementation. Findings: ``benchmarks/RESULTS.md``,
"AustereMH on the small target".
"""

from __future__ import annotations

import argparse
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.acceptance.austere_design import (
    adaptive_design_table,
    choose_austere_parameters,
    sequential_test_characteristics,
)
from tallmcmc.acceptance.sequential import metropolis_threshold
from tallmcmc.reproduce.bias import small_target

EDGES = [0, 0.1, 0.3, 0.6, 1.0, 1.5, 2, 3, 5, 8, np.inf]


def design_error_curve(kind: str, num_data: int, bound: float, grid: np.ndarray) -> np.ndarray:
    """The error the design of AustereMH(c) (``kind="c"``) or (nc) predicts at each standardized gap of ``grid``."""
    if kind == "c":
        design = choose_austere_parameters(bound, num_data)
        return sequential_test_characteristics(num_data, design.batch_size, [design.epsilon], grid)[0][0]
    gaps, sizes, epsilons = adaptive_design_table(bound, num_data)
    row = np.clip(np.searchsorted(gaps, grid, side="right") - 1, 0, gaps.size - 1)
    error = np.zeros(grid.size)
    for i in np.unique(row):
        if sizes[i] < num_data:  # m = N is the exact test
            chosen = row == i
            error[chosen] = sequential_test_characteristics(num_data, int(sizes[i]), [epsilons[i]], grid[chosen])[0][0]
    return error


def chains(args, target, tests, bounds, chain_count: int = 8, steps: int = 3500, burn_in: int = 500) -> None:
    """The real tests and their design-error oracles as chains; posterior sd over the exact posterior's."""
    model, num_data = target.model, args.num_data
    grid = np.concatenate([[0.0], np.geomspace(1e-3, 60.0, 600)])
    step_size = jnp.asarray(target.step_size, jnp.float32)
    print("| seed | test | way | accept | sd ratio θ₁ | sd ratio θ₂ | wrong accepts / step | wrong rejects / step |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    runs = [("exact MH", None, "exact")] + [(f"({kind})", kind, way) for kind in tests for way in ("oracle", "real")]
    for seed in args.chain_seeds:
        for label, kind, way in runs:
            test = tests.get(kind)
            error = np.zeros(grid.size) if kind is None else design_error_curve(kind, num_data, bounds[kind], grid)
            curve = jnp.asarray(error, jnp.float32)

            # one run: the exact test (a control of the harness), a design-error oracle or the real test
            def step(carry, key, test=test, curve=curve, way=way):
                theta, wrong_accepts, wrong_rejects = carry
                proposal_key, test_key, flip_key = jax.random.split(key, 3)
                proposed = theta + step_size * jax.random.normal(proposal_key, (2,))
                terms = model.log_likelihood_ratios(theta, proposed, model.data)
                offset = model.log_prior(proposed) - model.log_prior(theta)
                log_u, _, _ = metropolis_threshold(test_key, offset)  # the u the real test draws from this key
                delta = jnp.sum(terms) + offset
                exact = delta > log_u
                if way == "real":
                    accepted = test.decide(test_key, model, theta, proposed, offset, test.init(model, theta)).accepted
                else:
                    gap = jnp.abs(delta - log_u) / num_data * math.sqrt(num_data - 1) / jnp.std(terms)
                    accepted = exact ^ (jax.random.uniform(flip_key) < jnp.interp(gap, jnp.asarray(grid), curve))
                theta = jnp.where(accepted, proposed, theta)
                return (theta, wrong_accepts + (accepted & ~exact), wrong_rejects + (~accepted & exact)), (
                    theta,
                    accepted,
                )

            @jax.jit
            def run(key, start, step=step):
                (_, wrong_accepts, wrong_rejects), (thetas, accepted) = jax.lax.scan(
                    step, (start, 0, 0), jax.random.split(key, steps)
                )
                return thetas, accepted, wrong_accepts, wrong_rejects

            starts = jnp.asarray(target.reference.draw(np.random.default_rng(seed), chain_count), jnp.float32)
            thetas, accepted, wrong_accepts, wrong_rejects = jax.vmap(run)(
                jax.random.split(jax.random.key(seed), chain_count), starts
            )
            draws = np.asarray(thetas)[:, burn_in:].reshape(-1, 2)
            ratio = draws.std(axis=0) / target.reference.sd
            total = chain_count * steps
            print(
                f"| {seed} | {label} | {way} | {np.asarray(accepted)[:, burn_in:].mean():.3f} | {ratio[0]:.3f} | "
                f"{ratio[1]:.3f} | {int(np.sum(wrong_accepts)) / total:.4f} | "
                f"{int(np.sum(wrong_rejects)) / total:.4f} |",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=20_000, help="number of (θ, θ′) pairs")
    parser.add_argument("--num-data", type=int, default=1000, help="N of the small target (the reproduction's 1,000)")
    parser.add_argument("--step", type=float, default=2.5, help="random-walk sd in posterior sds (reproduction: 2.5)")
    parser.add_argument("--conservative-bound", type=float, default=0.2, help="AustereMH(c)'s worst-case bound")
    parser.add_argument("--adaptive-bound", type=float, default=0.05, help="AustereMH(nc)'s per-step bound")
    parser.add_argument("--gaussian", action="store_true", help="Gaussian terms with each pair's mean and sd")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chains", action="store_true", help="run chains (real test and design-error oracle)")
    parser.add_argument("--chain-seeds", type=int, nargs="+", default=[1, 2], help="seeds of --chains")
    args = parser.parse_args()
    began = time.perf_counter()
    num_data = args.num_data
    target = small_target(num_data, args.step, 10, 0, 50, 0, 1.0)
    model = target.model
    rng = np.random.default_rng(args.seed)
    theta = target.reference.draw(rng, args.pairs).astype(np.float32)
    proposed = (theta + target.step_size * rng.standard_normal((args.pairs, 2))).astype(np.float32)
    keys = jax.random.split(jax.random.key(args.seed), args.pairs)
    tests = {
        "c": tallmcmc.austere_conservative(args.conservative_bound, num_data=num_data),
        "nc": tallmcmc.austere_adaptive(args.adaptive_bound),
    }
    if args.chains:
        chains(args, target, tests, {"c": args.conservative_bound, "nc": args.adaptive_bound})
        print(f"\n{time.perf_counter() - began:.0f} s")
        return
    # Gaussian terms: a model whose per-datum log ratio at (0, 0) → (mean, sd) is mean + sd·zᵢ, zᵢ standardized
    z = rng.standard_normal(num_data)
    z = (z - z.mean()) / z.std()
    gaussian = tallmcmc.Model(
        lambda p, x: p[0] + p[1] * x, lambda p: jnp.zeros(()), jnp.asarray(z, jnp.float32), 1.0, position_shape=(2,)
    )

    @jax.jit
    def one(key, a, b):
        offset = model.log_prior(b) - model.log_prior(a)
        terms = model.log_likelihood_ratios(a, b, model.data)
        mean, spread = jnp.mean(terms), jnp.std(terms)
        log_u, threshold, _ = metropolis_threshold(key, offset)  # threshold = N·μ₀
        out = {
            "exact": jnp.sum(terms) + offset > log_u,
            "gap": (mean - threshold / num_data) * math.sqrt(num_data - 1) / spread,
        }
        used, start, end = (gaussian, jnp.zeros(2), jnp.stack([mean, spread])) if args.gaussian else (model, a, b)
        for name, test in tests.items():
            out[name] = test.decide(key, used, start, end, offset, test.init(used, start)).accepted
        return out

    result = {k: np.asarray(v) for k, v in jax.vmap(one)(keys, jnp.asarray(theta), jnp.asarray(proposed)).items()}
    exact, gap = result["exact"], np.abs(result["gap"])
    design = choose_austere_parameters(args.conservative_bound, num_data)
    gaps, sizes, epsilons = adaptive_design_table(args.adaptive_bound, num_data)

    def predicted_nc(values):
        row = np.clip(np.searchsorted(gaps, values, side="right") - 1, 0, gaps.size - 1)
        error = np.zeros(values.size)
        for i in np.unique(row):
            if sizes[i] < num_data:
                chosen = row == i
                error[chosen] = sequential_test_characteristics(num_data, int(sizes[i]), [epsilons[i]], values[chosen])[
                    0
                ][0]
        return error.mean()

    print(
        f"# small target, N = {num_data:,}, steps {args.step} sds, {args.pairs:,} pairs, "
        f"{'Gaussian' if args.gaussian else 'real'} per-datum terms; AustereMH(c) = {tests['c'].name} "
        f"(worst-case error {design.error:.3f}), AustereMH(nc) bound {args.adaptive_bound}\n"
    )
    print(
        "| |μ_std| | pairs | exact accept | (c) wrong | (c) design | (nc) wrong | (nc) design | (c) wrong acc / rej | "
        "(nc) wrong acc / rej |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    for low, high in zip(EDGES[:-1], EDGES[1:]):
        chosen = (gap >= low) & (gap < high)
        if not chosen.any():
            continue
        c, nc, ex = result["c"][chosen], result["nc"][chosen], exact[chosen]
        design_c = sequential_test_characteristics(num_data, design.batch_size, [design.epsilon], gap[chosen])[0][
            0
        ].mean()
        print(
            f"| {low:g}–{high:g} | {chosen.sum():,} | {ex.mean():.3f} | {np.mean(c != ex):.3f} | {design_c:.3f} | "
            f"{np.mean(nc != ex):.3f} | {predicted_nc(gap[chosen]):.3f} | {np.mean(c & ~ex):.3f} / "
            f"{np.mean(~c & ex):.3f} | {np.mean(nc & ~ex):.3f} / {np.mean(~nc & ex):.3f} |"
        )
    print(
        f"| all | {gap.size:,} | {exact.mean():.3f} | {np.mean(result['c'] != exact):.3f} | | "
        f"{np.mean(result['nc'] != exact):.3f} | | {np.mean(result['c'] & ~exact):.3f} / "
        f"{np.mean(~result['c'] & exact):.3f} | {np.mean(result['nc'] & ~exact):.3f} / "
        f"{np.mean(~result['nc'] & exact):.3f} |"
    )
    print(f"\n{time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
