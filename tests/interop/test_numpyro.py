"""``tallmcmc.from_numpyro``: NumPyro models as tallmcmc models.

* Log densities: on ten models — the five of issue 22 (logistic regression,
  linear regression with a HalfNormal σ, Poisson regression with an exposure
  offset, Student-t regression with unknown ν, two observed sites in one plate)
  and a HMCECS-style subsampling plate, data reached only through
  ``numpyro.subsample``, a multivariate observation with an LKJ prior, group
  effects with dict-valued data, per-datum weights through ``handlers.scale`` —
  ``Model.log_density`` equals −``numpyro.infer.util.potential_energy`` at
  random unconstrained points, in float64, to 1e-6 relative; the per-datum
  values equal NumPyro's own ``numpyro.infer.util.log_likelihood``.
* Posteriors: an exact Normal–Gamma posterior within 4 Monte Carlo standard
  errors, and the same model with its log-Jacobian dropped outside them; with
  ``--runslow``, ``tallmcmc.sample`` with the exact Metropolis test against
  NumPyro NUTS on the logistic and the Student-t regression, means and second
  moments within 4 Monte Carlo standard errors (ArviZ, both samplers' errors
  combined), the Student-t model without its log-Jacobians outside them.
* Refusals, each a ``ValueError`` naming the site or argument.

Float64 is switched on only inside ``jax.enable_x64(True)`` blocks, never for
the whole process (other tests share the worker).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from compilations import compilations
from numpyro import handlers
from numpyro.infer.util import log_likelihood as numpyro_log_likelihood
from numpyro.infer.util import potential_energy

import tallmcmc
from tallmcmc.interop import arviz as arviz_bridge
from tallmcmc.interop import numpyro as interop

NUM_DATA = 200


@pytest.fixture(autouse=True)
def float64_stays_off_outside_the_tests_blocks():
    """Every float64 block is a ``with jax.enable_x64(True)``: nothing leaks to the worker's other tests."""
    assert jnp.zeros(()).dtype == jnp.float32
    yield
    assert jnp.zeros(()).dtype == jnp.float32


# --- the models ----------------------------------------------------------------------


def logistic(X, y):
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)


def linear(X, y):
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Normal(X @ beta, sigma), obs=y)


def poisson(X, exposure, counts):
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("counts", dist.Poisson(jnp.exp(jnp.log(exposure) + X @ beta)), obs=counts)


