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
  raise clear errors;
* the one-off passes before ``sample`` (``find_mode``,
  ``taylor_control_variate``, the TunaMH bound helpers) on data split over the
  4 devices equal the unsharded ones, with the same data counts; keeping only
  each device's own partial sum fails.
"""

from __future__ import annotations

import textwrap

import jax.numpy as jnp
import numpy as np
import pytest
from forced_devices import run_on_host_devices

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
    return run_on_host_devices(SCRIPT, which, timeout=900)


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
    # the asynchronous driver keeps every draw on the device until the end: 8 chains x 100 draws x (2 + 8) x 4 bytes
    # (position and step statistics) = 32 kB, counted; the vmapped driver brings draws home chunk by chunk
    monkeypatch.setattr(sharding, "device_memory_bytes", lambda device: 20_000)
    with pytest.raises(sharding.DeviceMemoryError, match=r"draws held on the device \(asynchronous driver\) 3\.52e-05 GB"):
        tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.minibatch_barker(batch_size=20), start,
                        num_samples=100, num_chains=8, progress=False, driver="asynchronous")
    tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.minibatch_barker(batch_size=20), start, num_samples=100,
                    num_chains=8, progress=False)
    # driver="auto" would pick the asynchronous driver for 8 chains; where its draws do not fit it runs vmapped
    result = tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.minibatch_barker(batch_size=20), start,
                             num_samples=100, num_chains=8, progress=False, driver="auto")
    assert result.driver == "vmap"


def test_device_memory_query_answers_on_this_machine():
    import jax

    memory = sharding.device_memory_bytes(jax.devices()[0])
    assert memory is None or memory > 0


# ------------------------------------------------------------------ the one-off passes before sample

SETUP_SCRIPT = """
import importlib.util, json, sys, time, warnings
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
import tallmcmc, tallmcmc.sharding as sharding
from tallmcmc.acceptance.tuna import gaussian_mixture_bound, logistic_regression_bound
from tallmcmc.examples import gaussian_mixture, logistic_regression

warnings.simplefilter("ignore")
assert len(jax.devices()) == 4, jax.devices()
began = time.perf_counter()
EPS = float(np.finfo(np.float32).eps)
mesh = jax.make_mesh((4,), ("data",))  # explicit axes (JAX's default): plain indexing of the rows would fail
model = gaussian_mixture.model(num_data=1000, temperature=1.0)


def split(model, mesh, axis="data"):
    return model.with_data(jax.device_put(model.data, NamedSharding(mesh, PartitionSpec(axis))))


sharded = split(model, mesh)
start = jnp.array([0.5, 0.5])
center = jnp.array([0.1, 0.9])
# the size of the sums' float32 rounding: eps times the sums of |per-datum terms| (float64, from per-datum values)
per_datum_gradients = np.asarray(jax.vmap(jax.grad(gaussian_mixture.log_likelihood), (None, 0))(center, model.data),
                                 np.float64)
per_datum_hessians = np.asarray(jax.vmap(jax.hessian(gaussian_mixture.log_likelihood), (None, 0))(center, model.data),
                                np.float64)
gradient_scale = EPS * np.abs(per_datum_gradients).sum(axis=0).max()
hessian_scale = EPS * np.abs(per_datum_hessians).sum(axis=0).max()


def modes(model):
    # tolerance 1e-4 on |∇log π|/(N/K): above the float32 noise of the sums, so that the optimiser's path (hence
    # its number of passes) does not hinge on their last bits (at 1e-6 it can, see docs/sharding.md)
    out = {
        "default": tallmcmc.find_mode(model, start, tolerance=1e-4),
        "chunks": tallmcmc.find_mode(model, start, tolerance=1e-4, batch_size=96),
        "L-BFGS-B": tallmcmc.find_mode(model, start, tolerance=1e-4, method="L-BFGS-B"),
    }
    if importlib.util.find_spec("optax") is not None:  # optax is an optional extra (find_mode's Adam steps)
        out["chunks + adam"] = tallmcmc.find_mode(model, start, tolerance=1e-4, batch_size=96, adam_steps=20,
                                                  adam_batch_size=50)
    return out


def variates(model):
    return {
        "per_datum, chunks": tallmcmc.taylor_control_variate(model, center, batch_size=96),
        "low_rank": tallmcmc.taylor_control_variate(model, center, curvature="low_rank", rank=1),
    }


def compare_modes(reference, result):
    return {
        "position": float(np.max(np.abs(np.asarray(reference.position) - np.asarray(result.position)))),
        "hessian": float(np.max(np.abs(reference.hessian - result.hessian)) / np.max(np.abs(reference.hessian))),
        "same_data_used": reference.data_used == result.data_used,
        "same_iterations": reference.iterations == result.iterations,
        "converged": bool(reference.converged and result.converged),
    }


def compare_variates(reference, result):
    out = {"gradient": float(np.max(np.abs(np.asarray(reference.gradient_sum, np.float64)
                                           - np.asarray(result.gradient_sum, np.float64))) / gradient_scale),
           "same_data_used": reference.data_used == result.data_used}
    for name in ("hessian_sum", "hessian_diagonal", "hessian_eigenvalues"):
        if getattr(reference, name) is not None:
            out[name] = float(np.max(np.abs(np.asarray(getattr(reference, name), np.float64)
                                            - np.asarray(getattr(result, name), np.float64))) / hessian_scale)
    return out


out = {}
reference_modes, reference_variates = modes(model), variates(model)
for name, result in modes(sharded).items():
    out[f"find_mode {name}"] = compare_modes(reference_modes[name], result)
for name, result in variates(sharded).items():
    out[f"control variate {name}"] = compare_variates(reference_variates[name], result)
