"""One of two processes holding half the rows each: find_mode, taylor_control_variate, a TunaMH bound and a run.

Launched twice by ``tests/test_distributed.py`` (``launch``: ``--process-id``,
``--num-processes``, ``--coordinator``, plus ``--output``); the main process
saves the results to ``--output`` (``.npz``) for the test to compare with
one process.
"""

import argparse
import importlib.util
import warnings

import numpy as np

from tallmcmc import distributed

parser = argparse.ArgumentParser()
for option in ("--process-id", "--num-processes"):
    parser.add_argument(option, type=int)
parser.add_argument("--coordinator")
parser.add_argument("--output")
arguments = parser.parse_args()
distributed.initialize(
    arguments.coordinator, arguments.num_processes, arguments.process_id, timeout=30, initialization_timeout=60
)
import jax.numpy as jnp

import tallmcmc
from tallmcmc.examples import gaussian_mixture

warnings.simplefilter("ignore")
with distributed.exit_on_error():
    mesh = distributed.global_mesh()
    rows = distributed.local_rows(gaussian_mixture.simulate_data(4000, seed=0))  # this process's half
    model = gaussian_mixture.model(num_data=8, temperature=1.0).with_data(distributed.shard_rows(rows, mesh))
    assert not model.data.is_fully_addressable
    adam_steps = 10 if importlib.util.find_spec("optax") is not None else 0  # optax: an optional extra
    mode = tallmcmc.find_mode(
        model, jnp.array([0.5, 0.5]), tolerance=1e-4, batch_size=500, adam_steps=adam_steps, adam_batch_size=50
    )
    variate = tallmcmc.taylor_control_variate(model, mode.position, batch_size=500)
    bound = gaussian_mixture.tuna_bound(model)
    run = tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.05),
        tallmcmc.tuna(1e-4, bound),
        jnp.array([0.0, 1.0]),
        num_samples=50,
        seed=3,
        progress=False,
        mesh=mesh,
    )
    if distributed.is_main_process():
        np.savez(
            arguments.output,
            position=np.asarray(mode.position),
            hessian=mode.hessian,
            mode_data_used=mode.data_used,
            iterations=mode.iterations,
            gradient_sum=np.asarray(variate.gradient_sum),
            hessian_sum=np.asarray(variate.hessian_sum),
            variate_data_used=variate.data_used,
            constants=bound.constants,
            positions=run.positions,
            data_used=run.data_used,
            accepted=run.accepted,
        )