def student_t(X, y):
    beta = numpyro.sample("beta", dist.Normal(0.0, 2.0).expand([X.shape[1]]))
    sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
    nu = numpyro.sample("nu", dist.Gamma(2.0, 0.1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.StudentT(nu, X @ beta, sigma), obs=y)


def two_sites(X, y, z):
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
    scale = numpyro.sample("scale", dist.LogNormal(0.0, 1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)
        numpyro.sample("z", dist.Normal(X @ beta, scale), obs=z)


def subsampling_plate(X, y, num_data):
    """HMCECS style: the plate's size is a number, it subsamples, and the data are indexed by its indices."""
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
    with numpyro.plate("data", num_data, subsample_size=20) as idx:
        numpyro.sample("y", dist.Bernoulli(logits=X[idx] @ beta), obs=y[idx])


def make_closure_model(X, y):
    """Data held in a closure, reached only through numpyro.subsample: the datum is the plate's index."""
    X, y = jnp.asarray(X), jnp.asarray(y)

    def closure(num_data):
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
        with numpyro.plate("data", num_data, subsample_size=20):
            rows = numpyro.subsample(X, event_dim=1)
            labels = numpyro.subsample(y, event_dim=0)
            numpyro.sample("y", dist.Bernoulli(logits=rows @ beta), obs=labels)

    return closure


def multivariate(X, Y):
    B = numpyro.sample("B", dist.Normal(0.0, 1.0).expand([X.shape[1], Y.shape[1]]).to_event(2))
    L = numpyro.sample("L", dist.LKJCholesky(Y.shape[1], 2.0))
    sd = numpyro.sample("sd", dist.HalfNormal(1.0).expand([Y.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("Y", dist.MultivariateNormal(X @ B, scale_tril=sd[:, None] * L), obs=Y)


def group_effects(data, num_groups):
    """A group-level latent in its own plate; dict-valued data with an integer group column."""
    slope = numpyro.sample("slope", dist.Normal(0.0, 1.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(1.0))
    with numpyro.plate("groups", num_groups):
        effect = numpyro.sample("effect", dist.Normal(0.0, tau))
    with numpyro.plate("data", data["x"].shape[0]):
        numpyro.sample("y", dist.Normal(effect[data["g"]] + slope * data["x"], 0.5), obs=data["y"])


def weighted(X, y, weights, num_data):
    """Per-datum weights through handlers.scale, a plate sized by a number, and a deterministic site."""
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
    sigma = numpyro.sample("sigma", dist.Exponential(1.0))
    with numpyro.plate("data", num_data), handlers.scale(scale=weights):
        mean = numpyro.deterministic("mean", X @ beta)
        numpyro.sample("y", dist.Normal(mean, sigma), obs=y)


def simulate(name: str, num_data: int = NUM_DATA, seed: int = 0):
    """(model function, args, kwargs, data plate size) with data simulated from the model's family."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(num_data), rng.normal(size=(num_data, 2))])
    beta = np.array([0.3, -0.8, 0.5])
    eta = X @ beta
    if name == "logistic":
        return logistic, (X, (rng.random(num_data) < 1 / (1 + np.exp(-eta))).astype(np.int32)), {}
    if name == "linear":
        return linear, (X,), {"y": eta + 0.7 * rng.normal(size=num_data)}
    if name == "poisson":
        exposure = rng.uniform(0.5, 3.0, num_data)
        return poisson, (X, exposure, rng.poisson(exposure * np.exp(eta))), {}
    if name == "student_t":
        return student_t, (X, eta + 0.7 * rng.standard_t(4, size=num_data)), {}
    if name == "two_sites":
        y = (rng.random(num_data) < 1 / (1 + np.exp(-eta))).astype(np.int32)
        return two_sites, (X, y, eta + rng.normal(size=num_data)), {}
    if name == "subsampling_plate":
        return subsampling_plate, (X, (rng.random(num_data) < 1 / (1 + np.exp(-eta))).astype(np.int32), num_data), {}
    if name == "closure":
        y = (rng.random(num_data) < 1 / (1 + np.exp(-eta))).astype(np.int32)
        return make_closure_model(X, y), (num_data,), {}
    if name == "multivariate":
        Y = np.column_stack([eta, -eta]) + rng.normal(size=(num_data, 2)) @ np.array([[1.0, 0.5], [0.0, 0.8]])
        return multivariate, (X, Y), {}
    if name == "group_effects":
        g = rng.integers(0, 4, num_data)
        x = rng.normal(size=num_data)
        effects = rng.normal(size=4)
        data = {"x": x, "g": g, "y": effects[g] + 0.5 * x + 0.5 * rng.normal(size=num_data)}
        return group_effects, (data, 4), {}
    if name == "weighted":
        weights = rng.uniform(0.5, 2.0, num_data)
        return weighted, (X, eta + rng.normal(size=num_data), weights, num_data), {}
    raise KeyError(name)


MODELS = [
    "logistic",
    "linear",
    "poisson",
    "student_t",
    "two_sites",
    "subsampling_plate",
    "closure",
    "multivariate",
    "group_effects",
    "weighted",
]


def random_positions(model: tallmcmc.Model, count: int, seed: int) -> list[dict]:
    """Unconstrained positions, standard normal in every coordinate."""
    rng = np.random.default_rng(seed)
    return [
        {name: jnp.asarray(rng.normal(size=np.shape(zero))) for name, zero in model.position_shape.items()}
        for _ in range(count)
    ]


def whole_data(model_fn, num_data: int):
    """The model with its data plate's indices all N (a subsampling plate then evaluates every datum)."""
    return handlers.substitute(model_fn, data={"data": jnp.arange(num_data)})


# --- log densities ---------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:subsample_size does not match")
@pytest.mark.parametrize("name", MODELS)
def test_the_check_on_a_subsample_of_rows_accepts_every_model_at_float64_tolerance(name, monkeypatch):
    """Above ``_CHECK_ROWS`` the check runs on rows drawn at random (the data arguments cut to them, or the plate's
    indices set to them, NumPyro then scaling the plate's sites by N/n): every model of the suite passes it in float64
    (tolerance 10⁻¹⁰ of the terms' magnitudes), and the model is the one the whole-data check returns."""
    monkeypatch.setattr(interop, "_CHECK_ROWS", 37)
    with jax.enable_x64(True):
        model_fn, args, kwargs = simulate(name)
        found = interop._NumPyroModel(model_fn, args, kwargs, None)
        rows = found.check_rows()
        assert len(rows) == 37 and len(set(rows.tolist())) == 37 and np.all(np.diff(rows) > 0)
        model = tallmcmc.from_numpyro(model_fn, *args, **kwargs)
        (position,) = random_positions(model, 1, seed=2)
        reference = whole_data(model_fn, NUM_DATA)
        expected = -float(potential_energy(reference, args, kwargs, position))
        np.testing.assert_allclose(float(model.log_density(position)), expected, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:subsample_size does not match")
@pytest.mark.parametrize("name", MODELS)
def test_log_density_equals_numpyro_potential_energy(name):
    with jax.enable_x64(True):
        model_fn, args, kwargs = simulate(name)
        model = tallmcmc.from_numpyro(model_fn, *args, **kwargs)
        assert model.num_data == NUM_DATA
        reference = whole_data(model_fn, NUM_DATA)
        ours_at = jax.jit(model.log_density)
        theirs_at = jax.jit(lambda position: -potential_energy(reference, args, kwargs, position))
        for position in random_positions(model, 3, seed=1):
            ours, theirs = float(ours_at(position)), float(theirs_at(position))
            assert np.isfinite(theirs)
            np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:subsample_size does not match")
@pytest.mark.parametrize("name", ["two_sites", "poisson", "group_effects", "closure"])
def test_per_datum_values_equal_numpyro_log_likelihood(name):
    """Each datum's value is the sum over the plate's observed sites of NumPyro's own per-datum log-likelihood."""
    with jax.enable_x64(True):
        model_fn, args, kwargs = simulate(name)
        model = tallmcmc.from_numpyro(model_fn, *args, **kwargs)
        (position,) = random_positions(model, 1, seed=2)
        constrained = model.constrain(position)
        per_site = numpyro_log_likelihood(whole_data(model_fn, NUM_DATA), constrained, *args, batch_ndims=0, **kwargs)
        expected = sum(np.asarray(values) for values in per_site.values())
        np.testing.assert_allclose(np.asarray(model.per_datum_log_likelihood(position)), expected, rtol=1e-9)
        assert expected.shape == (NUM_DATA,)


def test_log_prior_holds_the_log_jacobians_and_temperature_tempers_the_likelihood():
    with jax.enable_x64(True):
        model_fn, args, kwargs = simulate("student_t")
        model = tallmcmc.from_numpyro(model_fn, *args, temperature=4.0, **kwargs)
        (position,) = random_positions(model, 1, seed=3)
        constrained = model.constrain(position)
        # the prior on the unconstrained scale: log p0(constrained) + log sigma + log nu (exp is the map to (0, inf))
        expected_prior = (
            dist.Normal(0.0, 2.0).log_prob(constrained["beta"]).sum()
            + dist.HalfNormal(2.0).log_prob(constrained["sigma"])
            + dist.Gamma(2.0, 0.1).log_prob(constrained["nu"])
            + position["sigma"]
            + position["nu"]
        )
        np.testing.assert_allclose(float(model.log_prior(position)), float(expected_prior), rtol=1e-12)
        np.testing.assert_allclose(float(constrained["sigma"]), float(np.exp(position["sigma"])), rtol=1e-12)
        untempered = -float(potential_energy(model_fn, args, kwargs, position))
        likelihood = untempered - float(model.log_prior(position))
        np.testing.assert_allclose(
            float(model.log_density(position)), float(model.log_prior(position)) + likelihood / 4.0, rtol=1e-9
        )


def test_data_are_the_arguments_of_leading_length_n_by_name():
    model_fn, args, kwargs = simulate("group_effects")
    model = tallmcmc.from_numpyro(model_fn, *args, **kwargs)
    assert sorted(model.data) == ["data['g']", "data['x']", "data['y']"]
    assert set(model.position_shape) == {"slope", "tau", "effect"}
    closure_fn, closure_args, _ = simulate("closure")
    indexed = tallmcmc.from_numpyro(closure_fn, *closure_args)
    assert list(indexed.data) == [interop.INDEX_KEY]
    np.testing.assert_array_equal(np.asarray(indexed.data[interop.INDEX_KEY]), np.arange(NUM_DATA))


def test_reading_a_model_with_numpy_data_compiles_nothing_and_keeps_jax_dtypes():
    """The data, one datum, the origin and the check's points are transferred from the host, not converted by
    compiled programs (nine of them for a NumPyro logistic regression at N = 10⁶, d = 10, in every process:
    ``docs/compilation.md``); the arrays are those ``jnp.asarray`` and ``jnp.zeros`` give. (Run alone, the test
    fails on the tree before; after other tests in the same worker JAX may hold those programs already.)"""
    model_fn, args, kwargs = simulate("logistic")
    with compilations() as compiled:
        found = interop._NumPyroModel(model_fn, args, kwargs, None)  # what from_numpyro reads, before its check
        points = found.check_points()
    assert compiled == []
    given = dict(zip(("X", "y"), args, strict=True))
    for name, value in found.data.items():
        expected = jnp.asarray(given[name])
        assert value.dtype == expected.dtype and not value.weak_type
        np.testing.assert_array_equal(np.asarray(value), np.asarray(expected))
        np.testing.assert_array_equal(np.asarray(found.first_datum[name]), np.asarray(expected[0]))
    for zero in found.origin.values():
        assert zero.dtype == jnp.zeros(()).dtype and not np.any(np.asarray(zero))
    assert all(point[name].dtype == found.origin[name].dtype for point in points for name in point)


def test_float32_large_data_passes_the_decomposition_check():
    """The check's float32 tolerance holds at N = 10^5 (rounding of the two sums is ~1e-7 relative)."""
    model_fn, args, kwargs = simulate("linear", num_data=100_000)
    model = tallmcmc.from_numpyro(model_fn, *args, **kwargs)
    assert model.data["X"].dtype == jnp.float32


# --- sampling ---------------------------------------------------------------------------


def compare_with_nuts(result: tallmcmc.SamplingResult, reference: dict) -> dict[str, np.ndarray]:
    """z-scores of the means and second moments of every site, both samplers' MCSE (ArviZ) combined.

    Returns the largest |z| per site; raises if a site's ESS is below 100 in either run.
    """
    worst = {}
    for site, theirs in reference.items():
        ours = np.asarray(result.positions[site], np.float64)
        theirs = np.asarray(theirs, np.float64)
        zs = []
        for moment in (lambda a: a, np.square):
            a, b = moment(ours), moment(theirs)
            for run in (a, b):
                assert np.min(arviz_bridge.ess(run)) >= 100, f"{site}: ESS below 100, no power"
            difference = a.mean((0, 1)) - b.mean((0, 1))
            error = np.sqrt(arviz_bridge.mcse(a) ** 2 + arviz_bridge.mcse(b) ** 2)
            zs.append(np.abs(np.asarray(difference / error)))
        worst[site] = float(np.max(zs))
    return worst


def nuts_draws(model_fn, args, seed: int = 0) -> dict:
    mcmc = numpyro.infer.MCMC(
        numpyro.infer.NUTS(model_fn),
        num_warmup=500,
        num_samples=2000,
        num_chains=2,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(jax.random.key(seed), *args)
    return mcmc.get_samples(group_by_chain=True)


def exact_run(
    model: tallmcmc.Model, seed: int = 1, num_samples: int = 4000, num_chains: int = 4, num_warmup: int = 1000
) -> tallmcmc.SamplingResult:
    return tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.1),
        tallmcmc.exact_metropolis(),
        initial_position=model.position_shape,
        num_samples=num_samples,
        num_chains=num_chains,
        num_warmup=num_warmup,
        adapt_covariance=num_warmup > 0,
        progress=False,
        seed=seed,
        num_chunks=1,
    )


@pytest.mark.slow
def test_logistic_posterior_matches_nuts():
    model_fn, args, _ = simulate("logistic", num_data=100)
    result = exact_run(tallmcmc.from_numpyro(model_fn, *args))
    worst = compare_with_nuts(result, nuts_draws(model_fn, args))
    assert max(worst.values()) <= 4.0, worst


@pytest.mark.slow
def test_student_t_posterior_matches_nuts_and_fails_without_log_jacobians():
    """σ and ν live on (0, ∞): sampling log σ and log ν without the Jacobian shifts both (|z| 7 for σ, 10 for ν here)."""
    model_fn, args, _ = simulate("student_t", num_data=100, seed=1)
    reference = nuts_draws(model_fn, args)
    model = tallmcmc.from_numpyro(model_fn, *args)
    worst = compare_with_nuts(exact_run(model), reference)
    assert max(worst.values()) <= 4.0, worst

    built = interop._NumPyroModel(model_fn, args, {}, None)

    def prior_without_jacobians(position):
        terms = built.prior_terms(position)
        return sum(value for name, value in terms.items() if not name.endswith("(log-Jacobian)"))

    wrong = dataclasses.replace(model, log_prior=prior_without_jacobians)
    worst_wrong = compare_with_nuts(exact_run(wrong), reference)
    assert worst_wrong["sigma"] > 4.0 and worst_wrong["nu"] > 4.0, worst_wrong


def normal_gamma(y, prior_mean, kappa, shape, rate):
    tau = numpyro.sample("tau", dist.Gamma(shape, rate))
    mu = numpyro.sample("mu", dist.Normal(prior_mean, 1.0 / jnp.sqrt(kappa * tau)))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0 / jnp.sqrt(tau)), obs=y)


def normal_gamma_posterior_moments(y, prior_mean, kappa, shape, rate) -> dict[str, tuple[float, float]]:
    """Exact posterior (mean, second moment) of τ ~ Gamma(a', b') and μ ~ Student-t(2a', m', b'/(a'κ'))."""
    n, ybar = len(y), float(np.mean(y))
    kappa_n = kappa + n
    mean_n = (kappa * prior_mean + n * ybar) / kappa_n
    shape_n = shape + n / 2
    rate_n = rate + 0.5 * float(np.sum((y - ybar) ** 2)) + kappa * n * (ybar - prior_mean) ** 2 / (2 * kappa_n)
    tau_mean, tau_variance = shape_n / rate_n, shape_n / rate_n**2
    mu_variance = rate_n / (shape_n * kappa_n) * (2 * shape_n) / (2 * shape_n - 2)
    return {"tau": (tau_mean, tau_variance + tau_mean**2), "mu": (mean_n, mu_variance + mean_n**2)}


def compare_with_exact(result: tallmcmc.SamplingResult, exact: dict) -> dict[str, float]:
    """Largest |z| per site of the mean and the second moment against exact values (ArviZ MCSE; ESS >= 100)."""
    worst = {}
    for site, moments in exact.items():
        draws = np.asarray(result.positions[site], np.float64)
        zs = []
        for moment, value in zip((draws, np.square(draws)), moments):
            assert arviz_bridge.ess(moment) >= 100, f"{site}: ESS below 100, no power"
            zs.append(abs(float(moment.mean()) - value) / arviz_bridge.mcse(moment))
        worst[site] = max(zs)
    return worst


def test_exact_posterior_on_the_unconstrained_scale_and_wrong_without_the_log_jacobian():
    """Normal-Gamma: the exact posterior of (μ, τ) is known; sampling log τ needs the log-Jacobian log τ.

    Without it the chain targets Gamma(a' − 1, b') for τ: the mean is off by 1/b', 0.4 sd here.
    """
    y = np.random.default_rng(5).normal(1.0, 2.0, size=10)
    arguments = (y, 0.0, 0.5, 2.0, 2.0)
    exact = normal_gamma_posterior_moments(*arguments)
    model = tallmcmc.from_numpyro(normal_gamma, *arguments)
    worst = compare_with_exact(exact_run(model), exact)
    assert max(worst.values()) <= 4.0, worst

    built = interop._NumPyroModel(normal_gamma, arguments, {}, None)

    def prior_without_jacobian(position):
        terms = built.prior_terms(position)
        return sum(value for name, value in terms.items() if not name.endswith("(log-Jacobian)"))

    wrong = dataclasses.replace(model, log_prior=prior_without_jacobian)
    worst_wrong = compare_with_exact(exact_run(wrong), exact)
    assert worst_wrong["tau"] > 4.0, worst_wrong


def test_draws_come_back_constrained_and_named_by_site():
    model_fn, args, kwargs = simulate("linear", num_data=100)
    model = tallmcmc.from_numpyro(model_fn, *args, **kwargs)
    result = tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.05),
        tallmcmc.exact_metropolis(),
        initial_position={"beta": jnp.zeros(3), "sigma": jnp.asarray(-5.0)},
        num_samples=50,
        num_chains=2,
        num_warmup=20,
        progress=False,
    )
    assert set(result.positions) == {"beta", "sigma"}
    assert result.positions["beta"].shape == (2, 50, 3)
    assert result.positions["sigma"].shape == (2, 50)
    # the chain moves log sigma (from -5); the reported draws are sigma itself
    assert np.all(result.warmup_positions["sigma"] > 0) and np.all(result.positions["sigma"] > 0)
    assert float(np.min(result.warmup_positions["sigma"])) < np.exp(-4.0)
    np.testing.assert_allclose(
        result.positions["sigma"][:, -1], np.exp(np.asarray(result.final_state.position["sigma"])), rtol=1e-6
    )
    idata = result.to_inference_data()
    assert set(idata.posterior.data_vars) == {"beta", "sigma"}
    assert set(idata.warmup_posterior.data_vars) == {"beta", "sigma"}


def test_control_variate_and_minibatch_test_run_on_a_numpyro_model():
    model_fn, args, _ = simulate("logistic", num_data=5000)
    model = tallmcmc.from_numpyro(model_fn, *args)
    mode = tallmcmc.find_mode(model, model.position_shape)
    cv = tallmcmc.taylor_control_variate(model, mode.position)
    result = tallmcmc.sample(
        model,
        tallmcmc.laplace_random_walk(mode),
        tallmcmc.minibatch_barker(50, control_variate=cv),
        initial_position=mode.position,
        num_samples=200,
        num_chains=2,
        progress=False,
    )
    assert result.data_used.mean() < 500
    assert 0.05 < result.acceptance_rate < 0.95


# --- refusals -----------------------------------------------------------------------------

X_SMALL = np.column_stack([np.ones(20), np.linspace(-1, 1, 20)])
Y_SMALL = np.linspace(-2, 2, 20)


def refused(model_fn, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as caught:
        tallmcmc.from_numpyro(model_fn, *args, **kwargs)
    return str(caught.value)


@pytest.fixture(params=["all rows", "7 rows"])
def check_rows(request, monkeypatch):
    """The refusals that the decomposition check makes, on all the data and on rows drawn at random (as above
    ``_CHECK_ROWS``, here 7 of the 20)."""
    if request.param == "7 rows":
        monkeypatch.setattr(interop, "_CHECK_ROWS", 7)
    return request.param


def test_refuses_a_local_latent_variable():
    def local(X, y):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
        with numpyro.plate("data", X.shape[0]):
            scale = numpyro.sample("local_scale", dist.HalfNormal(1.0))
            numpyro.sample("y", dist.Normal(X @ beta, scale), obs=y)

    message = refused(local, X_SMALL, Y_SMALL)
    assert "'local_scale'" in message and "local latent" in message and "integrate" in message


def test_refuses_obs_mask_naming_the_site_and_the_mask_that_replaces_it():
    """obs_mask= makes NumPyro impute the missing entries as a latent site 'y_unobserved' in the plate: the refusal
    names the site the user wrote ('y') and obs_mask, and the fix, .mask(mask) on filled data; that fix is accepted
    and gives the complete-case model's log density."""
    missing = np.arange(Y_SMALL.shape[0]) % 5 == 0
    response = np.where(missing, np.nan, Y_SMALL).astype(np.float32)

    def imputed(X, y, observed):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta, 1.0), obs=y, obs_mask=observed)

    message = refused(imputed, X_SMALL, response, ~missing)
    assert "site 'y' has obs_mask=" in message and "'y_unobserved'" in message and ".mask(mask)" in message

    def masked(X, y, observed):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta, 1.0).mask(observed), obs=y)

    model = tallmcmc.from_numpyro(masked, X_SMALL, np.where(missing, 0.0, Y_SMALL).astype(np.float32), ~missing)
    complete = tallmcmc.from_numpyro(masked, X_SMALL[~missing], Y_SMALL[~missing], np.ones((~missing).sum(), bool))
    beta = {"beta": jnp.linspace(-0.5, 0.5, X_SMALL.shape[1])}
    np.testing.assert_allclose(
        float(model.log_likelihood_sum(beta)), float(complete.log_likelihood_sum(beta)), rtol=1e-5
    )


