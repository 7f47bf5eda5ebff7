"""What ``choose_test`` predicts from the warm-up window against what each test then does (sample_tall's decision).

For each ``N×d`` in ``--settings`` (default 10⁵ × 10, 50, 100, 200, 500 and 10⁶ × 10): untempered logistic
regression ``logistic_regression.simulate(N, d, seed=0)`` (float32, prior N(0, I)), set up exactly as
``sample_tall`` sets it up (``fast_setup`` where ``setup="auto"`` uses it, else ``find_mode`` and
``taylor_control_variate``; the proxy-HMC proposal; ``minibatch_barker(100, cv)``; 4 chains from Laplace draws,
200 warm-up steps, seed 0). From the warm-up's second half (the window ``choose_test`` reads):

* the decision by data points alone (``choose_test(window, N, pool)``, the rule before the cost model) and by cost
  (``choose_test(..., control_variate=cv)``, the residual priced by ``RESIDUAL_POINT_COST``);
* estimates of the minibatch test's ESS per draw: the rule a/(2 − a) at the window's acceptance (what
  ``choose_test`` uses); the lag-1 autocorrelation of each whitened coordinate, z = L⁻¹(θ − θ̂) with LLᵀ the
  Laplace covariance, from the window's mean squared jump against the Laplace variance (1: "msjd") and against
  the window's own variance ("lag-1"), mapped to an ESS per draw by (1 − ρ)/(1 + ρ) (an AR(1) chain), median over
  coordinates; and ArviZ's bulk ESS of the window itself (4 × 100 draws), median over coordinates;
* for the exact test: a/(2 − a) at the window's estimated Metropolis acceptance.

Then both tests run from the warm-up, as ``sample_tall`` runs whichever it keeps: the minibatch test continuing
the warm-up (``--draws``, 2,000 per chain), the exact test from the warm-up's final states with the chains'
geometric-mean step factor (``--exact-draws``, 1,000). Measured: acceptance, bulk ESS per draw (median and min
over coordinates), points per step, and seconds per step (wall time of the run less JAX's compilation time; the
machine is shared, so the load is given).

    python benchmarks/bench_choose_test.py --json choose_test.json
    python benchmarks/bench_choose_test.py --settings 100000x10 100000x500
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

import tallmcmc
from tallmcmc import automatic, choice_of_test, tall_warmup
from tallmcmc.control_variate import control_variate_at_mode
from tallmcmc.examples import logistic_regression
from tallmcmc.interop import arviz as arviz_bridge
from tallmcmc.sharding import to_host

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import CompileClock  # noqa: E402

CLOCK = CompileClock()
CHAINS = 4


def ess_per_draw(draws: np.ndarray) -> tuple[float, float]:
    """Median and min over coordinates of ArviZ's bulk ESS per draw; ``draws`` (chain, draw, d)."""
    ess = np.asarray(arviz_bridge.ess(draws), np.float64) / (draws.shape[0] * draws.shape[1])
    return float(np.median(ess)), float(np.min(ess))


def ar1(rho: np.ndarray) -> np.ndarray:
    """(1 − ρ)/(1 + ρ): the ESS per draw of an AR(1) chain with lag-1 autocorrelation ρ."""
    rho = np.clip(rho, -0.999, 0.999)
    return (1.0 - rho) / (1.0 + rho)


def window_estimates(positions: np.ndarray, centre: np.ndarray, covariance: np.ndarray) -> dict[str, float]:
    """ESS-per-draw estimates from the window's positions (chain, draw, d), in Laplace-whitened coordinates."""
    factor = np.linalg.cholesky(covariance)
    whitened = np.linalg.solve(factor, (positions - centre).reshape(-1, centre.size).T).T.reshape(positions.shape)
    jumps = np.diff(whitened, axis=1)
    mean_square_jump = np.mean(jumps**2, axis=(0, 1))
    variance = np.var(whitened.reshape(-1, centre.size), axis=0)
    return {
        "msjd": float(np.median(ar1(1.0 - mean_square_jump / 2.0))),
        "lag-1": float(np.median(ar1(1.0 - mean_square_jump / (2.0 * variance)))),
        "window ESS": ess_per_draw(positions)[0],
    }


def timed_run(call) -> tuple[object, float]:
    """``call()`` and its wall seconds less JAX's compilation time."""
    CLOCK.reset()
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start - CLOCK.seconds


