"""find_mode: the analytic mode and curvature of a conjugate model, honest data counts, clear warnings."""

import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc.examples import gaussian_mean, logistic_regression


def test_conjugate_mode_and_laplace_covariance_are_exact():
    data = np.random.default_rng(0).normal([1.0, -2.0], 1.0, (3000, 2)).astype(np.float32)
    model = gaussian_mean.model(data, prior_variance=10.0, temperature=5.0)
    mean, variance = gaussian_mean.posterior(data, 10.0, 5.0)
    mode = tallmcmc.find_mode(model, jnp.zeros(2))
    assert mode.converged
    np.testing.assert_allclose(mode.position, mean, atol=1e-4)
    np.testing.assert_allclose(np.diag(tallmcmc.laplace_covariance(mode)), variance, rtol=1e-3)
    # start check + every L-BFGS-B evaluation + the Hessian + the final gradient, N each
    assert mode.data_used % 3000 == 0 and mode.data_passes == mode.data_used / 3000 >= 4


def test_logistic_mode_has_zero_gradient_and_feeds_the_laplace_proposals():
    rng = np.random.default_rng(1)
    covariates = rng.standard_normal((2000, 3)).astype(np.float32)
    response = (rng.random(2000) < 1 / (1 + np.exp(-covariates @ np.array([1.0, -0.5, 0.2])))).astype(np.float32)
    model = logistic_regression.model(covariates, response)
    mode = tallmcmc.find_mode(model, jnp.zeros(3))
    assert mode.gradient_norm < 1e-2  # float32 gradient of a sum of 2000 terms
    result = tallmcmc.sample(model, tallmcmc.laplace_random_walk(mode), tallmcmc.exact_metropolis(),
                             initial_position=mode.position, num_samples=20, progress=False)
    assert result.setup_data_used["find_mode"] == mode.data_used


def test_adam_phase_needs_optax_or_runs():
    model = gaussian_mean.model(np.zeros(100, np.float32))
    try:
        import optax  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install optax"):
            tallmcmc.find_mode(model, jnp.float32(3.0), adam_steps=10)
    else:
        mode = tallmcmc.find_mode(model, jnp.float32(3.0), adam_steps=10, adam_batch_size=20)
        assert mode.data_used >= 10 * 20


def test_bad_input_and_non_convergence():
    model = gaussian_mean.model(np.zeros(100, np.float32))
    with pytest.raises(ValueError, match="initial_position"):
        tallmcmc.find_mode(model, jnp.zeros(3))
    with pytest.raises(ValueError, match="max_iterations"):
        tallmcmc.find_mode(model, jnp.float32(0.0), max_iterations=0)
    with pytest.warns(RuntimeWarning, match="without converging"):
        tallmcmc.find_mode(gaussian_mean.model(np.linspace(-5, 5, 100).astype(np.float32)), jnp.float32(50.0),
                           max_iterations=1, tolerance=1e-12)


def test_non_positive_definite_hessian_warns():
    flat = tallmcmc.Model(lambda theta, x: -0.5 * (x - theta[0]) ** 2, lambda theta: jnp.zeros(()),
                          np.zeros((20,), np.float32))
    with pytest.warns(RuntimeWarning, match="not positive definite"):
        tallmcmc.find_mode(flat, jnp.zeros(2))
