"""The asynchronous driver on a mesh against the run without one, in a process with four forced host devices.

Run by ``tests/test_chain_asynchronous.py`` (``run_on_host_devices``); with
the argument ``all`` every test on every mesh, else minibatch Barker on the
2 × 2 mesh with its warm-up and the wrong variant only; prints ``RESULT <json>``: for each test and mesh whether draws,
data counts and decisions are identical, and a deliberately wrong variant.
"""

import json
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import tallmcmc
import tallmcmc.sharding as sharding
from tallmcmc.examples import gaussian_mixture

warnings.simplefilter("ignore")
assert len(jax.devices()) == 4, jax.devices()
model = gaussian_mixture.model(num_data=1003, temperature=1.0)  # the last of 4 data blocks is padded
meshes = {
    "data": jax.make_mesh((4,), ("data",)),
    "chains": jax.make_mesh((4,), ("chains",)),
    "data x chains": jax.make_mesh((2, 2), ("data", "chains")),
}


def run(test, mesh=None, num_warmup=0):
    return tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.05),
        test,
        jnp.array([0.0, 1.0]),
        num_samples=30,
        num_chains=4,
        seed=3,
        progress=False,
        num_chunks=2,
        mesh=mesh,
        driver="asynchronous",
        num_warmup=num_warmup,
    )


def same(a, b):
    return bool(
        np.array_equal(a.positions, b.positions)
        and np.array_equal(a.data_used, b.data_used)
        and np.array_equal(a.accepted, b.accepted)
    )


every = sys.argv[1:] == ["all"]
out = {}
cases = [
    ("minibatch_barker", lambda: tallmcmc.minibatch_barker(50), list(meshes) if every else ["data x chains"]),
    ("exact_barker", tallmcmc.exact_barker, ["data x chains"]),
    # a full pass at the start: the finished chains begin one at a time, on each device
    ("austere_adaptive", lambda: tallmcmc.austere_adaptive(0.05), ["data x chains"]),
]
for name, make, names in cases if every else cases[:1]:
    reference = run(make())
    for mesh_name in names:
        out[f"{name} | {mesh_name}"] = same(reference, run(make(), meshes[mesh_name]))
    if name == "minibatch_barker":  # an adaptive warm-up, asynchronous on the mesh too
        warm = [run(make(), mesh, num_warmup=10) for mesh in (None, meshes["data x chains"])]
        out["warm-up | data x chains"] = same(*warm) and bool(
            np.array_equal(warm[0].step_size_factor, warm[1].step_size_factor)
        )
        combine_exact = sharding.collectives.combine_exact
        sharding.collectives.combine_exact = lambda values, axis: values  # wrong: each device sees only its own rows
        out["wrong"] = same(reference, run(make(), meshes["data"]))
        sharding.collectives.combine_exact = combine_exact
print("RESULT " + json.dumps(out))
