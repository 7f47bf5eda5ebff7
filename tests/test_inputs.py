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


def test_a_model_that_branches_in_python_on_a_parameter_is_named_before_sampling():
    def log_prior(theta):
        return 0.0 if theta > 0 else -1.0  # Python control flow on a traced value: every sampler compiles log_prior

    model = tallmcmc.Model(gaussian_mean.log_likelihood, log_prior, jnp.zeros(5))
    with pytest.raises(ValueError, match="(?s)could not be traced.*jnp.where"):
        run(model)


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("nan")])
def test_temperature(temperature):
    with pytest.raises(ValueError, match="temperature"):
        gaussian_mean.model(np.zeros(5), temperature=temperature)


def test_a_shape_passed_where_temperature_goes_is_named():
    """Model's fourth positional argument is temperature: a shape there names both and the keyword to use."""
    with pytest.raises(TypeError, match=r"temperature must be .*got \(3,\).*position_shape=\.\.\."):
        tallmcmc.Model(gaussian_mean.log_likelihood, lambda t: 0.0, np.zeros(5), (3,))


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
    result = tallmcmc.sample(
        model,
        tallmcmc.random_walk(covariance=np.eye(2) * 0.01),
        tallmcmc.minibatch_barker(20),
        initial_position=start,
        num_samples=10,
        progress=False,
        num_chunks=1,
    )
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


# ---------------------------------------------------------------- the newcomer's path


def test_numpy_data_work_with_the_low_level_kernel():
    """Model converts NumPy data to JAX arrays, so build_kernel works under jit for every test."""
    import jax

    data = np.linspace(-1, 1, 200)  # float64 NumPy
    model = tallmcmc.Model(gaussian_mean.log_likelihood, lambda theta: -0.5 * theta**2, data)
    for test in (tallmcmc.minibatch_barker(batch_size=50), tallmcmc.exact_barker(), tallmcmc.austere(50, 0.05)):
        kernel = tallmcmc.build_kernel(model, tallmcmc.random_walk(0.1), test)
        state, info = jax.jit(kernel.step)(jax.random.key(0), kernel.init(jnp.float32(0.0)))
        assert np.isfinite(float(state.position)) and int(info.data_used) > 0


@pytest.mark.parametrize(
    "start, expected",
    [(jnp.zeros(3), r"shape \(\)"), ([0.0], r"shape \(\)"), (jnp.zeros((2, 1)), r"shape \(\)")],
)
def test_wrong_start_shape_names_initial_position(start, expected):
    with pytest.raises(ValueError, match=r"initial_position must be an array of " + expected):
        run(initial_position=start)


def test_wrong_start_shape_for_a_regression_model():
    from tallmcmc.examples import logistic_regression

    rng = np.random.default_rng(0)
    model = logistic_regression.model(rng.standard_normal((300, 10)), (rng.random(300) < 0.5).astype(float))
    for start in (jnp.zeros(2), 0.0, jnp.zeros((10, 1))):
        with pytest.raises(ValueError, match=r"initial_position must be an array of shape \(10,\)"):
            run(model, initial_position=start)
    run(model, initial_position=[0.0] * 10)  # a list of numbers is read as one array
    with pytest.raises(ValueError, match=r"initial_positions\[1\]"):
        run(
            model,
            initial_positions=jnp.stack([jnp.zeros(10), jnp.full(10, jnp.nan)]),
            initial_position=None,
            num_chains=2,
        )


def test_wrong_start_without_position_shape_is_a_value_error():
    """Without Model(position_shape=...), an evaluation failure is still a ValueError naming the start."""
    import jax

    rng = np.random.default_rng(1)
    data = {"x": rng.standard_normal((100, 10)), "y": (rng.random(100) < 0.5).astype(float)}

    def log_likelihood(beta, row):
        z = row["x"] @ beta
        return row["y"] * jax.nn.log_sigmoid(z) + (1 - row["y"]) * jax.nn.log_sigmoid(-z)

    model = tallmcmc.Model(log_likelihood, lambda beta: -0.5 * jnp.sum(beta**2), data)
    for start in (jnp.zeros(2), 0.0):
        with pytest.raises(ValueError, match="could not be evaluated at initial_position"):
            run(model, initial_position=start)


def test_position_shape_for_pytree_positions():
    model = tallmcmc.Model(
        lambda p, x: -0.5 * (x - p["mu"]) ** 2 * jnp.exp(-p["log_s"]) - 0.5 * p["log_s"],
        lambda p: -0.5 * (p["mu"] ** 2 + p["log_s"] ** 2),
        np.linspace(-1, 1, 50),
        position_shape={"mu": jnp.zeros(()), "log_s": jnp.zeros(())},
    )
    run(model, initial_position={"mu": 0.0, "log_s": 0.0})
    with pytest.raises(ValueError, match="initial_position must have the structure"):
        run(model, initial_position={"mu": 0.0})
    with pytest.raises(ValueError, match="position_shape"):
        tallmcmc.Model(gaussian_mean.log_likelihood, lambda t: 0.0, np.zeros(5), position_shape=(-1,))


