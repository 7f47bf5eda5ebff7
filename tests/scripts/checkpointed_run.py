"""A checkpointed run that the test kills with SIGKILL and runs again (``tests/test_checkpoint.py``).

``python checkpointed_run.py PATH DRIVER`` samples a Gaussian-mean model with
``sample(..., checkpoint=PATH, checkpoint_every=100)`` and prints ``RESULT
<json>`` when done. Every step calls a host callback that changes no value
(``jax.debug.callback``); with ``HANG_AFTER_STEPS`` set, the callback stops the
run for good part-way through that step (it sleeps until killed), so that the test
kills a run that cannot have ended, whatever the machine's speed (it slept a
millisecond a step before, and the test raced the run's end). Run again
unchanged, it resumes from ``PATH``.
"""

import json
import os
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import gaussian_mean

warnings.simplefilter("ignore")
path, driver = sys.argv[1], sys.argv[2]
NUM_CHAINS = 2
# one call a step under vmap (the chains' step is batched), one a chain a step under the asynchronous driver
hang_after_calls = int(os.environ.get("HANG_AFTER_STEPS", "0")) * (1 if driver == "vmap" else NUM_CHAINS)
calls = 0


def step_callback():
    global calls
    calls += 1
    if hang_after_calls and calls >= hang_after_calls:
        while True:  # until SIGKILL
            time.sleep(60)


data = np.random.default_rng(7).normal(1.0, 1.0, size=(2000, 2)).astype(np.float32)
plain = gaussian_mean.model(data)


def log_prior(theta):
    jax.debug.callback(step_callback)
    return plain.log_prior(theta)


model = tallmcmc.Model(plain.log_likelihood, log_prior, plain.data, position_shape=(2,))
result = tallmcmc.sample(
    model,
    tallmcmc.random_walk(0.03),
    tallmcmc.minibatch_barker(50),
    jnp.zeros(2),
    num_samples=400,
    num_chains=NUM_CHAINS,
    seed=11,
    num_warmup=50,
    driver=driver,
    progress=False,
    checkpoint=path,
    checkpoint_every=100,
)
print("RESULT " + json.dumps({"draws": result.num_draws}))
