"""Decisions of the minibatch Barker test on the bias reproduction's mixture, where the lᵢ are skewed.

``tallmcmc reproduce bias`` found MHminibatch (σ = 1.0, m = 50) narrowing the tempered mixture's posterior
sds by about 4%. This looks at single decisions. Pairs (θ, θ′): θ drawn from the grid reference of the
tempered posterior (N = 2·10⁴, K = 200, data seed 0, as the reproduction), θ′ = θ + 0.15·ξ (its random
walk). For each pair the exact Δ of the likelihood (float64, NumPy), and per variant ``--repetitions``
vmapped decisions (a fresh key set per pair, so the pairs' errors are independent) after 300 warming
decisions: the acceptance frequency against 1/(1 + e^{−Δ}) in binomial standard errors (z), and
E[Δ*] − Δ. With no error, z over the pairs has sd 1; the full-data Barker test is the control.

    python benchmarks/bench_skew_decisions.py --pairs 40 --repetitions 20000
    python benchmarks/bench_skew_decisions.py --pairs 40 --repetitions 20000 --penalty
    python benchmarks/bench_skew_decisions.py --timing 3

``--penalty``: the minibatch penalty test instead, whose acceptance is Metropolis-type, so each pair is checked for
detailed balance: z = (e^{−Δ/2} a_fwd − e^{Δ/2} a_rev) in standard errors, from two independent sets of decisions
(keys 100 + j forward, 500 + j backward). A pair whose two frequencies are 0 and 1 has no binomial spread and is
left out.

``--timing R``: what the pilot costs in time, not only in points: 8 chains × 5,000 steps of the random walk with
``minibatch_barker(50)`` and with ``pilot=True``, alternating, R rounds after one of each to compile; seconds per
step without compilation; ``--driver asynchronous`` runs the chains on that driver instead of ``vmap``.
"""

from __future__ import annotations

import argparse
import time

import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import gaussian_mixture
from tallmcmc.testing import repeated_decisions

NUM_DATA, TEMPERATURE, STEP = 20_000, 200.0, 0.15

VARIANTS = {
    "full-data Barker": lambda: tallmcmc.exact_barker(),
    "Algorithm 1 as printed": lambda: tallmcmc.minibatch_barker(50, variance_rse=None),
    "default (tail guard)": lambda: tallmcmc.minibatch_barker(50),
    "σ = 1.2": lambda: tallmcmc.minibatch_barker(50, sigma=1.2),
    "δ = 0.05": lambda: tallmcmc.minibatch_barker(50, delta=0.05),
    "m = 150": lambda: tallmcmc.minibatch_barker(150),
    "m = 400": lambda: tallmcmc.minibatch_barker(400),
    "pilot=True": lambda: tallmcmc.minibatch_barker(50, pilot=True),
}


#: The grid of the tempered posterior (the reproduction's reference grid).
AXES = (np.arange(-1.5 + 0.01, 2.5, 0.02), np.arange(-3.0 + 0.01, 3.0, 0.02))


