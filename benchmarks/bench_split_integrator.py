"""The proxy-HMC move's integrator on ``sample_tall``'s default path: leapfrog against split (``docs/warmup.md``).

For each target, in one process: the setup ``sample_tall`` would build (``fast_setup`` where ``setup="auto"`` picks
it, else ``find_mode`` and ``taylor_control_variate``), then ``sample_tall(model, start, mode=, control_variate=)``
twice with the same seed, once with ``tall_warmup.INTEGRATOR = "leapfrog"`` (the path before) and once ``"split"``
(:func:`tallmcmc.proxy_hamiltonian`'s ``integrator="split"``), so the setup is shared and only the move differs.

Targets (``--targets``):

* ``logistic10``, ``logistic50``, ``logistic100``: ``logistic_regression.simulate(N, d, seed=0)``, N from
  ``--num-data`` (default 10⁶);
* ``groups200``, ``groups2000``: ``random_intercepts.simulate(N, G, seed=3)``, d = G + 1, N from ``--num-data``;
  exact posterior by quadrature;
* ``mixture``: the N = 1,000 normal mixture of ``tests/test_sample_tall.py`` (heavier tails than its Laplace
  approximation; the weakest case of the proxy moves), reference moments from ``tests/data/reference_posteriors.json``.

Printed per run: the warm-up's step factor (steps per trajectory = round(3 / factor) at the default's 3 steps to
start), the proxy acceptance over the kept draws, the test's acceptance, data points per step, milliseconds per
4-chain step (kept draws, compilation apart), bulk ESS per draw (min over coordinates) and the ESS of the sd over the
bulk ESS (min), kept-draw ESS per second, the decision, and, where a reference exists, the largest |mean − ref| in
MCSE and |sd/ref sd − 1|. The last line per target: split / leapfrog of ms per step and ESS/s.

    python benchmarks/bench_split_integrator.py
    python benchmarks/bench_split_integrator.py --targets groups2000 --num-data 1000000 --draws 500
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

import tallmcmc
from tallmcmc import automatic, tall_warmup
from tallmcmc.control_variate import control_variate_at_mode
from tallmcmc.examples import logistic_regression, normal_mixture, random_intercepts
from tallmcmc.interop import arviz as arviz_bridge

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _timing import cpu_probe_ms  # noqa: E402

TARGETS = ("logistic10", "logistic50", "logistic100", "groups200", "groups2000", "mixture")


def target(name: str, num_data: int):
    """(model, start, reference (mean, sd) flat or None) of a named target."""
    if name.startswith("logistic"):
        dimension = int(name.removeprefix("logistic"))
        covariates, response = logistic_regression.simulate(num_data, dimension, seed=0)
        return logistic_regression.model(covariates, response), jnp.zeros(dimension), None
    if name.startswith("groups"):
        groups = int(name.removeprefix("groups"))
        labels, response = random_intercepts.simulate(num_data, groups, seed=3)
        exact = random_intercepts.posterior(labels, response, groups)
        mean = np.concatenate([[exact["log_tau"][0]], exact["u"][0]])
        sd = np.concatenate([[exact["log_tau"][1]], exact["u"][1]])
        start = {"log_tau": jnp.zeros(()), "u": jnp.zeros(groups)}
        return random_intercepts.model(labels, response, groups), start, (mean, sd)
    reference = json.loads((HERE.parent / "tests" / "data" / "reference_posteriors.json").read_text())
    rows = [reference["normal_mixture"]["moments"][coordinate] for coordinate in normal_mixture.COORDINATES]
    mean, sd = (np.array([row[key] for row in rows]) for key in ("mean", "sd"))
    start = jnp.array([-1.0, 0.9, 0.0, -0.3, -0.4])
    return normal_mixture.model(normal_mixture.simulate(1000, seed=0)), start, (mean, sd)


def setup(model, start):
    """The mode and control variate ``sample_tall(setup="auto")`` would build, and the seconds it took."""
    began = time.perf_counter()
    mode, control_variate, _ = automatic.default_setup(model, start)
    if control_variate is None:  # as sample_tall builds it: from find_mode's last pass
        control_variate = control_variate_at_mode(model, mode)
    return mode, control_variate, time.perf_counter() - began


def measured(result, reference) -> dict:
    flat = np.asarray(jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(result.positions), np.float64)
    ess = arviz_bridge.ess(flat)
    centred = flat - flat.mean(axis=(0, 1))
    ess_sd = arviz_bridge.ess(centred**2)
    draws = flat.shape[0] * flat.shape[1]
    seconds = float(result.sampling_seconds)
    row = {
        "factor": float(np.exp(np.mean(np.log(np.asarray(result.step_size_factor))))),
        "proxy_acceptance": float(np.mean(result.info["proxy_acceptance"])),
        "acceptance": float(np.mean(result.info["accepted"])),
        "points_per_step": float(np.mean(result.info["data_used"])),
        "ms_per_step": 1e3 * float(result.seconds_per_step),
        "ess_per_draw": float(ess.min()) / draws,
        "ess_sd_over_bulk": float((ess_sd / ess).min()),
        "ess_per_second": float(ess.min()) / seconds,
        "decision": result.diagnosis.decision,
        "test": result.test_name,
    }
    if reference is not None:
        mean, sd = reference
        mcse = flat.std(axis=(0, 1)) / np.sqrt(ess)
        row["max_z_mean"] = float(np.max(np.abs(flat.mean(axis=(0, 1)) - mean) / mcse))
        row["max_sd_error"] = float(np.max(np.abs(flat.std(axis=(0, 1)) / sd - 1)))
    return row


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--num-data", type=int, default=1_000_000)
    parser.add_argument("--draws", type=int, default=2000, help="sample_tall's num_samples")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    print(f"# {jax.devices()[0].device_kind}; cpu probe {cpu_probe_ms():.1f} ms; N = {args.num_data:,}", flush=True)
    rows = []
    for name in args.targets.split(","):
        model, start, reference = target(name, args.num_data)
        mode, control_variate, setup_seconds = setup(model, start)
        print(f"{name}: N = {model.num_data:,}, setup {setup_seconds:.1f} s", flush=True)
        pair = {}
        for integrator in ("leapfrog", "split"):
            tall_warmup.INTEGRATOR = integrator
            result = tallmcmc.sample_tall(
                model,
                start,
                num_samples=args.draws,
                seed=args.seed,
                progress=False,
                mode=mode,
                control_variate=control_variate,
            )
            row = {"target": name, "integrator": integrator, **measured(result, reference)}
            pair[integrator] = row
            rows.append(row)
            steps = max(1, round(tall_warmup.NUM_LEAPFROG_STEPS / row["factor"]))
            accuracy = f"  max|z| {row['max_z_mean']:.2f}  max|sd err| {row['max_sd_error']:.3f}" if reference else ""
            print(
                f"  {integrator:9s} steps ≈ {steps:2d}  proxy acc {row['proxy_acceptance']:.3f}  "
                f"acc {row['acceptance']:.3f}  points/step {row['points_per_step']:8.1f}  "
                f"{row['ms_per_step']:8.3f} ms/step  ESS/draw {row['ess_per_draw']:.3f}  "
                f"ESS(sd)/bulk {row['ess_sd_over_bulk']:.2f}  ESS/s {row['ess_per_second']:9.1f}  "
                f"{row['decision']} ({row['test']}){accuracy}",
                flush=True,
            )
        ratio_time = pair["split"]["ms_per_step"] / pair["leapfrog"]["ms_per_step"]
        ratio_ess = pair["split"]["ess_per_second"] / pair["leapfrog"]["ess_per_second"]
        print(f"  split / leapfrog: ms per step {ratio_time:.3f}, ESS/s {ratio_ess:.2f}", flush=True)
    tall_warmup.INTEGRATOR = "split"
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
