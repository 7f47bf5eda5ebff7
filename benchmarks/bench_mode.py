"""find_mode (issue 22): passes, iterations, time, Newton decrement and distance to the float64 mode.

For each problem, the new default (``method="auto"``: the trust-region Newton
method up to 200 coordinates), the new ``method="L-BFGS-B"`` (compensated
sums, then the decrement check and Newton finish) and the old default
(L-BFGS-B as it was at commit 8bca721, loaded from git) run in the same process,
from zeros, in float32 (no JAX_ENABLE_X64):

* ``regression``: the report's Gaussian linear regression, N = 10⁶, X ~ N(0, 1)
  float32 (N, 5), β* = [0.5, −1, 2, 0.3, −0.7], σ = 1.5, positions
  ``{"beta": (5,), "log_sigma": ()}``, priors N(0, 10²);
* ``regression-scaled``: the same with column 2 of X multiplied by 1,000;
* ``logistic``: ``tallmcmc.examples.logistic_regression.simulate(10**6, 10)``, prior N(0, I);
* ``regression-26``: 25 coefficients + log σ, N = 5,000, columns of X scaled by
  10^U(−2, 2) (an ill-conditioned design like the report's 26-parameter one).

Columns: data passes (every full-data evaluation, the start check included),
iterations, wall seconds of the run with compilation (tracing, lowering and
XLA compilation, from ``jax.monitoring``) counted apart (with ``--repeats k``
the fastest of k runs), the process's CPU seconds of that call (all threads,
compilation included), ``converged`` as the method reports it, the Newton decrement at the result computed in float64
(posterior sd), and the distance of the result from the float64 mode in the
float64 Hessian's metric (posterior sd). The references are float64 NumPy:
closed-form gradients and Hessians, Newton's method to machine precision.

    python benchmarks/bench_mode.py                       # the four problems
    python benchmarks/bench_mode.py --only regression-26
    python benchmarks/bench_mode.py --dimensions 25 50 100 200 400 --dimension-rows 100000 --repeats 3
    python benchmarks/bench_mode.py --sums                # accuracy and cost of the full-data sums
    python benchmarks/bench_mode.py --handover --repeats 3  # L-BFGS-B with and without the hand-over to Newton

``--handover``: ``method="L-BFGS-B"`` with the hand-over to the Newton
iterations where it crawls (``mode.HANDOVER_NATS``, ``mode.CRAWL_RATIO``) and
without it (``HANDOVER_NATS = -inf``, ``HANDOVER_ITERATIONS = inf``: SciPy's own stop), from the origin, on
a NumPyro logistic GLMM (5 slopes, a half-normal scale, 200 random
intercepts: d = 206), ``logistic_regression.simulate(N, 300)`` and
``random_intercepts.simulate(N, 299)`` (N = ``--dimension-rows``); with the
gains (nats) of SciPy's iterations from the first below 0.1 nats, and the
distance between the two results in the Hessian's metric (posterior sd).
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import subprocess
import sys
import tempfile
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from _timing import CompileClock
from jax.flatten_util import ravel_pytree

import tallmcmc
from tallmcmc import mode as mode_module
from tallmcmc.examples import logistic_regression

OLD_COMMIT = "8bca721"
REPOSITORY = pathlib.Path(__file__).resolve().parent.parent

COMPILE_CLOCK = CompileClock()


def old_find_mode():
    """``find_mode`` as it was at :data:`OLD_COMMIT` (the L-BFGS-B default whose ``converged`` could lie)."""
    source = subprocess.run(
        ["git", "-C", str(REPOSITORY), "show", f"{OLD_COMMIT}:src/tallmcmc/mode.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = pathlib.Path(tempfile.mkdtemp()) / "old_mode.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_mode", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.find_mode


# ------------------------------------------------------------------------------------------ problems


class Problem:
    """A model, a start, and float64 value/gradient/Hessian of −log π over the flat position."""

    def __init__(self, name, model, start, terms, initial=None):
        self.name, self.model, self.start, self.terms = name, model, start, terms
        theta = np.zeros(ravel_pytree(start)[0].size) if initial is None else initial
        for _ in range(100):  # Newton in float64 from ``initial``, near enough for Newton's method
            _, gradient, hessian = terms(theta)
            step = np.linalg.solve(hessian, gradient)
            theta = theta - step
            if np.sqrt(gradient @ step) < 1e-10:
                break
        self.mode = theta
        self.hessian = terms(theta)[2]

    def judge(self, position) -> tuple[float, float]:
        """(float64 Newton decrement at ``position``, distance to the float64 mode), both in posterior sd."""
        theta = np.asarray(ravel_pytree(position)[0], np.float64)
        _, gradient, hessian = self.terms(theta)
        try:
            decrement = float(
                np.sqrt(
                    gradient
                    @ np.linalg.solve(
                        np.linalg.cholesky(hessian).T, np.linalg.solve(np.linalg.cholesky(hessian), gradient)
                    )
                )
            )
        except np.linalg.LinAlgError:
            decrement = float("inf")
        error = theta - self.mode
        return decrement, float(np.sqrt(error @ self.hessian @ error))


def gaussian_regression(name, covariates, truth, sigma, seed, prior_variance=100.0, dict_positions=True):
    rng = np.random.default_rng(seed)
    num_data, p = covariates.shape
    response = (covariates.astype(np.float64) @ truth + sigma * rng.standard_normal(num_data)).astype(np.float32)

    if dict_positions:

        def unpack(position):
            return position["beta"], position["log_sigma"]

        start = {"beta": jnp.zeros(p, jnp.float32), "log_sigma": jnp.float32(0.0)}
    else:

        def unpack(position):
            return position[:-1], position[-1]

        start = jnp.zeros(p + 1, jnp.float32)

    def log_likelihood(position, row):
        beta, log_sigma = unpack(position)
        return jax.scipy.stats.norm.logpdf(row["y"], row["x"] @ beta, jnp.exp(log_sigma))

    def log_prior(position):
        beta, log_sigma = unpack(position)
        return -0.5 * (jnp.sum(beta**2) + log_sigma**2) / prior_variance

    model = tallmcmc.Model(log_likelihood, log_prior, {"x": covariates, "y": response})
    x, y = covariates.astype(np.float64), response.astype(np.float64)
    gram, cross = x.T @ x, x.T @ y

    def terms(theta):  # flat order: beta, log_sigma (ravel_pytree sorts the dict's keys)
        beta, log_sigma = theta[:p], theta[p]
        residual = y - x @ beta
        squares, precision = residual @ residual, np.exp(-2 * log_sigma)
        value = (
            0.5 * squares * precision
            + num_data * (log_sigma + 0.5 * np.log(2 * np.pi))
            + 0.5 * (beta @ beta + log_sigma**2) / prior_variance
        )
        gradient = np.append(
            -(cross - gram @ beta) * precision + beta / prior_variance,
            -squares * precision + num_data + log_sigma / prior_variance,
        )
        hessian = np.zeros((p + 1, p + 1))
        hessian[:p, :p] = gram * precision + np.eye(p) / prior_variance
        hessian[:p, p] = hessian[p, :p] = 2 * (cross - gram @ beta) * precision
        hessian[p, p] = 2 * squares * precision + 1 / prior_variance
        return value, gradient, hessian

    beta = np.linalg.solve(gram, cross)  # least squares: the reference's start
    initial = np.append(beta, 0.5 * np.log(np.mean((y - x @ beta) ** 2)))
    return Problem(name, model, start, terms, initial)


def regression(scaled: bool) -> Problem:
    rng = np.random.default_rng(0)
    covariates = rng.standard_normal((1_000_000, 5), dtype=np.float32)
    truth = np.array([0.5, -1.0, 2.0, 0.3, -0.7])
    if scaled:
        covariates[:, 2] *= 1000
        truth[2] /= 1000
    return gaussian_regression("regression-scaled" if scaled else "regression", covariates, truth, 1.5, 1)


def regression_26() -> Problem:
    rng = np.random.default_rng(26)
    scales = 10.0 ** rng.uniform(-2, 2, 25)
    covariates = (rng.standard_normal((5_000, 25)) * scales).astype(np.float32)
    truth = rng.standard_normal(25) / scales
    return gaussian_regression("regression-26", covariates, truth, 1.5, 27, dict_positions=False)


def logistic(num_data: int = 1_000_000, dimension: int = 10) -> Problem:
    covariates, response = logistic_regression.simulate(num_data, dimension)
    model = logistic_regression.model(covariates, response)
    x, y = covariates.astype(np.float64), response.astype(np.float64)

    def terms(beta):
        logit = x @ beta
        probability = 1 / (1 + np.exp(-logit))
        value = np.sum(np.logaddexp(0, logit) - y * logit) + 0.5 * beta @ beta
        gradient = x.T @ (probability - y) + beta
        hessian = x.T @ (x * (probability * (1 - probability))[:, None]) + np.eye(len(beta))
        return value, gradient, hessian

    return Problem(f"logistic N={num_data:,} d={dimension}", model, jnp.zeros(dimension, jnp.float32), terms)


# ------------------------------------------------------------------------------------------ runs


REPEATS = [1]


def run(problem: Problem, label: str, function, **options) -> dict:
    """One ``find_mode`` run, repeated ``REPEATS[0]`` times: the fastest run (compilation apart), its CPU seconds."""
    best = None
    for _ in range(REPEATS[0]):
        COMPILE_CLOCK.reset()
        began, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = function(problem.model, problem.start, **options)
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        compile_seconds = COMPILE_CLOCK.seconds
        if best is None or wall - compile_seconds < best[0]:
            best = (wall - compile_seconds, compile_seconds, cpu)
    decrement, distance = problem.judge(result.position)
    return dict(
        problem=problem.name,
        method=label,
        passes=result.data_passes,
        iterations=result.iterations,
        run=best[0],
        compile=best[1],
        cpu=best[2],
        converged=result.converged,
        reported=getattr(result, "newton_decrement", float("nan")),
        decrement=decrement,
        distance=distance,
        warnings=len(caught),
    )


HEADER = (
    "| problem | method | passes | iterations | run s | compile s | CPU s | converged | λ reported | "
    "λ float64 | distance (sd) |\n|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"
)


def row(r: dict) -> str:
    return (
        f"| {r['problem']} | {r['method']} | {r['passes']:.0f} | {r['iterations']} | {r['run']:.2f} | "
        f"{r['compile']:.2f} | {r['cpu']:.2f} | {r['converged']} | {r['reported']:.2g} | {r['decrement']:.2g} | "
        f"{r['distance']:.2g} |"
    )


def compare(problems, old) -> None:
    print(HEADER)
    for make in problems:
        problem = make()
        for label, function, options in (
            ("new default (auto)", tallmcmc.find_mode, {}),
            ("new L-BFGS-B", tallmcmc.find_mode, {"method": "L-BFGS-B"}),
            (f"old default ({OLD_COMMIT})", old, {}),
        ):
            if function is None:
                continue
            print(row(run(problem, label, function, **options)), flush=True)


def dimensions(sizes, num_data) -> None:
    """Newton against L-BFGS-B on logistic regressions of growing d: where does ``auto`` switch?"""
    print(HEADER)
    for dimension in sizes:
        problem = logistic(num_data, dimension)
        for method in ("newton", "L-BFGS-B"):
            print(row(run(problem, method, tallmcmc.find_mode, method=method)), flush=True)


def glmm(num_data: int, groups: int = 200, slopes: int = 5, seed: int = 11):
    """A user's NumPyro logistic GLMM: slopes, a half-normal scale and ``groups`` random intercepts."""
    import numpyro
    import numpyro.distributions as dist

    rng = np.random.default_rng(seed)
    covariates = rng.standard_normal((num_data, slopes)).astype(np.float32)
    group = rng.integers(0, groups, num_data).astype(np.int32)
    logits = covariates @ rng.normal(0, 0.5, slopes) + rng.normal(0, 0.8, groups)[group]
    response = (rng.random(num_data) < 1 / (1 + np.exp(-logits))).astype(np.float32)

    def model(covariates, group, y=None):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([slopes]))
        tau = numpyro.sample("tau", dist.HalfNormal(1.0))
        u = numpyro.sample("u", dist.Normal(0, tau).expand([groups]))
        with numpyro.plate("data", covariates.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=covariates @ beta + u[group]), obs=y)

    start = {"beta": jnp.zeros(slopes), "tau": jnp.zeros(()), "u": jnp.zeros(groups)}
    return tallmcmc.from_numpyro(model, covariates, group, y=response), start


