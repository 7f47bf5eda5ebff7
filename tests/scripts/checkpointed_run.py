"""A checkpointed run that the test kills with SIGKILL and runs again (``tests/test_checkpoint.py``).

``python checkpointed_run.py PATH DRIVER`` samples a Gaussian-mean model with
``sample(..., checkpoint=PATH, checkpoint_every=50)`` and prints ``RESULT
<json>`` when done. Each step sleeps one millisecond in a host callback that
changes no value (``jax.debug.callback``), so that the run lasts seconds and the
test can kill it part-way. Run again unchanged, it resumes from ``PATH``.
"""

import json
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
data = np.random.default_rng(7).normal(1.0, 1.0, size=(2000, 2)).astype(np.float32)
plain = gaussian_mean.model(data)


def log_prior(theta):
    jax.debug.callback(lambda: time.sleep(0.001))
    return plain.log_prior(theta)


model = tallmcmc.Model(plain.log_likelihood, log_prior, plain.data, position_shape=(2,))
result = tallmcmc.sample(
    model,
    tallmcmc.random_walk(0.03),
    tallmcmc.minibatch_barker(50),
    jnp.zeros(2),
    num_samples=800,
    num_chains=2,
    seed=11,
    num_warmup=50,
    driver=driver,
    progress=False,
    checkpoint=path,
    checkpoint_every=50,
)
print("RESULT " + json.dumps({"draws": result.num_draws}))