grid = split(model, jax.make_mesh((2, 2), ("data", "chains")))  # rows over 2 devices, copied over the other 2
out["control variate per_datum, chunks | data x chains"] = compare_variates(
    reference_variates["per_datum, chunks"], tallmcmc.taylor_control_variate(grid, center, batch_size=96))
out["find_mode default | data x chains"] = compare_modes(reference_modes["default"],
                                                         tallmcmc.find_mode(grid, start, tolerance=1e-4))

covariates, response = logistic_regression.simulate(400, 4)
regression = logistic_regression.model(covariates, response)
reversed_mesh = Mesh(np.array(jax.devices()[::-1]), ("rows",))  # automatic axes, devices in reverse order
for name, (reference, result) in {
    "gaussian_mixture_bound": (gaussian_mixture_bound(model), gaussian_mixture_bound(sharded)),
    "logistic_regression_bound": (logistic_regression_bound(regression),
                                  logistic_regression_bound(split(regression, reversed_mesh, "rows"))),
}.items():
    out[name] = {"identical": bool(np.array_equal(reference.constants, result.constants)
                                   and np.array_equal(reference.alias_index, result.alias_index)),
                 "same_data_used": reference.data_used == result.data_used}
# the route of a process that holds only some rows, taken here by shard on the reversed mesh
leaf = split(model, reversed_mesh, "rows").data
by_shard, whole = sharding.HostRows(leaf, by_shard=True), sharding.HostRows(leaf)
out["HostRows by shard"] = {
    "blocks": len(by_shard.blocks),
    "map identical": bool(np.array_equal(by_shard.map(lambda b: np.asarray(b, np.float64) ** 2),
                                         whole.map(lambda b: np.asarray(b, np.float64) ** 2))),
    "sum": float(abs(by_shard.sum(lambda b: np.asarray(b, np.float64).sum()) - whole.sum(
        lambda b: np.asarray(b, np.float64).sum()))),
}
# a layout the passes do not know: split along the second axis
try:
    tallmcmc.find_mode(regression.with_data({
        "covariates": jax.device_put(regression.data["covariates"],
                                     NamedSharding(reversed_mesh, PartitionSpec(None, "rows"))),
        "response": regression.data["response"]}), jnp.zeros(4))
    out["bad layout"] = None
except ValueError as error:
    out["bad layout"] = str(error)

# deliberately wrong: every device keeps its own partial sum (only the first block's reaches the result), and
# the TunaMH helper reads only the first block of rows
sharding.gather_partials = lambda value, axis: jax.tree_util.tree_map(lambda leaf: leaf[None], value)
out["wrong: find_mode default"] = compare_modes(reference_modes["default"],
                                                tallmcmc.find_mode(sharded, start, tolerance=1e-4))
out["wrong: control variate per_datum, chunks"] = compare_variates(
    reference_variates["per_datum, chunks"], tallmcmc.taylor_control_variate(sharded, center, batch_size=96))


class FirstBlock(sharding.HostRows):
    def __init__(self, leaf, by_shard=False):
        super().__init__(leaf, by_shard=True)
        self.blocks, self.starts, self.spread = self.blocks[:1], self.starts[:1], False


sharding.HostRows = FirstBlock
wrong = gaussian_mixture_bound(sharded)
out["wrong: gaussian_mixture_bound"] = {
    "identical": bool(wrong.constants.shape == (1000,)
                      and np.array_equal(wrong.constants, gaussian_mixture_bound(model).constants))}
out["seconds"] = time.perf_counter() - began
print("RESULT " + json.dumps(out))
"""


def test_setup_passes_on_sharded_data_match_the_unsharded_ones():
    """find_mode, taylor_control_variate and the TunaMH bounds on rows split over 4 devices equal the unsharded ones.

    Tolerances: positions 1e-5 and Hessians 1e-6 relative (float32 sums in a
    different order, at an optimiser tolerance of 1e-4 above their noise);
    the control variate's sums within 16 float32 roundings of the sum of the
    per-datum terms' sizes (eps · Σᵢ|gᵢ|, eps · Σᵢ|Hᵢ|), far below the
    worst case (N − 1) · eps · Σᵢ|gᵢ| of a float32 sum; the TunaMH constants
    (float64, computed on the host from the same rows) bit for bit. Data
    counts identical. Keeping only each device's own partial sum fails.
    """
    results = run_on_host_devices(SETUP_SCRIPT)
    print(f"setup passes: {results['seconds']:.1f} s in the subprocess")
    for key, result in results.items():
        if key.startswith("wrong") or key in ("seconds", "HostRows by shard", "bad layout"):
            continue
        if key.startswith("find_mode"):
            assert result["converged"] and result["same_iterations"] and result["same_data_used"], (key, result)
            assert result["position"] < 1e-5 and result["hessian"] < 1e-6, (key, result)
        elif key.startswith("control variate"):
            assert result["same_data_used"], key
            assert all(result[name] < 16 for name in result if name != "same_data_used"), (key, result)
        else:
            assert result["identical"] and result["same_data_used"], key
    assert results["HostRows by shard"] == {"blocks": 4, "map identical": True, "sum": 0.0}
    assert "find_mode: the model's data are split along other axes than the rows" in results["bad layout"]
    wrong_mode = results["wrong: find_mode default"]
    assert wrong_mode["position"] > 1e-3 and wrong_mode["hessian"] > 1e-3
    wrong_variate = results["wrong: control variate per_datum, chunks"]
    assert wrong_variate["gradient"] > 16 and wrong_variate["hessian_sum"] > 16
    assert not results["wrong: gaussian_mixture_bound"]["identical"]
