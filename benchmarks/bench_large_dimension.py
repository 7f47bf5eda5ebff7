"""Larger d (issue 26, item 5): where the second-order control variate stops paying, and what sample_tall chooses.

For each d in ``--dimensions`` (default 10, 100, 500): untempered logistic regression
``logistic_regression.simulate(N, d, seed=0)`` (xᵢ ~ N(0, I), β* ~ N(0, I/4), float32), prior N(0, I), N from
``--num-data`` (default 10⁶). In one process:

1. ``sample_tall(model, zeros)`` with its defaults (4 chains, ``--tall-draws`` kept draws, 200 warm-up): its
   decision and reason, setup passes by source, warm-up and kept passes, data per kept step, acceptance, bulk ESS
   (min over coordinates) per draw, data points per effective draw (kept draws only; and everything: setup,
   warm-up, kept), and its wall time split by phase from the times of its own progress lines (setup = mode and
   control variate; warm-up = start check, warm-up and the measured window; kept draws), with the seconds JAX
   spends compiling in each phase (``jax.monitoring``) apart.
2. From the same mode (``result.diagnosis.mode``), by hand, for each control variate — order 2 per-datum (the
   one sample_tall built), order 2 ``curvature="low_rank"`` with each rank in ``--ranks`` smaller than d, and
   order 1 —
   * how far the proxy's summed curvature A is from H̄: the range of the eigenvalues of H̄⁻¹A (1–1 for
     per-datum; it shapes the proxy posterior, hence the proposal);
   * the residual spread N²·Var(rᵢ) over all N residuals at ``--pairs`` independent pairs (θ, θ′) from the Laplace
     approximation N(θ̂, H⁻¹) (median and range; a proxy-HMC move of a quarter period is nearly such a pair);
   * the minibatch Barker test ``minibatch_barker(100, control_variate=cv)`` with the proxy-HMC proposal as
     sample_tall builds it (``proxy_hamiltonian(cv, INTEGRATION_TIME / NUM_LEAPFROG_STEPS, NUM_LEAPFROG_STEPS,
     preconditioner=laplace_covariance(mode), step_size_jitter=STEP_SIZE_JITTER)``), ``tallmcmc.warmup`` of
     ``--warmup`` (200) steps from Laplace draws, then ``--draws`` kept draws continuing it;
     ``automatic.choose_test`` on the warm-up's second half says what sample_tall would have decided with it;
   * the exact Metropolis test with the same proposal, tuned as sample_tall tunes it (the warm-up's geometric mean
     step factor, started from the warmed chains), ``--exact-draws`` draws.
   Columns: points per chain-step, acceptance, ESS per draw, points per effective draw (kept draws; and all-in:
   the mode's passes, the control variate's, the start check, warm-up and kept draws), seconds per 4-chain step
   (sampling, compilation excluded) and its load.

A run that would take longer than ``--budget`` seconds (projected from a ``--pilot-steps`` warm-up for the minibatch
test, from the measured seconds per full pass for the exact test) is shortened (fewer warm-up steps, never below 20,
and fewer draws) and marked ``short``; the seconds per step say what the full run would have cost.

Data touched are counted as the library counts them (``data_used``: points per step; a full pass is N). Loads are
``os.getloadavg()`` (1 min) at the start and end of each run; the machine is shared, so read the points, passes,
acceptance and ESS per draw, not the seconds.

    python benchmarks/bench_large_dimension.py --num-data 100000 --dimensions 10 100             # quick
    python benchmarks/bench_large_dimension.py --budget 450 --json large_d.json   # N = 10⁶, d = 10, 100, 500 (~1 h)
    python benchmarks/bench_large_dimension.py --dimensions 500 --options --exact-draws 1000 --budget 900 --validate
    python benchmarks/bench_large_dimension.py --num-data 100000 --dimensions 200 500 --options --budget 450

``--options`` with no value runs the per-datum control variate only; ``--validate`` compares sample_tall's draws
with the exact test's (z of the means and sds over the coordinates).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import math
import os
import resource
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

import tallmcmc
from tallmcmc.choice_of_test import choose_test
from tallmcmc.examples import logistic_regression
from tallmcmc.interop import arviz as arviz_bridge
from tallmcmc.sharding import to_host
from tallmcmc.tall_warmup import INTEGRATION_TIME, NUM_LEAPFROG_STEPS, STEP_SIZE_JITTER

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import CompileClock  # noqa: E402

CLOCK = CompileClock()
CHAINS = 4
MINIBATCH = 100


def load() -> float:
    return float(os.getloadavg()[0])


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def flat_draws(positions) -> np.ndarray:
    return np.asarray(jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(positions), np.float64)


def ess_min(positions) -> float:
    return float(np.min(arviz_bridge.ess(flat_draws(positions))))


class Stamped(io.TextIOBase):
    """Passes stdout through, noting the time and the compile seconds so far at each ``sample_tall:`` line."""

    def __init__(self, out):
        self.out = out
        self.lines: list[tuple[float, float, str]] = []

    def write(self, text):
        self.out.write(text)
        for line in text.splitlines():
            if line.startswith("sample_tall:"):
                self.lines.append((time.perf_counter(), CLOCK.seconds, line))
        return len(text)

    def flush(self):
        self.out.flush()


def run_sample_tall(model, dimension, args) -> tuple[dict, object]:
    CLOCK.reset()
    stamped = Stamped(sys.stdout)
    began_load = load()
    began = time.perf_counter()
    with (
        warnings.catch_warnings(record=True) as caught,
        contextlib.redirect_stdout(stamped),
        contextlib.redirect_stderr(io.StringIO()),
    ):  # its progress bars
        warnings.simplefilter("always")
        result = tallmcmc.sample_tall(
            model,
            jnp.zeros(dimension, jnp.float32),
            num_samples=args.tall_draws,
            num_chains=CHAINS,
            seed=args.seed,
            progress=True,
        )
    ended = time.perf_counter()
    total_compile = CLOCK.seconds
    marks = {"start": (began, 0.0)}
    for moment, compiled, line in stamped.lines:
        if "warm-up with the minibatch test" in line:
            marks["warm-up"] = (moment, compiled)
        elif line.startswith(
            ("sample_tall: minibatch", "sample_tall: exact", "sample_tall: tuna", "sample_tall: random walk")
        ):
            marks["kept"] = (moment, compiled)
    marks["end"] = (ended, total_compile)
    order = [name for name in ("start", "warm-up", "kept", "end") if name in marks]
    phases = {}
    for first, last in zip(order, order[1:]):
        phases[first] = dict(seconds=marks[last][0] - marks[first][0], compile=marks[last][1] - marks[first][1])
    diagnosis = result.diagnosis
    ess = diagnosis.ess_bulk_min
    draws = CHAINS * args.tall_draws
    num_data = model.num_data
    kept_points = diagnosis.sampling_passes * num_data
    choice = diagnosis.choice
    row = dict(
        decision=diagnosis.decision,
        reason=diagnosis.reason,
        setup_passes=diagnosis.setup_passes,
        setup_passes_total=sum(diagnosis.setup_passes.values()),
        warmup_passes=diagnosis.warmup_passes,
        sampling_passes=diagnosis.sampling_passes,
        data_fraction=diagnosis.data_fraction,
        points_per_step=diagnosis.data_fraction * num_data,
        accept=result.acceptance_rate,
        ess_min=ess,
        ess_per_draw=ess / draws,
        r_hat_max=diagnosis.r_hat_max,
        points_per_ess_kept=kept_points / ess,
        points_per_ess_warm=(kept_points + diagnosis.warmup_passes * num_data) / ess,
        points_per_ess_all=result.total_data_used / ess,
        wall=ended - began,
        compile=total_compile,
        phases=phases,
        kept_sampling_seconds=result.sampling_seconds,
        kept_compile_seconds=result.compile_seconds,
        seconds_per_step=result.seconds_per_step,
        settled=diagnosis.warmup_settled,
        problems=diagnosis.problems,
        warnings=sorted({str(w.message)[:160] for w in caught}),
        load=(began_load, load()),
        peak_gb=peak_gb(),
    )
    if choice is not None:
        row.update(
            window_spread=choice.use.spread,
            window_fraction=choice.use.fraction,
            window_kurtosis=choice.use.kurtosis,
            window_barker_accept=choice.barker_acceptance,
            window_metropolis_accept=choice.metropolis_acceptance,
            predicted_minibatch_cost=choice.minibatch_cost,
            predicted_exact_cost=choice.exact_cost,
        )
    return row, result


def laplace_pairs(mode, covariance, count, seed):
    center = np.asarray(ravel_pytree(mode.position)[0], np.float64)
    factor = np.linalg.cholesky(np.asarray(covariance, np.float64))
    rng = np.random.default_rng(seed)
    return [
        tuple(jnp.asarray(center + factor @ rng.standard_normal(center.size), jnp.float32) for _ in range(2))
        for _ in range(count)
    ]


def residual_spreads(model, cv, pairs, rows) -> np.ndarray:
    """N²·Var(rᵢ) over all N residuals at each pair, the residuals computed in chunks of ``rows`` (float64 on host)."""
    residual_model = cv.residual_model(model)
    function = jax.jit(lambda a, b, data: residual_model.log_likelihood_ratios(a, b, data))
    num_data = model.num_data

    def chunk(first):  # sliced afresh for each pair: no second copy of the data held
        return jax.tree_util.tree_map(lambda leaf: leaf[first : first + rows], model.data)

    spreads = []
    for a, b in pairs:
        values = np.concatenate(
            [np.asarray(function(a, b, chunk(first)), np.float64) for first in range(0, num_data, rows)]
        )
        spreads.append(num_data**2 * float(np.var(values)))
    return np.asarray(spreads)


def pass_seconds(model) -> float:
    """Seconds of one full-data log-likelihood at 4 positions together (vmapped, as the exact test's step), best of 3."""
    dimension = int(model.position_shape[0])
    function = jax.jit(
        jax.vmap(lambda beta, data: jnp.sum(model.per_datum_log_likelihood(beta, data)), in_axes=(0, None))
    )  # the data an argument, not a captured constant
    positions = jnp.full((CHAINS, dimension), 0.01, jnp.float32)
    function(positions, model.data).block_until_ready()
    best = math.inf
    for _ in range(3):
        began = time.perf_counter()
        function(positions, model.data).block_until_ready()
        best = min(best, time.perf_counter() - began)
    return best


def starts(mode, covariance, seed):
    """One start per chain from N(mode, covariance), as sample_tall draws them."""
    flat, unravel = ravel_pytree(mode.position)
    factor = np.linalg.cholesky(np.asarray(covariance, np.float64))
    noise = np.asarray(
        jax.random.normal(jax.random.fold_in(jax.random.key(seed), 1), (CHAINS, flat.shape[0])), np.float64
    )
    draws = np.asarray(flat, np.float64) + noise @ factor.T
    return jax.vmap(unravel)(jnp.asarray(draws, flat.dtype))


def window(warmed):
    half = warmed.num_warmup // 2
    return {name: values[:, half:] for name, values in warmed.info.items()}


def fit(seconds_per_step, warmup, draws, budget):
    """(warm-up steps, draws, shortened?) that fit ``budget`` seconds at ``seconds_per_step``."""
    if seconds_per_step * (warmup + draws) <= budget:
        return warmup, draws, False
    steps = max(int(budget / max(seconds_per_step, 1e-9)), 60)
    new_warmup = max(20, min(warmup, steps // 3))
    return new_warmup, max(20, min(draws, steps - new_warmup)), True


def compare(draws, reference) -> dict:
    """``draws`` against ``reference`` (both (chain, draw, d)): z of the means and sds over the coordinates.

    MCSE of the mean: sd/√ESS; of the sd (delta method): sd((x − x̄)²)/(2·sd·√ESS₂), ESS₂ that of the squared
    deviations; z = difference / √(MCSE² + MCSE²_ref). With d nearly independent coordinates, max |z| is ≈ 3.3 at
    d = 500 by chance alone, and a bias common to the coordinates shows in the mean z of the sds (± 1/√d) and the
    mean sd ratio (± its standard error over the coordinates).
    """

    def moments(x):
        mean, sd = x.mean((0, 1)), x.std((0, 1))
        squares = (x - mean) ** 2
        mean_mcse = sd / np.sqrt(arviz_bridge.ess(x))
        sd_mcse = squares.std((0, 1)) / np.sqrt(arviz_bridge.ess(squares)) / (2 * sd)
        return mean, sd, mean_mcse, sd_mcse

    m, s, mm, sm = moments(draws)
    mr, sr, mmr, smr = moments(reference)
    z_mean = (m - mr) / np.hypot(mm, mmr)
    z_sd = (s - sr) / np.hypot(sm, smr)
    ratio = s / sr
    return dict(
        max_abs_z_mean=float(np.max(np.abs(z_mean))),
        max_abs_z_sd=float(np.max(np.abs(z_sd))),
        mean_z_sd=float(z_sd.mean()),
        sd_ratio=float(ratio.mean()),
        sd_ratio_se=float(ratio.std() / np.sqrt(ratio.size)),
    )


def curvature_range(cv, hessian_sum) -> tuple[float, float]:
    """Smallest and largest eigenvalue of H̄⁻¹A: the proxy's summed curvature A against H̄ (1, 1 when A = H̄)."""
    if cv.order != 2:
        return float("nan"), float("nan")
    factor = np.linalg.cholesky(-hessian_sum)
    inner = np.linalg.solve(factor, np.linalg.solve(factor, -cv.hessian_matrix()).T)
    values = np.linalg.eigvalsh(0.5 * (inner + inner.T))
    return float(values.min()), float(values.max())


def by_hand(model, cv, name, mode, covariance, mode_passes, seconds_per_pass, pairs, hessian_sum, args) -> list[dict]:
    num_data = model.num_data
    low, high = curvature_range(cv, hessian_sum)
    spreads = residual_spreads(model, cv, pairs, args.residual_rows)
    proposal = tallmcmc.proxy_hamiltonian(
        cv,
        INTEGRATION_TIME / NUM_LEAPFROG_STEPS,
        NUM_LEAPFROG_STEPS,
        preconditioner=covariance,
        step_size_jitter=STEP_SIZE_JITTER,
    )
    test = tallmcmc.minibatch_barker(MINIBATCH, control_variate=cv)
    initial = starts(mode, covariance, args.seed)
    common = dict(num_chains=CHAINS, seed=args.seed, progress=False)
    cv_passes = cv.data_used / num_data
    base = dict(
        option=name,
        cv_passes=cv_passes,
        curvature_low=low,
        curvature_high=high,
        spread_median=float(np.median(spreads)),
        spread_low=float(np.min(spreads)),
        spread_high=float(np.max(spreads)),
    )
    rows = []

    # pilot: a few warm-up steps, to project the run's time
    CLOCK.reset()
    began = time.perf_counter()
    pilot = tallmcmc.warmup(
        model, proposal, test, initial_positions=initial, num_warmup=args.pilot_steps, check_starts=False, **common
    )
    pilot_seconds = (time.perf_counter() - began - CLOCK.seconds) / args.pilot_steps
    pilot_points = float(np.mean(pilot.info["data_used"]))
    del pilot
    num_warmup, draws, short = fit(pilot_seconds, args.warmup, args.draws, args.budget)
    print(
        f"  {name}: N²Var(rᵢ) median {base['spread_median']:.4g}; pilot {pilot_points:,.0f} points/step, "
        f"{pilot_seconds:.3g} s/step -> warm-up {num_warmup}, draws {draws}{' (short)' if short else ''}",
        flush=True,
    )

    began_load = load()
    CLOCK.reset()
    began = time.perf_counter()
    warmed = tallmcmc.warmup(model, proposal, test, initial_positions=initial, num_warmup=num_warmup, **common)
    warm_wall, warm_compile = time.perf_counter() - began, CLOCK.seconds
    pool = warmed.states.cache
    choice = choose_test(window(warmed), num_data, to_host(pool) if hasattr(pool, "fourth") else None)
    CLOCK.reset()
    result = tallmcmc.sample(model, proposal, test, warmed, num_samples=draws, **common)
    ess = ess_min(result.positions)
    kept = float(np.sum(result.data_used))
    warm_points = float(np.sum(warmed.info["data_used"]))
    start_check = sum(warmed.setup_data_used.values()) / num_data  # the start check (the mode is counted apart)
    all_in = (mode_passes + cv_passes + start_check) * num_data + warm_points + kept
    rows.append(
        dict(
            base,
            test="minibatch Barker",
            warmup=num_warmup,
            draws=draws,
            short=short,
            points_per_step=float(np.mean(result.data_used)),
            fraction=float(np.mean(result.data_used)) / num_data,
            full_data_steps=float(np.mean(result.info["used_full_data"])),
            accept=result.acceptance_rate,
            proxy_accept=float(np.nanmean(result.info["proxy_acceptance"]))
            if "proxy_acceptance" in result.info
            else None,
            ess_min=ess,
            ess_per_draw=ess / (CHAINS * draws),
            points_per_ess_kept=kept / ess,
            points_per_ess_all=all_in / ess,
            seconds_per_step=result.seconds_per_step,
            compile=warm_compile + result.compile_seconds,
            warmup_seconds=warm_wall - warm_compile,
            window_spread=choice.use.spread,
            window_fraction=choice.use.fraction,
            window_kurtosis=choice.use.kurtosis,
            would_keep_minibatch=choice.minibatch,
            predicted_minibatch_cost=choice.minibatch_cost,
            predicted_exact_cost=choice.exact_cost,
            setup_start_check=start_check,
            load=(began_load, load()),
            peak_gb=peak_gb(),
        )
    )
    print(
        f"    minibatch: {rows[-1]['points_per_step']:,.0f} points/step, accept {result.acceptance_rate:.3f}, "
        f"ESS/draw {rows[-1]['ess_per_draw']:.3f}, {rows[-1]['points_per_ess_kept']:,.0f} points/ESS, "
        f"{result.seconds_per_step * 1e3:.3g} ms/step",
        flush=True,
    )

    # the exact test with the same proposal, tuned and started as sample_tall does
    exact_draws = args.exact_draws
    short_exact = False
    if seconds_per_pass * exact_draws > args.budget:
        exact_draws, short_exact = max(20, int(args.budget / seconds_per_pass)), True
    if exact_draws > 0:
        factor = float(np.exp(np.mean(np.log(np.asarray(to_host(warmed.step_size_factor))))))
        tuned = proposal.tune(jnp.asarray(factor, jnp.float32))
        began_load = load()
        CLOCK.reset()
        exact = tallmcmc.sample(
            model,
            tuned,
            tallmcmc.exact_metropolis(),
            initial_positions=warmed.states.position,
            num_samples=exact_draws,
            check_starts=False,
            **common,
        )
        ess = ess_min(exact.positions)
        kept = float(np.sum(exact.data_used))
        all_in = (mode_passes + cv_passes + start_check) * num_data + warm_points + kept
        rows.append(
            dict(
                base,
                test="exact Metropolis",
                warmup=num_warmup,
                draws=exact_draws,
                short=short_exact,
                points_per_step=float(np.mean(exact.data_used)),
                fraction=float(np.mean(exact.data_used)) / num_data,
                full_data_steps=1.0,
                accept=exact.acceptance_rate,
                ess_min=ess,
                ess_per_draw=ess / (CHAINS * exact_draws),
                points_per_ess_kept=kept / ess,
                points_per_ess_all=all_in / ess,
                seconds_per_step=exact.seconds_per_step,
                compile=exact.compile_seconds,
                load=(began_load, load()),
                peak_gb=peak_gb(),
            )
        )
        if args.reference is not None and cv.order == 2 and cv.curvature == "per_datum":
            rows[-1]["validation"] = compare(args.reference, flat_draws(exact.positions))
            print(f"    sample_tall's draws against these exact-test draws: {rows[-1]['validation']}", flush=True)
        print(
            f"    exact: accept {exact.acceptance_rate:.3f}, ESS/draw {rows[-1]['ess_per_draw']:.3f}, "
            f"{rows[-1]['points_per_ess_kept']:,.0f} points/ESS, {exact.seconds_per_step:.3g} s/step",
            flush=True,
        )
    del warmed, result
    gc.collect()
    return rows


def fmt(value, spec=",.0f"):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return format(value, spec)


def print_tables(report):
    print("\n### sample_tall (defaults)\n")
    print(
        "| N | d | decision | setup passes (by source) | warm-up passes | kept passes | % of N per step | accept | "
        "ESS/draw | r̂ max | pts/ESS kept | pts/ESS all-in | window N²Var(rᵢ) | wall s: setup (compile) / warm-up "
        "(compile) / kept (compile) | load |"
    )
    print("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for entry in report:
        t = entry["sample_tall"]
        sources = ", ".join(f"{k} {v:.3g}" for k, v in t["setup_passes"].items())
        phases = " / ".join(f"{p['seconds']:.1f} ({p['compile']:.1f})" for p in t["phases"].values())
        print(
            f"| {entry['num_data']:,} | {entry['dimension']} | {t['decision']} | {t['setup_passes_total']:.3g} "
            f"({sources}) | {t['warmup_passes']:.3g} | {t['sampling_passes']:.3g} | {100 * t['data_fraction']:.3g} "
            f"| {t['accept']:.3f} | {t['ess_per_draw']:.3f} | {t['r_hat_max']:.4f} | {fmt(t['points_per_ess_kept'])} "
            f"| {fmt(t['points_per_ess_all'])} | {fmt(t.get('window_spread'), '.3g')} | {phases} "
            f"| {t['load'][0]:.1f}–{t['load'][1]:.1f} |"
        )
    print("\n### By hand, same mode: control variate × test (proxy-HMC proposal as sample_tall builds it)\n")
    print(
        "| N | d | control variate | CV passes | eig(H̄⁻¹A) | N²Var(rᵢ) Laplace pairs (median, range) | test "
        "| points/step (% of N) | accept | ESS/draw | pts/ESS kept | pts/ESS all-in | ms per 4-chain step "
        "| draws (warm-up) | load |"
    )
    print("|---:|---:|---|---:|---|---|---|---|---:|---:|---:|---:|---:|---|---|")
    for entry in report:
        for r in entry["by_hand"]:
            spread = f"{r['spread_median']:.3g} ({r['spread_low']:.3g}–{r['spread_high']:.3g})"
            draws = f"{r['draws']} ({r['warmup']}){' short' if r['short'] else ''}"
            curvature = (
                "–" if not math.isfinite(r["curvature_low"]) else f"{r['curvature_low']:.3g}–{r['curvature_high']:.3g}"
            )
            print(
                f"| {entry['num_data']:,} | {entry['dimension']} | {r['option']} | {r['cv_passes']:.3g} | {curvature} "
                f"| {spread} "
                f"| {r['test']} | {fmt(r['points_per_step'])} ({100 * r['fraction']:.3g}%) | {r['accept']:.3f} "
                f"| {r['ess_per_draw']:.3f} | {fmt(r['points_per_ess_kept'])} | {fmt(r['points_per_ess_all'])} "
                f"| {1e3 * r['seconds_per_step']:.3g} | {draws} | {r['load'][0]:.1f}–{r['load'][1]:.1f} |"
            )
    print("\n### Warm-up window of each minibatch run (what choose_test would decide)\n")
    print(
        "| N | d | control variate | window N²Var(rᵢ) | window % of N | kurtosis | keep minibatch? | "
        "predicted pts/ESS minibatch | predicted pts/ESS exact |"
    )
    print("|---:|---:|---|---:|---:|---:|---|---:|---:|")
    for entry in report:
        for r in entry["by_hand"]:
            if r["test"] != "minibatch Barker":
                continue
            print(
                f"| {entry['num_data']:,} | {entry['dimension']} | {r['option']} | {fmt(r['window_spread'], '.3g')} "
                f"| {100 * r['window_fraction']:.3g} | {fmt(r['window_kurtosis'], '.3g')} "
                f"| {'yes' if r['would_keep_minibatch'] else 'no'} | {fmt(r['predicted_minibatch_cost'])} "
                f"| {fmt(r['predicted_exact_cost'])} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-data", type=int, default=1_000_000)
    parser.add_argument("--dimensions", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--ranks", type=int, nargs="+", default=[10, 50], help="low_rank ranks (those < d run)")
    parser.add_argument(
        "--options",
        nargs="*",
        default=["low_rank", "order1"],
        choices=["low_rank", "order1"],
        help="by-hand control variates besides the per-datum one",
    )
    parser.add_argument("--tall-draws", type=int, default=2000, help="sample_tall's num_samples (its default)")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--draws", type=int, default=1000, help="kept draws per chain, minibatch test by hand")
    parser.add_argument("--exact-draws", type=int, default=300, help="kept draws per chain, exact test")
    parser.add_argument("--pairs", type=int, default=10, help="Laplace pairs for N²Var(rᵢ)")
    parser.add_argument("--pilot-steps", type=int, default=10)
    parser.add_argument("--budget", type=float, default=600.0, help="seconds per by-hand run before shortening it")
    parser.add_argument("--residual-rows", type=int, default=100_000)
    parser.add_argument("--cv-batch", type=int, default=50_000, help="rows per chunk of the by-hand CV passes")
    parser.add_argument("--skip-exact", action="store_true")
    parser.add_argument(
        "--validate",
        action="store_true",
        help="compare sample_tall's draws with the exact test's (per-datum CV proposal), z over coordinates",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.skip_exact:
        args.exact_draws = 0
    print(
        f"load average {os.getloadavg()}; {jax.devices()[0].platform}; tallmcmc {tallmcmc.__version__}; "
        f"{' '.join(sys.argv)}",
        flush=True,
    )
    report = []
    for dimension in args.dimensions:
        print(f"\n== N = {args.num_data:,}, d = {dimension} (load {load():.1f})", flush=True)
        covariates, response = logistic_regression.simulate(args.num_data, dimension, args.seed)
        model = logistic_regression.model(covariates, response)
        del covariates, response
        gc.collect()
        seconds_per_pass = pass_seconds(model)
        print(
            f"  one full pass at 4 positions: {seconds_per_pass:.3g} s (peak RSS so far {peak_gb():.1f} GB)", flush=True
        )
        tall, result = run_sample_tall(model, dimension, args)
        print(f"  sample_tall: {tall['decision']} — {tall['reason']}", flush=True)
        print(
            f"  sample_tall: {tall['points_per_step']:,.0f} points/step, accept {tall['accept']:.3f}, ESS/draw "
            f"{tall['ess_per_draw']:.3f}, {tall['points_per_ess_kept']:,.0f} points/ESS kept, "
            f"{tall['points_per_ess_all']:,.0f} all-in; wall {tall['wall']:.1f} s, phases {tall['phases']}",
            flush=True,
        )
        diagnosis = result.diagnosis
        mode, cv_default = diagnosis.mode, diagnosis.control_variate
        args.reference = flat_draws(result.positions) if args.validate else None
        # the mode's passes: everything sample_tall set up, less the start check (the per-datum CV is in fast_setup's
        # passes, or apart when find_mode ran; counted with each option's own cv_passes below)
        setup = dict(diagnosis.setup_passes)
        setup.pop("start check", None)
        if cv_default is not None:
            setup.pop(cv_default.name, None)
        mode_passes = sum(setup.values())
        del result
        gc.collect()
        entry = dict(
            num_data=args.num_data,
            dimension=dimension,
            seconds_per_pass=seconds_per_pass,
            mode_passes=mode_passes,
            sample_tall=tall,
            by_hand=[],
        )
        if cv_default is not None:
            covariance = tallmcmc.laplace_covariance(mode)
            pairs = laplace_pairs(mode, covariance, args.pairs, args.seed + 1)
            hessian_sum = cv_default.hessian_matrix()  # H̄ of the per-datum control variate (d × d, once)
            options = [("order 2, per_datum", lambda: cv_default)]
            for rank in args.ranks if "low_rank" in args.options else ():
                if rank < dimension:
                    options.append(
                        (
                            f"order 2, low_rank k = {rank}",
                            lambda rank=rank: tallmcmc.taylor_control_variate(
                                model, mode.position, curvature="low_rank", rank=rank, batch_size=args.cv_batch
                            ),
                        )
                    )
            if "order1" in args.options:
                options.append(
                    (
                        "order 1",
                        lambda: tallmcmc.taylor_control_variate(
                            model, mode.position, order=1, batch_size=args.cv_batch
                        ),
                    )
                )
            for name, build in options:
                began = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cv = build()
                    built = time.perf_counter() - began
                    rows = by_hand(
                        model, cv, name, mode, covariance, mode_passes, seconds_per_pass, pairs, hessian_sum, args
                    )
                for r in rows:
                    r["cv_seconds"] = built
                entry["by_hand"].extend(rows)
                del cv
                gc.collect()
        report.append(entry)
        model = mode = cv_default = None  # free the data before the next d
        gc.collect()
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(report, handle, indent=1, default=float)
    print_tables(report)
    print(f"\nload average {os.getloadavg()}; peak RSS {peak_gb():.1f} GB", flush=True)


if __name__ == "__main__":
    main()
