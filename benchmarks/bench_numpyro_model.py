"""Per-step cost of a model built by ``tallmcmc.from_numpyro`` against the same model hand-written (issue 22).

Data: ``tallmcmc.examples.logistic_regression.simulate(N, d, seed=0)`` (xᵢ ~ N(0, I_d) float32, yᵢ 0/1). One
posterior, β ~ N(0, I), Bernoulli-logit likelihood, K = 1, written three ways:

* ``numpyro``: ``tallmcmc.from_numpyro`` of ::

      def model(X, y):
          beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]))
          with numpyro.plate("data", X.shape[0]):
              numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)

  (position ``{"beta": β}``);
* ``numpyro_factor``: the same NumPyro model with the likelihood written as
  ``numpyro.factor("y", logistic_regression.log_sigmoid((2y − 1)·Xβ))`` in the plate: the example's expression
  through ``from_numpyro``, which separates what the interop costs from what NumPyro's ``Bernoulli.log_prob``
  costs (its NaN guards are ``select``s, like ``jax.nn.log_sigmoid``'s);
* ``hand``: the README's hand-written model, ``jax.nn.log_sigmoid((2y − 1)·xᵀβ)`` per datum (position β);
* ``example``: the shipped ``tallmcmc.examples.logistic_regression.model(X, y)``, whose log-sigmoid is written so
  that XLA:CPU fuses it into the sum.

Measured, each model in the same process, the runs interleaved (model order rotated every repeat) and the best and
the median of ``--repeats`` reported:

* ``minibatch``: one compiled loop of ``--minibatch-iterations`` iterations, each drawing 100 indices and
  evaluating ``Model.log_likelihood_ratios_at`` (the per-datum log ratios of two positions, what every subsampling
  test evaluates), per iteration;
* ``full``: one compiled loop of ``--full-iterations`` evaluations of ``Model.log_likelihood_sum`` (all N), per
  evaluation;
* ``cv``: ``tallmcmc.sample`` with ``minibatch_barker(100, control_variate=taylor_control_variate(mode))`` and the
  Laplace random walk, 4 chains from the mode, sampling seconds per chain-step (compilation excluded);
* ``exact``: the same with ``exact_metropolis()``.

The mode and its Hessian are found once, on the ``example`` model, and given to every model (as ``{"beta": mode}``
to the NumPyro ones), so all chains see the same proposals; the script also reports how far their draws end up
from the ``example`` model's (0 when every accept decision agrees; float32 rounding of different expressions can
flip a rare decision).

    python benchmarks/bench_numpyro_model.py --sizes 100000 1000000
"""

from __future__ import annotations

import argparse
import statistics

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from _timing import timed

import tallmcmc
from tallmcmc.examples import logistic_regression


def numpyro_logistic(X, y):
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)


def numpyro_factor_logistic(X, y):
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
    with numpyro.plate("data", X.shape[0]):
        numpyro.factor("y", logistic_regression.log_sigmoid((2.0 * y - 1.0) * (X @ beta)))


def hand_written(X, y) -> tallmcmc.Model:
    """The README's hand-written logistic regression."""

    def log_likelihood(beta, row):
        return jax.nn.log_sigmoid((2 * row["y"] - 1) * (row["x"] @ beta))

    def log_prior(beta):
        return -0.5 * jnp.sum(beta**2)

    return tallmcmc.Model(log_likelihood, log_prior, {"x": X, "y": y}, position_shape=(X.shape[1],))


def as_position(name: str, beta):
    return {"beta": beta} if name.startswith("numpyro") else beta


def minibatch_loop(model, position, proposed, num_data: int, iterations: int, batch_size: int = 100):
    """A compiled loop: each iteration draws ``batch_size`` indices and sums their log ratios."""

    @jax.jit
    def run(key):
        def body(i, total):
            indices = jax.random.randint(jax.random.fold_in(key, i), (batch_size,), 0, num_data)
            return total + jnp.sum(model.log_likelihood_ratios_at(position, proposed, indices))

        return jax.lax.fori_loop(0, iterations, body, jnp.zeros(()))

    return lambda: jax.block_until_ready(run(jax.random.key(0)))


def full_loop(model, position, iterations: int):
    """A compiled loop of full-data log-likelihood sums at positions that change each iteration."""
    leaves, unravel = jax.flatten_util.ravel_pytree(position)

    @jax.jit
    def run(flat):
        def body(i, total):
            return total + model.log_likelihood_sum(unravel(flat + 1e-6 * i))

        return jax.lax.fori_loop(0, iterations, body, jnp.zeros(()))

    return lambda: jax.block_until_ready(run(leaves))


def sample_run(model, name, mode, cv, test_kind: str, num_samples: int, num_chains: int = 4):
    position = as_position(name, mode.position)
    mode_here = mode._replace(position=position)
    if test_kind == "cv":
        test = tallmcmc.minibatch_barker(100, control_variate=cv)
    else:
        test = tallmcmc.exact_metropolis()
    return tallmcmc.sample(
        model,
        tallmcmc.laplace_random_walk(mode_here),
        test,
        initial_position=position,
        num_samples=num_samples,
        num_chains=num_chains,
        num_chunks=1,
        progress=False,
        seed=3,
    )


