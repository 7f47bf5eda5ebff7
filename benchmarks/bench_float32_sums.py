"""How exact are float32 sums of N per-datum terms on this device? (a lead for HMCECS's bias on a GPU)

On a GPU, XLA's float32 dot at JAX's default precision may run on the tensor cores at TF32 (10 mantissa bits);
HMCECS's Taylor proxy, and any model that writes ``x @ beta``, sums N per-datum terms through such dots. This
script measures, on whatever device JAX runs on, the relative error against float64 NumPy of

* the logits ``x @ beta`` (N × d matrix-vector product, as a vmapped ``jnp.dot(x_i, beta)`` lowers),
* the full-data gradient ``x.T @ r`` (Σᵢ rᵢ xᵢ, what a Taylor proxy or a control variate's Σ gᵢ computes),
* the full-data log ratio Σᵢ [ℓᵢ(β′) − ℓᵢ(β)] of a step of about one posterior sd (what an exact MH test sums),
  through a ``tallmcmc.Model`` (its products at full precision, ``tallmcmc.precision``) and through the same
  per-datum log-likelihood without that wrapper,

at ``precision="default"``, ``"high"`` and ``"highest"``, and ``jnp.sum(x * r[:, None], axis=0)`` (no dot), for
logistic-regression data ``logistic_regression.simulate(N, d, seed=0)``. Printed: the largest relative error per
coordinate (gradient) and the 99.9th percentile relative error (logits), and each one's time (best of 3, after a
warm call).

    python benchmarks/bench_float32_sums.py --num-data 10000000 --dimension 10
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc.examples import logistic_regression
from tallmcmc.precision import unwrapped


def best_of(function, *arguments, repeats: int = 3) -> tuple[np.ndarray, float]:
    """``function(*arguments)`` as a NumPy array, and its best wall time of ``repeats`` after one warm call."""
    jax.block_until_ready(function(*arguments))
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        value = jax.block_until_ready(function(*arguments))
        times.append(time.perf_counter() - began)
    return np.asarray(value, dtype=np.float64), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-data", type=int, default=10_000_000)
    parser.add_argument("--dimension", type=int, default=10)
    arguments = parser.parse_args()
    covariates, responses = logistic_regression.simulate(arguments.num_data, arguments.dimension, seed=0)
    covariates = np.asarray(covariates, dtype=np.float32)
    rng = np.random.default_rng(1)
    beta = (rng.standard_normal(arguments.dimension) / np.sqrt(arguments.dimension)).astype(np.float32)
    exact_logits = covariates.astype(np.float64) @ beta.astype(np.float64)
    weights = (np.asarray(responses, dtype=np.float64) - 1 / (1 + np.exp(-exact_logits))).astype(np.float32)
    exact_gradient = covariates.astype(np.float64).T @ weights.astype(np.float64)
    x, b, r = jax.device_put(covariates), jax.device_put(beta), jax.device_put(weights)
    print(
        f"device {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}, "
        f"N = {arguments.num_data:,}, d = {arguments.dimension}, default matmul precision setting: "
        f"{jax.config.jax_default_matmul_precision}"
    )
    print("| what | how | max relative error | s |")
    print("|---|---|---:|---:|")
    for precision in ("default", "high", "highest"):
        logits, seconds = best_of(jax.jit(lambda x, b, p=precision: jnp.dot(x, b, precision=p)), x, b)
        error = np.abs(logits - exact_logits) / np.maximum(np.abs(exact_logits), 1e-3)
        print(
            f"| logits x @ beta (99.9th percentile) | dot, precision={precision} | "
            f"{np.quantile(error, 0.999):.2e} | {seconds:.4f} |"
        )
    for precision in ("default", "high", "highest"):
        gradient, seconds = best_of(jax.jit(lambda x, r, p=precision: jnp.dot(x.T, r, precision=p)), x, r)
        error = np.max(np.abs(gradient - exact_gradient) / np.abs(exact_gradient))
        print(f"| gradient x.T @ r | dot, precision={precision} | {error:.2e} | {seconds:.4f} |")
    gradient, seconds = best_of(jax.jit(lambda x, r: jnp.sum(x * r[:, None], axis=0)), x, r)
    error = np.max(np.abs(gradient - exact_gradient) / np.abs(exact_gradient))
    print(f"| gradient x.T @ r | sum(x * r), no dot | {error:.2e} | {seconds:.4f} |")

    # what an MH test sums: Σᵢ [ℓᵢ(β') − ℓᵢ(β)] for a step of about a posterior sd, through a Model (its
    # log-likelihood wrapped by tallmcmc.precision) and through the same per-datum function without the wrapper
    model = logistic_regression.model(covariates, responses)
    proposed = (beta + rng.standard_normal(arguments.dimension) / np.sqrt(arguments.num_data)).astype(np.float32)
    signs = 2.0 * np.asarray(responses, dtype=np.float64) - 1.0

    def exact_log_likelihood(coefficients):
        return -np.logaddexp(0.0, -signs * (covariates.astype(np.float64) @ coefficients.astype(np.float64)))

    exact_ratio = np.sum(exact_log_likelihood(proposed) - exact_log_likelihood(beta))
    wrapped = jax.vmap(model.log_likelihood, in_axes=(None, 0))
    raw = jax.vmap(unwrapped(model.log_likelihood), in_axes=(None, 0))
    print(f"\nΣᵢ ℓᵢ(β′) − ℓᵢ(β) over the N data, a step of about one posterior sd (float64: {exact_ratio:.4f})\n")
    print("| how | value | absolute error | s |")
    print("|---|---:|---:|---:|")
    for how, per_datum in (
        ("Model (products at full float32 precision)", wrapped),
        ("the same per-datum function, unwrapped", raw),
    ):
        # the data an argument: closed over, they would be a 400 MB constant of the program at N = 10⁷
        ratio, seconds = best_of(
            jax.jit(lambda a, c, data, f=per_datum: jnp.sum(f(c, data) - f(a, data))),
            jax.device_put(beta),
            jax.device_put(proposed),
            model.data,
        )
        print(f"| {how} | {float(ratio):.4f} | {abs(float(ratio) - exact_ratio):.2e} | {seconds:.4f} |")


if __name__ == "__main__":
    main()