def test_refuses_observed_sites_outside_any_plate():
    def no_plate(X, y):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
        numpyro.sample("y", dist.Normal(X @ beta, 1.0).to_event(1), obs=y)

    message = refused(no_plate, X_SMALL, Y_SMALL)
    assert "no data plate" in message and "['y']" in message and "numpyro.plate" in message


def test_asks_for_plate_when_two_plates_hold_observed_sites():
    Y = np.stack([Y_SMALL, -Y_SMALL], axis=1)

    def nested(X, Y):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
        with numpyro.plate("outputs", Y.shape[1], dim=-1), numpyro.plate("rows", X.shape[0], dim=-2):
            numpyro.sample("Y", dist.Normal((X @ beta)[:, None], 1.0), obs=Y)

    message = refused(nested, X_SMALL, Y)
    assert "'outputs'" in message and "'rows'" in message and "plate=" in message
    model = tallmcmc.from_numpyro(nested, X_SMALL, Y, plate="rows")
    assert model.num_data == 20
    with jax.enable_x64(True):
        model = tallmcmc.from_numpyro(nested, X_SMALL, Y, plate="rows")
        position = {"beta": jnp.asarray([0.3, -0.4])}
        np.testing.assert_allclose(
            float(model.log_density(position)), -float(potential_energy(nested, (X_SMALL, Y), {}, position)), rtol=1e-9
        )
    assert "no plate of that name" in refused(nested, X_SMALL, Y, plate="data")


