"""``sample(..., mesh=...)`` against the run without a mesh, in a process with four forced host devices.

Run by ``tests/test_sharding.py`` (``run_on_host_devices``, which sets
``XLA_FLAGS=--xla_force_host_platform_device_count=4``) with one argument,
``fast`` or ``full``; prints ``RESULT <json>``: for each test and mesh, how
the sharded run compares with the unsharded one.
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
full = sys.argv[1] == "full"
model = gaussian_mixture.model(num_data=1003, temperature=1.0)  # 1003 = 4 * 251 - 1: the last data block is padded
start = jnp.array([0.0, 1.0])  # the true θ: the data, not the prior, decide
meshes = {
    "data": jax.make_mesh((4,), ("data",)),
    "chains": jax.make_mesh((4,), ("chains",)),
    "data x chains": jax.make_mesh((2, 2), ("data", "chains")),
}
every = list(meshes)
tests = {
    "minibatch_barker": (
        lambda: tallmcmc.minibatch_barker(batch_size=50),
        every if full else ["data x chains", "chains"],
    ),
    "exact_barker": (lambda: tallmcmc.exact_barker(), every if full else ["data"]),
}
if full:
    tests.update(
        {
            "austere_adaptive": (lambda: tallmcmc.austere_adaptive(0.05), every),
            "confidence_sampler": (lambda: tallmcmc.confidence_sampler(50), every),
            "tuna": (lambda: tallmcmc.tuna(1e-4, gaussian_mixture.tuna_bound(model)), every),
        }
    )


def run(test, mesh=None, warmup=0):
    return tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.05),
        test,
        start,
        num_samples=25,
        num_chains=4,
        seed=3,
        progress=False,
        num_chunks=1,
        num_warmup=warmup,
        mesh=mesh,
    )


def compare(reference, result):
    return {
        "identical": bool(np.array_equal(reference.positions, result.positions)),
        "close": bool(np.allclose(reference.positions, result.positions, rtol=1e-5, atol=1e-5)),
        "same_decisions": bool(np.array_equal(reference.accepted, result.accepted)),
        "same_data_used": bool(
            np.array_equal(reference.data_used, result.data_used)
            and reference.setup_data_used == result.setup_data_used
        ),
        "acceptance": reference.acceptance_rate,
    }


out = {}
references = {}
for name, (make, mesh_names) in tests.items():
    reference = references[name] = run(make())
    for mesh_name in mesh_names:
        out[f"{name} | {mesh_name}"] = compare(reference, run(make(), meshes[mesh_name]))

if full:  # warm-up (step-size adaptation) runs sharded too
    reference = run(tallmcmc.minibatch_barker(batch_size=50), warmup=10)
    warm = run(tallmcmc.minibatch_barker(batch_size=50), meshes["data x chains"], warmup=10)
    out["warmup | data x chains"] = compare(reference, warm)
    out["warmup | data x chains"]["same_factors"] = bool(
        np.array_equal(reference.step_size_factor, warm.step_size_factor)
    )

if full:  # the data-using proposals: full-data gradient (log_likelihood_sum's custom gradient), SGLD's rows
    for label, proposal, test in [
        ("langevin + exact_barker", tallmcmc.langevin(0.002), tallmcmc.exact_barker()),
        ("sgld", tallmcmc.stochastic_gradient_langevin(1e-4, 50), tallmcmc.always_accept()),
    ]:
        pair = [
            tallmcmc.sample(
                model,
                proposal,
                test,
                start,
                num_samples=20,
                num_chains=4,
                seed=1,
                progress=False,
                num_chunks=1,
                mesh=mesh,
            )
            for mesh in (None, meshes["data x chains"])
        ]
        out[f"close: {label} | data x chains"] = compare(*pair)

# bad input: chains that the mesh's 'chains' axis does not divide; the padded layout of N = 1003 over 4
try:
    tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.1),
        tallmcmc.exact_barker(),
        start,
        num_samples=2,
        num_chains=3,
        progress=False,
        mesh=meshes["chains"],
    )
    out["chains error"] = None
except ValueError as error:
    out["chains error"] = str(error)
layout = sharding.layout_for(meshes["data"], 1003, 4, "vmap")
out["padding"] = [layout.rows_per_shard, layout.padded_num_data, layout.shards.padded]

# a wrong sharded evaluation: the psum left out (each device sees only the values of its own rows)
sharding.collectives.combine_exact = lambda values, axis: values
wrong = run(tallmcmc.minibatch_barker(batch_size=50), meshes["data"])
out["wrong: psum omitted | data"] = compare(references["minibatch_barker"], wrong)
print("RESULT " + json.dumps(out))
