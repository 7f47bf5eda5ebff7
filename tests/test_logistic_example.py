"""The logistic example's one-log-sigmoid likelihood: the two-term formula's values and derivatives, bit for bit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tallmcmc.examples import logistic_regression
from tallmcmc.model import Model


def two_terms(coefficients, datum):
    # the textbook form the example used before: two log-sigmoids per datum
    logit = jnp.dot(datum["covariates"], coefficients)
    response = datum["response"]
    return response * jax.nn.log_sigmoid(logit) + (1.0 - response) * jax.nn.log_sigmoid(-logit)


@pytest.fixture(scope="module")
def models():
    covariates, response = logistic_regression.simulate(3000, 4, seed=3)
    example = logistic_regression.model(covariates, response)
    return example, Model(two_terms, example.log_prior, example.data, 1.0, position_shape=(4,))


@pytest.mark.parametrize("scale", [0.3, 3.0, 30.0])
def test_same_bits_as_two_log_sigmoids(models, scale):
    example, reference = models
    position = scale * jax.random.normal(jax.random.key(int(scale * 10)), (4,))
    for name, of in [
        ("per-datum values", lambda m: m.per_datum_log_likelihood),
        ("sum", lambda m: m.log_likelihood_sum),
        ("gradient", lambda m: jax.grad(m.log_likelihood_sum)),
        ("Hessian", lambda m: jax.hessian(m.log_likelihood_sum)),
        ("per-datum Jacobian", lambda m: jax.jacfwd(m.per_datum_log_likelihood)),
    ]:
        got, want = jax.jit(of(example))(position), jax.jit(of(reference))(position)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)


def test_log_sigmoid_matches_jax_at_the_edges():
    z = jnp.asarray([-jnp.inf, -1e30, -100.0, -20.0, -1.0, -0.0, 0.0, 1e-8, 1.0, 20.0, 80.0, jnp.inf, jnp.nan])
    fast, jax_version = logistic_regression.log_sigmoid, jax.nn.log_sigmoid
    np.testing.assert_array_equal(jax.jit(fast)(z), jax.jit(jax_version)(z))
    for order in (1, 2):

        def derivative(f, order=order):
            for _ in range(order):
                f = jax.grad(f)
            return jax.jit(jax.vmap(f))

        np.testing.assert_array_equal(derivative(fast)(z), derivative(jax_version)(z), err_msg=f"order {order}")


def test_the_sign_comes_from_the_response():
    datum = {"covariates": jnp.asarray([1.0, 2.0]), "response": jnp.asarray(1.0)}
    beta = jnp.asarray([0.5, -1.0])  # logit -1.5
    assert float(logistic_regression.log_likelihood(beta, datum)) == pytest.approx(-np.log1p(np.exp(1.5)), rel=1e-6)
    datum["response"] = jnp.asarray(0.0)
    assert float(logistic_regression.log_likelihood(beta, datum)) == pytest.approx(-np.log1p(np.exp(-1.5)), rel=1e-6)
