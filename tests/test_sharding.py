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
* a covariance adapted by a warm-up on a mesh is the one the kept draws use
  (in this process, on a mesh of its one device);
* bad meshes and the out-of-memory estimate (memory query monkeypatched)
  raise clear errors;
* the one-off passes before ``sample`` (``find_mode``,
  ``taylor_control_variate``, the TunaMH bound helpers) on data split over the
  4 devices equal the unsharded ones, with the same data counts; keeping only
  each device's own partial sum fails.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from forced_devices import SCRIPTS, run_on_host_devices

import tallmcmc
import tallmcmc.examples.gaussian_mean
import tallmcmc.sharding as sharding
from tallmcmc.examples import gaussian_mixture

SCRIPT = SCRIPTS / "sharded_runs.py"  # run with "fast" or "full"


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


def test_a_covariance_adapted_on_a_mesh_is_the_one_the_kept_draws_use():
    """``adapt_covariance=True`` on a mesh (of this process's one device: the plan's program is for the mesh either
    way): the kept draws run the warm-up's proposal, so they equal the run without a mesh bit for bit. Before
    2026-11-29 the vmapped driver ran them on the plan's program, whose proposal has no covariance (acceptance 0.46
    against 0.06 on a target 10 times wider in one coordinate, ``/tmp`` script of that day), so they differed."""
    data = np.random.default_rng(7).normal(1.0, 1.0, size=(2000, 2)).astype(np.float32)
    model = tallmcmc.examples.gaussian_mean.model(data * np.array([1.0, 10.0], np.float32))

    def run(mesh):
        return tallmcmc.sample(
            model,
            tallmcmc.random_walk(0.03),
            tallmcmc.exact_metropolis(),  # the test does not matter here; the exact one compiles least
            jnp.zeros(2),
            num_samples=20,
            num_chains=2,
            num_warmup=40,
            adapt_covariance=True,
            progress=False,
            mesh=mesh,
            seed=1,
            num_chunks=1,
        )

    plain, on_mesh = run(None), run(jax.make_mesh((1,), ("data",), devices=jax.devices()[:1]))
    np.testing.assert_array_equal(plain.adapted_covariance, on_mesh.adapted_covariance)
    np.testing.assert_array_equal(np.asarray(plain.positions), np.asarray(on_mesh.positions))


def test_bad_meshes_are_refused():
    import jax

    model, start = _model(), jnp.array([0.5, 0.5])
    devices = np.array(jax.devices()[:1])
    with pytest.raises(ValueError, match="mesh axis names must be 'data' and/or 'chains'"):
        tallmcmc.sample(
            model,
            tallmcmc.random_walk(0.1),
            tallmcmc.exact_barker(),
            start,
            num_samples=2,
            progress=False,
            mesh=jax.sharding.Mesh(devices, ("batch",)),
        )
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh"):
        tallmcmc.sample(
            model, tallmcmc.random_walk(0.1), tallmcmc.exact_barker(), start, num_samples=2, progress=False, mesh="data"
        )
    with pytest.raises(ValueError, match="num_chains = 3 is not a multiple"):  # the asynchronous driver checks it too
        tallmcmc.sample(
            model,
            tallmcmc.random_walk(0.1),
            tallmcmc.exact_barker(),
            start,
            num_samples=2,
            num_chains=3,
            progress=False,
            mesh=jax.sharding.Mesh(np.array(jax.devices()[:1] * 2), ("chains",)),
            driver="asynchronous",
        )


def test_out_of_memory_estimate_before_sampling(monkeypatch):
    model, start = _model(), jnp.array([0.5, 0.5])
    data_bytes = 101 * 4
    cache_bytes = 2 * 8 * 101 * 4  # exact test: num_chains x N float32 values, current and proposed
    # what the device has on top of the data already resident in host memory
    monkeypatch.setattr(sharding.memory, "device_memory_bytes", lambda device: 1000)
    with pytest.raises(sharding.DeviceMemoryError, match=r"needs about .* GB on one device \(data .* GB, chain states"):
        tallmcmc.sample(
            model,
            tallmcmc.random_walk(0.1),
            tallmcmc.exact_barker(),
            start,
            num_samples=2,
            num_chains=8,
            progress=False,
        )
    with pytest.raises(ValueError, match=r"mesh=jax.make_mesh"):  # a ValueError too, naming the fix
        tallmcmc.sample(
            model,
            tallmcmc.random_walk(0.1),
            tallmcmc.exact_barker(),
            start,
            num_samples=2,
            num_chains=8,
            progress=False,
        )
    # enough memory: the run goes ahead (the estimate counts data + 2 x num_chains x N values + small states)
    monkeypatch.setattr(sharding.memory, "device_memory_bytes", lambda device: 2 * (data_bytes + cache_bytes))
    result = tallmcmc.sample(
        model, tallmcmc.random_walk(0.1), tallmcmc.exact_barker(), start, num_samples=2, num_chains=8, progress=False
    )
    assert result.num_draws == 2
    # a minibatch test keeps no per-datum cache: it fits where the exact test did not
    monkeypatch.setattr(sharding.memory, "device_memory_bytes", lambda device: 1000)
    tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.1),
        tallmcmc.minibatch_barker(batch_size=20),
        start,
        num_samples=2,
        num_chains=8,
        progress=False,
    )
    # the asynchronous driver keeps every draw on the device until the end: 8 chains x 128 rows (100 draws, rounded
    # up to a power of two) x (2 + 9) x 4 bytes (position and step statistics) = 45 kB, counted; the vmapped driver
    # brings draws home chunk by chunk
    monkeypatch.setattr(sharding.memory, "device_memory_bytes", lambda device: 20_000)
    with pytest.raises(
        sharding.DeviceMemoryError, match=r"draws held on the device \(asynchronous driver\) 4\.51e-05 GB"
    ):
        tallmcmc.sample(
            model,
            tallmcmc.random_walk(0.1),
            tallmcmc.minibatch_barker(batch_size=20),
            start,
            num_samples=100,
            num_chains=8,
            progress=False,
            driver="asynchronous",
        )
    tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.1),
        tallmcmc.minibatch_barker(batch_size=20),
        start,
        num_samples=100,
        num_chains=8,
        progress=False,
    )
    # driver="auto" would pick the asynchronous driver for 8 chains; where its draws do not fit it runs vmapped
    result = tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.1),
        tallmcmc.minibatch_barker(batch_size=20),
        start,
        num_samples=100,
        num_chains=8,
        progress=False,
        driver="auto",
    )
    assert result.driver == "vmap"


def test_device_memory_query_answers_on_this_machine():
    import jax

    memory = sharding.device_memory_bytes(jax.devices()[0])
    assert memory is None or memory > 0


# ------------------------------------------------------------------ the one-off passes before sample

SETUP_SCRIPT = SCRIPTS / "sharded_setup_passes.py"


# slow (22 s, suite time): sharded sampling stays in the default suite (test_sharded_runs_match_the_unsharded_run))
@pytest.mark.slow
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
    assert not results["wrong: gaussian_mixture.tuna_bound"]["identical"]
