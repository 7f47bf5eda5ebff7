"""The kept draws watched: ``sample_tall`` looking at the minibatch test's cost during the kept draws, and switching
to the exact test where it has grown past it (``docs/sample_tall.md``, "When the minibatch grows during the kept
draws").

The case is the 2026-11-29 third user-model audit's: a NumPyro logistic regression whose four covariates are
Student-t(2) (leverage points; max |x| in the hundreds), N = 200,000. Its control-variate residuals have no finite
fourth moment, so the tail guard's pool keeps learning after warm-up and, in some chains, asks for most of N per
step: warm-up measured 0.05% of N and chose the minibatch test; the kept draws then grew to all of N.

Per seed, in the same process and on the same data: ``sample_tall(model, seed=s)`` with the looks switched off
(``KEPT_CHECKS = ()``: the kept draws of the tree before, bit for bit) and with them on (the default), each timed
with compilation, the decision, where it switched, and the data per kept step; then every coordinate's
z = (mean − mean_ref)/√(MCSE² + MCSE_ref²) against a reference run of the exact test (4 × 6,000 draws, forced
with ``residual_cost=1e9``). Last, what the looks cost where nothing switches: the README's logistic regression at
N = 10⁶, the looks off and on, alternating (``--repeats``), and the ratio of the calls' times.

    python benchmarks/bench_kept_looks.py                       # seeds 0-5 at N = 200,000, then the overhead
    python benchmarks/bench_kept_looks.py --seeds 0 1 --repeats 0
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
import numpyro
import numpyro.distributions as dist
from _timing import cpu_probe_ms

import tallmcmc
import tallmcmc.tall_kept_draws as tall_kept_draws
from tallmcmc.examples import logistic_regression
from tallmcmc.interop import arviz as arviz_bridge


def leverage_model(num_data: int):
    rng = np.random.default_rng(17)
    covariates = rng.standard_t(2.0, size=(num_data, 4)).astype(np.float32)
    probability = 1 / (1 + np.exp(-(0.2 + covariates.astype(np.float64) @ np.array([0.8, -0.5, 0.3, 0.0]))))
    response = (rng.random(num_data) < probability).astype(np.int32)

    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=a + X @ beta), obs=y)

    return tallmcmc.from_numpyro(model, covariates, y=response)


def flat(result) -> np.ndarray:
    positions = result.positions
    return np.concatenate(
        [np.asarray(positions[name]).reshape(*np.shape(positions[name])[:2], -1) for name in sorted(positions)], axis=-1
    )


def timed(model, looks, **options):
    tall_kept_draws.KEPT_CHECKS = looks
    began = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = tallmcmc.sample_tall(model, progress=False, **options)
    return (
        result,
        time.perf_counter() - began,
        [str(w.message)[:60] for w in caught if "fast_setup" not in str(w.message)],
    )


def max_z(draws: np.ndarray, reference: np.ndarray) -> float:
    """max over coordinates of |mean − mean_ref| / √(MCSE² + MCSE_ref²), MCSE = sd/√(bulk ESS) (ArviZ's ESS)."""

    def mcse(x):
        return x.std(axis=(0, 1)) / np.sqrt(np.ravel(arviz_bridge.ess(x)))

    z = np.abs(draws.mean(axis=(0, 1)) - reference.mean(axis=(0, 1))) / np.hypot(mcse(draws), mcse(reference))
    return float(z.max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-data", type=int, default=200_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--repeats", type=int, default=3, help="alternating pairs for the overhead at N = 10⁶")
    args = parser.parse_args()
    looks = tall_kept_draws.KEPT_CHECKS
    print(f"# load {os.getloadavg()[0]:.2f}, CPU probe {cpu_probe_ms():.1f} ms")
    model = leverage_model(args.num_data)
    reference, seconds, _ = timed(model, (), seed=100, num_samples=6000, residual_cost=1e9)
    reference_draws = flat(reference)
    print(f"# reference: {reference.diagnosis.decision}, 4 × 6,000 draws, {seconds:.1f} s")
    print("| seed | looks | decision | switched at | s | data per kept step (% of N) | max \\|z\\| vs exact |")
    print("|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        for label, chosen in (("off", ()), ("on", looks)):
            result, seconds, caught = timed(model, chosen, seed=seed)
            used = 100 * float(np.mean(result.info["data_used"])) / model.num_data
            switched = result.diagnosis.switched_at
            print(
                f"| {seed} | {label} | {result.diagnosis.decision} | {'—' if switched is None else switched} | "
                f"{seconds:.1f} | {used:.3g} | {max_z(flat(result), reference_draws):.2f} |"
                + (f" warnings: {caught}" if caught else ""),
                flush=True,
            )
    if args.repeats:
        tall = logistic_regression.model(*logistic_regression.simulate(1_000_000, 10, seed=0))
        timed(tall, looks, seed=0)  # compiled once, for both
        times = {"off": [], "on": []}
        for _ in range(args.repeats):
            for label, chosen in (("off", ()), ("on", looks)):
                result, seconds, _ = timed(tall, chosen, seed=0)
                times[label].append(seconds)
        ratio = np.median(np.array(times["on"]) / np.array(times["off"]))
        print(
            f"# overhead, logistic N = 10⁶, d = 10 ({result.diagnosis.decision}): looks off "
            f"{', '.join(f'{t:.2f}' for t in times['off'])} s; on {', '.join(f'{t:.2f}' for t in times['on'])} s; "
            f"median ratio on/off {ratio:.3f}"
        )


if __name__ == "__main__":
    main()
