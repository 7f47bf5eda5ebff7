"""A short ``sample_tall`` whose chain program is compiled ahead on a first run; prints ``RESULT {"misses": …,
"first_draw": …, "programs": […]}``, ``misses`` the programs JAX's persistent cache did not have
(``tests/test_compile_ahead.py`` runs it twice on one fresh cache folder: the second run must load what the first
run's thread compiled), ``programs`` the names of the XLA programs the run compiled or loaded, in order."""

import json
import logging
import re
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


class Names(logging.Handler):
    def emit(self, record):
        found = re.match(r"Finished XLA compilation of jit\((\w+)\)", record.getMessage())
        if found:
            programs.append(found.group(1))


programs: list[str] = []
jax.config.update("jax_log_compiles", True)
jax_logger = logging.getLogger("jax")
jax_logger.addHandler(Names())
jax_logger.propagate = False  # the names only: JAX logs each compilation as a warning
jax.monitoring.register_event_listener(listen)
model = logistic_regression.model(*logistic_regression.simulate(60_000, 3, seed=4))
result = tallmcmc.sample_tall(model, num_samples=40, num_chains=2, num_warmup=40, progress=False, setup="fast")
first_draw = np.asarray(result.positions)[:, 0].tolist()
print("RESULT " + json.dumps({"misses": len(misses), "first_draw": first_draw, "programs": programs}))
