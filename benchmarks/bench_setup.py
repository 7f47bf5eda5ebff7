"""fast_setup against find_mode + taylor_control_variate (issue 26, item 1): passes, time, residuals, posterior.

For each (N, d): untempered logistic regression ``logistic_regression.simulate(N, d, seed=0)``, prior N(0, I), start
at zeros, float32 (no JAX_ENABLE_X64). In the same process:

* ``fast``: ``tallmcmc.fast_setup(model)`` (subsample Newton, two full passes; mode, covariance, control variate);
* ``old``: ``tallmcmc.find_mode(model, 0)``, ``tallmcmc.laplace_covariance(mode)`` and
  ``tallmcmc.taylor_control_variate(model, mode.position)``: what ``sample_tall`` did before.

Columns: passes over N (every point touched: fast_setup's subsample phase, start check and full passes; find_mode's
passes with its start check, plus the control variate's pass); wall seconds of the call with the seconds JAX
reports for tracing, lowering and compiling (``jax.monitoring``) counted apart ("compile s"; both paths compile
afresh at every call, as a user meets them), after one untimed full-data sum has touched the rows; λ₁ (the Newton
decrement at the control variate's centre, posterior sd) and the distance of fast_setup's mode from find_mode's
(posterior sd, find_mode's Hessian); the residual ratio: mean N²·Var(rᵢ) of fast_setup's control variate over that of
the control variate at find_mode's mode, over the same 20 independent pairs (θ, θ′) from the Laplace approximation
N(θ̂, H⁻¹) and 20 Laplace random-walk steps θ′ = θ + (2.38/√d)·Lξ (computed in float64 NumPy from closed-form
per-datum derivatives, in chunks of rows; ± its delta-method standard error over the pairs), and the same ratio for
the deliberately bad centre (the subsample iterate, where pass 1 was made). Ratios fast/old from the same run.

``--groups G …`` runs the hierarchical model instead: random intercepts of G groups with a learned scale
(``random_intercepts.simulate(N, G, seed=3)``, positions log τ and u, d = G + 1), where τ's posterior stays as wide as
G groups make it at any N; columns: passes, whether the fast path fell back (and why), its levels, λ₁, the distance
of its mode from find_mode's, and the exact posterior's log τ mean − mode in sd (quadrature; the skew the levels must
not leave to the full-data Newton steps). No residual ratio (its closed form is the logistic model's).

``--posterior`` also runs ``sample_tall(model, setup="fast")`` (4 × ``--draws``) against a long run of the old path,
``sample_tall(model, setup="exact")`` (4 × ``--reference-draws``), and prints the largest |z| of the means and sds
(both runs' MCSEs, ArviZ bulk ESS) and each run's setup passes.

    python benchmarks/bench_setup.py --sizes 1000000 10000000 --dimensions 10 50
    python benchmarks/bench_setup.py --sizes 1000000 --dimensions 10 --posterior --draws 2000 --reference-draws 8000
    python benchmarks/bench_setup.py --sizes 250000 1000000 --groups 3 8 40
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from _timing import CompileClock
from jax.flatten_util import ravel_pytree

import tallmcmc
from tallmcmc.examples import logistic_regression, random_intercepts
from tallmcmc.interop import arviz as arviz_bridge

COMPILE_CLOCK = CompileClock()


def timed(function):
    """``(value, wall seconds, compile seconds)`` of ``function()``."""
    COMPILE_CLOCK.reset()
    began = time.perf_counter()
    value = function()
    return value, time.perf_counter() - began, COMPILE_CLOCK.seconds


def flat(position) -> np.ndarray:
    return np.asarray(ravel_pytree(position)[0], np.float64)


def log_sigmoid(z):
    return np.minimum(z, 0) - np.log1p(np.exp(-np.abs(z)))


def residual_spreads(covariates, response, centers, pairs, rows=250_000) -> np.ndarray:
    """N²·Var(rᵢ) for every (centre, pair), float64, in chunks of ``rows`` rows: shape (len(centers), len(pairs))."""
    num_data = covariates.shape[0]
    starts = np.stack([a for a, _ in pairs], 1)
    ends = np.stack([b for _, b in pairs], 1)
    centers = np.stack(centers, 1)
    total = np.zeros((centers.shape[1], starts.shape[1]))
    squares = np.zeros_like(total)
    for first in range(0, num_data, rows):
        x = covariates[first : first + rows].astype(np.float64)
        sign = (2.0 * response[first : first + rows].astype(np.float64) - 1.0)[:, None]
        za, zb, zc = sign * (x @ starts), sign * (x @ ends), sign * (x @ centers)
        change = log_sigmoid(zb) - log_sigmoid(za)
        along = zb - za  # s·xᵀδ
        for k in range(zc.shape[1]):
            tail = 1.0 / (1.0 + np.exp(zc[:, k : k + 1]))
            middle = 0.5 * (za + zb) - zc[:, k : k + 1]  # s·xᵀū
            residual = change - tail * along + tail * (1.0 - tail) * middle * along
            total[k] += residual.sum(0)
            squares[k] += (residual**2).sum(0)
    mean = total / num_data
    return num_data**2 * (squares / num_data - mean**2)


def laplace_pairs(center, hessian, count, seed=0):
    factor = np.linalg.cholesky(np.linalg.inv(hessian))
    rng = np.random.default_rng(seed)
    dimension = center.size
    pairs = []
    for _ in range(count):
        draws = center + rng.standard_normal((2, dimension)) @ factor.T
        pairs.append((draws[0], draws[1]))
        start = center + factor @ rng.standard_normal(dimension)
        pairs.append((start, start + 2.38 / math.sqrt(dimension) * factor @ rng.standard_normal(dimension)))
    return pairs


def ratio_and_error(ours: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    ratio = ours.mean() / reference.mean()
    influence = (ours - ratio * reference) / reference.mean()
    return float(ratio), float(influence.std(ddof=1) / math.sqrt(ours.size))


def moments_z(draws, reference_draws) -> tuple[float, float]:
    """Largest |z| of the means and of the sds between two runs, each with its own MCSE (ArviZ bulk ESS)."""

    def moments(x):
        ess = arviz_bridge.ess(x)
        sd = x.std((0, 1))
        kurtosis = np.mean((x - x.mean((0, 1))) ** 4, (0, 1)) / sd**4
        return x.mean((0, 1)), sd, sd / np.sqrt(ess), sd * np.sqrt((kurtosis - 1) / (4 * ess))

    mean, sd, mcse_mean, mcse_sd = moments(draws)
    mean_r, sd_r, mcse_mean_r, mcse_sd_r = moments(reference_draws)
    return (
        float(np.max(np.abs(mean - mean_r) / np.hypot(mcse_mean, mcse_mean_r))),
        float(np.max(np.abs(sd - sd_r) / np.hypot(mcse_sd, mcse_sd_r))),
    )


def run(num_data, dimension, args):
    began = time.perf_counter()
    covariates, response = logistic_regression.simulate(num_data, dimension, seed=0)
    model = logistic_regression.model(covariates, response)
    generated = time.perf_counter() - began
    start = jnp.zeros(dimension, jnp.float32)
    touch = jax.jit(lambda theta, data: model.with_data(data).log_likelihood_sum(theta))
    jax.block_until_ready(touch(start, model.data))  # the rows' first touch, timed by neither path

    def old_path():
        mode = tallmcmc.find_mode(model, start)
        covariance = tallmcmc.laplace_covariance(mode)
        return mode, covariance, tallmcmc.taylor_control_variate(model, mode.position)

    runs = {}
    for name in args.order:
        runs[name] = timed((lambda: tallmcmc.fast_setup(model, start)) if name == "fast" else old_path)
    (fast, fast_wall, fast_compile), ((mode, _, cv), old_wall, old_compile) = runs["fast"], runs["old"]
    fast_passes = fast.data_used / num_data
    old_passes = (mode.data_used + cv.data_used) / num_data
    exact = flat(mode.position)
    offset = flat(fast.mode.position) - exact
    distance = float(np.sqrt(offset @ mode.hessian @ offset))
    pairs = laplace_pairs(exact, mode.hessian, args.pairs)
    centers = [flat(fast.control_variate.center), exact]
    if fast.subsample_point is not None:  # None where the fast path gave up before pass 1
        centers.append(flat(fast.subsample_point))
    spreads = residual_spreads(covariates, response, centers, pairs)
    ratio, ratio_error = ratio_and_error(spreads[0], spreads[1])
    bad, bad_error = ratio_and_error(spreads[2], spreads[1]) if len(centers) == 3 else (math.nan, math.nan)
    out = {
        "N": num_data,
        "d": dimension,
        "fallback": fast.fallback,
        "fast_passes": fast_passes,
        "fast_subsample_passes": fast.subsample_passes,
        "levels": [(lv.rows, lv.evaluations) for lv in fast.levels],
        "old_passes": old_passes,
        "find_mode_passes": mode.data_passes,
        "fast_wall": fast_wall,
        "fast_compile": fast_compile,
        "old_wall": old_wall,
        "old_compile": old_compile,
        "decrement": fast.mode.newton_decrement,
        "decrement_limit": fast.decrement_limit,
        "distance_sd": distance,
        "spread_old": float(spreads[1].mean()),
        "spread_fast": float(spreads[0].mean()),
        "ratio": ratio,
        "ratio_error": ratio_error,
        "bad_ratio": bad,
        "bad_ratio_error": bad_error,
        "generate_s": generated,
    }
    running = (fast_wall - fast_compile) / (old_wall - old_compile)
    print(
        ("" if fast.fallback is None else f"FALLBACK ({fast.fallback}) ")
        + f"N={num_data:,} d={dimension}: passes fast {fast_passes:.3f} (subsample {fast.subsample_passes:.3f}, "
        f"levels {out['levels']}) vs old {old_passes:.0f} (find_mode {mode.data_passes:.0f} + 1): ratio "
        f"{fast_passes / old_passes:.3f}; wall fast {fast_wall:.2f} s (compile {fast_compile:.2f}) vs old "
        f"{old_wall:.2f} s (compile {old_compile:.2f}): ratio {fast_wall / old_wall:.2f}, without compilation "
        f"{running:.2f}; λ₁ {fast.mode.newton_decrement:.3g} (limit {fast.decrement_limit:.3g}), mode "
        f"{distance:.2g} sd from find_mode's; N²Var(rᵢ) old {spreads[1].mean():.4g}, fast {spreads[0].mean():.4g}: "
        f"ratio {ratio:.3f} ± {ratio_error:.3f}; bad centre (subsample iterate) {bad:.3g} ± {bad_error:.2g}",
        flush=True,
    )
    if args.posterior:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            new, new_wall, _ = timed(
                lambda: tallmcmc.sample_tall(model, start, num_samples=args.draws, seed=1, progress=False, setup="fast")
            )
            ref, ref_wall, _ = timed(
                lambda: tallmcmc.sample_tall(
                    model, start, num_samples=args.reference_draws, seed=2, progress=False, setup="exact"
                )
            )
        draws = np.asarray(jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(new.positions), np.float64)
        reference = np.asarray(jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(ref.positions), np.float64)
        z_mean, z_sd = moments_z(draws, reference)
        out.update(
            posterior_z_mean=z_mean,
            posterior_z_sd=z_sd,
            new_setup_passes=new.setup_data_passes,
            reference_setup_passes=ref.setup_data_passes,
            new_decision=new.diagnosis.decision,
            new_problems=new.diagnosis.problems,
            reference_problems=ref.diagnosis.problems,
            new_wall=new_wall,
            reference_wall=ref_wall,
            new_rhat=new.diagnosis.r_hat_max,
            reference_rhat=ref.diagnosis.r_hat_max,
            new_ess=new.diagnosis.ess_bulk_min,
            reference_ess=ref.diagnosis.ess_bulk_min,
        )
        print(
            f"  posterior: sample_tall(setup='fast') 4×{args.draws} vs setup='exact' 4×{args.reference_draws}: max |z| "
            f"mean {z_mean:.2f}, sd {z_sd:.2f}; setup passes (start check included) {new.setup_data_passes:.2f} vs "
            f"{ref.setup_data_passes:.2f}; decision {new.diagnosis.decision}; r̂ {new.diagnosis.r_hat_max:.4f} / "
            f"{ref.diagnosis.r_hat_max:.4f}; ESS {new.diagnosis.ess_bulk_min:.0f} / {ref.diagnosis.ess_bulk_min:.0f}; "
            f"problems {new.diagnosis.problems or 'none'} / {ref.diagnosis.problems or 'none'}",
            flush=True,
        )
    print(json.dumps(out), flush=True)
    return out


def run_hierarchical(num_data, groups, args):
    """fast_setup against find_mode + taylor_control_variate on random intercepts of ``groups`` groups."""
    labels, response = random_intercepts.simulate(num_data, groups, seed=3)
    model = random_intercepts.model(labels, response, groups)
    start = {"log_tau": jnp.zeros((), jnp.float32), "u": jnp.zeros(groups, jnp.float32)}

    def old_path():
        mode = tallmcmc.find_mode(model, start)
        return mode, tallmcmc.taylor_control_variate(model, mode.position)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        fast, fast_wall, fast_compile = timed(lambda: tallmcmc.fast_setup(model, start))
    (mode, cv), old_wall, old_compile = timed(old_path)
    offset = flat(fast.mode.position) - flat(mode.position)
    distance = float(np.sqrt(offset @ mode.hessian @ offset))
    exact = random_intercepts.posterior(labels, response, groups)
    skew = (exact["log_tau"][0] - float(flat(mode.position)[0])) / exact["log_tau"][1]
    out = {
        "N": num_data,
        "groups": groups,
        "fallback": fast.fallback,
        "warnings": len(caught),
        "fast_passes": fast.data_passes,
        "fast_subsample_passes": fast.subsample_passes,
        "levels": [(lv.rows, lv.evaluations) for lv in fast.levels],
        "old_passes": (mode.data_used + cv.data_used) / num_data,
        "fast_wall": fast_wall,
        "fast_compile": fast_compile,
        "old_wall": old_wall,
        "old_compile": old_compile,
        "decrement": fast.mode.newton_decrement,
        "decrement_limit": fast.decrement_limit,
        "distance_sd": distance,
        "log_tau_mean_minus_mode_sd": skew,
    }
    print(
        ("" if fast.fallback is None else f"FALLBACK ({fast.fallback[:90]}…) ")
        + f"N={num_data:,} G={groups}: passes fast {fast.data_passes:.3f} (subsample {fast.subsample_passes:.3f}, "
        f"levels {out['levels']}) vs old {out['old_passes']:.2f}; wall fast {fast_wall:.2f} s (compile "
        f"{fast_compile:.2f}) vs old {old_wall:.2f} s (compile {old_compile:.2f}); λ₁ {fast.mode.newton_decrement:.3g} "
        f"(limit {fast.decrement_limit:.3g}), mode {distance:.2g} sd from find_mode's; log τ's mean − mode "
        f"{skew:.2f} sd",
        flush=True,
    )
    print(json.dumps(out), flush=True)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--dimensions", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--pairs", type=int, default=20, help="independent pairs and random-walk pairs, each")
    parser.add_argument(
        "--order",
        nargs=2,
        default=["fast", "old"],
        choices=["fast", "old"],
        help="which setup runs first in each configuration",
    )
    parser.add_argument(
        "--groups",
        type=int,
        nargs="+",
        help="random intercepts of these numbers of groups instead of the logistic model",
    )
    parser.add_argument("--posterior", action="store_true")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--reference-draws", type=int, default=8000)
    args = parser.parse_args()
    for num_data in args.sizes:
        for groups in args.groups or ():
            run_hierarchical(num_data, groups, args)
        for dimension in () if args.groups else args.dimensions:
            run(num_data, dimension, args)
            gc.collect()  # the configuration's rows go before the next one's are made


if __name__ == "__main__":
    main()