def handover(num_data: int) -> None:
    """L-BFGS-B with and without the hand-over to the Newton iterations where it crawls."""
    import scipy.optimize

    from tallmcmc.examples import random_intercepts

    covariates, response = logistic_regression.simulate(num_data, 300)
    labels, outcome = random_intercepts.simulate(num_data, 299, seed=3)
    problems = {
        f"NumPyro GLMM, 200 groups (d = 206), N = {num_data:,}": glmm(num_data),
        f"logistic d = 300, N = {num_data:,}": (logistic_regression.model(covariates, response), jnp.zeros(300)),
        f"random intercepts, 299 groups (d = 300), N = {num_data:,}": (
            random_intercepts.model(labels, outcome, 299),
            {"log_tau": jnp.zeros(()), "u": jnp.zeros(299)},
        ),
    }
    minimize, gains = scipy.optimize.minimize, []

    def recording(*arguments, callback=None, **options):  # SciPy's iterations' gains, then find_mode's own callback
        values: list[float] = []

        def record(intermediate_result):
            values.append(float(intermediate_result.fun))
            if callback is not None:
                callback(intermediate_result)

        try:
            return minimize(*arguments, callback=record, **options)
        finally:
            gains[:] = list(-np.diff(values))

    scipy.optimize.minimize = recording
    handover_nats, handover_iterations = mode_module.HANDOVER_NATS, mode_module.HANDOVER_ITERATIONS
    print(
        "| problem | hand-over | passes (gradient + Hessian) | run s | compile s | λ reported | "
        "gains from the first < 0.1 nats |\n|---|---|---|---:|---:|---:|---|"
    )
    try:
        for name, (model, start) in problems.items():
            results = {}
            for label, nats, iterations in (("yes", handover_nats, handover_iterations), ("no", -np.inf, np.inf)):
                mode_module.HANDOVER_NATS, mode_module.HANDOVER_ITERATIONS = nats, iterations
                best = None
                for _ in range(REPEATS[0]):
                    COMPILE_CLOCK.reset()
                    began = time.perf_counter()
                    result = tallmcmc.find_mode(model, start, method="L-BFGS-B")
                    wall = time.perf_counter() - began
                    if best is None or wall - COMPILE_CLOCK.seconds < best[0]:
                        best = (wall - COMPILE_CLOCK.seconds, COMPILE_CLOCK.seconds)
                scale = model.num_data / model.temperature
                small = [gain * scale for gain in gains]
                small = small[next((k for k, gain in enumerate(small) if gain < 0.1), len(small)) :]
                kinds = result.passes_by_kind
                print(
                    f"| {name} | {label} | {result.data_passes:.0f} ({kinds['value_and_gradient']:.0f} + "
                    f"{kinds['value_gradient_hessian']:.0f}) | {best[0]:.2f} | {best[1]:.2f} | "
                    f"{result.newton_decrement:.1e} | {', '.join(f'{gain:.2g}' for gain in small)} |",
                    flush=True,
                )
                results[label] = result
            error = np.asarray(
                ravel_pytree(results["yes"].position)[0] - ravel_pytree(results["no"].position)[0], np.float64
            )
            distance = np.sqrt(error @ np.asarray(results["no"].hessian, np.float64) @ error)
            print(f"|  | distance between the two (sd) | {distance:.2g} | | | | |", flush=True)
    finally:
        scipy.optimize.minimize = minimize
        mode_module.HANDOVER_NATS, mode_module.HANDOVER_ITERATIONS = handover_nats, handover_iterations