def test_refuses_data_on_a_non_leading_axis(check_rows):
    def transposed(XT, y):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([XT.shape[0]]))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Normal(XT.T @ beta, 1.0), obs=y)

    message = refused(transposed, X_SMALL.T, Y_SMALL)
    assert "leading axis" in message and "y (20,)" in message


def test_refuses_a_series_read_with_lags_and_says_how_to_pass_it(check_rows):
    """An AR(1) written as NumPyro users often write it: each term reads two rows of y. The refusal (a broadcasting
    error on rows drawn at random, a failed decomposition on all the data) names the lag and the fix (the 2026-11-29
    third user-model audit: both messages were right and neither said why)."""

    def autoregressive(y):
        rho = numpyro.sample("rho", dist.Uniform(-1.0, 1.0))
        scale = numpyro.sample("scale", dist.HalfNormal(1.0))
        with numpyro.plate("data", y.shape[0] - 1):
            numpyro.sample("obs", dist.Normal(rho * y[:-1], scale), obs=y[1:])

    series = np.cumsum(np.random.default_rng(0).normal(size=21)).astype(np.float32)
    message = refused(autoregressive, series)
    assert "The argument y has 21 rows against the plate's N = 20" in message and "y_prev=y[:-1]" in message

    def transitions(y_prev, y_next):  # the fix the message gives: one transition per datum
        rho = numpyro.sample("rho", dist.Uniform(-1.0, 1.0))
        scale = numpyro.sample("scale", dist.HalfNormal(1.0))
        with numpyro.plate("data", y_next.shape[0]):
            numpyro.sample("obs", dist.Normal(rho * y_prev, scale), obs=y_next)

    assert tallmcmc.from_numpyro(transitions, series[:-1], series[1:]).num_data == 20


