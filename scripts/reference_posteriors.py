"""Gold-standard draws for the reference posteriors that have no closed form, written to tests/data/.

NumPyro NUTS (an independent sampler: not tallmcmc's code) in float64 on the exact posterior of
``tallmcmc.examples.normal_mixture`` (its sampling scale, the same log density the tests sample; 10 chains x 10,000
draws after 2,000 warm-up steps each) and of ``tallmcmc.examples.zero_inflated_poisson`` (the NumPyro model itself
on N = 20,000 rows; 4 chains x 10,000 draws after 2,000, ``target_accept_prob=0.95`` for the gate's long tail) and
of the separated logistic regression (``logistic_regression.simulate_separated()``, prior N(0, 5²); the same NUTS
settings as the zero-inflated Poisson's). Writes, per coordinate, the mean, the standard deviation,
their Monte Carlo standard errors, the bulk ESS and r-hat to ``tests/data/reference_posteriors.json``, with the
settings and package versions.

    python scripts/reference_posteriors.py                          # both; minutes on 2 CPU cores
    python scripts/reference_posteriors.py zero_inflated_poisson    # one, the others kept as they are
    python scripts/reference_posteriors.py separated_logistic

The tests read the JSON; they never run this.
"""

from __future__ import annotations

import json
import pathlib
import sys

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import numpyro  # noqa: E402
from numpyro.infer import MCMC, NUTS  # noqa: E402

import tallmcmc  # noqa: E402
from tallmcmc.examples import logistic_regression, normal_mixture, zero_inflated_poisson  # noqa: E402
from tallmcmc.interop import arviz as arviz_bridge  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "reference_posteriors.json"
CHAINS, DRAWS, WARMUP, SEED = 10, 10_000, 2_000, 20261124
#: The zero-inflated Poisson's rows and its NUTS run (each chain's gradient reads all rows: fewer, longer chains).
ZIP_ROWS, ZIP_CHAINS, ZIP_DRAWS, ZIP_WARMUP = 20_000, 4, 10_000, 2_000


def mixture_reference() -> dict:
    y = normal_mixture.simulate(1000, seed=0)
    data = jax.numpy.asarray(y, jax.numpy.float64)

    def potential(position):
        per_datum = jax.vmap(normal_mixture.log_likelihood, in_axes=(None, 0))(position, data)
        return -(normal_mixture.log_prior(position) + per_datum.sum())

    kernel = NUTS(potential_fn=potential, target_accept_prob=0.9)
    mcmc = MCMC(
        kernel, num_warmup=WARMUP, num_samples=DRAWS, num_chains=CHAINS, chain_method="sequential", progress_bar=False
    )
    starts = np.tile(np.array([-1.0, 0.9, 0.0, -0.3, -0.4]), (CHAINS, 1))
    starts += 0.05 * np.random.default_rng(SEED).standard_normal(starts.shape)
    mcmc.run(jax.random.key(SEED), init_params=jax.numpy.asarray(starts))
    draws = np.asarray(mcmc.get_samples(group_by_chain=True))  # (chain, draw, 5)
    rows = {name: _moments(draws[..., k]) for k, name in enumerate(normal_mixture.COORDINATES)}
    return {
        "model": "tallmcmc.examples.normal_mixture.model(normal_mixture.simulate(1000, seed=0))",
        "coordinates": list(normal_mixture.COORDINATES),
        "sampler": f"NumPyro {numpyro.__version__} NUTS, target_accept_prob 0.9, float64, {CHAINS} chains x "
        f"{DRAWS} draws after {WARMUP} warm-up, seed {SEED}",
        "tallmcmc": tallmcmc.__version__,
        "jax": jax.__version__,
        "moments": rows,
    }


def _moments(x: np.ndarray) -> dict:
    """Mean, sd, their Monte Carlo standard errors, bulk ESS and r̂ of draws ``(chain, draw)``."""
    ess = arviz_bridge.ess(x)
    sd = float(x.std())
    kurtosis = float(np.mean((x - x.mean()) ** 4) / x.var() ** 2)
    return {
        "mean": float(x.mean()),
        "sd": sd,
        "mcse_mean": arviz_bridge.mcse(x, method="mean"),
        "mcse_sd": sd * float(np.sqrt((kurtosis - 1) / (4 * ess))),  # delta method on the variance
        "ess_bulk": ess,
        "r_hat": arviz_bridge.rhat(x),
    }


