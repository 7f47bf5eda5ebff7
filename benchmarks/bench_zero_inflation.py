"""The zero-inflation gate on data with no zero inflation: ``sample_tall``'s former weak spot, and what samples it right.

``bench_user_models.py``'s ``zero_inflation`` (``tallmcmc.examples.zero_inflated_poisson``: a zero-inflated Poisson
with a logistic gate and a log rate, two covariates each, fitted to pure Poisson data): the gate's intercept has a
long left tail bounded only by its prior, which the Laplace approximation misses, so the plain proxy-HMC move rarely
goes there (``docs/sample_tall.md``, "Tails wider than the Laplace approximation"). Against NumPyro NUTS (4 × 1,500
draws after 1,500, ``target_accept_prob=0.95``), for the intercept
``a_gate``: the mean's z (MCSEs added in quadrature), the sd ratio and its error in standard errors, bulk ESS, r̂,
seconds, and the Stein identity −E[(x − x̄) ∂ log π(x)] (1 under the posterior; full-data gradients at 2,000 of the
draws), for

* ``sample_tall(model, seed=0)`` (its defaults: the momentum tempered, λ = 3, since 2026-12-01), and the same with
  the gate off (``tallmcmc.tall_tempering.TEMPER_BELOW = 0``: the plain move, as before);
* full-data HMC under the exact test from its mode (``minibatch_hamiltonian(0.5, L, N, minibatch="trajectory",
  preconditioner=laplace_covariance(mode))``, 500 warm-up steps, 4 × 2,000 draws), L = 3 and 10;
* a random walk under the exact test with an adapted covariance (1,000 warm-up steps, 4 × 4,000 draws).

    python benchmarks/bench_zero_inflation.py                   # N = 20,000, about 3 min
"""

from __future__ import annotations

import argparse
import time
import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
from bench_user_models import MODELS
from numpyro.infer import MCMC, NUTS

import tallmcmc
import tallmcmc.automatic


def _scalar(value) -> float:
    return float(np.ravel(value)[0])


def nuts_reference(model_fn, positional, keywords) -> tuple[dict[str, np.ndarray], int]:
    """NumPyro NUTS on the model, 4 × 1,500 draws after 1,500 at ``target_accept_prob=0.95`` (sequential chains, key
    1): the draws by site ``(chain, draw, …)`` and the number of divergences."""
    nuts = MCMC(
        NUTS(model_fn, target_accept_prob=0.95),
        num_warmup=1500,
        num_samples=1500,
        num_chains=4,
        chain_method="sequential",
        progress_bar=False,
    )
    nuts.run(jax.random.key(1), *positional, **keywords)
    draws = {k: np.asarray(v) for k, v in nuts.get_samples(group_by_chain=True).items()}
    return draws, int(np.sum(nuts.get_extra_fields()["diverging"]))


def stein_ratio(model, draws) -> float:
    """−mean((x − x̄) ∂ log π(x)) for ``a_gate`` over 2,000 of ``draws`` (a dict of (chain, draw, …) arrays)."""
    flat = {name: np.asarray(value).reshape(-1, *np.asarray(value).shape[2:]) for name, value in draws.items()}
    count = len(flat["a_gate"])
    picked = np.random.default_rng(0).choice(count, min(count, 2000), replace=False)
    position = {name: jnp.asarray(value[picked], jnp.float32) for name, value in flat.items()}
    gradient = jax.jit(jax.vmap(jax.grad(model.log_density)))(position)
    x = np.asarray(position["a_gate"], np.float64)
    return float(-np.mean((x - x.mean()) * np.asarray(gradient["a_gate"], np.float64)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-data", type=int, default=20_000)
    args = parser.parse_args()
    model_fn, positional, keywords = MODELS["zero_inflation"](args.num_data, np.random.default_rng(7))
    model = tallmcmc.from_numpyro(model_fn, *positional, **keywords)
    began = time.perf_counter()
    nuts_draws, divergences = nuts_reference(model_fn, positional, keywords)
    reference = np.asarray(nuts_draws["a_gate"], np.float64)
    print(
        f"NUTS: a_gate mean {reference.mean():.3f}, sd {reference.std():.3f}, bulk ESS {_scalar(az.ess(reference)):.0f}"
        f", {divergences} divergences, {time.perf_counter() - began:.1f} s",
        flush=True,
    )
    print(f"  Stein identity {stein_ratio(model, nuts_draws):.3f}", flush=True)

    def report(label: str, result, seconds: float) -> None:
        draws = np.asarray(result.positions["a_gate"], np.float64)
        z = (draws.mean() - reference.mean()) / np.hypot(_scalar(az.mcse(draws)), _scalar(az.mcse(reference)))
        ratio = draws.std() / reference.std()
        error = ratio * np.sqrt(
            0.5 / _scalar(az.ess(draws, method="sd")) + 0.5 / _scalar(az.ess(reference, method="sd"))
        )
        print(
            f"{label}: a_gate mean z {z:+.2f}, sd ratio {ratio:.3f} ({(ratio - 1) / error:+.1f} se), bulk ESS "
            f"{_scalar(az.ess(draws)):.0f}, r̂ {_scalar(az.rhat(draws)):.3f}, {seconds:.1f} s; Stein identity "
            f"{stein_ratio(model, result.positions):.3f}",
            flush=True,
        )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        began = time.perf_counter()
        tall = tallmcmc.sample_tall(model, seed=0, progress=False)
        report(
            f"sample_tall (defaults; λ = {tall.diagnosis.momentum_temperature:g})", tall, time.perf_counter() - began
        )
        shipped, tallmcmc.tall_tempering.TEMPER_BELOW = tallmcmc.tall_tempering.TEMPER_BELOW, 0.0
        began = time.perf_counter()
        plain = tallmcmc.sample_tall(model, seed=0, progress=False)
        report("sample_tall, the gate off (the plain move)", plain, time.perf_counter() - began)
        tallmcmc.tall_tempering.TEMPER_BELOW = shipped
        mode = tall.diagnosis.mode
        options = dict(initial_position=mode.position, num_chains=4, seed=0, progress=False)
        for steps in (3, 10):
            began = time.perf_counter()
            proposal = tallmcmc.minibatch_hamiltonian(
                0.5, steps, model.num_data, minibatch="trajectory", preconditioner=tallmcmc.laplace_covariance(mode)
            )
            result = tallmcmc.sample(
                model, proposal, tallmcmc.exact_metropolis(), num_samples=2000, num_warmup=500, **options
            )
            report(f"full-data HMC, L = {steps}, exact test", result, time.perf_counter() - began)
        began = time.perf_counter()
        result = tallmcmc.sample(
            model,
            tallmcmc.random_walk(0.1),
            tallmcmc.exact_metropolis(),
            num_samples=4000,
            num_warmup=1000,
            adapt_covariance=True,
            **options,
        )
        report("random walk, adapted covariance, exact test", result, time.perf_counter() - began)


if __name__ == "__main__":
    main()
