"""``sample_tall`` with the proxy-HMC move's momentum tempered (λ = 2) against the plain move (λ = 1), same process.

``proxy_hamiltonian(..., momentum_temperature=λ)`` draws the momentum from N(0, λM⁻¹) and divides its
kinetic energy by λ in the ratio: an exact move that proposes roughly from the proxy raised to 1/λ, √λ times wider.
This sets ``tallmcmc.automatic.MOMENTUM_TEMPERATURE`` (1 on the default path) and runs ``sample_tall(model, seed=S)``
on

* ``mixture``: the N = 1,000 normal mixture of ``tests/test_sample_tall.py`` (tails heavier than the Laplace
  approximation, where the plain move sticks), against ``tests/data/reference_posteriors.json`` (NUTS, float64);
* ``zero_inflation`` (``bench_user_models.py``, N = 20,000): the gate intercept's long left tail, against NumPyro
  NUTS run here (4 × 1,500 draws, ``target_accept_prob=0.95``);
* ``poisson`` (``bench_user_models.py``, N = 20,000): a posterior close to its Laplace approximation, where the
  tempered move only costs.

Per run: the kept draws' acceptance, the smallest bulk ESS, r̂, and per coordinate the mean's z (its MCSE and the
reference's in quadrature) and the sd ratio (for ``poisson`` only the ESS: it has no reference here).

    python benchmarks/bench_tempered_momentum.py                  # about 4 min
    python benchmarks/bench_tempered_momentum.py --only mixture --seeds 3 4 5 6
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time
import warnings

import arviz as az
import numpy as np
from bench_user_models import MODELS
from bench_zero_inflation import nuts_reference

import tallmcmc
import tallmcmc.automatic
from tallmcmc.examples import normal_mixture

REFERENCE = pathlib.Path(__file__).parents[1] / "tests" / "data" / "reference_posteriors.json"


def _scalar(value) -> float:
    return float(np.ravel(value)[0])


def mixture():
    moments = json.loads(REFERENCE.read_text())["normal_mixture"]["moments"]
    reference = {name: (moments[name]["mean"], moments[name]["sd"], 0.0) for name in normal_mixture.COORDINATES}
    model = normal_mixture.model(normal_mixture.simulate(1000, seed=0))
    return (
        model,
        reference,
        lambda positions: {
            name: np.asarray(positions, np.float64)[..., j] for j, name in enumerate(normal_mixture.COORDINATES)
        },
    )


def zero_inflation():
    model_fn, positional, keywords = MODELS["zero_inflation"](20_000, np.random.default_rng(7))
    draws, _ = nuts_reference(model_fn, positional, keywords)
    reference = {}
    for name, value in _coordinates(draws).items():
        reference[name] = (value.mean(), value.std(), _scalar(az.mcse(value)))
    return tallmcmc.from_numpyro(model_fn, *positional, **keywords), reference, _coordinates


def poisson():
    model_fn, positional, keywords = MODELS["poisson"](20_000, np.random.default_rng(7))
    return tallmcmc.from_numpyro(model_fn, *positional, **keywords), None, _coordinates


def _coordinates(draws: dict) -> dict[str, np.ndarray]:
    out = {}
    for name, value in draws.items():
        value = np.asarray(value, np.float64).reshape(*np.shape(value)[:2], -1)
        for j in range(value.shape[2]):
            out[f"{name}[{j}]"] = value[:, :, j]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=["mixture", "zero_inflation", "poisson"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[3, 4])
    parser.add_argument("--temperatures", nargs="+", type=float, default=[1.0, 2.0])
    args = parser.parse_args()
    builders = {"mixture": mixture, "zero_inflation": zero_inflation, "poisson": poisson}
    for name in args.only:
        model, reference, coordinates = builders[name]()
        for seed in args.seeds:
            for temperature in args.temperatures:
                tallmcmc.automatic.MOMENTUM_TEMPERATURE = temperature
                began = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = tallmcmc.sample_tall(model, seed=seed, progress=False)
                seconds = time.perf_counter() - began
                diagnosis = result.diagnosis
                rows = []
                if reference is not None:
                    for coordinate, draws in coordinates(result.positions).items():
                        mean, sd, mcse = reference[coordinate]
                        z = (draws.mean() - mean) / np.hypot(_scalar(az.mcse(draws)), mcse)
                        rows.append(f"{coordinate} z {z:+.1f} sd {draws.std() / sd:.3f}")
                print(
                    f"{name} seed {seed} λ = {temperature:g}: {seconds:.1f} s, {diagnosis.decision}, accepted "
                    f"{float(np.mean(result.info['accepted'])):.3f}, bulk ESS min {diagnosis.ess_bulk_min:.0f}, r̂ max "
                    f"{diagnosis.r_hat_max:.3f}, problems {len(diagnosis.problems)}"
                    + (f"\n    {'; '.join(rows)}" if rows else ""),
                    flush=True,
                )
    tallmcmc.automatic.MOMENTUM_TEMPERATURE = 1.0


if __name__ == "__main__":
    main()
