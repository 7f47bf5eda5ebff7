"""Taylor control variates: exact bookkeeping, decisions at the Barker rate, and clear refusals."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
from jax.flatten_util import ravel_pytree
from suite_xla import RUN_HEAVY

import tallmcmc
from tallmcmc.control_variate import all_equations
from tallmcmc.examples import logistic_regression


@pytest.fixture(scope="module")
def logistic():
    """Untempered logistic regression, N = 20,000, d = 5, with its mode and control variate."""
    rng = np.random.default_rng(2024)
    covariates = rng.standard_normal((20_000, 5)).astype(np.float32)
    truth = rng.standard_normal(5) / 2
    response = (rng.random(20_000) < 1 / (1 + np.exp(-covariates @ truth))).astype(np.float32)
    model = logistic_regression.model(covariates, response)
    objective = jax.jit(jax.value_and_grad(lambda beta: -model.log_density(beta)))
    fit = scipy.optimize.minimize(
        lambda beta: tuple(np.asarray(v, np.float64) for v in objective(jnp.asarray(beta, jnp.float32))),
        np.zeros(5),
        jac=True,
        method="L-BFGS-B",
    )
    mode = jnp.asarray(fit.x, jnp.float32)
    return model, mode, tallmcmc.taylor_control_variate(model, mode)


def test_proxy_sum_equals_the_sum_of_per_datum_proxies(logistic):
    model, mode, cv = logistic
    theta, theta_new = mode + 0.01, mode - 0.02 * jnp.arange(5.0)
    per_datum = cv.proxy_differences(theta, theta_new, model.data)
    np.testing.assert_allclose(float(cv.proxy_log_ratio(theta, theta_new)), float(jnp.sum(per_datum)), rtol=2e-3)
    first = tallmcmc.taylor_control_variate(model, mode, order=1)
    per_datum = first.proxy_differences(theta, theta_new, model.data)
    np.testing.assert_allclose(float(first.proxy_log_ratio(theta, theta_new)), float(jnp.sum(per_datum)), rtol=2e-3)


@pytest.mark.parametrize("order, curvature", [(2, "per_datum"), (1, "per_datum"), (2, "shared")])
def test_per_datum_proxy_differences_are_the_taylor_quadratic_on_a_model_with_a_dict_position(order, curvature):
    """qᵢ(θ′) − qᵢ(θ) = gᵢᵀδ + ūᵀHᵢδ (forward-over-forward in the library) against gᵢ and Hᵢ written out by hand.

    The random-intercepts model: a row's log-likelihood −½(yᵢ − u_{gᵢ})² touches one coordinate, so gᵢ and Hᵢ are
    zero but for u_{gᵢ} (gᵢ = yᵢ − u_{gᵢ}, Hᵢ = −1 there); log τ does not enter the likelihood. A proxy that took
    another row's coordinate, dropped the curvature or the midpoint fails at 10⁻⁴.
    """
    from tallmcmc.examples import random_intercepts

    groups, response = random_intercepts.simulate(300, 7, seed=3)
    model = random_intercepts.model(groups, response, 7)
    rng = np.random.default_rng(5)
    center = {"log_tau": jnp.float32(-0.3), "u": jnp.asarray(rng.normal(0, 0.5, 7), jnp.float32)}
    theta = {"log_tau": jnp.float32(0.1), "u": center["u"] + jnp.asarray(rng.normal(0, 0.2, 7), jnp.float32)}
    proposed = {"log_tau": jnp.float32(-0.2), "u": theta["u"] + jnp.asarray(rng.normal(0, 0.2, 7), jnp.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the centre is no mode: the summed Hessian's warning is not the point here
        cv = tallmcmc.taylor_control_variate(model, center, order=order, curvature=curvature)
    got = np.asarray(cv.proxy_differences(theta, proposed, model.data), np.float64)

    u_c, u, u_new = (np.asarray(p["u"], np.float64)[groups] for p in (center, theta, proposed))
    y = np.asarray(response, np.float64)
    delta, midpoint = u_new - u, 0.5 * (u + u_new) - u_c
    expected = (y - u_c) * delta  # gᵢᵀδ
    if order == 2 and curvature == "per_datum":
        expected = expected - midpoint * delta  # ūᵀHᵢδ with Hᵢ = −1 on u_{gᵢ}
    elif order == 2:  # shared: ūᵀ(H̄/N)δ for every row, H̄ = −diag(rows per group) on u
        counts = np.bincount(groups, minlength=7).astype(np.float64)
        flat = lambda p: np.asarray(p["u"], np.float64)  # noqa: E731
        mid = 0.5 * (flat(theta) + flat(proposed)) - flat(center)
        expected = expected - float(np.sum(mid * counts * (flat(proposed) - flat(theta)))) / len(y)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    wrong = (y - u_c) * delta - (0.5 * (u + u_new)) * delta  # the curvature about 0, not about the centre
    assert np.max(np.abs(wrong - expected)) > 1e-2


@pytest.mark.parametrize("order, curvature", [(2, "per_datum"), (1, "per_datum"), (2, "diagonal")])
def test_a_residual_builds_no_length_d_vector_per_row(order, curvature):
    """A chunk of 100 residuals on random intercepts (d = 501, a row touches one intercept) has no (100, ·) array
    longer than a few entries per row: the proxy difference is carried forward through the row's own
    log-likelihood, so its cost does not grow with d (5.5× cheaper than the gradient and Hessian-vector product
    it replaced; benchmarks/RESULTS.md, "A residual in forward mode"). A reverse-mode gradient per row, the
    replaced form, builds (100, 500) arrays and fails."""
    from tallmcmc.examples import random_intercepts

    groups, response = random_intercepts.simulate(2_000, 500, seed=0)
    model = random_intercepts.model(groups, response, 500)
    center = {"log_tau": jnp.float32(0.0), "u": jnp.zeros(500, jnp.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cv = tallmcmc.taylor_control_variate(model, center, order=order, curvature=curvature)
    residuals = cv.residual_model(model)
    theta = {"log_tau": jnp.float32(0.1), "u": jnp.full(500, 0.01, jnp.float32)}
    proposed = {"log_tau": jnp.float32(0.2), "u": jnp.full(500, 0.02, jnp.float32)}
    indices = jnp.arange(100, dtype=jnp.int32)

    def per_row_widths(function):  # the widths of every (100, ·) intermediate, loops and nested calls included
        jaxpr = jax.make_jaxpr(function)(theta, proposed, indices).jaxpr
        shapes = {
            tuple(getattr(var.aval, "shape", ())) for equation in all_equations(jaxpr) for var in equation.outvars
        }
        return {shape[1] for shape in shapes if len(shape) == 2 and shape[0] == 100}

    assert max(per_row_widths(residuals.log_likelihood_ratios_at), default=1) <= 2

    def reverse_mode(position, proposed, indices):  # the replaced form: a gradient per row
        rows = jax.tree_util.tree_map(lambda column: column[indices], model.data)
        delta = ravel_pytree(proposed)[0] - ravel_pytree(position)[0]
        gradient = jax.vmap(lambda row: ravel_pytree(jax.grad(lambda p: model.log_likelihood(p, row))(center))[0])
        return gradient(rows) @ delta

    assert max(per_row_widths(reverse_mode)) >= 500


def test_residuals_are_far_smaller_than_the_log_ratios(logistic):
    model, mode, cv = logistic
    theta, theta_new = mode + 0.005, mode - 0.005
    ratios = model.log_likelihood_ratios(theta, theta_new, model.data)
    residuals = cv.residual_model(model).log_likelihood_ratios(theta, theta_new, model.data)
    assert float(jnp.std(residuals)) < 0.05 * float(jnp.std(ratios))


def decision_frequencies(model, mode, test, pairs, num_decisions, drop_proxy=False):
    """Acceptance frequency of ``test`` over ``num_decisions`` independent decisions per (θ, θ′) pair.

    One compiled program for all pairs (the pair and its prior offset are arguments, not constants).
    """
    decide = test.decide
    if drop_proxy:  # the residual estimate alone, without the exact proxy sum
        cv = test.setup[0]
        inner = tallmcmc.minibatch_barker(100)
        decide = lambda key, m, a, b, o, c: inner.decide(key, cv.residual_model(m), a, b, o, c)  # noqa: E731
    keys = jax.random.split(jax.random.key(17), num_decisions)
    decide_all = jax.jit(
        jax.vmap(lambda key, a, b, o: decide(key, model, a, b, o, ()).accepted, (0, None, None, None)),
        compiler_options=RUN_HEAVY,  # one program run long: XLA's defaults (suite_xla)
    )
    frequencies = []
    for theta, theta_new in pairs:
        offset = jnp.asarray(model.log_prior(theta_new) - model.log_prior(theta), jnp.float32)
        frequencies.append(float(jnp.mean(decide_all(keys, theta, theta_new, offset))))
    return np.array(frequencies)


def exact_barker_probabilities(model, pairs):
    deltas = np.array(
        [
            float(jnp.sum(model.log_likelihood_ratios(a, b, model.data)) + model.log_prior(b) - model.log_prior(a))
            for a, b in pairs
        ]
    )
    return deltas, 1 / (1 + np.exp(-deltas))


@pytest.fixture(scope="module")
def pairs(logistic):
    """(θ, θ′) pairs near the mode and their reverses, so the exact Δ takes both signs."""
    model, mode, cv = logistic
    rng = np.random.default_rng(5)
    sd = 1 / np.sqrt(np.diag(-np.asarray(cv.hessian_sum)))
    found = []
    for scale in (0.3, 0.6, 1.0):
        theta = mode + jnp.asarray(sd * rng.standard_normal(5), jnp.float32)
        theta_new = theta + jnp.asarray(scale * sd * rng.standard_normal(5), jnp.float32)
        found += [(theta, theta_new), (theta_new, theta)]
    return found


def test_control_variate_decisions_follow_the_barker_probability(logistic, pairs):
    model, mode, cv = logistic
    test = tallmcmc.minibatch_barker(100, control_variate=cv)
    num = 20_000
    deltas, exact = exact_barker_probabilities(model, pairs)
    assert deltas.min() < -0.5 and deltas.max() > 0.5, deltas  # the pairs cover both sides
    frequencies = decision_frequencies(model, mode, test, pairs, num)
    standard_errors = np.sqrt(exact * (1 - exact) / num)
    assert np.all(np.abs(frequencies - exact) < 4 * standard_errors), (deltas, frequencies, exact)


def test_leaving_out_the_proxy_sum_fails_the_same_check(logistic, pairs):
    model, mode, cv = logistic
    test = tallmcmc.minibatch_barker(100, control_variate=cv)
    num = 20_000
    _, exact = exact_barker_probabilities(model, pairs)
    frequencies = decision_frequencies(model, mode, test, pairs, num, drop_proxy=True)
    standard_errors = np.sqrt(exact * (1 - exact) / num)
    assert np.any(np.abs(frequencies - exact) > 4 * standard_errors)


def test_control_variate_run_uses_the_first_minibatch_and_counts_its_setup(logistic):
    model, mode, cv = logistic
    covariance = tallmcmc.laplace_covariance(-np.asarray(cv.hessian_sum) + np.eye(5))
    result = tallmcmc.sample(
        model,
        tallmcmc.laplace_random_walk(covariance=covariance),
        tallmcmc.minibatch_barker(100, control_variate=cv),
        initial_position=mode,
        num_samples=200,
        num_chains=2,
        progress=False,
    )
    assert np.all(result.data_used == 100)
    assert result.setup_data_used == {"start check": 20_000, cv.name: 20_000}
    assert result.setup_data_passes == 2.0
    assert result.total_data_used == 40_000 + 100 * 400


@pytest.mark.parametrize(
    "factory",
    [
        lambda cv: tallmcmc.austere(100, 0.01, control_variate=cv),
        lambda cv: tallmcmc.confidence_sampler(100, control_variate=cv),
        lambda cv: tallmcmc.austere_conservative(0.2, (100, 200), (0.001, 0.01), control_variate=cv),
    ],
)
def test_every_subsampling_test_accepts_a_control_variate(logistic, factory):
    model, mode, cv = logistic
    result = tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.002),
        factory(cv),
        initial_position=mode,
        num_samples=50,
        progress=False,
    )
    assert result.test_name.endswith("_cv")
    assert 0 < result.acceptance_rate <= 1


def test_a_control_variate_for_another_model_is_refused(logistic):
    model, mode, cv = logistic
    other = logistic_regression.model(np.ones((10, 5), np.float32), np.ones(10, np.float32))
    with pytest.raises(ValueError, match="control_variate was built for another model"):
        tallmcmc.sample(
            other,
            tallmcmc.random_walk(0.01),
            tallmcmc.minibatch_barker(5, control_variate=cv),
            initial_position=jnp.zeros(5),
            num_samples=2,
            progress=False,
        )
    with pytest.raises(TypeError, match="taylor_control_variate"):
        tallmcmc.minibatch_barker(50, control_variate="cv")


def test_bad_centers_are_reported(logistic):
    model, mode, cv = logistic
    with pytest.raises(ValueError, match="order"):
        tallmcmc.taylor_control_variate(model, mode, order=3)
    with pytest.raises(ValueError, match="center"):
        tallmcmc.taylor_control_variate(model, jnp.zeros(3))


def test_a_center_far_from_the_mode_warns(logistic):
    model, mode, _ = logistic
    far = tallmcmc.taylor_control_variate(model, mode + 3.0)
    with pytest.warns(RuntimeWarning, match=r"used \d+% of the N = [0-9,]+ data points.*find_mode"):
        tallmcmc.sample(
            model,
            tallmcmc.random_walk(0.01),
            tallmcmc.minibatch_barker(100, control_variate=far),
            initial_position=mode,
            num_samples=30,
            progress=False,
        )


def test_non_negative_definite_hessian_sum_is_reported_by_name():
    model = tallmcmc.Model(
        lambda theta, x: 0.5 * jnp.sum((x - theta) ** 2),
        lambda theta: -jnp.sum(theta**2),
        np.zeros((50, 2), np.float32),
    )
    with pytest.warns(RuntimeWarning, match="hessian_sum"):
        tallmcmc.taylor_control_variate(model, jnp.zeros(2))


@pytest.mark.slow
def test_untempered_logistic_posterior_matches_the_exact_test():
    """N = 10⁵, d = 10, K = 1: the control-variate minibatch test's means and sds within 4 MCSE of the exact test's."""
    from tallmcmc.interop.arviz import ess

    rng = np.random.default_rng(10)
    covariates = rng.standard_normal((100_000, 10)).astype(np.float32)
    response = (rng.random(100_000) < 1 / (1 + np.exp(-covariates @ (rng.standard_normal(10) / 2)))).astype(np.float32)
    model = logistic_regression.model(covariates, response)
    objective = jax.jit(jax.value_and_grad(lambda beta: -model.log_density(beta)))
    fit = scipy.optimize.minimize(
        lambda beta: tuple(np.asarray(v, np.float64) for v in objective(jnp.asarray(beta, jnp.float32))),
        np.zeros(10),
        jac=True,
        method="L-BFGS-B",
    )
    mode = jnp.asarray(fit.x, jnp.float32)
    cv = tallmcmc.taylor_control_variate(model, mode)
    covariance = tallmcmc.laplace_covariance(-np.asarray(cv.hessian_sum) + np.eye(10))
    proposal = tallmcmc.laplace_random_walk(covariance=covariance)
    runs = {
        name: tallmcmc.sample(
            model, proposal, test, initial_position=mode, num_samples=6000, num_chains=4, seed=1, progress=False
        ).positions
        for name, test in (
            ("exact", tallmcmc.exact_barker()),
            ("cv", tallmcmc.minibatch_barker(100, control_variate=cv)),
        )
    }
    for j in range(10):
        se = [np.std(runs[k][..., j]) / np.sqrt(ess(runs[k][..., j])) for k in runs]
        combined = np.hypot(*se)
        assert abs(runs["cv"][..., j].mean() - runs["exact"][..., j].mean()) < 4 * combined
        sd_se = [np.std(runs[k][..., j]) / np.sqrt(2 * ess(runs[k][..., j])) for k in runs]
        assert abs(runs["cv"][..., j].std() - runs["exact"][..., j].std()) < 4 * np.hypot(*sd_se)


def test_without_batch_size_a_pass_takes_all_rows_unless_their_gradients_would_be_large(logistic, monkeypatch):
    """``batch_size=None``: all N rows at once where N·d ≤ 2²⁷, else chunks of 2²⁷/d rows (the bound lowered here
    to 5 × 3,000: chunks of 3,000 rows, the last of 2,000) — the same sums and the same count."""
    from tallmcmc import control_variate as module

    model, mode, whole = logistic
    flat, unravel = ravel_pytree(mode)
    assert module._SetupPasses(model, flat, unravel, None).size == model.num_data
    monkeypatch.setattr(module, "_ROWS_TIMES_DIMENSION_AT_ONCE", 5 * 3000)
    assert module._SetupPasses(model, flat, unravel, None).size == 3000
    chunked = tallmcmc.taylor_control_variate(model, mode)
    scale = np.abs(np.asarray(whole.hessian_sum)).max()
    np.testing.assert_allclose(chunked.gradient_sum, whole.gradient_sum, rtol=0, atol=1e-5 * scale)
    np.testing.assert_allclose(chunked.hessian_sum, whole.hessian_sum, rtol=1e-5, atol=1e-6 * scale)
    assert chunked.data_used == whole.data_used == model.num_data


# --------------------------------------------------------------------------- shared curvature (large d)
SHARED = ("shared", "diagonal", "low_rank")


@pytest.fixture(scope="module")
def shared_cvs(logistic):
    """The three shared-curvature control variates of the logistic fixture, built in chunks of 7000 rows."""
    model, mode, _ = logistic
    return {
        curvature: tallmcmc.taylor_control_variate(
            model, mode, curvature=curvature, rank=2 if curvature == "low_rank" else None, batch_size=7000
        )
        for curvature in SHARED
    }


@pytest.mark.parametrize("curvature", SHARED)
def test_shared_curvature_proxy_sum_equals_the_sum_of_per_datum_proxies(logistic, shared_cvs, curvature):
    model, mode, _ = logistic
    cv = shared_cvs[curvature]
    theta, theta_new = mode + 0.01, mode - 0.02 * jnp.arange(5.0)
    total = float(cv.proxy_log_ratio(theta, theta_new))
    np.testing.assert_allclose(total, float(jnp.sum(cv.proxy_differences(theta, theta_new, model.data))), rtol=2e-3)
    difference = float(cv.proxy_log_likelihood(theta_new)) - float(cv.proxy_log_likelihood(theta))
    np.testing.assert_allclose(total, difference, rtol=2e-3)


def test_shared_curvatures_are_the_summed_hessian_or_its_approximations(logistic, shared_cvs):
    model, _, cv = logistic
    hessian = np.asarray(cv.hessian_sum, np.float64)
    np.testing.assert_allclose(shared_cvs["shared"].hessian_matrix(), hessian, rtol=1e-6)
    np.testing.assert_allclose(shared_cvs["diagonal"].hessian_matrix(), np.diag(np.diag(hessian)), rtol=1e-4)
    # d = 5 ≤ rank + oversampling: the range finder spans everything, so the eigenpairs are those of the scaled
    # S = D^{-1/2}(−H̄)D^{-1/2}, D = −diag(H̄), and A is exact on their directions D^{-1/2}U
    low = shared_cvs["low_rank"]
    basis, values = np.asarray(low.hessian_basis, np.float64), np.asarray(low.hessian_eigenvalues, np.float64)
    root = np.sqrt(-np.diag(hessian))
    np.testing.assert_allclose(np.asarray(low.hessian_scale, np.float64), root, rtol=1e-4)
    scaled = hessian / np.outer(root, root)
    np.testing.assert_allclose(np.sort(values), np.linalg.eigvalsh(scaled)[:2], rtol=1e-4)
    np.testing.assert_allclose(scaled @ basis, basis * values, rtol=0, atol=1e-4 * np.abs(values).max())
    curvature = low.hessian_matrix()
    directions = basis / root[:, None]
    np.testing.assert_allclose(curvature @ directions, hessian @ directions, rtol=0, atol=1e-4 * np.abs(hessian).max())
    assert np.linalg.eigvalsh(curvature).max() < 0
    assert [shared_cvs[c].data_used for c in SHARED] == [20_000, 20_000, 60_000]  # low rank: three passes
    assert shared_cvs["shared"].hessian_basis is None and shared_cvs["diagonal"].hessian_sum is None


def planted_quadratic_model(dimension, scales, direction, top):
    """Per-datum log-likelihood −½θᵀ(B/N)θ + xᵢᵀθ, so H̄ = −B exactly, B = Σ S₀ Σ with unit-diagonal S₀.

    S₀ = cI + (μ − c)wwᵀ, w with entries ±1/√d and c = (d − μ)/(d − 1): S₀'s diagonal is 1, w its eigenvector
    with eigenvalue μ = ``top`` and every other eigenvalue c.
    """
    c = (dimension - top) / (dimension - 1)
    inner = c * np.eye(dimension) + (top - c) * np.outer(direction, direction)
    precision = scales[:, None] * inner * scales[None, :]
    num_data = 8
    per_datum = jnp.asarray(precision / num_data, jnp.float32)
    model = tallmcmc.Model(
        lambda theta, x: -0.5 * theta @ per_datum @ theta + x @ theta,
        lambda theta: -0.5 * jnp.sum(theta**2),
        np.zeros((num_data, dimension), np.float32),
    )
    return model, -precision


def test_low_rank_curvature_is_exact_on_a_deviation_from_the_diagonal():
    """Columns scaled over 10³: H̄'s most negative eigenvectors are coordinate-like, not the planted deviation w.

    The scaled choice finds Σ⁻¹w and is exact there (and elsewhere, the rest of S₀ being cI); the most negative eigenpairs of
    H̄ with the diagonal across them (the choice before) are off by more than 2× in some direction.
    """
    dimension, rank = 40, 1
    rng = np.random.default_rng(3)
    direction = rng.choice([-1.0, 1.0], dimension) / np.sqrt(dimension)
    scales = 10 ** rng.uniform(-1.5, 1.5, dimension)
    model, hessian = planted_quadratic_model(dimension, scales, direction, top=dimension / 2)
    cv = tallmcmc.taylor_control_variate(model, jnp.zeros(dimension), curvature="low_rank", rank=rank)
    curvature = cv.hessian_matrix()
    planted = direction / scales  # Σ⁻¹w: H̄ Σ⁻¹w = −Σ S₀ w = −μ Σ w
    np.testing.assert_allclose(curvature @ planted, hessian @ planted, rtol=1e-3, atol=1e-4 * np.abs(hessian).max())
    ratios = scipy.linalg.eigh(-curvature, -hessian, eigvals_only=True)
    assert 0.98 < ratios.min() and ratios.max() < 1.02, ratios  # the complement is isotropic: exact up to rounding

    # the choice before: k most negative eigenpairs of H̄ (exact here: a dense eigendecomposition), the diagonal
    # they leave across them; it misses the planted direction by far
    values, vectors = np.linalg.eigh(hessian)
    basis, kept = vectors[:, :rank], values[:rank]
    rest = np.minimum(np.diag(hessian) - np.einsum("jk,k,jk->j", basis, kept, basis), 0.0)
    projector = np.eye(dimension) - basis @ basis.T
    before = basis @ np.diag(kept) @ basis.T + projector @ np.diag(rest) @ projector
    before_ratios = scipy.linalg.eigh(-before, -hessian, eigvals_only=True)
    assert max(before_ratios.max(), 1 / before_ratios.min()) > 2, before_ratios


def test_shared_curvature_residuals_spread_exactly_like_first_order(logistic, shared_cvs, pairs):
    """A shared curvature adds the same ūᵀAδ/N to every residual: the spread is order 1's, far above per-datum's."""
    model, mode, cv = logistic
    first = tallmcmc.taylor_control_variate(model, mode, order=1)
    for theta, theta_new in pairs:
        variance = {
            name: float(jnp.var(c.residual_model(model).log_likelihood_ratios(theta, theta_new, model.data)))
            for name, c in [("per_datum", cv), ("first", first), *shared_cvs.items()]
        }
        for curvature in SHARED:
            np.testing.assert_allclose(variance[curvature], variance["first"], rtol=1e-3)
        assert variance["per_datum"] < 0.01 * variance["first"], variance


@pytest.mark.parametrize(
    "curvature", [pytest.param("diagonal", marks=pytest.mark.slow), pytest.param("low_rank", marks=pytest.mark.slow)]
)  # not a default path
def test_shared_curvature_decisions_follow_the_barker_probability(logistic, shared_cvs, pairs, curvature):
    model, mode, _ = logistic
    test = tallmcmc.minibatch_barker(100, control_variate=shared_cvs[curvature])
    num = 20_000
    deltas, exact = exact_barker_probabilities(model, pairs)
    frequencies = decision_frequencies(model, mode, test, pairs, num)
    standard_errors = np.sqrt(exact * (1 - exact) / num)
    assert np.all(np.abs(frequencies - exact) < 4 * standard_errors), (deltas, frequencies, exact)


def test_a_diagonal_control_variate_drives_a_proxy_hamiltonian_run(logistic, shared_cvs):
    model, mode, _ = logistic
    cv = shared_cvs["diagonal"]
    preconditioner = tallmcmc.laplace_covariance(-cv.hessian_matrix() + np.eye(5))
    result = tallmcmc.sample(
        model,
        tallmcmc.proxy_hamiltonian(cv, 0.5, 3, preconditioner=preconditioner),
        tallmcmc.minibatch_barker(100, control_variate=cv),
        initial_position=mode,
        num_samples=50,
        progress=False,
    )
    assert result.setup_data_used[cv.name] == 20_000 and cv.name.endswith("(order 2, diagonal curvature)")
    assert result.acceptance_rate > 0.2


def test_bad_curvature_arguments_are_refused_by_name(logistic):
    model, mode, _ = logistic
    build = tallmcmc.taylor_control_variate
    with pytest.raises(ValueError, match="curvature must be one of 'per_datum', 'shared', 'diagonal', 'low_rank'"):
        build(model, mode, curvature="full")
    with pytest.raises(ValueError, match="curvature='diagonal' needs order=2"):
        build(model, mode, order=1, curvature="diagonal")
    for bad in (None, 0, 2.5):
        with pytest.raises(ValueError, match="rank must be a positive integer"):
            build(model, mode, curvature="low_rank", rank=bad)
    with pytest.raises(ValueError, match="rank must be smaller than d = 5"):
        build(model, mode, curvature="low_rank", rank=5)
    with pytest.raises(ValueError, match="rank is for curvature='low_rank' only"):
        build(model, mode, curvature="diagonal", rank=2)
    with pytest.raises(ValueError, match="first-order control variate has no curvature"):
        build(model, mode, order=1).hessian_matrix()


@pytest.mark.parametrize("curvature", ["diagonal", "low_rank"])
def test_shared_curvature_away_from_a_mode_warns(curvature):
    model = tallmcmc.Model(
        lambda theta, x: 0.5 * jnp.sum((x - theta) ** 2),
        lambda theta: -jnp.sum(theta**2),
        np.zeros((50, 3), np.float32),
    )
    with pytest.warns(RuntimeWarning, match="hessian_sum"):
        tallmcmc.taylor_control_variate(
            model, jnp.zeros(3), curvature=curvature, rank=1 if curvature == "low_rank" else None
        )


@pytest.mark.parametrize("temperature", [1.0, 25.0])
def test_the_control_variate_from_find_modes_last_pass_equals_one_from_a_pass_of_its_own(temperature):
    """``sample_tall`` builds its control variate from find_mode's final pass (no pass): the same sums, untempered."""
    from tallmcmc.control_variate import control_variate_at_mode

    covariates, response = logistic_regression.simulate(20_000, 4, seed=7)
    model = logistic_regression.model(covariates, response).with_temperature(temperature)
    mode = tallmcmc.find_mode(model, jnp.zeros(4))
    reused = control_variate_at_mode(model, mode)
    own = tallmcmc.taylor_control_variate(model, mode.position)
    assert reused.data_used == 0 and own.data_used == model.num_data and reused.name == own.name
    scale = float(np.abs(np.asarray(own.hessian_sum)).max())
    np.testing.assert_allclose(reused.hessian_sum, own.hessian_sum, rtol=0, atol=1e-5 * scale)
    np.testing.assert_allclose(reused.gradient_sum, own.gradient_sum, rtol=0, atol=1e-5 * scale)
    assert reused.temperature == own.temperature == temperature
    # tempered or not, the sums are the likelihood's own: G + prior gradient·K vanishes at the mode
    prior_gradient = jax.grad(model.log_prior)(mode.position)
    np.testing.assert_allclose(
        np.asarray(reused.gradient_sum) / temperature + np.asarray(prior_gradient), 0.0, atol=1e-3 * scale / temperature
    )
    # and a proposal and test built on it accept the same moves as on the other
    position = mode.position + 0.01
    proposed = position - 0.02
    np.testing.assert_allclose(
        reused.proxy_log_ratio(position, proposed), own.proxy_log_ratio(position, proposed), rtol=1e-4, atol=1e-4
    )