def sums() -> None:
    """The full-data sums: error against the exact (float64) sum of the float32 per-datum terms, and cost.

    Two data sets of N = 10⁶: the ``regression`` at its float64 mode, and 10⁶
    equal terms (``gaussian_mean`` with every datum and θ at 0.1: each term
    is the float32 number −½ log 2π, so every float32 rounding of a long sum
    goes the same way). Times: best of 5 passes (value and gradient; the
    value, gradient and Hessian pass of the default in brackets).
    """
    from jax import lax

    from tallmcmc.examples import gaussian_mean

    problem = regression(False)
    equal = gaussian_mean.model(np.full(1_000_000, 0.1, np.float32), prior_variance=None)
    cases = (
        ("regression at its mode", problem.model, problem.start, problem.mode.astype(np.float32)),
        ("10⁶ equal terms", equal, jnp.float32(0.0), np.array([0.1], np.float32)),
    )

    def best_of(function, repeats=5):
        jax.block_until_ready(function())
        times = []
        for _ in range(repeats):
            began = time.perf_counter()
            jax.block_until_ready(function())
            times.append(time.perf_counter() - began)
        return min(times)

    print("| data | summation | value error | ms |\n|---|---|---:|---:|")
    for label, model, start, theta in cases:
        unravel = ravel_pytree(start)[1]
        per_datum = jax.jit(lambda t, d: -model.per_datum_log_likelihood(unravel(t), d))
        reference = float(
            np.sum(np.asarray(per_datum(theta, model.data), np.float64)) + np.float64(-model.log_prior(unravel(theta)))
        )

        def whole(t, d):
            return -jnp.sum(model.per_datum_log_likelihood(unravel(t), d)) - model.log_prior(unravel(t))

        def running(chunk):
            def total(t, d):
                count = -(-model.num_data // chunk)

                def add(carry, index):
                    first = jnp.minimum(index * chunk, model.num_data - chunk)
                    rows = jax.tree_util.tree_map(lambda leaf: lax.dynamic_slice_in_dim(leaf, first, chunk), d)
                    terms = -model.per_datum_log_likelihood(unravel(t), rows)
                    return carry + jnp.sum(jnp.where(first + jnp.arange(chunk) >= index * chunk, terms, 0.0)), None

                return lax.scan(add, jnp.float32(0.0), jnp.arange(count))[0] - model.log_prior(unravel(t))

            return total

        for name, function in (
            ("whole array, float32 (old default)", whole),
            ("chunks of 1000, float32 running total (old batch_size=1000)", running(1000)),
            ("chunks of 4096, float32 running total", running(4096)),
        ):
            jitted = jax.jit(jax.value_and_grad(function))
            value = float(jitted(theta, model.data)[0])
            print(
                f"| {label} | {name} | {value - reference:+.4f} | "
                f"{1e3 * best_of(lambda: jitted(theta, model.data)):.1f} |"
            )
        accurate = mode_module._accurate_sum
        variants = (
            ("Neumaier over chunks, float64 on the host", lambda t: (jnp.sum(t), jnp.zeros((), t.dtype))),
            ("+ error-free extraction within chunks (the default)", accurate),
        )
        try:
            for name, summation in variants:
                mode_module._accurate_sum = summation
                for chunk in (1000, 4096):
                    evaluate = mode_module._FullData(model, unravel, chunk, None, np.dtype(np.float32))
                    value = evaluate._combine(evaluate._value_and_gradient(theta, model.data), hessian=False)[0]
                    seconds = best_of(lambda: evaluate._value_and_gradient(theta, model.data))
                    full = best_of(lambda: evaluate._full_pass(theta, model.data))
                    print(
                        f"| {label} | chunks of {chunk}, {name} | {value - reference:+.4f} | "
                        f"{1e3 * seconds:.1f} ({1e3 * full:.1f}) |"
                    )
        finally:
            mode_module._accurate_sum = accurate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=("regression", "regression-scaled", "logistic", "regression-26"))
    parser.add_argument("--no-old", action="store_true", help=f"skip the old default (needs git and {OLD_COMMIT})")
    parser.add_argument("--dimensions", nargs="+", type=int, help="logistic regressions of these d: newton vs L-BFGS-B")
    parser.add_argument("--dimension-rows", type=int, default=100_000)
    parser.add_argument("--sums", action="store_true", help="accuracy and cost of the full-data sums")
    parser.add_argument("--handover", action="store_true", help="L-BFGS-B with and without the hand-over to Newton")
    parser.add_argument("--repeats", type=int, default=1, help="runs per method; the fastest is reported")
    args = parser.parse_args()
    REPEATS[0] = args.repeats
    print(
        f"JAX {jax.__version__}, {jax.devices()[0].platform}, x64 {jax.config.jax_enable_x64}; {' '.join(sys.argv)}",
        flush=True,
    )
    if args.sums:
        sums()
        return
    if args.dimensions:
        dimensions(args.dimensions, args.dimension_rows)
        return
    if args.handover:
        handover(args.dimension_rows)
        return
    problems = {
        "regression": lambda: regression(False),
        "regression-scaled": lambda: regression(True),
        "logistic": logistic,
        "regression-26": regression_26,
    }
    chosen = [problems[name] for name in (args.only or problems)]
    compare(chosen, None if args.no_old else old_find_mode())


if __name__ == "__main__":
    main()