def _long_chains(kernel) -> MCMC:
    """``kernel`` in ZIP_CHAINS sequential chains of ZIP_DRAWS draws after ZIP_WARMUP: fewer, longer chains, for the
    references whose gradient reads every one of their rows."""
    return MCMC(
        kernel,
        num_warmup=ZIP_WARMUP,
        num_samples=ZIP_DRAWS,
        num_chains=ZIP_CHAINS,
        chain_method="sequential",
        progress_bar=False,
    )


def zero_inflation_reference() -> dict:
    X, Z, y = zero_inflated_poisson.simulate(ZIP_ROWS)
    kernel = NUTS(zero_inflated_poisson.numpyro_model, target_accept_prob=0.95)
    mcmc = _long_chains(kernel)
    mcmc.run(jax.random.key(SEED), np.asarray(X, np.float64), np.asarray(Z, np.float64), y=y)
    samples = {name: np.asarray(value) for name, value in mcmc.get_samples(group_by_chain=True).items()}
    rows = {}
    for name in zero_inflated_poisson.COORDINATES:
        site, _, index = name.partition("[")
        x = samples[site] if not index else samples[site][..., int(index[:-1])]
        rows[name] = _moments(x)
    divergences = int(np.sum(mcmc.get_extra_fields()["diverging"]))
    return {
        "model": f"tallmcmc.examples.zero_inflated_poisson.model(*zero_inflated_poisson.simulate({ZIP_ROWS}))",
        "coordinates": list(zero_inflated_poisson.COORDINATES),
        "sampler": f"NumPyro {numpyro.__version__} NUTS, target_accept_prob 0.95, float64, {ZIP_CHAINS} chains x "
        f"{ZIP_DRAWS} draws after {ZIP_WARMUP} warm-up, seed {SEED}, {divergences} divergences",
        "tallmcmc": tallmcmc.__version__,
        "jax": jax.__version__,
        "moments": rows,
    }


#: The separated logistic regression's prior variance (N(0, 5²) on every coefficient).
SEPARATED_PRIOR_VARIANCE = 25.0


def separation_reference() -> dict:
    covariates, response = logistic_regression.simulate_separated()
    x, y = jax.numpy.asarray(covariates, jax.numpy.float64), jax.numpy.asarray(response, jax.numpy.float64)

    def potential(beta):
        logits = x @ beta
        return 0.5 * jax.numpy.sum(beta**2) / SEPARATED_PRIOR_VARIANCE - jax.numpy.sum(
            jax.nn.log_sigmoid(jax.numpy.where(y > 0, logits, -logits))
        )

    kernel = NUTS(potential_fn=potential, target_accept_prob=0.95)
    mcmc = _long_chains(kernel)
    mcmc.run(jax.random.key(SEED), init_params=jax.numpy.zeros((ZIP_CHAINS, 4)))
    draws = np.asarray(mcmc.get_samples(group_by_chain=True))  # (chain, draw, 4)
    coordinates = [f"beta[{k}]" for k in range(4)]
    divergences = int(np.sum(mcmc.get_extra_fields()["diverging"]))
    return {
        "model": "tallmcmc.examples.logistic_regression.model(*logistic_regression.simulate_separated(), "
        f"prior_variance={SEPARATED_PRIOR_VARIANCE})",
        "coordinates": coordinates,
        "sampler": f"NumPyro {numpyro.__version__} NUTS, target_accept_prob 0.95, float64, {ZIP_CHAINS} chains x "
        f"{ZIP_DRAWS} draws after {ZIP_WARMUP} warm-up, seed {SEED}, {divergences} divergences",
        "tallmcmc": tallmcmc.__version__,
        "jax": jax.__version__,
        "moments": {name: _moments(draws[..., k]) for k, name in enumerate(coordinates)},
    }


REFERENCES = {
    "normal_mixture": mixture_reference,
    "zero_inflated_poisson": zero_inflation_reference,
    "separated_logistic": separation_reference,
}


def main() -> int:
    names = sys.argv[1:] or list(REFERENCES)
    unknown = sorted(set(names) - set(REFERENCES))
    if unknown:
        raise SystemExit(f"unknown reference(s) {unknown}: choose from {list(REFERENCES)}")
    reference = json.loads(OUT.read_text()) if OUT.exists() else {}
    reference.update({name: REFERENCES[name]() for name in names})  # the others kept as they are
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(reference, indent=2) + "\n")
    print(json.dumps(reference, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
