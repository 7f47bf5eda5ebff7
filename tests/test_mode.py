"""find_mode: the analytic mode and curvature of a conjugate model, chunked sums, honest data counts, clear errors."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import tallmcmc
from tallmcmc.examples import gaussian_mean, logistic_regression
from tallmcmc.mode import METHODS, find_mode, laplace_covariance


@pytest.mark.parametrize("method", METHODS)
def test_conjugate_mode_and_laplace_covariance_are_exact(method):
    data = np.random.default_rng(0).normal([1.0, -2.0], 1.0, (3000, 2)).astype(np.float32)
    model = gaussian_mean.model(data, prior_variance=10.0, temperature=5.0)
    mean, variance = gaussian_mean.posterior(data, 10.0, 5.0)
    mode = find_mode(model, jnp.zeros(2), method=method)
    assert mode.converged
    np.testing.assert_allclose(mode.position, mean, atol=1e-5)
    np.testing.assert_allclose(laplace_covariance(mode), np.diag(variance), rtol=1e-5, atol=1e-10)
    log_density = -0.5 * np.sum(mean**2) / 10.0 + np.sum(
        -0.5 * np.sum((data - mean) ** 2, axis=1) - np.log(2 * np.pi)
    ) / 5.0
    np.testing.assert_allclose(mode.log_density, log_density, rtol=1e-5)


@pytest.fixture(scope="module")
def logistic():
    rng = np.random.default_rng(1)
    covariates = rng.standard_normal((2000, 3)).astype(np.float32)
    response = (rng.random(2000) < 1 / (1 + np.exp(-covariates @ np.array([1.0, -0.5, 0.2])))).astype(np.float32)
    return covariates, response


def test_logistic_mode_is_a_zero_of_the_gradient_chunked_or_not(logistic):
    covariates, response = logistic
    model = logistic_regression.model(covariates, response)
    whole = find_mode(model, jnp.zeros(3))
    chunked = find_mode(model, jnp.zeros(3), batch_size=300)  # 6 chunks and a remainder of 200

    x, y = covariates.astype(np.float64), response.astype(np.float64)

    def negative_log_posterior(beta):  # float64 reference, prior N(0, I)
        logit = x @ beta
        value = np.sum(np.logaddexp(0, logit) - y * logit) + 0.5 * beta @ beta
        return value, x.T @ (1 / (1 + np.exp(-logit)) - y) + beta

    reference = scipy.optimize.minimize(negative_log_posterior, np.zeros(3), jac=True, options={"gtol": 1e-10}).x
    probability = 1 / (1 + np.exp(-x @ reference))
    precision = x.T @ (x * (probability * (1 - probability))[:, None]) + np.eye(3)
    for mode in (whole, chunked):
        assert mode.converged
        assert mode.gradient_norm < 1e-2  # float32 gradient of a sum of 2000 terms
        np.testing.assert_allclose(mode.position, reference, atol=1e-5)
        np.testing.assert_allclose(mode.hessian, precision, rtol=1e-4)
    np.testing.assert_allclose(whole.position, chunked.position, atol=1e-5)
    np.testing.assert_allclose(whole.log_density, chunked.log_density, rtol=1e-6)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("batch_size", [None, 7])
def test_data_used_counts_every_pass(method, batch_size):
    # started at the exact mode the gradient is 0: the start check, one value-and-gradient, one Hessian
    model = gaussian_mean.model(np.zeros(100, np.float32), prior_variance=1.0)
    mode = find_mode(model, jnp.float32(0.0), method=method, batch_size=batch_size)
    assert (mode.data_used, mode.data_passes, mode.iterations) == (300, 3.0, 0)
    assert mode.converged and float(mode.position) == 0.0
    np.testing.assert_allclose(mode.hessian, [[101.0]])


def test_pytree_positions_keep_their_structure():
    data = np.random.default_rng(2).normal(0.5, 1.0, (500, 3)).astype(np.float32)

    def log_likelihood(position, x):
        return gaussian_mean.log_likelihood(jnp.concatenate([position["a"][None], position["b"]]), x)

    model = tallmcmc.Model(log_likelihood, lambda position: jnp.zeros(()), data)
    mode = find_mode(model, {"a": jnp.float32(0.0), "b": jnp.zeros(2)})
    assert set(mode.position) == {"a", "b"} and mode.position["b"].shape == (2,)
    np.testing.assert_allclose(np.append(mode.position["a"], mode.position["b"]), data.mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(mode.hessian, 500 * np.eye(3), rtol=1e-6)


def test_bad_input_is_refused_naming_the_argument():
    model = gaussian_mean.model(np.zeros((100, 2), np.float32))
    start = jnp.zeros(2)
    with pytest.raises(ValueError, match="initial_position must be an array of shape"):
        find_mode(model, jnp.zeros(3))
    with pytest.raises(ValueError, match="initial_position contains NaN"):
        find_mode(model, jnp.array([0.0, jnp.nan]))
    with pytest.raises(ValueError, match="method must be one of 'L-BFGS-B', 'BFGS', 'trust-exact'"):
        find_mode(model, start, method="newton")
    for bad in (0, -5, 2.5):
        with pytest.raises(ValueError, match="batch_size"):
            find_mode(model, start, batch_size=bad)
    with pytest.raises(ValueError, match="max_iterations"):
        find_mode(model, start, max_iterations=0)
    with pytest.raises(ValueError, match="tolerance"):
        find_mode(model, start, tolerance=0.0)
    for bad in (0, jax.random.split(jax.random.key(0), 2), jnp.zeros(2)):
        with pytest.raises(ValueError, match="rng_key must be one JAX PRNG key"):
            find_mode(model, start, rng_key=bad)
    for good in (jax.random.key(1), jax.random.PRNGKey(1)):
        assert find_mode(model, start, rng_key=good).converged


def test_non_convergence_warns():
    model = gaussian_mean.model(np.linspace(-5, 5, 100).astype(np.float32))
    with pytest.warns(RuntimeWarning, match="stopped without converging"):
        mode = find_mode(model, jnp.float32(50.0), max_iterations=1, tolerance=1e-12)
    assert not mode.converged


def test_a_flat_direction_warns_and_has_no_laplace_covariance():
    model = tallmcmc.Model(lambda theta, x: -0.5 * (x - theta[0]) ** 2, lambda theta: jnp.zeros(()),
                           np.zeros(20, np.float32))
    with pytest.warns(RuntimeWarning, match="not positive definite"):
        mode = find_mode(model, jnp.zeros(2))
    with pytest.raises(ValueError, match="not positive definite.*find_mode"):
        laplace_covariance(mode)


def test_adam_phase_without_optax_names_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "optax", None)  # makes `import optax` fail
    model = gaussian_mean.model(np.zeros(100, np.float32))
    with pytest.raises(ImportError, match="pip install optax"):
        find_mode(model, jnp.float32(3.0), adam_steps=10)


def test_adam_phase_gets_close_and_is_counted(logistic):
    pytest.importorskip("optax")
    model = logistic_regression.model(*logistic)
    direct = find_mode(model, jnp.full(3, 4.0))
    mode = find_mode(model, jnp.full(3, 4.0), adam_steps=200, adam_batch_size=50, adam_learning_rate=0.05,
                     rng_key=jax.random.key(3))
    np.testing.assert_allclose(mode.position, direct.position, atol=1e-5)
    assert (mode.data_used - 200 * 50) % 2000 == 0
    assert mode.data_passes == mode.data_used / 2000