def measure(num_data: int, dimension: int, args) -> dict:
    model = logistic_regression.model(*logistic_regression.simulate(num_data, dimension, seed=0))
    start = jnp.zeros(dimension)
    wall = time.perf_counter()
    mode, control_variate, _ = automatic.default_setup(model, start)
    if control_variate is None:  # as sample_tall builds it: from find_mode's last pass
        control_variate = control_variate_at_mode(model, mode)
    setup_seconds = time.perf_counter() - wall
    covariance = np.asarray(tallmcmc.laplace_covariance(mode), np.float64)
    proposal = tallmcmc.proxy_hamiltonian(
        control_variate,
        tall_warmup.INTEGRATION_TIME / tall_warmup.NUM_LEAPFROG_STEPS,
        tall_warmup.NUM_LEAPFROG_STEPS,
        preconditioner=tallmcmc.laplace_covariance(mode),
        step_size_jitter=tall_warmup.STEP_SIZE_JITTER,
    )
    minibatch = tallmcmc.minibatch_barker(100, control_variate=control_variate)
    starts = tall_warmup.chain_starts(mode.position, covariance, CHAINS, jax.random.key(0))
    load_start = os.getloadavg()[0]
    warmed = tallmcmc.warmup(
        model,
        proposal,
        minibatch,
        initial_positions=starts,
        num_warmup=args.warmup,
        num_chains=CHAINS,
        seed=0,
        progress=False,
        check_starts=False,
    )
    window = tall_warmup.warmup_window(warmed)
    pool = warmed.states.cache
    pool = to_host(pool) if hasattr(pool, "fourth") else None
    by_points = automatic.choose_test(window, num_data, pool)
    by_cost = automatic.choose_test(window, num_data, pool, control_variate)
    centre = np.asarray(ravel_pytree(mode.position)[0], np.float64)
    flat = np.asarray(warmed.positions, np.float64)[:, args.warmup // 2 :]
    estimates = window_estimates(flat, centre, covariance)
    estimates["rule"] = choice_of_test.ess_per_draw(by_cost.barker_acceptance)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        kept, kept_seconds = timed_run(
            lambda: tallmcmc.sample(model, proposal, minibatch, warmed, num_samples=args.draws, seed=0, progress=False)
        )
        factor = float(np.exp(np.mean(np.log(np.asarray(to_host(warmed.step_size_factor))))))
        tuned = proposal.tune(jnp.asarray(factor, jnp.float32))
        exact, exact_seconds = timed_run(
            lambda: tallmcmc.sample(
                model,
                tuned,
                tallmcmc.exact_metropolis(),
                initial_positions=tall_warmup.final_positions(warmed),
                num_samples=args.exact_draws,
                num_chains=CHAINS,
                seed=0,
                check_starts=False,
                progress=False,
            )
        )
    row = {"N": num_data, "d": dimension, "setup_seconds": setup_seconds, "load": [load_start]}
    row["residual_cost"] = by_cost.residual_cost
    row["decision_by_points"] = "minibatch" if by_points.minibatch else "exact"
    row["decision_by_cost"] = "minibatch" if by_cost.minibatch else "exact"
    row["cause"] = by_cost.cause
    row["window"] = {
        "points_per_step": float(np.mean(window["data_used"])),
        "barker_acceptance": by_cost.barker_acceptance,
        "metropolis_acceptance": by_cost.metropolis_acceptance,
        "minibatch_points_per_ess": by_cost.minibatch_points,
        "minibatch_cost_per_ess": by_cost.minibatch_cost,
        "exact_cost_per_ess": by_cost.exact_cost,
        "minibatch_ess_per_draw": estimates,
        "exact_ess_per_draw_rule": choice_of_test.ess_per_draw(by_cost.metropolis_acceptance),
    }
    for name, result, seconds in (("minibatch", kept, kept_seconds), ("exact", exact, exact_seconds)):
        draws = np.asarray(result.positions, np.float64)
        median, minimum = ess_per_draw(draws)
        steps = draws.shape[1]
        row[name] = {
            "points_per_step": float(np.mean(result.data_used)),
            "acceptance": float(np.mean(result.info["accepted"])),
            "ess_per_draw_median": median,
            "ess_per_draw_min": minimum,
            "seconds_per_step": seconds / steps,
            "seconds_per_ess": seconds / (median * CHAINS * steps),
            "points_per_ess": float(np.mean(result.data_used)) / median,
        }
    row["load"].append(os.getloadavg()[0])
    return row


def print_rows(rows: list[dict]) -> None:
    print(
        "\n| N | d | c | decision: points → cost | window: pts/step, a_B, a_M | minibatch ESS/draw: rule, msjd, lag-1, "
        "window ESS → measured median (min) | exact ESS/draw: rule → measured median (min) | predicted cost/ESS "
        "minibatch : exact | measured s/ESS minibatch : exact (load) |"
    )
    print("|---:|---:|---:|---|---|---|---|---|---|")
    for row in rows:
        window, mb, ex = row["window"], row["minibatch"], row["exact"]
        est = window["minibatch_ess_per_draw"]
        print(
            f"| {row['N']:.0e} | {row['d']} | {row['residual_cost']:.3g} | {row['decision_by_points']} → "
            f"{row['decision_by_cost']} | {window['points_per_step']:,.0f}, {window['barker_acceptance']:.2f}, "
            f"{window['metropolis_acceptance']:.2f} | {est['rule']:.3f}, {est['msjd']:.3f}, {est['lag-1']:.3f}, "
            f"{est['window ESS']:.3f} → {mb['ess_per_draw_median']:.3f} ({mb['ess_per_draw_min']:.3f}) | "
            f"{window['exact_ess_per_draw_rule']:.3f} → {ex['ess_per_draw_median']:.3f} ({ex['ess_per_draw_min']:.3f}) "
            f"| {window['minibatch_cost_per_ess']:,.0f} : {window['exact_cost_per_ess']:,.0f} | "
            f"{mb['seconds_per_ess']:.3g} : {ex['seconds_per_ess']:.3g} ({row['load'][0]:.1f}–{row['load'][1]:.1f}) |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["100000x10", "100000x50", "100000x100", "100000x200", "100000x500", "1000000x10"],
        help="NxD pairs",
    )
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--exact-draws", type=int, default=1000)
    parser.add_argument("--json")
    args = parser.parse_args()
    started = datetime.datetime.now(datetime.UTC)
    print(f"# {' '.join(sys.argv)}  ({started:%Y-%m-%d %H:%M} UTC, jax {jax.__version__})", flush=True)
    rows = []
    for setting in args.settings:
        num_data, dimension = (int(part) for part in setting.split("x"))
        rows.append(measure(num_data, dimension, args))
        print(json.dumps(rows[-1]), flush=True)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(
                    {"command": " ".join(sys.argv), "started": started.isoformat(), "rows": rows}, handle, indent=1
                )
    print_rows(rows)


if __name__ == "__main__":
    main()
