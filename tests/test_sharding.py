"""``sample(..., mesh=...)``: the data split over devices give the draws and data counts of the run without a mesh.

The default suite runs in one process whose JAX already has one CPU device, so
the checks run in a subprocess with four forced host devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=4``), all in one
interpreter to pay JAX's start-up once. Each run is compared with the
unsharded run of the same seed:

* a ``"data"`` mesh (rows over 4 devices, N = 1003 so the last block is
  padded) and a 2 × 2 ``("data", "chains")`` mesh: draws bit for bit (a
  minibatch's values are combined by an exact psum, x + 0 + 0 + 0), the same
  ``data_used``;
* a ``"chains"`` mesh (data copied, one chain per device): the same decisions
  and ``data_used``, positions equal to float32 rounding (a device vmaps one
  chain where the unsharded run vmaps four, so XLA may round differently);
* a deliberately wrong sharded evaluation (the psum left out: each device
  sees only its own rows' values) fails the same comparison;
* bad meshes and the out-of-memory estimate (memory query monkeypatched)
  raise clear errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
import tallmcmc.sharding as sharding
from tallmcmc.examples import gaussian_mixture

SCRIPT = textwrap.dedent(
    """
    import json, sys, warnings
    import jax, jax.numpy as jnp, numpy as np
    import tallmcmc, tallmcmc.sharding as sharding
    from tallmcmc.examples import gaussian_mixture
    from tallmcmc.acceptance.tuna import gaussian_mixture_bound

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
        "minibatch_barker": (lambda: tallmcmc.minibatch_barker(batch_size=50),
                             every if full else ["data x chains", "chains"]),
        "exact_barker": (lambda: tallmcmc.exact_barker(), every if full else ["data"]),
    }
    if full:
        tests.update({
            "austere_adaptive": (lambda: tallmcmc.austere_adaptive(0.05), every),
            "confidence_sampler": (lambda: tallmcmc.confidence_sampler(50), every),
            "tuna": (lambda: tallmcmc.tuna(1e-4, gaussian_mixture_bound(model)), every),
        })

    def run(test, mesh=None, warmup=0):
        return tallmcmc.sample(model, tallmcmc.random_walk(0.05), test, start, num_samples=25, num_chains=4, seed=3,
                               progress=False, num_chunks=1, num_warmup=warmup, mesh=mesh)

    def compare(reference, result):
        return {
            "identical": bool(np.array_equal(reference.positions, result.positions)),
            "close": bool(np.allclose(reference.positions, result.positions, rtol=1e-5, atol=1e-5)),
            "same_decisions": bool(np.array_equal(reference.accepted, result.accepted)),
            "same_data_used": bool(np.array_equal(reference.data_used, result.data_used)
                                   and reference.setup_data_used == result.setup_data_used),
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
            pair = [tallmcmc.sample(model, proposal, test, start, num_samples=20, num_chains=4, seed=1,
                                    progress=False, num_chunks=1, mesh=mesh)
                    for mesh in (None, meshes["data x chains"])]
            out[f"close: {label} | data x chains"] = compare(*pair)

    # bad input: chains that the mesh's 'chains' axis does not divide; the padded layout of N = 1003 over 4
    try:
        tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.exact_barker(), start, num_samples=2,
                        num_chains=3, progress=False, mesh=meshes["chains"])
        out["chains error"] = None
    except ValueError as error:
        out["chains error"] = str(error)
    layout = sharding.layout_for(meshes["data"], 1003, 4, "vmap")
    out["padding"] = [layout.rows_per_shard, layout.padded_num_data, layout.shards.padded]

    # a wrong sharded evaluation: the psum left out (each device sees only the values of its own rows)
    sharding.combine_exact = lambda values, axis: values
    wrong = run(tallmcmc.minibatch_barker(batch_size=50), meshes["data"])
    out["wrong: psum omitted | data"] = compare(references["minibatch_barker"], wrong)
    print("RESULT " + json.dumps(out))
    """
)


def _run_checks(which: str) -> dict:
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    completed = subprocess.run(
        [sys.executable, "-c", SCRIPT, which], capture_output=True, text=True, env=env, timeout=900
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    line = next(line for line in completed.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _assert_same(results: dict) -> None:
    for key, result in results.items():
        if key.startswith("wrong") or " | " not in key:
            continue
        assert result["same_data_used"], key
        assert result["same_decisions"], key
        if not key.startswith("close: sgld"):  # (SGLD accepts everything)
            assert 0.0 < result["acceptance"] < 1.0, key  # the comparison means something: both moves and stays
        if key.endswith("| chains") or key.startswith("close:"):
            assert result["close"], key
        else:
            assert result["identical"], key
    if "warmup | data x chains" in results:
        assert results["warmup | data x chains"]["same_factors"]
    assert "num_chains = 3 is not a multiple of the mesh's 'chains' axis size 4" in results["chains error"]
    assert results["padding"] == [251, 1004, True]
    wrong = results["wrong: psum omitted | data"]
    assert not wrong["identical"] and not wrong["same_decisions"]


def test_sharded_runs_match_the_unsharded_run():
    """Minibatch Barker on a 2 × 2 and a chains mesh, exact Barker on a data mesh; the wrong variant fails."""
    _assert_same(_run_checks("fast"))


@pytest.mark.slow
def test_every_test_on_every_mesh():
    """Minibatch and exact Barker, AustereMH(nc), MHSubLhd and TunaMH on every mesh; sharded warm-up; Langevin, SGLD."""
    _assert_same(_run_checks("full"))


# ------------------------------------------------------------------ bad input (one device is enough)


def _model():
    return gaussian_mixture.model(num_data=101)


def test_bad_meshes_are_refused():
    import jax

    model, start = _model(), jnp.array([0.5, 0.5])
    devices = np.array(jax.devices()[:1])
    with pytest.raises(ValueError, match="mesh axis names must be 'data' and/or 'chains'"):
        tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.exact_barker(), start, num_samples=2,
                        progress=False, mesh=jax.sharding.Mesh(devices, ("batch",)))
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh"):
        tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.exact_barker(), start, num_samples=2,
                        progress=False, mesh="data")
    with pytest.raises(ValueError, match="num_chains = 3 is not a multiple"):  # the asynchronous driver checks it too
        tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.exact_barker(), start, num_samples=2, num_chains=3,
                        progress=False, mesh=jax.sharding.Mesh(np.array(jax.devices()[:1] * 2), ("chains",)),
                        driver="asynchronous")


def test_out_of_memory_estimate_before_sampling(monkeypatch):
    model, start = _model(), jnp.array([0.5, 0.5])
    data_bytes = 101 * 4
    cache_bytes = 2 * 8 * 101 * 4  # exact test: num_chains x N float32 values, current and proposed
    # what the device has on top of the data already resident in host memory
    monkeypatch.setattr(sharding, "device_memory_bytes", lambda device: 1000)
    with pytest.raises(sharding.DeviceMemoryError, match=r"needs about .* GB on one device \(data .* GB, chain states"):
        tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.exact_barker(), start, num_samples=2,
                        num_chains=8, progress=False)
    with pytest.raises(ValueError, match=r"mesh=jax.make_mesh"):  # a ValueError too, naming the fix
        tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.exact_barker(), start, num_samples=2,
                        num_chains=8, progress=False)
    # enough memory: the run goes ahead (the estimate counts data + 2 x num_chains x N values + small states)
    monkeypatch.setattr(sharding, "device_memory_bytes", lambda device: 2 * (data_bytes + cache_bytes))
    result = tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.exact_barker(), start, num_samples=2,
                             num_chains=8, progress=False)
    assert result.num_draws == 2
    # a minibatch test keeps no per-datum cache: it fits where the exact test did not
    monkeypatch.setattr(sharding, "device_memory_bytes", lambda device: 1000)
    tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.minibatch_barker(batch_size=20), start, num_samples=2,
                    num_chains=8, progress=False)


def test_device_memory_query_answers_on_this_machine():
    import jax

    memory = sharding.device_memory_bytes(jax.devices()[0])
    assert memory is None or memory > 0