def test_refuses_data_outside_the_support_naming_the_rows():
    """Three Weibull times of 0 or below among 40: NumPyro's log density is -inf everywhere; the refusal names the
    rows (the 2026-11-29 third audit: the message said only that the density was not finite at 20 points)."""

    def weibull(X, t):
        shape = numpyro.sample("shape", dist.Gamma(2.0, 1.0))
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("t", dist.Weibull(jnp.exp(X @ beta), shape), obs=t)

    rng = np.random.default_rng(0)
    covariates = rng.normal(size=(40, 2)).astype(np.float32)
    times = rng.weibull(1.5, size=40).astype(np.float32)
    times[[3, 17, 30]] = [0.0, -1.0, 0.0]
    message = refused(weibull, covariates, times)
    assert "not finite at 3 of the N = 40 rows (rows 3, 17, 30)" in message and "outside the support" in message
    times[[3, 17, 30]] = 1.0
    assert tallmcmc.from_numpyro(weibull, covariates, times).num_data == 40


def test_accepts_a_count_regression_on_covariates_of_large_magnitude():
    """Ages 20–80 and incomes around 50 under a log link overflow float32 at every random check point in (−2, 2), and
    the rows with the largest covariates were named as data outside the support ("drop or correct those rows", the
    2026-11-30 audit). The check tries the unconstrained origin first, where the linear predictor is 0."""

    def negative_binomial(X, y):
        a = numpyro.sample("a", dist.Normal(0, 5))
        b = numpyro.sample("b", dist.Normal(0, 1).expand([2]).to_event(1))
        phi = numpyro.sample("phi", dist.Exponential(0.5))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.NegativeBinomial2(jnp.exp(a + X @ b), phi), obs=y)

    rng = np.random.default_rng(0)
    X = np.stack([rng.uniform(20, 80, 500), rng.lognormal(np.log(50), 0.6, 500)], 1).astype(np.float32)
    y = rng.negative_binomial(2.0, 2.0 / (2.0 + np.exp(-1.0 + X @ np.array([0.02, 0.005])))).astype(np.int32)
    assert tallmcmc.from_numpyro(negative_binomial, X, y).num_data == 500
    # real counts outside the support are still named, the origin included among the points
    y[[4, 9]] = -1
    message = refused(negative_binomial, X, y)
    assert "not finite at 2 of the N = 500 rows (rows 4, 9) at the unconstrained origin" in message, message


