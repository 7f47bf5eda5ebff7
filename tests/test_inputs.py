"""Bad input fails early with an error that names the argument."""

import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc.examples import gaussian_mean


def good_model(num=100):
    return gaussian_mean.model(np.linspace(-1, 1, num).astype(np.float32), prior_variance=10.0, temperature=1.0)


def run(model=None, test=None, **kwargs):
    options = dict(initial_position=jnp.float32(0.0), num_samples=5, progress=False)
    options.update(kwargs)
    return tallmcmc.sample(model or good_model(), tallmcmc.random_walk(0.1), test or tallmcmc.exact_barker(), **options)


def test_nan_in_data_is_reported_with_the_datum():
    data = np.zeros(50, np.float32)
    data[17] = np.nan
    with pytest.raises(ValueError, match="log_likelihood is not finite.*datum 17"):
        run(gaussian_mean.model(data))


def test_infinite_prior_at_start():
    model = tallmcmc.Model(gaussian_mean.log_likelihood, lambda t: jnp.where(t < 1, -jnp.inf, 0.0), jnp.zeros(10))
    with pytest.raises(ValueError, match="log_prior"):
        run(model)


def test_empty_and_ragged_data():
    with pytest.raises(ValueError, match="empty"):
        tallmcmc.Model(gaussian_mean.log_likelihood, lambda t: 0.0, jnp.zeros((0,)))
    with pytest.raises(ValueError, match="same leading length"):
        tallmcmc.Model(gaussian_mean.log_likelihood, lambda t: 0.0, {"x": jnp.zeros(5), "y": jnp.zeros(6)})
    with pytest.raises(ValueError, match="leading axis"):
        tallmcmc.Model(gaussian_mean.log_likelihood, lambda t: 0.0, jnp.float32(1.0))


def test_log_likelihood_must_return_a_scalar_per_datum():
    model = tallmcmc.Model(lambda t, x: jnp.stack([t, x]), lambda t: 0.0, jnp.zeros(5))
    with pytest.raises(ValueError, match="scalar for one datum"):
        run(model)


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("nan")])
def test_temperature(temperature):
    with pytest.raises(ValueError, match="temperature"):
        gaussian_mean.model(np.zeros(5), temperature=temperature)


@pytest.mark.parametrize("batch_size", [1, 0, -3, 2.5])
def test_batch_size_too_small(batch_size):
    with pytest.raises(ValueError, match="batch_size"):
        tallmcmc.minibatch_barker(batch_size)


def test_batch_size_larger_than_data():
    with pytest.raises(ValueError, match="batch_size = 200 exceeds .* N = 100"):
        run(test=tallmcmc.minibatch_barker(200))


@pytest.mark.parametrize("sigma", [0.0, -1.0, 1.9, float("nan")])
def test_sigma_range(sigma):
    with pytest.raises(ValueError, match="sigma must lie in"):
        tallmcmc.minibatch_barker(50, sigma=sigma)


def test_other_settings():
    with pytest.raises(ValueError, match="growth"):
        tallmcmc.minibatch_barker(50, growth="exponential")
    with pytest.raises(ValueError, match="delta"):
        tallmcmc.minibatch_barker(50, delta=0.0)
    with pytest.raises(ValueError, match="num_samples"):
        run(num_samples=0)
    with pytest.raises(ValueError, match="exactly one of initial_position"):
        run(initial_positions=jnp.zeros(1))
    with pytest.raises(ValueError, match="num_chains"):
        run(initial_position=None, initial_positions=jnp.zeros(3), num_chains=2)
    with pytest.raises(ValueError, match="scale"):
        tallmcmc.random_walk(-1.0)
    with pytest.raises(ValueError, match="positive definite"):
        tallmcmc.random_walk(covariance=[[1.0, 2.0], [2.0, 1.0]])


def test_result_and_inference_data():
    result = run(test=tallmcmc.minibatch_barker(10), num_chains=3, num_samples=12, num_chunks=3)
    assert result.positions.shape == (3, 12)
    assert result.accepted.shape == (3, 12) and result.data_used.shape == (3, 12)
    idata = result.to_inference_data()
    assert idata.posterior["theta"].shape == (3, 12)
    for name in ("accepted", "data_used", "data_used_by_test", "variance", "error_bound", "used_full_data"):
        assert name in idata.sample_stats


def test_pytree_positions_and_full_covariance():
    data = {"x": jnp.linspace(-1, 1, 200), "w": jnp.ones(200)}

    def log_likelihood(position, datum):
        return -0.5 * datum["w"] * (datum["x"] - position["mu"] - position["offset"][0]) ** 2

    model = tallmcmc.Model(log_likelihood, lambda p: -0.5 * (p["mu"] ** 2 + jnp.sum(p["offset"] ** 2)), data)
    start = {"mu": jnp.float32(0.0), "offset": jnp.zeros(1, jnp.float32)}
    result = tallmcmc.sample(model, tallmcmc.random_walk(covariance=np.eye(2) * 0.01), tallmcmc.minibatch_barker(20),
                             initial_position=start, num_samples=10, progress=False, num_chunks=1)
    assert result.positions["mu"].shape == (1, 10) and result.positions["offset"].shape == (1, 10, 1)
    assert set(result.to_inference_data().posterior.data_vars) == {"mu", "offset"}


def test_float64_is_supported():
    # x64 must be switched on before JAX starts, so this runs in a fresh interpreter
    script = textwrap.dedent(
        """
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp, numpy as np, tallmcmc
        from tallmcmc.examples import gaussian_mean
        data = np.random.default_rng(0).normal(0.0, 1.0, 5000)
        model = gaussian_mean.model(data, prior_variance=10.0, temperature=10.0)
        result = tallmcmc.sample(model, tallmcmc.random_walk(0.1), tallmcmc.minibatch_barker(50),
                                 initial_position=jnp.float64(0.0), num_samples=400, progress=False, num_chunks=1)
        assert result.positions.dtype == np.float64, result.positions.dtype
        assert result.info["statistic"].dtype == np.float64
        mean, variance = gaussian_mean.posterior(data, prior_variance=10.0, temperature=10.0)
        assert abs(result.positions[0, 200:].mean() - mean) < 0.1, (result.positions.mean(), mean)
        print("ok")
        """
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0 and "ok" in completed.stdout, completed.stderr[-2000:]
