"""``sample_tall``'s tempered proxy-HMC momentum: the default path's gate against the plain move and other λ.

``proxy_hamiltonian(..., momentum_temperature=λ)`` draws the momentum from N(0, λM⁻¹) and divides its kinetic
energy by λ in the ratio: an exact move that proposes roughly from the proxy raised to 1/λ, √λ times wider.
``sample_tall`` warms up with the plain move (λ = 1) and, where that warm-up's Metropolis acceptance is below
``tallmcmc.tall_tempering.TEMPER_BELOW``, warms up again with λ = ``TEMPERED_MOMENTUM`` and keeps it
(``docs/sample_tall.md``, "Tails wider than the Laplace approximation"). Variants, each ``sample_tall(model,
seed=S)`` with its defaults but for:

* ``default``: nothing (the gate as shipped);
* ``plain``: the gate and the draws again off (``TEMPER_BELOW = 0``, ``STICKY_TEMPERED_MOMENTUM = 1``): the plain
  move everywhere, the path before either;
* ``gated-2``: the gate with λ = 2 where it fires (``TEMPERED_MOMENTUM = 2``);
* ``forced-2``: every warm-up at λ = 2, the gate and the draws again off (``MOMENTUM_TEMPERATURE = 2``: what the
  first measurements of the tempered move ran, on models the gate does not fire on too).

Models:

* ``zero_inflation``: ``tallmcmc.examples.zero_inflated_poisson`` at N = 20,000 (a gate intercept with a long left
  tail that the Laplace approximation misses);
* ``mixture``: the N = 1,000 normal mixture of ``tests/test_sample_tall.py`` (tails heavier than the Laplace
  approximation, where the plain move sticks; its warm-up acceptance does not fire the gate, its kept draws' sd-mixing
  check draws them again at λ = ``STICKY_TEMPERED_MOMENTUM``);
* ``poisson`` (``bench_user_models.py``, N = 20,000): a posterior close to its Laplace approximation, where the
  tempered move only costs.

References: ``tests/data/reference_posteriors.json`` (NumPyro NUTS, float64; ``scripts/reference_posteriors.py``);
``poisson`` has none (its ESS only). Per run: λ, the decision, the kept draws' acceptance, the smallest bulk ESS, r̂,
and per coordinate the mean's z and the sd's z (the run's MCSE and the reference's in quadrature:
``tallmcmc.testing.reference_errors``, as the tests use it) and the sd ratio. Per variant and model over the seeds: the
smallest and mean sd ratio of the coordinate furthest from its reference, and the pooled z of its sd (Σz/√seeds).

    python benchmarks/bench_tempered_momentum.py --seeds 0 1 2 3 4 5 6 7 8 9 10 11        # about 9 min
    python benchmarks/bench_tempered_momentum.py --only poisson mixture --variants default forced-2 --seeds 3 4
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time
import warnings

import numpy as np
from bench_user_models import MODELS

import tallmcmc
import tallmcmc.tall_tempering as tall_tempering
import tallmcmc.tall_warmup as tall_warmup
import tallmcmc.testing
from tallmcmc.examples import normal_mixture, zero_inflated_poisson

REFERENCE = json.loads((pathlib.Path(__file__).parents[1] / "tests" / "data" / "reference_posteriors.json").read_text())
#: What each variant sets (the rest as shipped; each setting in its module, ``SETTING_HOME``).
VARIANTS = {
    "default": {},
    "plain": {"TEMPER_BELOW": 0.0, "STICKY_TEMPERED_MOMENTUM": 1.0},
    "gated-2": {"TEMPERED_MOMENTUM": 2.0},
    "forced-2": {"MOMENTUM_TEMPERATURE": 2.0, "TEMPER_BELOW": 0.0, "STICKY_TEMPERED_MOMENTUM": 2.0},
}


def _reference(name: str, coordinates) -> tuple[np.ndarray, ...]:
    rows = [REFERENCE[name]["moments"][coordinate] for coordinate in coordinates]
    return tuple(np.array([row[key] for row in rows]) for key in ("mean", "sd", "mcse_mean", "mcse_sd"))


MODELS_HERE = {
    "zero_inflation": lambda: (
        zero_inflated_poisson.model(*zero_inflated_poisson.simulate(20_000)),
        zero_inflated_poisson.COORDINATES,
        _reference("zero_inflated_poisson", zero_inflated_poisson.COORDINATES),
    ),
    "mixture": lambda: (
        normal_mixture.model(normal_mixture.simulate(1000, seed=0)),
        normal_mixture.COORDINATES,
        _reference("normal_mixture", normal_mixture.COORDINATES),
    ),
    "poisson": lambda: (_poisson(), None, None),
}


def _poisson():
    model_fn, positional, keywords = MODELS["poisson"](20_000, np.random.default_rng(7))
    return tallmcmc.from_numpyro(model_fn, *positional, **keywords)


#: The module each setting a variant changes lives in (the path reads it there).
SETTING_HOME = {
    "MOMENTUM_TEMPERATURE": tall_warmup,
    "TEMPER_BELOW": tall_tempering,
    "TEMPERED_MOMENTUM": tall_tempering,
    "STICKY_TEMPERED_MOMENTUM": tall_tempering,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=["zero_inflation", "mixture", "poisson"], choices=MODELS_HERE)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    parser.add_argument("--variants", nargs="+", default=["default", "plain", "gated-2"], choices=VARIANTS)
    args = parser.parse_args()
    shipped = {name: getattr(SETTING_HOME[name], name) for name in SETTING_HOME}
    for name in args.only:
        model, coordinates, reference = MODELS_HERE[name]()
        for variant in args.variants:
            ratios, z_sds = [], []
            for seed in args.seeds:
                for setting, value in {**shipped, **VARIANTS[variant]}.items():
                    setattr(SETTING_HOME[setting], setting, value)
                began = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = tallmcmc.sample_tall(model, seed=seed, progress=False)
                seconds = time.perf_counter() - began
                diagnosis = result.diagnosis
                line = (
                    f"{name} {variant} seed {seed}: λ {diagnosis.momentum_temperature}, {seconds:.1f} s, "
                    f"{diagnosis.decision}, accepted {float(np.mean(result.info['accepted'])):.3f}, bulk ESS min "
                    f"{diagnosis.ess_bulk_min:.0f}, r̂ max {diagnosis.r_hat_max:.3f}, problems {len(diagnosis.problems)}"
                )
                if reference is not None:
                    z_mean, z_sd, ratio, _ = tallmcmc.testing.reference_errors(result.positions, *reference)
                    worst = int(np.argmax(np.abs(ratio - 1)))
                    ratios.append(ratio)
                    z_sds.append(z_sd)
                    line += (
                        f"\n    z(mean) {np.round(z_mean, 1)}\n    z(sd)   {np.round(z_sd, 1)}\n    sd ratio "
                        f"{np.round(ratio, 3)} (furthest: {coordinates[worst]})"
                    )
                print(line, flush=True)
            if ratios:
                ratios, z_sds = np.array(ratios), np.array(z_sds)
                worst = int(np.argmax(np.abs(ratios.mean(axis=0) - 1)))
                print(
                    f"== {name} {variant}, seeds {args.seeds}: {coordinates[worst]}'s sd ratio "
                    f"{ratios[:, worst].min():.3f}–{ratios[:, worst].max():.3f}, mean {ratios[:, worst].mean():.3f}; "
                    f"pooled z of its sd {z_sds[:, worst].sum() / np.sqrt(len(args.seeds)):+.1f}; max |z(sd)| over "
                    f"coordinates and seeds {np.abs(z_sds).max():.1f}",
                    flush=True,
                )
    for setting, value in shipped.items():
        setattr(SETTING_HOME[setting], setting, value)


if __name__ == "__main__":
    main()
