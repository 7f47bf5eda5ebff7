"""One small run; prints ``RESULT {"compile_seconds": …, "cache": …}`` (``tests/test_compilation_cache.py`` runs it
twice with ``TALLMCMC_COMPILATION_CACHE`` set to a fresh folder)."""

import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import gaussian_mean

warnings.simplefilter("ignore")
data = np.random.default_rng(0).normal(1.0, 1.0, size=(2000, 2)).astype(np.float32)
result = tallmcmc.sample(
    gaussian_mean.model(data),
    tallmcmc.random_walk(0.03),
    tallmcmc.minibatch_barker(50),
    jnp.zeros(2),
    num_samples=100,
    num_chains=2,
    num_warmup=50,
    progress=False,
)
print(
    "RESULT "
    + json.dumps(
        {
            "compile_seconds": result.compile_seconds,
            "cache": jax.config.jax_compilation_cache_dir,
            "first_draw": np.asarray(result.positions)[:, 0].tolist(),
        }
    )
)