def test_at_a_mode_the_prior_outweighs_no_curvature_warning_and_at_a_saddle_one():
    """At a true mode H̄ may curve upwards where the prior outweighs it (a hierarchical scale against its group
    effects); ``control_variate_at_mode`` warned "center is probably not near a mode … use find_mode" inside
    ``sample_tall``, which had just used find_mode. Here ℓᵢ(θ) = 0.75θ² − (xᵢ − θ)²/2, so H̄ = +50 at N = 100, under
    a N(0, 0.1²) prior: the posterior's Hessian 50 is positive definite."""
    from tallmcmc.control_variate import control_variate_at_mode

    data = np.linspace(-1.0, 1.0, 100).astype(np.float32)

    def log_likelihood(theta, datum):
        return 0.75 * theta[0] ** 2 - 0.5 * (datum - theta[0]) ** 2

    model = tallmcmc.Model(log_likelihood, lambda theta: -50.0 * jnp.sum(theta**2), data, position_shape=(1,))
    mode = tallmcmc.find_mode(model, jnp.array([0.3]))
    assert mode.converged and float(np.asarray(mode.likelihood_sums[1])[0, 0]) > 49
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        control_variate_at_mode(model, mode)
    with pytest.warns(RuntimeWarning, match="not negative semi-definite"):  # a saddle: no such excuse
        control_variate_at_mode(model, mode._replace(hessian=-np.eye(1)))