def test_refuses_a_discrete_latent_site():
    def discrete(X, y):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
        switch = numpyro.sample("switch", dist.Bernoulli(0.5))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta + switch, 1.0), obs=y)

    message = refused(discrete, X_SMALL, Y_SMALL)
    assert "'switch'" in message and "discrete" in message


def test_refuses_a_prior_that_reads_the_data(check_rows):
    def centred_prior(X, y):
        intercept = numpyro.sample("intercept", dist.Normal(jnp.mean(y), 1.0))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(intercept, 1.0), obs=y)

    message = refused(centred_prior, X_SMALL, Y_SMALL)
    assert "'intercept'" in message and "outside the data plate" in message


def test_refuses_a_likelihood_that_reads_other_data(check_rows):
    def standardised(X, y):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta, 0.1 + jnp.std(y)), obs=y)

    message = refused(standardised, X_SMALL, Y_SMALL)
    assert "decomposition does not hold at site 'y'" in message


def test_refuses_a_model_whose_sites_depend_on_the_data_size(check_rows):
    """A site that exists only above some N: on all the data the check sees it and one datum's run does not; on rows
    drawn at random (7 of 20, below the threshold) it is the abstract trace on all N rows that has it."""

    def sized(X, y):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
        if X.shape[0] > 10:
            numpyro.sample("extra", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta, 1.0), obs=y)

    message = refused(sized, X_SMALL, Y_SMALL)
    assert "'extra'" in message and "depends on the data's size" in message


