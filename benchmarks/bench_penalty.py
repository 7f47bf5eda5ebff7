"""The minibatch penalty test against the minibatch Barker test inside ``sample_tall`` (docs/penalty.md).

Usage::

    python benchmarks/bench_penalty.py                               # logistic regression, N = 10⁵ and 10⁶
    python benchmarks/bench_penalty.py --target mixture --draws 16000 --seeds 5 6
    python benchmarks/bench_penalty.py --target mixture --draws 16000 --tests exact --seeds 5 6 7 8 9 10 11 12 \
        --jitters 0.2 0.6 0.9          # the proxy-HMC step's jitter, on the exact test's chains
    python benchmarks/bench_penalty.py --target mixture --draws 16000 --tests exact nuts --seeds 5 6 7 8 9 10 11 12 \
        --times 0.125 0.25 0.5         # NumPyro's NUTS beside it; the proxy-HMC integration time (× π)

``--target logistic``: ``sample_tall(model, minibatch_test=...)`` on ``logistic_regression.simulate(N, 10,
seed=0)`` with each of ``"penalty"`` and ``"barker"`` (4 chains, ``--draws`` kept per chain, the same seed), and
what each kept: acceptance, points per kept step, bulk and tail ESS per draw (min over coordinates), the mean CLT
error bound of its kept steps, and max |mean − ref| / MCSE and |sd / ref sd − 1| against the cached reference of
``bench_all_in.py`` where there is one (``~/.cache/tallmcmc/bench``).

``--target mixture``: the two-component normal mixture at N = 1,000 (``tests/test_sample_tall.py``'s target, its
reference a long NUTS run in ``tests/data/reference_posteriors.json``), the minibatch path forced with
``residual_cost=1.0``: each test's sd / reference sd per coordinate and its z, with the exact test beside them —
where the normal approximation of Δ* is weakest (Var(Δ*) up to 1 in the posterior's tails). The sd's z uses the
Monte Carlo error of the squared deviations (their own ESS), not the draws' bulk ESS (until 2026-11-28 it did, which
overstated |z| about twofold on this target). ``--tests nuts`` adds NumPyro's NUTS on the same log density
(``[bench]``; 1,000 warm-up steps, the same starts and draws), scored the same way: the control for what a sampler
that follows the posterior's own gradient gets on this target with these seeds; ``--tests hmc`` adds tallmcmc's own
full-data HMC under the exact test (``minibatch_hamiltonian`` with b = N, one minibatch per trajectory), the remedy
``docs/sample_tall.md`` names. ``--times`` sets
``sample_tall``'s proxy-HMC integration time (``tallmcmc.tall_warmup.INTEGRATION_TIME``, in units of π; its default
is ½) for the ``sample_tall`` rows; a summary line per row group gives the mean sd / reference sd over the seeds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import pathlib
import sys
import time
import warnings

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
warnings.simplefilter("ignore")

import tallmcmc  # noqa: E402
import tallmcmc.automatic  # noqa: E402
from tallmcmc.examples import logistic_regression, normal_mixture  # noqa: E402
from tallmcmc.interop import arviz as arviz_bridge  # noqa: E402


def per_draw(draws: np.ndarray) -> tuple[float, float]:
    """Min over coordinates of bulk and tail ESS per draw; ``draws`` (chain, draw, d)."""
    count = draws.shape[0] * draws.shape[1]
    bulk = np.ravel(arviz_bridge.ess(draws, method="bulk")).min() / count
    tail = np.ravel(arviz_bridge.ess(draws, method="tail")).min() / count
    return float(bulk), float(tail)


def logistic(args) -> None:
    from bench_logistic import coordinate_stats

    print(
        "| N | test | acceptance | points per kept step | bulk ESS/draw | tail ESS/draw | mean error bound | "
        "max \\|z\\| mean | max \\|sd/ref − 1\\| | s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        covariates, response = logistic_regression.simulate(n, 10, seed=0)
        model = logistic_regression.model(covariates, response)
        cached = sorted(pathlib.Path("~/.cache/tallmcmc/bench").expanduser().glob(f"reference_independence_N{n}_d10_*"))
        reference = np.load(cached[-1]) if cached else None
        for test in ("penalty", "barker"):
            began = time.perf_counter()
            result = tallmcmc.sample_tall(model, num_samples=args.draws, minibatch_test=test, progress=False, seed=0)
            seconds = time.perf_counter() - began
            draws = np.asarray(result.positions, np.float64)
            bulk, tail = per_draw(draws)
            z = sd_error = float("nan")
            if reference is not None:
                _, mcse = coordinate_stats(draws)
                z = float(np.max(np.abs(draws.mean((0, 1)) - reference["mean"]) / np.hypot(mcse, reference["mcse"])))
                sd_error = float(np.max(np.abs(draws.std((0, 1)) / reference["sd"] - 1)))
            info = result.info
            print(
                f"| {n:,} | {test} ({result.diagnosis.decision}) | {np.mean(info['accepted']):.3f} | "
                f"{np.mean(info['data_used']):.1f} | {bulk:.3f} | {tail:.3f} | {np.mean(info['error_bound']):.2g} | "
                f"{z:.2f} | {sd_error:.3f} | {seconds:.1f} |",
                flush=True,
            )


def mixture(args) -> None:
    sys.path.insert(0, str(HERE.parent / "tests"))
    reference = json.loads((HERE.parent / "tests" / "data" / "reference_posteriors.json").read_text())
    moments = [reference["normal_mixture"]["moments"][name] for name in normal_mixture.COORDINATES]
    mean, sd = (np.array([row[key] for row in moments]) for key in ("mean", "sd"))
    mcse_sd = np.array([row["mcse_sd"] for row in moments])
    model = normal_mixture.model(normal_mixture.simulate(1000, seed=0))
    start = np.array([-1.0, 0.9, 0.0, -0.3, -0.4], np.float32)
    print(f"normal mixture, N = 1,000, 4 × {args.draws:,} kept draws; sd / reference sd per coordinate (z)")
    print(
        "| test | seed | sd / ref sd (z) | max \\|z\\| mean | r̂ max | acceptance | mean error bound | "
        "ESS per draw: bulk, squared deviations (min) |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---|")
    default_jitter, default_time = tallmcmc.tall_warmup.STEP_SIZE_JITTER, tallmcmc.tall_warmup.INTEGRATION_TIME
    groups: dict[str, list[np.ndarray]] = {}
    runs = itertools.product(args.times or [default_time / math.pi], args.jitters or [default_jitter], args.tests)
    for time_in_pi, jitter, test in runs:
        if test in ("nuts", "hmc") and (jitter != default_jitter or time_in_pi * math.pi != default_time):
            continue  # neither has sample_tall's proxy move: one group of rows
        for seed in args.seeds:
            tallmcmc.tall_warmup.STEP_SIZE_JITTER = jitter  # ε·U(1 − j, 1 + j): integration times T·(1 ± j)
            tallmcmc.tall_warmup.INTEGRATION_TIME = time_in_pi * math.pi
            if test == "nuts":
                draws, accepted, bound, label = nuts_draws(model, start, args.draws, seed), float("nan"), 0.0, "NUTS"
            elif test == "hmc":
                draws, accepted = full_data_hmc_draws(model, start, args.draws, seed)
                bound, label = 0.0, "full-data HMC (L = 3), exact test"
            else:
                options = dict(residual_cost=1e6) if test == "exact" else dict(residual_cost=1.0, minibatch_test=test)
                result = tallmcmc.sample_tall(
                    model, start, num_samples=args.draws, seed=seed, progress=False, **options
                )
                draws = np.asarray(result.positions, np.float64)
                accepted, bound = np.mean(result.info["accepted"]), np.mean(result.info["error_bound"])
                label = f"{test} ({result.diagnosis.decision})"
                label += "" if jitter == default_jitter else f", jitter {jitter}"
                label += "" if time_in_pi * math.pi == default_time else f", T = {time_in_pi}π"
            row = score(draws, mean, sd, mcse_sd, moments)
            groups.setdefault(label, []).append(row["ratios"])
            print(f"| {label} | {seed} | {row['text']} | {accepted:.3f} | {bound:.2g} | {row['ess']} |", flush=True)
    tallmcmc.tall_warmup.STEP_SIZE_JITTER, tallmcmc.tall_warmup.INTEGRATION_TIME = default_jitter, default_time
    for label, ratios in groups.items():
        ratios = np.array(ratios)
        spread = ratios.std(0, ddof=1) / np.sqrt(len(ratios)) if len(ratios) > 1 else np.full(ratios.shape[1], np.nan)
        print(
            f"mean sd / reference sd over {len(ratios)} seeds, {label}: "
            + ", ".join(f"{m:.4f} ± {e:.4f}" for m, e in zip(ratios.mean(0), spread, strict=True))
        )


def nuts_draws(model, start, draws: int, seed: int) -> np.ndarray:
    """NumPyro's NUTS on ``model``'s log density (4 chains vectorised, 1,000 warm-up steps): ``(chain, draw, d)``."""
    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS

    def potential(position):
        return -(model.log_prior(position) + jnp.sum(model.per_datum_log_likelihood(position, model.data)))

    mcmc = MCMC(
        NUTS(potential_fn=potential),
        num_warmup=1000,
        num_samples=draws,
        num_chains=4,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(jax.random.key(seed), init_params=jnp.tile(jnp.asarray(start), (4, 1)))
    return np.asarray(mcmc.get_samples(group_by_chain=True), np.float64)


def full_data_hmc_draws(model, start, draws: int, seed: int) -> tuple[np.ndarray, float]:
    """HMC on the posterior itself under the exact test: ``minibatch_hamiltonian`` with b = N and one minibatch per
    trajectory (its gradients are the full data's), L = 3, preconditioned by the Laplace covariance, its step
    adapted to a Metropolis acceptance of 0.8 over 1,000 warm-up steps; 4 chains from Laplace draws."""
    import jax.numpy as jnp

    mode = tallmcmc.find_mode(model, jnp.asarray(start))
    covariance = tallmcmc.laplace_covariance(mode)
    proposal = tallmcmc.minibatch_hamiltonian(
        math.pi / 6, 3, model.num_data, minibatch="trajectory", preconditioner=covariance
    )
    noise = np.random.default_rng(seed).multivariate_normal(np.zeros(len(start)), np.asarray(covariance), 4)
    result = tallmcmc.sample(
        model,
        proposal,
        tallmcmc.exact_metropolis(),
        initial_positions=mode.position + jnp.asarray(noise, jnp.float32),
        num_chains=4,
        num_warmup=1000,
        num_samples=draws,
        seed=seed,
        progress=False,
        target_acceptance=0.8,
    )
    return np.asarray(result.positions, np.float64), float(np.mean(result.info["accepted"]))


def score(draws: np.ndarray, mean, sd, mcse_sd, moments) -> dict:
    """sd / reference sd and its z per coordinate, max |z| of the means, r̂, and ESS per draw of one run."""
    flat = draws.reshape(-1, draws.shape[-1])
    ess = np.ravel(arviz_bridge.ess(draws, method="bulk"))
    got = flat.std(0)
    # the sd's MCSE from the squared deviations' own ESS (the delta method: sd = √v, MCSE(v)/(2 sd)); the
    # bulk ESS of the draws overstates it where the chains visit the tails rarely (4-5× here)
    squares = (draws - flat.mean(0)) ** 2
    ess_squares = np.ravel(arviz_bridge.ess(squares, method="mean"))
    mcse_own = np.sqrt(squares.reshape(flat.shape).var(0) / ess_squares) / (2 * got)
    z_sd = (got - sd) / np.hypot(mcse_own, mcse_sd)
    z_mean = np.abs(flat.mean(0) - mean) / np.hypot(got / np.sqrt(ess), [row["mcse_mean"] for row in moments])
    ratios = ", ".join(f"{r:.3f} ({z:+.1f})" for r, z in zip(got / sd, z_sd, strict=True))
    rhat = float(np.max(arviz_bridge.rhat(draws)))
    return {
        "ratios": got / sd,
        "text": f"{ratios} | {z_mean.max():.1f} | {rhat:.3f}",
        "ess": f"{ess.min() / flat.shape[0]:.3f}, {ess_squares.min() / flat.shape[0]:.3f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=["logistic", "mixture"], default="logistic")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[5, 6])
    parser.add_argument(
        "--tests",
        nargs="+",
        choices=["penalty", "barker", "exact", "nuts", "hmc"],
        default=["penalty", "barker", "exact"],
        help="mixture: which tests' rows (nuts: NumPyro's NUTS on the same log density; hmc: full-data HMC under the "
        "exact test, tallmcmc.minibatch_hamiltonian with b = N)",
    )
    parser.add_argument(
        "--times",
        type=float,
        nargs="+",
        default=None,
        help="mixture: sample_tall's proxy-HMC integration time set to each (in units of π; its default is 0.5)",
    )
    parser.add_argument(
        "--jitters",
        type=float,
        nargs="+",
        default=None,
        help="mixture: also with sample_tall's proxy-HMC step jitter set to each (its default is 0.2)",
    )
    args = parser.parse_args()
    (logistic if args.target == "logistic" else mixture)(args)


if __name__ == "__main__":
    main()
