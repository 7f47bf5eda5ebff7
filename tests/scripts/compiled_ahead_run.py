"""A short ``sample_tall`` whose chain program is compiled ahead on a first run; prints ``RESULT {"misses": …,
"first_draw": …}``, ``misses`` the programs JAX's persistent cache did not have (``tests/test_compile_ahead.py``
runs it twice on one fresh cache folder: the second run must load what the first run's thread compiled)."""

import json
import warnings

import jax
import numpy as np

import tallmcmc
from tallmcmc.examples import logistic_regression

warnings.simplefilter("ignore")
misses = []


def listen(event, **_):
    if event == "/jax/compilation_cache/cache_misses":
        misses.append(event)


jax.monitoring.register_event_listener(listen)
model = logistic_regression.model(*logistic_regression.simulate(60_000, 3, seed=4))
result = tallmcmc.sample_tall(model, num_samples=40, num_chains=2, num_warmup=40, progress=False, setup="fast")
print("RESULT " + json.dumps({"misses": len(misses), "first_draw": np.asarray(result.positions)[:, 0].tolist()}))