@pytest.mark.parametrize("test_name", [pytest.param("exact_barker", marks=pytest.mark.slow), "minibatch_barker"])
def test_draws_do_not_depend_on_num_chunks(test_name):
    """Each step's key comes from (seed, chain, step), so chunking the run changes nothing."""
    test = tallmcmc.exact_barker() if test_name == "exact_barker" else tallmcmc.minibatch_barker(batch_size=20)
    runs = [
        tallmcmc.sample(
            good_model(),
            tallmcmc.random_walk(0.3),
            test,
            initial_position=jnp.float32(0.0),
            num_samples=23,
            num_chains=3,
            seed=5,
            progress=False,
            num_chunks=chunks,
        )
        for chunks in (1, 7, 23)
    ]
    for other in runs[1:]:
        np.testing.assert_array_equal(runs[0].positions, other.positions)
        np.testing.assert_array_equal(runs[0].info["data_used"], other.info["data_used"])
    assert np.unique(runs[0].positions).size > 10  # the chains moved


def test_subpackages_are_reachable_from_the_top_level():
    for name in ("acceptance", "proposals", "correction", "stein"):
        assert getattr(tallmcmc, name).__name__ == f"tallmcmc.{name}"


def _regression_rows(num=200, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num, 2)).astype(np.float32)
    y = (x @ np.array([0.5, -1.0]) + 0.3 * rng.standard_normal(num)).astype(np.float32)
    return x, y


def _regression_log_likelihood(position, row):
    mean = row["x1"] * position["beta"][0] + row["x2"] * position["beta"][1]
    sigma = jnp.exp(position["log_sigma"])
    return -0.5 * ((row["y"] - mean) / sigma) ** 2 - position["log_sigma"]


def _weak_prior(position):
    return -0.5 * jnp.sum(position["beta"] ** 2) / 100.0 - 0.5 * position["log_sigma"] ** 2


def test_position_shape_as_a_dict_of_shape_tuples():
    x, y = _regression_rows()
    data = {"x1": x[:, 0], "x2": x[:, 1], "y": y}
    model = tallmcmc.Model(
        _regression_log_likelihood, _weak_prior, data, position_shape={"beta": (2,), "log_sigma": ()}
    )
    good = {"beta": jnp.zeros(2), "log_sigma": jnp.zeros(())}
    run(model, initial_position=good, num_samples=3)
    with pytest.raises(ValueError, match=r"initial_position must have the structure and shapes \{'beta': \(2,\)"):
        run(model, initial_position={"beta": jnp.zeros(3), "log_sigma": jnp.zeros(())})
    with pytest.raises(ValueError, match="non-negative"):
        tallmcmc.Model(_regression_log_likelihood, _weak_prior, data, position_shape={"beta": (-1,)})


def test_a_pandas_data_frame_is_read_as_named_columns():
    pandas = pytest.importorskip("pandas")
    x, y = _regression_rows()
    frame = pandas.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "y": y})
    model = tallmcmc.Model(
        _regression_log_likelihood, _weak_prior, frame, position_shape={"beta": (2,), "log_sigma": ()}
    )
    assert set(model.data) == {"x1", "x2", "y"} and model.num_data == 200
    as_dict = tallmcmc.Model(_regression_log_likelihood, _weak_prior, {"x1": x[:, 0], "x2": x[:, 1], "y": y})
    start = {"beta": jnp.zeros(2), "log_sigma": jnp.zeros(())}
    np.testing.assert_allclose(model.log_density(start), as_dict.log_density(start), rtol=1e-6)
    with pytest.raises(ValueError, match="data: column 'label' holds object values"):
        tallmcmc.Model(_regression_log_likelihood, _weak_prior, frame.assign(label=["a"] * 200))


def test_an_integer_start_is_cast_to_float():
    result = run(initial_position=0, num_samples=3)  # an int, not 0.0
    assert result.positions.dtype == jnp.result_type(float)
    result = run(initial_position=jnp.zeros((), jnp.int32), num_samples=3)
    assert jnp.issubdtype(result.positions.dtype, jnp.floating)
    with pytest.raises(ValueError, match="initial_position must hold real numbers"):
        run(initial_position=jnp.zeros((), jnp.complex64))


