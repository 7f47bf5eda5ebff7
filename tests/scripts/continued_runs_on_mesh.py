"""Continued runs on a mesh equal one longer run, in a process with four forced host devices.

Run by ``tests/test_continuation.py`` (``run_on_host_devices``), no arguments;
prints ``RESULT <json>``: for the asynchronous driver with the minibatch Barker test (the harder case: one
loop per device, chains levelled before a state is handed out; the vmapped driver's mesh runs are checked
against the unmeshed ones in ``test_sharding.py``), whether a run of 30 draws
continued by 30 (in memory, and through a file) equals one run of 60 bit for
bit on a ("data", "chains") mesh, and a deliberately wrong continuation (the
key counter restarted) that must differ.
"""

import json
import os
import tempfile
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import gaussian_mixture

warnings.simplefilter("ignore")
assert len(jax.devices()) == 4, jax.devices()
model = gaussian_mixture.model(num_data=1003, temperature=1.0)  # the last of 2 data blocks is padded
mesh = jax.make_mesh((2, 2), ("data", "chains"))
start = jnp.array([0.0, 1.0])


def run(test, driver, num_samples, **options):
    return tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.05),
        test,
        num_samples=num_samples,
        num_chains=4,
        seed=3,
        progress=False,
        num_chunks=3,
        mesh=mesh,
        driver=driver,
        **options,
    )


def equal(a, b):
    pairs = zip(jax.tree_util.tree_leaves((a.positions, a.info)), jax.tree_util.tree_leaves((b.positions, b.info)))
    return all(np.array_equal(x, y, equal_nan=True) for x, y in pairs)


out = {}
folder = tempfile.mkdtemp()
for driver, name, make in (("asynchronous", "minibatch_barker", lambda: tallmcmc.minibatch_barker(50)),):
    test = make()
    whole = run(test, driver, 60, initial_position=start, num_warmup=10)
    first = run(test, driver, 30, initial_position=start, num_warmup=10)
    out[f"{driver} | {name}"] = equal(whole, run(test, driver, 30, resume=first))
    path = os.path.join(folder, f"{driver}-{name}.nc")
    first.save(path)
    out[f"{driver} | {name} | file"] = equal(whole, run(test, driver, 30, resume=tallmcmc.load_result(path)))
    if driver == "asynchronous":
        restarted = first.last_state._replace(steps_done=0)  # wrong: the key counter starts again
        later = run(test, driver, 30, resume=restarted)
        out[f"wrong | {driver}"] = bool(np.array_equal(later.positions, whole.positions[:, 30:]))
print("RESULT " + json.dumps(out))