def describe(values: list[float]) -> str:
    return f"best {min(values) * 1e6:9.2f} us  median {statistics.median(values) * 1e6:9.2f} us"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--dimension", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--minibatch-iterations", type=int, default=2000)
    parser.add_argument("--full-iterations", type=int, default=20)
    parser.add_argument("--cv-samples", type=int, default=2000)
    parser.add_argument("--exact-samples", type=int, default=100)
    parser.add_argument("--names", nargs="+", default=["numpyro", "numpyro_factor", "hand", "example"])
    parser.add_argument(
        "--only",
        nargs="+",
        default=["minibatch", "full", "cv", "exact"],
        choices=["minibatch", "full", "cv", "exact"],
        help="which measurements to make",
    )
    arguments = parser.parse_args()
    print(f"jax {jax.__version__}, numpyro {numpyro.__version__}, devices {jax.devices()}")

    for num_data in arguments.sizes:
        X, y = logistic_regression.simulate(num_data, arguments.dimension, seed=0)
        _, build_wall, _ = timed(lambda: tallmcmc.from_numpyro(numpyro_logistic, X, y))
        models = {
            "numpyro": tallmcmc.from_numpyro(numpyro_logistic, X, y),
            "numpyro_factor": tallmcmc.from_numpyro(numpyro_factor_logistic, X, y),
            "hand": hand_written(X, y),
            "example": logistic_regression.model(X, y),
        }
        models = {name: models[name] for name in arguments.names}
        print(
            f"\nN = {num_data:,}, d = {arguments.dimension}: from_numpyro (trace + decomposition check) "
            f"{build_wall:.2f} s"
        )
        mode = tallmcmc.find_mode(logistic_regression.model(X, y), jnp.zeros(arguments.dimension))
        proposed = mode.position + 0.01 * jnp.arange(arguments.dimension) / arguments.dimension
        cvs = {
            name: tallmcmc.taylor_control_variate(model, as_position(name, mode.position))
            for name, model in models.items()
        }

        timers = {}
        for name, model in models.items():
            position, moved = as_position(name, mode.position), as_position(name, proposed)
            timers[("minibatch", name)] = minibatch_loop(
                model, position, moved, num_data, arguments.minibatch_iterations
            )
            timers[("full", name)] = full_loop(model, position, arguments.full_iterations)
        compile_seconds = {}
        timers = {key: timer for key, timer in timers.items() if key[0] in arguments.only}
        for key, timer in timers.items():
            _, wall, _ = timed(timer)
            compile_seconds[key] = wall
        per_call = {"minibatch": arguments.minibatch_iterations, "full": arguments.full_iterations}
        results: dict = {key: [] for key in timers}
        samples = {"cv": arguments.cv_samples, "exact": arguments.exact_samples}
        samples = {kind: value for kind, value in samples.items() if kind in arguments.only}
        for kind in samples:
            for name in models:
                results[(kind, name)] = []
        draws = {}
        names = list(models)
        for repeat in range(arguments.repeats):
            order = names[repeat % len(names) :] + names[: repeat % len(names)]
            for kind in [kind for kind in ("minibatch", "full") if kind in arguments.only]:
                for name in order:
                    _, wall, _ = timed(timers[(kind, name)])
                    results[(kind, name)].append(wall / per_call[kind])
            for kind, num_samples in samples.items():
                for name in order:
                    result = sample_run(models[name], name, mode, cvs[name], kind, num_samples)
                    results[(kind, name)].append(result.sampling_seconds / num_samples / 4)
                    if repeat == 0:
                        compile_seconds[(kind, name)] = result.compile_seconds
                        leaves = jax.tree_util.tree_leaves(result.positions)
                        draws[(kind, name)] = (
                            np.asarray(leaves[0]),
                            float(result.acceptance_rate),
                            float(result.data_used.mean()),
                        )

        for kind in [kind for kind in ("minibatch", "full", "cv", "exact") if kind in arguments.only]:
            unit = {
                "minibatch": "per minibatch of 100",
                "full": "per full pass",
                "cv": "per chain-step",
                "exact": "per chain-step",
            }[kind]
            print(f"  {kind} ({unit}):")
            for name in names:
                extra = ""
                if (kind, name) in draws:
                    values, acceptance, data_used = draws[(kind, name)]
                    if "example" in names and (kind, "example") in draws:
                        difference = float(np.max(np.abs(values - draws[(kind, "example")][0])))
                        extra = f"  acc {acceptance:.3f}  points/step {data_used:,.0f}  max|draw - example| {difference:.2e}"
                print(
                    f"    {name:14s} {describe(results[(kind, name)])}  (compile {compile_seconds[(kind, name)]:.2f} s)"
                    f"{extra}"
                )
            for ours, other in (("numpyro", "hand"), ("numpyro", "example"), ("numpyro_factor", "example")):
                if ours in names and other in names:
                    best = min(results[(kind, ours)]) / min(results[(kind, other)])
                    median = statistics.median(results[(kind, ours)]) / statistics.median(results[(kind, other)])
                    print(f"    {ours} / {other}: {best:.2f}x (best)  {median:.2f}x (median)")


if __name__ == "__main__":
    main()
