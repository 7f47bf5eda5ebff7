"""The automatic path against the hand-tuned recipe and NumPyro NUTS, everything counted (issue 22).

Targets (same run, same data for all three methods):

* ``logistic``: untempered logistic regression, ``tallmcmc.examples.logistic_regression.simulate(N, 10, 0)``
  (bench_logistic.py's rows), N from ``--sizes``;
* ``regression``: the Gaussian linear regression of issue 22, N = ``--regression-size`` (10⁶), d = 5 + log σ,
  β* = (0.5, −1, 2, 0.3, −0.7), σ = 1.5, weak N(0, 10²) priors (``tallmcmc.examples.linear_regression``).

Methods:

* ``sample_tall``: ``tallmcmc.sample_tall(model)`` with its defaults (4 chains × ``--draws``, 200 warm-up,
  the measured window and burn-in), started at zeros;
* ``recipe``: the README's hand-tuned recipe: ``find_mode`` from zeros, ``taylor_control_variate``,
  ``proxy_hamiltonian(cv, 0.5, 3, preconditioner=laplace_covariance(mode))``, ``minibatch_barker(100, cv)``,
  ``sample`` from the mode, no warm-up, 4 chains × ``--draws``;
* ``nuts``: NumPyro NUTS on the whole data (4 chains, ``--nuts-warmup`` + ``--nuts-draws``, vectorized,
  started at the mode), data counted as N per leapfrog step, warm-up included.

Columns: min bulk ESS over the coordinates (ArviZ); "ESS/s sampling" over the kept draws' sampling seconds
(compilation excluded); "ESS/s wall" over the whole call's wall time (mode, control variate, compilation,
warm-up, sampling; each method run in a fresh compile cache state as a user would meet it in a new process —
the tallmcmc methods share JAX's in-process caches, so the second of them may compile a little less);
"ESS/10⁶ pts" over every data point touched (setup passes, warm-up, sampling, all chains); "max |z|": the
largest |mean − NUTS mean| / MCSE over the coordinates (both MCSEs). Ratios ``sample_tall / recipe`` are
printed from the same run.

    python benchmarks/bench_sample_tall.py --sizes 100000 1000000 --draws 2000
    python benchmarks/bench_sample_tall.py --only regression
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import linear_regression, logistic_regression
from tallmcmc.interop import arviz as arviz_bridge

CHAINS = 4
REGRESSION_COEFFICIENTS = (0.5, -1.0, 2.0, 0.3, -0.7)


def flat_draws(positions) -> np.ndarray:
    return np.asarray(jax.vmap(jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0]))(positions), np.float64)


def bulk_ess(draws: np.ndarray) -> np.ndarray:
    return arviz_bridge.ess(draws)


def row(name, draws, *, sampling_seconds, wall_seconds, points, num_data, reference=None, extra=None):
    ess = bulk_ess(draws)
    out = dict(
        method=name,
        ess_min=float(ess.min()),
        sampling_seconds=float(sampling_seconds),
        wall_seconds=float(wall_seconds),
        ess_per_s_sampling=float(ess.min() / sampling_seconds),
        ess_per_s_wall=float(ess.min() / wall_seconds),
        passes=float(points / num_data),
        ess_per_million=float(ess.min() / points * 1e6),
    )
    if reference is not None:
        mcse = draws.std((0, 1)) / np.sqrt(ess)
        out["max_z"] = float(np.max(np.abs(draws.mean((0, 1)) - reference[0]) / np.hypot(mcse, reference[1])))
    out.update(extra or {})
    return out


def run_sample_tall(model, start, draws, seed):
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tallmcmc.sample_tall(model, start, num_samples=draws, num_chains=CHAINS, seed=seed, progress=False)
    wall = time.perf_counter() - began
    d = result.diagnosis
    return (
        result,
        wall,
        dict(
            decision=d.decision,
            setup_passes=sum(d.setup_passes.values()),
            warmup_passes=d.warmup_passes,
            data_fraction=d.data_fraction,
            accept=result.acceptance_rate,
            r_hat_max=d.r_hat_max,
        ),
    )


def run_recipe(model, start, draws, seed):
    began = time.perf_counter()
    mode = tallmcmc.find_mode(model, start)
    cv = tallmcmc.taylor_control_variate(model, mode.position)
    proposal = tallmcmc.proxy_hamiltonian(cv, 0.5, 3, preconditioner=tallmcmc.laplace_covariance(mode))
    test = tallmcmc.minibatch_barker(100, control_variate=cv)
    result = tallmcmc.sample(
        model,
        proposal,
        test,
        initial_position=mode.position,
        num_samples=draws,
        num_chains=CHAINS,
        seed=seed,
        progress=False,
    )
    wall = time.perf_counter() - began
    return (
        result,
        wall,
        mode,
        dict(
            setup_passes=result.setup_data_passes,
            accept=result.acceptance_rate,
            data_fraction=float(result.data_used.mean()) / model.num_data,
        ),
    )


def run_nuts(potential_model, args_, mode_flat, unravel, num_data, warmup, draws, seed, steps_per_gradient=1):
    from numpyro.infer import MCMC, NUTS, init_to_value

    began = time.perf_counter()
    kernel = NUTS(potential_model, init_strategy=init_to_value(values=unravel(mode_flat)))
    mcmc = MCMC(
        kernel, num_warmup=warmup, num_samples=draws, num_chains=CHAINS, chain_method="vectorized", progress_bar=False
    )
    mcmc.warmup(jax.random.key(seed), *args_, extra_fields=("num_steps",), collect_warmup=True)
    warm_steps = int(np.sum(np.asarray(mcmc.get_extra_fields()["num_steps"])))
    began_sampling = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, *args_, extra_fields=("num_steps",))
    sampling = time.perf_counter() - began_sampling
    wall = time.perf_counter() - began
    steps = int(np.sum(np.asarray(mcmc.get_extra_fields()["num_steps"])))
    samples = mcmc.get_samples(group_by_chain=True)
    draws_flat = flat_draws(samples)
    points = (warm_steps + steps + CHAINS) * num_data * steps_per_gradient
    return draws_flat, sampling, wall, points, dict(leapfrog_per_step=steps / (CHAINS * draws))


def logistic_numpyro(covariates, response):
    import numpyro
    import numpyro.distributions as dist

    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([covariates.shape[1]]).to_event(1))
    with numpyro.plate("N", covariates.shape[0]):
        numpyro.sample("obs", dist.Bernoulli(logits=covariates @ beta), obs=response)


def regression_numpyro(covariates, response):
    import numpyro
    import numpyro.distributions as dist

    beta = numpyro.sample("beta", dist.Normal(0.0, 10.0).expand([covariates.shape[1]]).to_event(1))
    log_sigma = numpyro.sample("log_sigma", dist.Normal(0.0, 10.0))
    with numpyro.plate("N", covariates.shape[0]):
        numpyro.sample("obs", dist.Normal(covariates @ beta, jnp.exp(log_sigma)), obs=response)


def compare(label, model, start, numpyro_model, numpyro_args, args, seed=0):
    print(f"\n== {label}: N = {model.num_data:,}", flush=True)
    rows = []
    recipe, recipe_wall, mode, recipe_extra = run_recipe(model, start, args.draws, seed)
    tall, tall_wall, tall_extra = run_sample_tall(model, start, args.draws, seed)
    reference = None
    if not args.skip_nuts:
        flat_mode, unravel = jax.flatten_util.ravel_pytree(mode.position)

        def unravel_sites(flat):  # NumPyro's init wants the site dict (sites sorted by name, as ravel_pytree does)
            return unravel(flat) if isinstance(mode.position, dict) else {"beta": flat}

        nuts_draws, seconds, wall, points, extra = run_nuts(
            numpyro_model,
            numpyro_args,
            flat_mode,
            unravel_sites,
            model.num_data,
            args.nuts_warmup,
            args.nuts_draws,
            seed,
        )
        reference = (nuts_draws.mean((0, 1)), nuts_draws.std((0, 1)) / np.sqrt(bulk_ess(nuts_draws)))
        rows.append(
            row(
                "NumPyro NUTS",
                nuts_draws,
                sampling_seconds=seconds,
                wall_seconds=wall,
                points=points,
                num_data=model.num_data,
                extra=extra,
            )
        )
    for name, result, wall, extra in (
        ("recipe (eps 0.5, L 3, no warm-up)", recipe, recipe_wall, recipe_extra),
        ("sample_tall (defaults)", tall, tall_wall, tall_extra),
    ):
        rows.append(
            row(
                name,
                flat_draws(result.positions),
                sampling_seconds=result.sampling_seconds,
                wall_seconds=wall,
                points=result.total_data_used,
                num_data=model.num_data,
                reference=reference,
                extra=extra,
            )
        )
    header = (
        f"{'method':36s} {'ESS min':>8s} {'samp s':>7s} {'wall s':>7s} {'ESS/s samp':>10s} {'ESS/s wall':>10s} "
        f"{'passes':>8s} {'ESS/1e6pt':>10s} {'max|z|':>7s}"
    )
    print(header)
    for r in rows:
        print(
            f"{r['method']:36s} {r['ess_min']:8.0f} {r['sampling_seconds']:7.2f} {r['wall_seconds']:7.1f} "
            f"{r['ess_per_s_sampling']:10.0f} {r['ess_per_s_wall']:10.1f} {r['passes']:8.1f} "
            f"{r['ess_per_million']:10.2f} {r.get('max_z', float('nan')):7.2f}"
        )
    tall_row, recipe_row = rows[-1], rows[-2]
    print(
        f"sample_tall / recipe: ESS/s sampling {tall_row['ess_per_s_sampling'] / recipe_row['ess_per_s_sampling']:.2f}x, "
        f"ESS/s wall {tall_row['ess_per_s_wall'] / recipe_row['ess_per_s_wall']:.2f}x, "
        f"ESS per 10^6 points {tall_row['ess_per_million'] / recipe_row['ess_per_million']:.2f}x; "
        f"sample_tall decided {tall_extra['decision']}, {100 * tall_extra['data_fraction']:.2g}% of N per step"
    )
    return dict(label=label, num_data=model.num_data, rows=rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--regression-size", type=int, default=1_000_000)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--nuts-warmup", type=int, default=300)
    parser.add_argument("--nuts-draws", type=int, default=300)
    parser.add_argument("--skip-nuts", action="store_true")
    parser.add_argument("--only", choices=["logistic", "regression"], default=None)
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; {jax.devices()[0].platform}; tallmcmc {tallmcmc.__version__}")
    results = []
    if args.only in (None, "logistic"):
        for size in args.sizes:
            covariates, response = logistic_regression.simulate(size, 10, 0)
            model = logistic_regression.model(covariates, response)
            results.append(
                compare(
                    "logistic, d = 10",
                    model,
                    jnp.zeros(10, jnp.float32),
                    logistic_numpyro,
                    (covariates, response),
                    args,
                )
            )
    if args.only in (None, "regression"):
        covariates, response = linear_regression.simulate(
            args.regression_size, 5, 0, coefficients=REGRESSION_COEFFICIENTS
        )
        model = linear_regression.model(covariates, response, prior_scale=10.0)
        start = {"beta": jnp.zeros(5, jnp.float32), "log_sigma": jnp.zeros((), jnp.float32)}
        results.append(
            compare(
                "linear regression, d = 5 + log sigma", model, start, regression_numpyro, (covariates, response), args
            )
        )
    print(f"load average {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