def test_refuses_an_observed_summary_of_the_data_outside_the_plate(check_rows):
    def summary(X, y):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
        numpyro.sample("y_mean", dist.Normal(jnp.mean(X @ beta), 1.0), obs=jnp.mean(y))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta, 1.0), obs=y)

    message = refused(summary, X_SMALL, Y_SMALL)
    assert "'y_mean'" in message and "outside the data plate" in message


def test_an_observed_site_outside_the_plate_that_does_not_read_the_data_is_part_of_the_prior():
    def soft_constraint(X, y):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
        numpyro.sample("sum_to_zero", dist.Normal(jnp.sum(beta), 0.01), obs=0.0)
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta, 1.0), obs=y)

    with jax.enable_x64(True):
        model = tallmcmc.from_numpyro(soft_constraint, X_SMALL, Y_SMALL)
        position = {"beta": jnp.asarray([0.2, 0.1])}
        expected = dist.Normal(0, 1).log_prob(position["beta"]).sum() + dist.Normal(0.3, 0.01).log_prob(0.0)
        np.testing.assert_allclose(float(model.log_prior(position)), float(expected), rtol=1e-12)


def test_refuses_a_model_without_observed_or_latent_sites_or_that_cannot_run():
    def prior_only(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta, 1.0), obs=y)

    assert "no observed site" in refused(prior_only, X_SMALL)

    def nothing_to_sample(X, y):
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(X[:, 1], 1.0), obs=y)

    assert "no latent site" in refused(nothing_to_sample, X_SMALL, Y_SMALL)
    assert "do not fit the model's signature" in refused(logistic, X_SMALL)  # y missing
    assert "could not be run" in refused(logistic, Y_SMALL, Y_SMALL)  # X.shape[1] of a vector
    assert "leading axis" in refused(logistic, X_SMALL, Y_SMALL[:5])  # y is not of length N


def test_refuses_data_with_nan_naming_the_argument_and_row():
    y = Y_SMALL.copy()
    y[[7, 12]] = np.nan
    message = refused(linear, X_SMALL, y)
    assert "argument 'y' in 2 rows (first: row 7)" in message and "'X'" not in message
    X = X_SMALL.copy()
    X[3, 1] = np.inf
    assert "argument 'X' in 1 row (first: row 3)" in refused(linear, X, Y_SMALL)