def pairs(count: int, data: np.ndarray, log_density: np.ndarray):
    axes = AXES
    weights = np.exp(log_density - log_density.max()).ravel()
    rng = np.random.default_rng(5)
    index = rng.choice(weights.size, count, p=weights / weights.sum())
    thetas = np.stack([axes[0][index // len(axes[1])], axes[1][index % len(axes[1])]], 1).astype(np.float32)
    proposals = (thetas + STEP * rng.standard_normal(thetas.shape)).astype(np.float32)
    x = data.astype(np.float64)

    def terms(theta):
        theta = theta.astype(np.float64)
        return np.logaddexp(-((x - theta[0]) ** 2) / 4, -((x - theta[0] - theta[1]) ** 2) / 4)

    deltas, skews = [], []
    for theta, proposed in zip(thetas, proposals):
        values = (terms(proposed) - terms(theta)) / TEMPERATURE
        centred = values - values.mean()
        deltas.append(values.sum())
        skews.append(np.mean(centred**3) / np.mean(centred**2) ** 1.5)
    return thetas, proposals, np.array(deltas), np.array(skews)


def direction_of_skew(data: np.ndarray, thetas: np.ndarray, log_density: np.ndarray, moves_per_theta: int = 6) -> None:
    """Print how the lᵢ's skewness depends on whether a move leaves or approaches the nearer mode."""
    axes = AXES
    first = np.unravel_index(np.argmax(log_density), log_density.shape)
    modes = [np.array([axes[0][first[0]], axes[1][first[1]]])]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1)
    masked = np.where(np.linalg.norm(grid - modes[0], axis=-1) < 1.0, -np.inf, log_density)
    second = np.unravel_index(np.argmax(masked), masked.shape)
    modes.append(np.array([axes[0][second[0]], axes[1][second[1]]]))
    x = data.astype(np.float64)
    rng = np.random.default_rng(9)
    outward, skews = [], []
    for theta in thetas.astype(np.float64):
        mode = min(modes, key=lambda mode: np.linalg.norm(theta - mode))
        for _ in range(moves_per_theta):
            proposed = theta + STEP * rng.standard_normal(2)
            values = [np.logaddexp(-((x - t[0]) ** 2) / 4, -((x - t[0] - t[1]) ** 2) / 4) for t in (proposed, theta)]
            centred = values[0] - values[1] - np.mean(values[0] - values[1])
            skews.append(np.mean(centred**3) / np.mean(centred**2) ** 1.5)
            outward.append(np.linalg.norm(proposed - mode) - np.linalg.norm(theta - mode))
    outward, skews = np.array(outward), np.array(skews)
    print(
        f"modes near {modes[0].round(2)} and {modes[1].round(2)}; of {len(skews)} moves, mean γ {skews[outward > 0].mean():+.2f} "
        f"away from the nearer mode and {skews[outward < 0].mean():+.2f} towards it "
        f"(correlation of γ with the change of distance {np.corrcoef(outward, skews)[0, 1]:+.2f})"
    )


def balance(model, thetas, proposals, deltas, repetitions: int) -> None:
    """Detailed balance of the minibatch penalty test's decisions, with and without the pilot."""
    print(f"{'variant':24s} {'rms z':>6s} {'max |z|':>7s} {'beyond 4':>8s} {'points':>6s}")
    for name, test in (
        ("minibatch_penalty(50)", tallmcmc.minibatch_penalty(50)),
        ("pilot=True", tallmcmc.minibatch_penalty(50, pilot=True)),
    ):
        began, z, used = time.perf_counter(), [], []
        for j, (theta, proposed, delta) in enumerate(zip(thetas, proposals, deltas)):
            rates = []
            for start, end, seed in ((theta, proposed, 100 + j), (proposed, theta, 500 + j)):
                decision = repeated_decisions(
                    model, test, jnp.asarray(start), jnp.asarray(end), repetitions, warmup_decisions=300, seed=seed
                )
                rates.append(float(jnp.mean(decision.accepted)))
                used.append(float(jnp.mean(decision.info.data_used)))
            forward, reverse = rates
            variance = forward * (1 - forward) * np.exp(-delta) + reverse * (1 - reverse) * np.exp(delta)
            if variance > 0:
                z.append((forward * np.exp(-delta / 2) - reverse * np.exp(delta / 2)) / np.sqrt(variance / repetitions))
        z = np.array(z)
        print(
            f"{name:24s} {np.sqrt(np.mean(z**2)):6.2f} {np.abs(z).max():7.1f} {int(np.sum(np.abs(z) > 4)):5d}/{len(z):<2d} "
            f"{np.mean(used):6.0f}  ({time.perf_counter() - began:.0f} s)",
            flush=True,
        )


def timing(model, rounds: int, driver: str = "vmap") -> None:
    """Seconds per step of 8 chains, ``minibatch_barker(50)`` against ``pilot=True``, alternating (same process), on
    ``driver``."""

    def run(pilot: bool, seed: int) -> tuple[float, float]:
        began = time.perf_counter()
        result = tallmcmc.sample(
            model,
            tallmcmc.random_walk(STEP),
            tallmcmc.minibatch_barker(50, pilot=pilot),
            initial_position=jnp.asarray([0.5, 0.0]),
            num_samples=5000,
            num_chains=8,
            progress=False,
            seed=seed,
            driver=driver,
        )
        seconds = time.perf_counter() - began - result.compile_seconds
        return seconds / 5000, float(np.mean(result.info["data_used"]))

    for pilot in (False, True):
        run(pilot, 0)
    for round_ in range(rounds):
        (plain, plain_points), (piloted, pilot_points) = run(False, round_ + 1), run(True, round_ + 1)
        print(
            f"round {round_ + 1}: {plain * 1e3:.3f} ms/step at {plain_points:.0f} points, pilot {piloted * 1e3:.3f} "
            f"ms/step at {pilot_points:.0f} points: {piloted / plain:.2f}× the time, {pilot_points / plain_points:.2f}× "
            "the points",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--repetitions", type=int, default=20_000)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS), metavar="NAME")
    parser.add_argument("--penalty", action="store_true", help="detailed balance of minibatch_penalty instead")
    parser.add_argument("--timing", type=int, default=0, metavar="R", help="time the pilot's chains instead")
    parser.add_argument("--driver", default="vmap", help="the chains' driver for --timing (vmap or asynchronous)")
    args = parser.parse_args()
    data = gaussian_mixture.simulate_data(NUM_DATA, seed=0)
    model = gaussian_mixture.model(NUM_DATA, TEMPERATURE, seed=0)  # the same data
    if args.timing:
        timing(model, args.timing, args.driver)
        return
    log_density = gaussian_mixture.log_posterior_grid(data, TEMPERATURE, *AXES)
    thetas, proposals, deltas, skews = pairs(args.pairs, data, log_density)
    direction_of_skew(data, thetas, log_density)
    if args.penalty:
        balance(model, thetas, proposals, deltas, args.repetitions)
        return
    print(
        f"{args.pairs} pairs, Δ from {deltas.min():.2f} to {deltas.max():.2f}, skewness γ of the lᵢ from "
        f"{skews.min():.2f} to {skews.max():.2f} (median {np.median(skews):.2f}); {args.repetitions:,} decisions each"
    )
    print(f"{'variant':24s} {'sd of z':>7s} {'max |z|':>7s} {'beyond 4':>8s} {'rms E[Δ*]−Δ':>11s} {'points':>6s}")
    baseline = None
    for name in args.variants:
        test = VARIANTS[name]()
        began, z, bias, used = time.perf_counter(), [], [], []
        for j, (theta, proposed, delta) in enumerate(zip(thetas, proposals, deltas)):
            decision = repeated_decisions(
                model,
                test,
                jnp.asarray(theta),
                jnp.asarray(proposed),
                args.repetitions,
                warmup_decisions=300,
                seed=100 + j,
            )
            probability = 1 / (1 + np.exp(-delta))
            frequency = float(jnp.mean(decision.accepted))
            z.append((frequency - probability) / np.sqrt(probability * (1 - probability) / args.repetitions))
            bias.append(float(np.mean(np.asarray(decision.info.statistic, np.float64))) - delta)
            used.append(float(jnp.mean(decision.info.data_used)))
        z, bias = np.array(z), np.array(bias)
        points = float(np.mean(used))
        if name == "Algorithm 1 as printed":
            baseline = points
        ratio = f" ({points / baseline:.2f}× as printed)" if baseline and name != "Algorithm 1 as printed" else ""
        print(
            f"{name:24s} {z.std():7.2f} {np.abs(z).max():7.1f} {int(np.sum(np.abs(z) > 4)):5d}/{len(z):<2d} "
            f"{np.sqrt(np.mean(bias**2)):11.4f} {points:6.0f}{ratio}  corr(z, γ) {np.corrcoef(z, skews)[0, 1]:+.2f} "
            f"({time.perf_counter() - began:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
