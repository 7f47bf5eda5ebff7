"""ESS per draw of proxy HMC as a function of its integration time T and leapfrog steps L (docs/warmup.md).

Usage::

    python benchmarks/bench_proxy_trajectory.py [--targets d10,d50,skewed] [--tests barker,exact,tuna]
        [--draws 10000] [--json out.json]
    python benchmarks/bench_proxy_trajectory.py --times 0.5 --proxy-targets 0.8,0.9,0.97,0.99  # leapfrog accuracy
    python benchmarks/bench_proxy_trajectory.py --steps-sweep   # L at fixed T, no adaptation

The commands behind ``benchmarks/RESULTS.md``, "Proxy HMC trajectory length", are listed there (a full default run
takes about 15 minutes on 2 busy cores).

Proxy HMC (``tallmcmc.proxy_hamiltonian``) with the Laplace covariance as inverse mass, integration time
T = ε·L (L = 3 to start; warm-up adapts ε on the proxy's own acceptance and keeps T), step jitter j (0 or 0.2,
the default path's), on logistic regression (``tallmcmc.examples.logistic_regression``):

* ``d10``, ``d50``: ``simulate(100_000, d, seed=0)``;
* ``skewed``: 500 rows, d = 10, covariates with correlation 0.9 between neighbours and coefficients ~ N(0, 3²),
  so that few rows are informative and the posterior is skewed (the marginal skewness of the whitened draws is
  printed: ≈ 0 for a Gaussian).

Tests: ``minibatch_barker(100, control_variate=cv)`` (``barker``), ``exact_metropolis()`` (``exact``) and TunaMH on
the control-variate residuals with ``logistic_regression.tuna_bound(model, cv)``, χ = 0.01 (``tuna``, d = 10 only).
4 chains started at draws from the Laplace approximation, 300 warm-up steps, ``--draws`` kept draws each.

Reported per configuration, on the Laplace-whitened draws z = L⁻¹(θ − θ̂): ArviZ bulk and tail ESS per draw (min and
median over coordinates), the ESS per draw of the mean of z_k² (second moments; min over coordinates), the mean
squared jump distance |z_{t+1} − z_t|²/d, the acceptance, data points per step, and the sampling seconds per draw
(compilation apart). Timings are noisy on a shared machine; ESS per draw and points per step are not.

Prediction (docs/warmup.md): the proxy posterior is Gaussian, so the preconditioned proxy dynamics are a rotation of
angle T in every direction; a proposal θ′ − θ̂ = ρ(θ − θ̂) + √(1 − ρ²)·noise with ρ = cos T, accepted with
probability a, gives per coordinate ESS per draw a(1 − ρ)/(2 − a(1 − ρ)) for the mean and
a(1 − ρ²)/(2 − a(1 − ρ²)) for the mean of the square (with E over the jitter of ρ, ρ²).
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings

import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import logistic_regression
from tallmcmc.interop import arviz as arviz_bridge

#: Integration times, in units of π.
TIMES = (0.25, 0.5, 0.625, 0.75, 0.875, 1.0, 1.25, 1.5)
JITTERS = (0.0, 0.2)
NUM_CHAINS = 4
NUM_WARMUP = 300


def skewed_data(num_data: int = 500, dimension: int = 10, seed: int = 0):
    """Correlated covariates (AR(1) correlation 0.9) and large coefficients: a skewed logistic posterior."""
    rng = np.random.default_rng(seed)
    correlation = 0.9 ** np.abs(np.subtract.outer(np.arange(dimension), np.arange(dimension)))
    covariates = (rng.standard_normal((num_data, dimension)) @ np.linalg.cholesky(correlation).T).astype(np.float32)
    truth = 3.0 * rng.standard_normal(dimension)
    response = (rng.random(num_data) < 1 / (1 + np.exp(-(covariates @ truth)))).astype(np.float32)
    return covariates, response


def build(target: str):
    if target == "skewed":
        covariates, response = skewed_data()
    else:
        covariates, response = logistic_regression.simulate(100_000, int(target[1:]), seed=0)
    model = logistic_regression.model(covariates, response)
    dimension = covariates.shape[1]
    mode = tallmcmc.find_mode(model, jnp.zeros(dimension))
    control_variate = tallmcmc.taylor_control_variate(model, mode.position)
    covariance = tallmcmc.laplace_covariance(mode)
    return model, mode, control_variate, covariance


def make_test(name: str, model, control_variate):
    if name == "barker":
        return tallmcmc.minibatch_barker(100, control_variate=control_variate)
    if name == "exact":
        return tallmcmc.exact_metropolis()
    if name == "tuna":
        return tallmcmc.tuna(
            0.01, logistic_regression.tuna_bound(model, control_variate), control_variate=control_variate
        )
    raise ValueError(f"unknown test {name!r}")


def measure(result, mode, covariance) -> dict:
    factor = np.linalg.cholesky(np.asarray(covariance, np.float64))
    draws = np.asarray(result.positions, np.float64)
    whitened = np.linalg.solve(factor, (draws - np.asarray(mode.position, np.float64)).reshape(-1, draws.shape[-1]).T)
    z = whitened.T.reshape(draws.shape)
    count = z.shape[0] * z.shape[1]
    bulk = np.asarray(arviz_bridge.ess(z, "bulk")) / count
    tail = np.asarray(arviz_bridge.ess(z, "tail")) / count
    square = np.asarray(arviz_bridge.ess((z - z.mean(axis=(0, 1))) ** 2, "mean")) / count
    centred = z - z.mean(axis=(0, 1))
    skewness = np.mean(centred**3, axis=(0, 1)) / np.mean(centred**2, axis=(0, 1)) ** 1.5
    return {
        "bulk_min": float(bulk.min()),
        "bulk_median": float(np.median(bulk)),
        "tail_min": float(tail.min()),
        "tail_median": float(np.median(tail)),
        "square_min": float(square.min()),
        "square_median": float(np.median(square)),
        "msjd": float(np.mean(np.sum(np.diff(z, axis=1) ** 2, axis=-1)) / z.shape[-1]),
        "acceptance": float(np.mean(result.info["accepted"])),
        "points_per_step": float(np.mean(result.info["data_used"])),
        "proxy_acceptance": float(np.nanmean(result.info["proxy_acceptance"])),
        "seconds_per_draw": result.sampling_seconds / z.shape[1],
        "compile_seconds": result.compile_seconds,
        "max_abs_skewness": float(np.max(np.abs(skewness))),
        "factor": float(np.exp(np.mean(np.log(np.asarray(result.step_size_factor)))))
        if result.step_size_factor is not None
        else 1.0,
    }


def run_one(
    model, mode, control_variate, covariance, test_name, time_pi, jitter, steps, draws, warmup, seed, proxy_target=None
):
    integration_time = time_pi * math.pi
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the half-period warning is the point of the sweep past π
        proposal = tallmcmc.proxy_hamiltonian(
            control_variate,
            integration_time / steps,
            steps,
            preconditioner=covariance,
            step_size_jitter=jitter,
        )
        factor = np.linalg.cholesky(np.asarray(covariance, np.float64))
        flat = np.asarray(mode.position, np.float64)
        noise = np.random.default_rng(seed).standard_normal((NUM_CHAINS, flat.shape[0]))
        starts = jnp.asarray(flat + noise @ factor.T, jnp.float32)
        result = tallmcmc.sample(
            model,
            proposal,
            make_test(test_name, model, control_variate),
            initial_positions=starts,
            num_samples=draws,
            num_warmup=warmup,
            target_acceptance=proxy_target if warmup else None,
            num_chains=NUM_CHAINS,
            seed=seed,
            progress=False,
        )
    row = {"time_pi": time_pi, "jitter": jitter, "steps": steps, "test": test_name, "warmup": warmup}
    row["proxy_target"], row["seed"] = proxy_target, seed
    row.update(measure(result, mode, covariance))
    return row


def predicted(time_pi: float, jitter: float, acceptance: float) -> tuple[float, float]:
    """ESS per draw of the mean and of the mean square of one coordinate under the rotation model (docstring)."""
    times = time_pi * math.pi * np.linspace(1 - jitter, 1 + jitter, 2001)
    rho, rho2 = np.mean(np.cos(times)), np.mean(np.cos(times) ** 2)
    mean = acceptance * (1 - rho) / (2 - acceptance * (1 - rho))
    square = acceptance * (1 - rho2) / (2 - acceptance * (1 - rho2))
    return float(mean), float(square)


HEADER = (
    "| target | test | T/π | j | L (adapted) | proxy target, acc | bulk min | bulk med | tail min | tail med | x² min | predicted mean, x² | "
    "MSJD | accept | points/step | ms/draw |"
)


def table_row(target: str, row: dict) -> str:
    mean, square = predicted(row["time_pi"], row["jitter"], row["acceptance"])
    steps = f"{row['steps']}" + (f" ({row['steps'] / row['factor']:.1f})" if row["warmup"] else "")
    proxy_target = row["proxy_target"] or (0.9 if row["warmup"] else "—")
    return (
        f"| {target} | {row['test']} | {row['time_pi']:.3g} | {row['jitter']:.2g} | {steps} | "
        f"{proxy_target}, {row['proxy_acceptance']:.3f} | "
        f"{row['bulk_min']:.3f} | {row['bulk_median']:.3f} | {row['tail_min']:.3f} | {row['tail_median']:.3f} | "
        f"{row['square_min']:.3f} | {mean:.3f}, {square:.3f} | {row['msjd']:.3f} | {row['acceptance']:.3f} | "
        f"{row['points_per_step']:,.0f} | {1e3 * row['seconds_per_draw']:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", default="d10,d50,skewed")
    parser.add_argument("--tests", default="barker,exact,tuna")
    parser.add_argument("--times", default=",".join(map(str, TIMES)), help="integration times in units of π")
    parser.add_argument("--jitters", default=",".join(map(str, JITTERS)))
    parser.add_argument("--draws", type=int, default=10_000)
    parser.add_argument("--exact-draws", type=int, default=5_000, help="kept draws per chain under the exact test")
    parser.add_argument("--steps-sweep", action="store_true", help="L in 1, 2, 3, 6, 12 at fixed T, no warm-up")
    parser.add_argument(
        "--proxy-targets", default="", help="e.g. 0.8,0.9,0.97,0.99: warm-up's proxy acceptance target (j = 0.2)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    for target in args.targets.split(","):
        model, mode, control_variate, covariance = build(target)
        for test_name in args.tests.split(","):
            if test_name == "tuna" and target != "d10":
                continue
            draws = args.exact_draws if test_name == "exact" else args.draws
            if args.steps_sweep:
                configs = [(t, 0.2, s, 0, None) for t in map(float, args.times.split(",")) for s in (1, 2, 3, 6, 12)]
            elif args.proxy_targets:
                configs = [
                    (t, 0.2, 3, NUM_WARMUP, float(p))
                    for t in map(float, args.times.split(","))
                    for p in args.proxy_targets.split(",")
                ]
            else:
                configs = [
                    (t, j, 3, NUM_WARMUP, None)
                    for j in map(float, args.jitters.split(","))
                    for t in map(float, args.times.split(","))
                ]
            for time_pi, jitter, steps, warmup, proxy_target in configs:
                started = time.perf_counter()
                row = run_one(
                    model,
                    mode,
                    control_variate,
                    covariance,
                    test_name,
                    time_pi,
                    jitter,
                    steps,
                    draws,
                    warmup,
                    args.seed,
                    proxy_target,
                )
                row["target"], row["wall"] = target, time.perf_counter() - started
                rows.append(row)
                print(table_row(target, row), f"(skew {row['max_abs_skewness']:.2f})", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
