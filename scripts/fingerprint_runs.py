"""Fingerprints of `tallmcmc.sample` runs: one hash per configuration of every array a run returns.

A refactoring that must not change what the library computes is checked by running this before and after it and
comparing the outputs line by line (issue 23: "draws, warm-up draws and statistics bit-identical"):

    XLA_FLAGS=--xla_force_host_platform_device_count=2 python scripts/fingerprint_runs.py > before.txt
    (change the code)
    XLA_FLAGS=--xla_force_host_platform_device_count=2 python scripts/fingerprint_runs.py > after.txt
    diff before.txt after.txt

Each line: the configuration, then a SHA-256 prefix over the draws, every step statistic, the warm-up draws and
statistics, the adapted step factors and covariance, the setup counts and the final state's positions. Tests
(every acceptance test), drivers (vmap, asynchronous), warm-up (none, step size, step size and covariance),
schedules (temperature, step size), a control variate, and meshes (data, chains) when two devices are forced.
"""

from __future__ import annotations

import hashlib
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import gaussian_mixture, logistic_regression
from tallmcmc.examples.gaussian_mixture import tuna_bound as gaussian_mixture_bound


def digest(result) -> str:
    hasher = hashlib.sha256()

    def add(value):
        for leaf in jax.tree_util.tree_leaves(value):
            array = np.ascontiguousarray(np.asarray(leaf))
            hasher.update(str(array.dtype).encode() + str(array.shape).encode())
            hasher.update(array.tobytes())

    add(result.positions)
    for name in sorted(result.info):
        add(result.info[name])
    add(result.warmup_positions)
    for name in sorted(result.warmup_info or {}):
        add(result.warmup_info[name])
    add(result.step_size_factor)
    add(result.adapted_covariance)
    add(result.final_state.position)
    hasher.update(repr(sorted(result.setup_data_used.items())).encode())
    return hasher.hexdigest()[:16]


def configurations():
    mixture = gaussian_mixture.model(num_data=2000, temperature=20.0)
    covariates, response = logistic_regression.simulate(3000, 3, seed=1)
    logistic = logistic_regression.model(covariates, response)
    mode = tallmcmc.find_mode(logistic, jnp.zeros(3))
    cv = tallmcmc.taylor_control_variate(logistic, mode.position)
    proxy = tallmcmc.proxy_hamiltonian(cv, 0.5, 3, preconditioner=tallmcmc.laplace_covariance(mode))
    start = jnp.array([0.0, 1.0])
    walk = tallmcmc.random_walk(0.15)
    tests = {
        "exact_metropolis": tallmcmc.exact_metropolis(),
        "exact_barker": tallmcmc.exact_barker(),
        "minibatch_barker": tallmcmc.minibatch_barker(50),
        "austere": tallmcmc.austere(50, epsilon=0.05),
        "austere_adaptive": tallmcmc.austere_adaptive(0.05),
        "confidence_sampler": tallmcmc.confidence_sampler(50),
        "tuna": tallmcmc.tuna(1.0, gaussian_mixture_bound(mixture)),
    }
    for name, test in tests.items():
        for driver in ("vmap", "asynchronous"):
            yield f"{name} {driver}", mixture, walk, test, dict(initial_position=start, driver=driver)
            yield (
                f"{name} {driver} warm-up",
                mixture,
                walk,
                test,
                dict(initial_position=start, driver=driver, num_warmup=40),
            )
    for driver in ("vmap", "asynchronous"):
        yield (
            f"minibatch_barker covariance warm-up {driver}",
            mixture,
            walk,
            tallmcmc.minibatch_barker(50),
            dict(initial_position=start, driver=driver, num_warmup=60, adapt_covariance=True),
        )
        yield (
            f"minibatch_barker schedules {driver}",
            mixture,
            walk,
            tallmcmc.minibatch_barker(50),
            dict(
                initial_position=start,
                driver=driver,
                temperature_schedule=np.linspace(40.0, 20.0, 60),
                step_size_schedule=np.linspace(1.0, 0.5, 60),
            ),
        )
        yield (
            f"control variate proxy HMC warm-up {driver}",
            logistic,
            proxy,
            tallmcmc.minibatch_barker(100, control_variate=cv),
            dict(initial_position=mode.position, driver=driver, num_warmup=40),
        )
        yield (
            f"control variate exact start per chain {driver}",
            logistic,
            proxy,
            tallmcmc.exact_barker(),
            dict(initial_positions=jnp.stack([mode.position] * 4) + 0.01, driver=driver),
        )
    if len(jax.devices()) >= 2:
        for axes in (("data",), ("chains",)):
            mesh = jax.make_mesh((2,), axes)
            for name in ("minibatch_barker", "exact_barker", "austere_adaptive"):
                for driver in ("vmap", "asynchronous"):
                    yield (
                        f"{name} mesh {axes[0]} {driver}",
                        mixture,
                        walk,
                        tests[name],
                        dict(initial_position=start, driver=driver, mesh=mesh, num_warmup=20),
                    )


def main() -> int:
    warnings.simplefilter("ignore")
    print(f"# {len(jax.devices())} device(s), jax {jax.__version__}", flush=True)
    for label, model, proposal, test, options in configurations():
        result = tallmcmc.sample(model, proposal, test, num_samples=60, num_chains=4, seed=7, progress=False, **options)
        print(f"{label:55s} {digest(result)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