def test_a_custom_vjp_log_likelihood_gets_the_same_residual_proxy_through_its_backward_rule():
    """JAX cannot take a jvp of the jvp of a custom_vjp function; the proxy difference then comes from the gradient
    and a Hessian-vector product (through the backward rule), with the values the plain function gives forward."""

    @jax.custom_vjp
    def softplus(x):
        return jnp.logaddexp(x, 0.0)

    softplus.defvjp(lambda x: (jnp.logaddexp(x, 0.0), x), lambda x, cotangent: (cotangent * jax.nn.sigmoid(x),))
    rng = np.random.default_rng(1)
    data = {"x": rng.normal(size=(500, 3)).astype(np.float32), "y": (rng.random(500) < 0.5).astype(np.float32)}

    def model_with(function):
        def log_likelihood(beta, datum):
            logit = datum["x"] @ beta
            return datum["y"] * logit - function(logit)

        return tallmcmc.Model(log_likelihood, lambda beta: -0.5 * jnp.sum(beta**2), data)

    center = jnp.asarray([0.2, -0.1, 0.3], jnp.float32)
    theta, proposed = center + 0.05, center - jnp.asarray([0.02, 0.04, 0.0], jnp.float32)
    for options in (dict(order=2), dict(order=1)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            custom = tallmcmc.taylor_control_variate(model_with(softplus), center, **options)
            plain = tallmcmc.taylor_control_variate(model_with(lambda z: jnp.logaddexp(z, 0.0)), center, **options)
        got = custom.proxy_differences(theta, proposed, data)
        expected = plain.proxy_differences(theta, proposed, data)
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-4, atol=1e-6)
        residuals = custom.residual_model(model_with(softplus))
        assert np.all(np.isfinite(np.asarray(residuals.log_likelihood_ratios_at(theta, proposed, jnp.arange(50)))))