def test_deterministic_sites_outside_the_data_plate_are_reported_with_the_draws():
    """As NumPyro's MCMC reports them (the audit: they were dropped); one per datum, or one that reads the data
    outside the plate (its value would be the first datum's), is not, the second with a warning."""
    groups, g = 5, np.arange(40) % 5
    y = np.linspace(-1.0, 1.0, 40)

    def noncentred(g, y):
        mu = numpyro.sample("mu", dist.Normal(0, 1))
        tau = numpyro.sample("tau", dist.HalfNormal(1.0))
        with numpyro.plate("groups", groups):
            z = numpyro.sample("z", dist.Normal(0, 1))
        effect = numpyro.deterministic("effect", mu + tau * z)
        numpyro.deterministic("ybar", y.mean())
        with numpyro.plate("data", g.shape[0]):
            numpyro.deterministic("mean", effect[g])
            numpyro.sample("y", dist.Normal(effect[g], 1.0), obs=y)

    with pytest.warns(UserWarning, match="deterministic site 'ybar' depends on the datum"):
        model = tallmcmc.from_numpyro(noncentred, g, y)
    position = {"mu": jnp.array(0.3), "tau": jnp.array(-0.5), "z": jnp.linspace(-1.0, 1.0, groups)}
    constrained = model.constrain(position)
    assert set(constrained) == {"mu", "tau", "z", "effect"}
    np.testing.assert_allclose(constrained["effect"], 0.3 + np.exp(-0.5) * np.linspace(-1.0, 1.0, groups), atol=1e-6)


def test_refuses_pandas_and_lists_of_data_naming_the_argument_and_the_fix():
    """The audit: a list, a Series or a DataFrame gave a trace error or advice about arguments it did not name."""
    pandas = pytest.importorskip("pandas")
    series = refused(linear, X_SMALL, pandas.Series(Y_SMALL))
    assert "argument 'y' is a pandas Series" in series and "y.to_numpy()" in series
    frame = refused(linear, pandas.DataFrame(X_SMALL), Y_SMALL)
    assert "argument 'X' is a pandas DataFrame" in frame and "X[columns].to_numpy(np.float32)" in frame
    listed = refused(linear, X_SMALL, Y_SMALL.tolist())
    assert f"argument 'y' is a list of N = {len(Y_SMALL)} numbers" in listed and "np.asarray(y)" in listed
    short = refused(linear, X_SMALL, Y_SMALL[:-1])
    assert f"other array arguments (leading length not N, passed whole): y ({len(Y_SMALL) - 1},)" in short


def test_refuses_a_subsampling_plate_that_is_not_the_data_plate():
    def groups_subsampled(x, g, y):
        with numpyro.plate("groups", 10, subsample_size=5):
            numpyro.sample("effect", dist.Normal(0, 1))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(x, 1.0), obs=y)

    message = refused(groups_subsampled, Y_SMALL, np.zeros(20, int), Y_SMALL)
    assert "'groups'" in message and "subsample" in message


def test_model_kwargs_pass_names_that_clash_with_from_numpyros_own():
    def takes_temperature(x, y, temperature):
        mu = numpyro.sample("mu", dist.Normal(0, 1))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(mu + x, temperature), obs=y)

    model = tallmcmc.from_numpyro(takes_temperature, Y_SMALL, Y_SMALL, model_kwargs={"temperature": 2.0})
    assert model.temperature == 1.0
    with pytest.raises(ValueError, match="model_kwargs"):
        tallmcmc.from_numpyro(takes_temperature, Y_SMALL, Y_SMALL, model_kwargs=[2.0])


def test_the_draws_feed_numpyros_predictive_as_after_nuts():
    """``result.get_samples()`` is NumPyro's ``MCMC.get_samples()`` layout (chains one after another), so
    ``Predictive`` runs on it unchanged; ``result.positions`` needs ``batch_ndims=2`` (the audit: without it NumPyro
    failed with "dot_general requires contracting dimensions to have the same shape")."""
    from numpyro.infer import Predictive

    def regression(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        with numpyro.plate("data", X.shape[0]):
            mean = numpyro.deterministic("mean", X @ beta)
            numpyro.sample("y", dist.Normal(mean, sigma), obs=y)

    model = tallmcmc.from_numpyro(regression, X_SMALL, Y_SMALL)
    result = exact_run(model, num_samples=30, num_chains=2, num_warmup=0)
    samples = result.get_samples()
    assert samples["beta"].shape == (60, 2) and samples["sigma"].shape == (60,)
    np.testing.assert_array_equal(samples["beta"][30:], result.positions["beta"][1])
    assert result.get_samples(group_by_chain=True) is result.positions
    new = np.column_stack([np.ones(3), [-2.0, 0.0, 2.0]])
    predicted = Predictive(regression, posterior_samples=samples)(jax.random.key(0), new)
    assert predicted["y"].shape == (60, 3)
    np.testing.assert_allclose(predicted["mean"], samples["beta"] @ new.T, rtol=1e-5, atol=1e-6)
    grouped = Predictive(regression, posterior_samples=result.positions, batch_ndims=2)(jax.random.key(0), new)
    np.testing.assert_allclose(np.reshape(grouped["mean"], (60, 3)), predicted["mean"], rtol=1e-5, atol=1e-6)


def test_a_param_site_is_held_and_said_so():
    """The audit: ``numpyro.param`` was held at its initial value without a word (as NumPyro's MCMC does)."""

    def with_param(X, y):
        scale = numpyro.param("scale", 2.0)
        beta = numpyro.sample("beta", dist.Normal(0.0, scale).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta, 1.0), obs=y)

    with pytest.warns(UserWarning, match="param site 'scale' held at the initial value"):
        model = tallmcmc.from_numpyro(with_param, X_SMALL, Y_SMALL)
    assert set(model.position_shape) == {"beta"}
