"""Gold-standard draws for the reference posteriors that have no closed form, written to tests/data/.

NumPyro NUTS (an independent sampler: not tallmcmc's code) on the exact posterior of
``tallmcmc.examples.normal_mixture`` (its sampling scale, the same log density the tests sample), in float64,
10 chains x 10,000 draws after 2,000 warm-up steps each. Writes, per coordinate, the mean, the standard deviation,
their Monte Carlo standard errors, the bulk ESS and r-hat to ``tests/data/reference_posteriors.json``, with the
settings and package versions.

    python scripts/reference_posteriors.py            # ~1-2 minutes on 2 CPU cores

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
from tallmcmc.examples import normal_mixture  # noqa: E402
from tallmcmc.interop import arviz as arviz_bridge  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "reference_posteriors.json"
CHAINS, DRAWS, WARMUP, SEED = 10, 10_000, 2_000, 20261124


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
    rows = {}
    for k, name in enumerate(normal_mixture.COORDINATES):
        x = draws[..., k]
        ess = arviz_bridge.ess(x)
        sd = float(x.std())
        kurtosis = float(np.mean((x - x.mean()) ** 4) / x.var() ** 2)
        rows[name] = {
            "mean": float(x.mean()),
            "sd": sd,
            "mcse_mean": arviz_bridge.mcse(x, method="mean"),
            "mcse_sd": sd * float(np.sqrt((kurtosis - 1) / (4 * ess))),  # delta method on the variance
            "ess_bulk": ess,
            "r_hat": arviz_bridge.rhat(x),
        }
    return {
        "model": "tallmcmc.examples.normal_mixture.model(normal_mixture.simulate(1000, seed=0))",
        "coordinates": list(normal_mixture.COORDINATES),
        "sampler": f"NumPyro {numpyro.__version__} NUTS, target_accept_prob 0.9, float64, {CHAINS} chains x "
        f"{DRAWS} draws after {WARMUP} warm-up, seed {SEED}",
        "tallmcmc": tallmcmc.__version__,
        "jax": jax.__version__,
        "moments": rows,
    }


def main() -> int:
    reference = {"normal_mixture": mixture_reference()}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(reference, indent=2) + "\n")
    print(json.dumps(reference, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
