"""A model's matrix products are traced at full float32 precision unless the user chose one (tallmcmc.precision).

The effect is on GPUs and TPUs only (a CPU's float32 products are exact at every setting; the H200 figures are in
``benchmarks/RESULTS.md``), so these tests read the precision recorded in the traced programs.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc.examples import logistic_regression
from tallmcmc.precision import full_float32_dots, unwrapped

HIGHEST = jax.lax.Precision.HIGHEST


def dot_precisions(function, *arguments) -> list:
    """The ``precision`` of every ``dot_general`` in ``function``'s jaxpr, sub-jaxprs (vmap, grad, jit) included."""
    found = []

    def walk(jaxpr):
        for equation in jaxpr.eqns:
            if equation.primitive.name == "dot_general":
                found.append(equation.params["precision"])
            for value in equation.params.values():
                for inner in value if isinstance(value, (tuple, list)) else (value,):
                    if isinstance(inner, jax.extend.core.ClosedJaxpr):
                        walk(inner.jaxpr)
                    elif isinstance(inner, jax.extend.core.Jaxpr):
                        walk(inner)

    walk(jax.make_jaxpr(function)(*arguments).jaxpr)
    return found


def log_likelihood(beta, datum):
    return -0.5 * (datum["y"] - jnp.dot(datum["x"], beta)) ** 2


def log_prior(beta):
    return -0.5 * beta @ beta


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 3)).astype(np.float32)
    return tallmcmc.Model(log_likelihood, log_prior, {"x": x, "y": x @ np.ones(3, np.float32)})


def test_a_models_products_are_traced_at_full_precision(model):
    beta = jnp.ones(3)
    traced = {
        "per-datum log-likelihood (vmapped)": dot_precisions(model.per_datum_log_likelihood, beta),
        "gradient of the log density": dot_precisions(jax.grad(model.log_density), beta),
        "Hessian of one datum's log-likelihood": dot_precisions(
            jax.hessian(lambda b: model.log_likelihood(b, jax.tree_util.tree_map(lambda a: a[0], model.data))), beta
        ),
        "minibatch log ratios": dot_precisions(
            lambda b: model.log_likelihood_ratios_at(b, b + 0.1, jnp.arange(10)), beta
        ),
    }
    for what, precisions in traced.items():
        assert precisions, what
        assert all(p == (HIGHEST, HIGHEST) for p in precisions), (what, precisions)
    # the same functions unwrapped leave the precision to XLA (the GPU's TF32 default): what the test would catch
    raw = dot_precisions(jax.vmap(log_likelihood, in_axes=(None, 0)), beta, model.data)
    assert raw and all(p is None for p in raw)


def test_the_users_own_setting_is_kept(model):
    with jax.default_matmul_precision("tensorfloat32"):
        chosen = dot_precisions(model.per_datum_log_likelihood, jnp.ones(3))
    assert chosen and all(p != (HIGHEST, HIGHEST) for p in chosen), chosen
    # a product's own precision= is kept ("bfloat16" is JAX's name for Precision.DEFAULT), not raised to HIGHEST
    explicit = full_float32_dots(lambda a, b: jnp.dot(a, b, precision="bfloat16"))
    assert dot_precisions(explicit, jnp.ones(3), jnp.ones(3)) == [(jax.lax.Precision.DEFAULT,) * 2]


def test_the_control_variates_target_terms_too(model):
    control_variate = tallmcmc.taylor_control_variate(model, jnp.ones(3))
    beta, proposed = jnp.ones(3), jnp.full(3, 1.1)
    for name in ("proxy_log_ratio", "proxy_differences"):
        method = getattr(control_variate, name)
        arguments = (beta, proposed) + ((model.data,) if name == "proxy_differences" else ())
        precisions = dot_precisions(method, *arguments)
        assert precisions and all(p == (HIGHEST, HIGHEST) for p in precisions), (name, precisions)


def test_the_users_functions_stay_theirs(model):
    assert unwrapped(model.log_likelihood) is log_likelihood
    assert unwrapped(model.log_prior) is log_prior
    assert model.log_likelihood.__name__ == "log_likelihood"
    assert full_float32_dots(model.log_likelihood) is model.log_likelihood  # wrapped once
    assert model.with_data(model.data).log_likelihood is model.log_likelihood
    again = tallmcmc.Model(log_likelihood, log_prior, model.data)  # the same functions, another Model
    control_variate = tallmcmc.taylor_control_variate(model, jnp.ones(3))
    control_variate.check_model(again)  # accepted: it is the same model
    with pytest.raises(ValueError, match="built for another model"):
        control_variate.check_model(tallmcmc.Model(lambda b, d: log_likelihood(b, d), log_prior, model.data))
    x, y = logistic_regression.simulate(200, 2, seed=0)
    assert unwrapped(logistic_regression.model(x, y).log_likelihood) is logistic_regression.log_likelihood


def test_a_numpyro_models_products_too():  # (its decomposition check's precision is not tested: internal)
    numpyro = pytest.importorskip("numpyro")
    import numpyro.distributions as dist

    def regression(x, y):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([x.shape[1]]))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=x @ beta), obs=y)

    x, y = logistic_regression.simulate(100, 3, seed=0)
    model = tallmcmc.from_numpyro(regression, x, y)
    position = {"beta": jnp.zeros(3)}
    precisions = dot_precisions(model.per_datum_log_likelihood, position)
    assert precisions and all(p == (HIGHEST, HIGHEST) for p in precisions), precisions