def test_constrain_maps_the_draws_and_leaves_the_chain_state_alone():
    x, y = _regression_rows()
    data = {"x1": x[:, 0], "x2": x[:, 1], "y": y}
    model = tallmcmc.Model(
        _regression_log_likelihood,
        _weak_prior,
        data,
        constrain=lambda p: {"beta": p["beta"], "sigma": jnp.exp(p["log_sigma"])},
    )
    start = {"beta": jnp.zeros(2), "log_sigma": jnp.zeros(())}
    result = tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.05),
        tallmcmc.exact_metropolis(),
        initial_position=start,
        num_samples=20,
        num_warmup=10,
        num_chains=2,
        progress=False,
    )
    assert set(result.positions) == {"beta", "sigma"} and result.positions["sigma"].shape == (2, 20)
    np.testing.assert_allclose(
        result.positions["sigma"][:, -1], np.exp(result.final_state.position["log_sigma"]), rtol=1e-6
    )
    assert set(result.warmup_positions) == {"beta", "sigma"}
    assert set(result.to_inference_data().posterior.data_vars) == {"beta", "sigma"}
    with pytest.raises(TypeError, match="constrain must be a function"):
        tallmcmc.Model(_regression_log_likelihood, _weak_prior, data, constrain=3)


def test_a_non_scalar_log_likelihood_is_named_where_the_data_are_evaluated_elsewhere():
    """The shape check of one datum holds on the path that sample_tall's start check and a mesh take (the values
    computed by ``evaluate_data``); it once read the shape of a ``jax.ShapeDtypeStruct`` wrapped in a NumPy array,
    which is always ()."""
    import jax

    model = tallmcmc.Model(lambda t, x: jnp.stack([t, x]), lambda t: 0.0, jnp.zeros(5))
    never = lambda position, data: pytest.fail("the per-datum values were computed before the shape check")  # noqa: E731
    with pytest.raises(ValueError, match="scalar for one datum"):
        tallmcmc.check_model(
            model, jnp.float32(0.0), evaluate_data=never, datum_shape=jax.ShapeDtypeStruct((), jnp.float32)
        )


def test_the_start_checks_per_datum_program_is_compiled_once_per_log_likelihood():
    """Every ``sample``, ``find_mode`` and ``sample_tall`` of a process checks its model at the start; the check's
    per-datum program is found compiled by the next check of a model with the same log-likelihood (a notebook's
    second run), not traced, lowered and compiled again as ``jax.jit`` of a new bound method would be."""
    from tallmcmc import model as model_module

    def log_likelihood(theta, x):  # a function no other test compiled
        return -0.5 * (x - theta) ** 2

    model = tallmcmc.Model(log_likelihood, lambda theta: -0.5 * theta**2, jnp.linspace(-1.0, 1.0, 37))
    before = model_module._per_datum_values._cache_size()
    for _ in range(3):
        tallmcmc.check_model(model, jnp.float32(0.0))
    tallmcmc.check_model(model.with_temperature(2.0), jnp.float32(0.5))  # another model, the same function
    assert model_module._per_datum_values._cache_size() - before == 1


def test_a_non_finite_datum_names_the_data_array_that_holds_it():
    """The audit: NaN in a covariate reached sample_tall as "datum 4567, value nan", the array unnamed."""
    from tallmcmc.model import check_model

    covariates = np.ones((50, 2), np.float32)
    covariates[7, 1] = np.nan
    data = {"X": covariates, "y": np.zeros(50, np.float32)}

    def log_likelihood(theta, datum):
        return -0.5 * (datum["y"] - datum["X"] @ theta) ** 2

    model = tallmcmc.Model(log_likelihood, lambda theta: -0.5 * jnp.sum(theta**2), data, position_shape=(2,))
    with pytest.raises(ValueError, match=r"datum 7, value nan\); that datum's data hold NaN or inf in \['X'\]"):
        check_model(model, jnp.zeros(2))
    with pytest.raises(ValueError, match=r"in \['X'\]"):
        tallmcmc.find_mode(model, jnp.zeros(2))


def test_a_log_likelihood_with_a_while_loop_is_named_before_the_mode_search():
    import jax

    def log_likelihood(theta, datum):  # a Newton solve by while_loop: JAX has no reverse rule for it
        def step(state):
            value, count = state
            return value - (value - datum - theta) / 1.0, count + 1

        root, _ = jax.lax.while_loop(lambda state: state[1] < 3, step, (jnp.zeros_like(theta), 0))
        return -0.5 * root**2

    model = tallmcmc.Model(log_likelihood, lambda theta: -0.5 * theta**2, jnp.linspace(-1, 1, 100))
    with pytest.raises(ValueError, match=r"reverse mode \(jax\.grad\).*find_mode.*while_loop"):
        tallmcmc.find_mode(model, jnp.float32(0.0))
    with pytest.raises(ValueError, match=r"reverse mode \(jax\.grad\).*taylor_control_variate.*while_loop"):
        tallmcmc.taylor_control_variate(model, jnp.float32(0.0))
