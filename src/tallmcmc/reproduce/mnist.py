"""MNIST 1s vs 7s logistic regression (Seita et al. 2017, Section 6.2, Appendix C.3; Table 2, Figures 3-6).

Logistic regression of the digit (1.0 = seven, 0.0 = one) on the 784 pixels
rescaled to [0, 1], no intercept and no other preprocessing (the paper's
"I is 784 × 784"), uniform (flat, improper) prior on θ ∈ ℝ⁷⁸⁴, temperature
K = 100, every chain started at θ = 0. Data: MNIST-13k is the 13,007 MNIST
training 1s and 7s (the paper says 13,000 without naming the 7 it dropped;
``--num-train 13000`` keeps the first 13,000), MNIST-100k adds the 87,000
deformed copies of :func:`tallmcmc.datasets.load_mnist_100k` (100,007 rows);
both are tested on the 2,163 MNIST test 1s and 7s.

Table 5's settings are the defaults (``--data 13k`` | ``100k``):

* random walk with **standard deviation** 0.05 (13k) / 0.01 (100k) per
  coordinate. The paper's text says "covariance matrix 0.05I"; its code
  draws the step as σ·N(0, I), and the minibatch sizes of Table 2 and
  Figure 6 go with that reading, so ``--step-size`` is a standard deviation;
* 5000 samples × 10 trials (13k), 3000 × 5 (100k);
* MHminibatch: m = 100, growing by 100, σ = 1, Algorithm 1 as printed: the
  library's tail guard (``variance_rse``, not in the paper) is off unless
  ``--tail-guard`` is given. On this model the lᵢ are heavy-tailed (the few
  badly classified points carry most of the spread), and the guard
  multiplies the mean minibatch by about six (716 against 122 on 13k, see
  docs/REPRODUCTIONS.md);
* AustereMH(c): (m, ε) from the conservative grid search at worst-case
  error bound 0.1 (13k) / 0.2 (100k) (the paper's search gave m = 450 /
  300, ε = 0.01; the design is a CLT computation and touches no data);
* AustereMH(nc): error bound 0.05 (13k) / 0.1 (100k) at the step's own
  standardized gap, which
  needs μ and σ_l from a full pass over the data every step
  (:func:`tallmcmc.austere_adaptive`);
* MHSubLhd: first batch 100, γ = 2, p = 2, δ = 0.01, with the empirical
  C = maxᵢ |lᵢ| from a full pass every step.

Trials are chains: the T trials of a method run as T chains of one
:func:`tallmcmc.sample` call (``vmap``), each with its own random stream. A
sequential test in a ``vmap`` runs until every chain's test has stopped, so
the wall time per step is the slowest chain's; each chain's counts are its
own.

What is counted. "Minibatch size" is the test's own sequential sample (what
the paper's Table 2 counts). "All data" adds every point touched: the full
passes of AustereMH(nc) and MHSubLhd (N per step), and one start check (N)
per trial, spread over its samples.

Figure 3: test accuracy and mean test log-likelihood (untempered, per test
point) of the sampled θₜ against the cumulative number of training points
the tests used; ``--eval-points`` evenly spaced draws per trial are
evaluated (every draw when it is at least the number of samples), the
curves are interpolated on a common log-spaced grid and averaged over
trials (± one standard deviation). The right panel is MHminibatch run with a
temperature schedule: K = 100 for the first ``--anneal-after`` samples, then
K = ``--anneal-temperature`` with the step multiplied by
``--anneal-step-factor`` (the paper does not state the smaller step).
Figures 4/5 are log-log histograms of the minibatch sizes of one trial per
method; Figure 6 repeats MHminibatch at the step sizes of ``--sweep-step-sizes``.

The run time is the full-pass and large-minibatch baselines', not
MHminibatch's; the measured times are in docs/REPRODUCTIONS.md.

References
----------
.. [1] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
   minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 6.2,
   Appendix C.3, Tables 2 and 5, Figures 3-6.
.. [2] Korattikara, A., Chen, Y. and Welling, M. (2014). Austerity in MCMC
   land: cutting the Metropolis-Hastings budget. ICML 2014.
.. [3] Bardenet, R., Doucet, A. and Holmes, C. (2014). Towards scaling up
   Markov chain Monte Carlo: an adaptive subsampling approach. ICML 2014.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import math
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc import datasets
from tallmcmc.examples.logistic_regression import log_likelihood
from tallmcmc.reproduce import mnist_posterior
from tallmcmc.reproduce._common import (
    add_common_arguments,
    format_table,
    mean_pm_std,
    new_figure,
    output_folder,
    print_written,
    save_figure,
    write_summary,
)
from tallmcmc.reproduce._methods import METHODS, selected

NAME = "mnist"
HELP = "MNIST 1s vs 7s logistic regression (Section 6.2, Appendix C.3): Table 2, Figures 3-6"

#: The four tests of Table 2, in the paper's order; "austere_adaptive" (AustereMH(nc)) is not in the shared registry.
METHOD_KEYS = ("minibatch_barker", "austere_adaptive", "austere_conservative", "confidence_sampler")
DISPLAY_NAMES = {"austere_adaptive": "AustereMH(nc)", **{key: m.display_name for key, m in METHODS.items()}}

#: Table 2: average minibatch size, mean ± std over trials (10 × 5000 samples on 13k, 5 × 3000 on 100k).
PAPER_TABLE_2 = {
    "13k": {
        "minibatch_barker": (125.4, 9.2),
        "austere_adaptive": (973.8, 49.8),
        "austere_conservative": (1924.3, 52.4),
        "confidence_sampler": (10783.4, 78.9),
    },
    "100k": {
        "minibatch_barker": (216.5, 7.9),
        "austere_adaptive": (1098.3, 44.9),
        "austere_conservative": (2795.6, 364.0),
        "confidence_sampler": (14977.3, 582.0),
    },
}
#: ``--driver auto``: the methods whose trials run faster with ``sample(driver="asynchronous")`` (same draws).
#: AustereMH(nc) stays vmapped: its per-step full pass over all chains at once is one matrix product, which the
#: asynchronous driver's one-chain-at-a-time starts give up. Measurements: docs/REPRODUCTIONS.md ("Drivers").
AUTO_DRIVERS = {"confidence_sampler": "asynchronous", "austere_conservative": "asynchronous"}

#: Table 5's per-data-set settings.
PAPER_SETTINGS = {
    "13k": {
        "samples": 5000,
        "trials": 10,
        "step_size": 0.05,
        "austere_error_bound": 0.1,
        "austere_nc_error_bound": 0.05,
    },
    "100k": {
        "samples": 3000,
        "trials": 5,
        "step_size": 0.01,
        "austere_error_bound": 0.2,
        "austere_nc_error_bound": 0.1,
    },
}
#: Appendix C.3 / Figure 6: MHminibatch's mean minibatch size on 100k per step size.
PAPER_FIGURE_6 = {0.005: 116.1, 0.05: 2215.6}
PAPER_AUSTERE_DESIGN = {"13k": {"batch_size": 450, "epsilon": 0.01}, "100k": {"batch_size": 300, "epsilon": 0.01}}
CHAIN_SEED = 2017


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the experiment's options to ``parser``."""
    parser.add_argument("--data", choices=("13k", "100k"), default="13k", help="MNIST-13k or MNIST-100k")
    parser.add_argument(
        "--posterior",
        action="store_true",
        help="instead of the paper's tempered run: the untempered posterior (K = 1, prior N(0, I), MNIST-13k) of "
        "our samplers against a NumPyro NUTS reference, i.e. `tallmcmc reproduce mnist-posterior` with its "
        "defaults and this command's --features, --num-train, --num-test, --batch-size (that command has "
        "every option)",
    )
    parser.add_argument(
        "--features",
        choices=("pca50", "raw"),
        default="pca50",
        help="with --posterior: the first 50 principal components (default) or the 784 pixels",
    )
    parser.add_argument(
        "--trials",
        type=int,
        default=None,
        help="independent chains per method (default: the paper's, 10 for 13k and 5 for 100k)",
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=None,
        help="samples per trial (default: the paper's, 5000 for 13k and 3000 for 100k)",
    )
    parser.add_argument(
        "--step-size",
        type=float,
        default=None,
        help="random-walk standard deviation per coordinate (default: the paper's, 0.05 for 13k and "
        "0.01 for 100k; the paper's text calls it a covariance σI, its code a standard deviation)",
    )
    parser.add_argument("--temperature", type=float, default=100.0, help="K (paper: 100)")
    parser.add_argument(
        "--batch-size",
        type=int,
        default=100,
        help="m of MHminibatch (and its increment) and MHSubLhd's first batch (paper: 100)",
    )
    parser.add_argument(
        "--tail-guard",
        type=float,
        default=None,
        metavar="RSE",
        help="MHminibatch's tail guard variance_rse (a tallmcmc addition, not in the paper; the library's default is "
        "0.35). Default: off, Algorithm 1 as printed, as the paper ran it",
    )
    parser.add_argument(
        "--austere-error-bound",
        type=float,
        default=None,
        help="AustereMH(c)'s worst-case error bound for its (m, ε) grid search (default: the paper's, "
        "0.1 for 13k and 0.2 for 100k)",
    )
    parser.add_argument(
        "--austere-nc-error-bound",
        type=float,
        default=None,
        help="AustereMH(nc)'s error bound at each step's standardized gap (default: the paper's, 0.05 "
        "for 13k and 0.1 for 100k)",
    )
    parser.add_argument("--confidence-gamma", type=float, default=2.0, help="MHSubLhd's growth factor γ (paper: 2)")
    parser.add_argument("--confidence-p", type=float, default=2.0, help="MHSubLhd's p (paper: 2)")
    parser.add_argument("--confidence-delta", type=float, default=0.01, help="MHSubLhd's δ (paper: 0.01)")
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=METHOD_KEYS,
        default=None,
        metavar="KEY",
        help="tests to run, in this order (default: all): "
        + ", ".join(f"{key} ({DISPLAY_NAMES[key]})" for key in METHOD_KEYS),
    )
    parser.add_argument(
        "--method-trials",
        nargs="+",
        default=None,
        metavar="KEY=T",
        help="fewer (or more) trials for named methods, e.g. confidence_sampler=3 (the full-pass methods dominate "
        "the run time)",
    )
    parser.add_argument(
        "--driver",
        choices=("auto", "vmap", "asynchronous"),
        default="auto",
        help="how each method's trials (chains) run together; the draws are the same either way. auto: "
        + ", ".join(f"{key} {driver}" for key, driver in AUTO_DRIVERS.items())
        + ", the others vmap (measured fastest on MNIST-13k, docs/REPRODUCTIONS.md)",
    )
    parser.add_argument(
        "--num-train",
        type=int,
        default=None,
        help="keep only the first NUM training points (default: all; 13000 gives the paper's count for 13k)",
    )
    parser.add_argument(
        "--num-test", type=int, default=None, help="keep only the first NUM test points (default: all 2,163)"
    )
    parser.add_argument(
        "--eval-points",
        type=int,
        default=500,
        help="draws per trial whose test accuracy and log-likelihood are computed (evenly spaced)",
    )
    parser.add_argument(
        "--anneal-after",
        type=int,
        default=400,
        help="Figure 3 (right): samples at K = --temperature before the temperature drops",
    )
    parser.add_argument("--anneal-temperature", type=float, default=1.0, help="Figure 3 (right): K after the drop")
    parser.add_argument(
        "--anneal-step-factor",
        type=float,
        default=0.1,
        help="Figure 3 (right): factor on the step size after the drop (the paper does not state it)",
    )
    parser.add_argument(
        "--anneal-trials",
        type=int,
        default=None,
        help="Figure 3 (right): trials of the annealed run (default: --trials)",
    )
    parser.add_argument("--no-anneal", action="store_true", help="skip Figure 3's annealed MHminibatch run")
    parser.add_argument(
        "--sweep-step-sizes",
        type=float,
        nargs="+",
        default=[0.005, 0.01, 0.05],
        help="Figure 6: MHminibatch step sizes (one trial each, --samples samples)",
    )
    parser.add_argument("--no-sweep", action="store_true", help="skip Figure 6's step-size sweep")
    add_common_arguments(parser, NAME, seed=CHAIN_SEED, seed_help="seed of every method's chains (trial i is chain i)")


# ----------------------------------------------------------------------------------------------------------------
# model, tests, evaluation


def flat_log_prior(coefficients):
    """The uniform (improper, flat) prior of the paper: log p₀(θ) = 0."""
    return jnp.zeros((), coefficients.dtype)


def load_data(name: str, num_train: int | None, num_test: int | None, progress: bool = True):
    """Training and test arrays of MNIST-13k or MNIST-100k (float32 pixels in [0, 1], labels 1.0 = seven)."""
    if name == "13k":
        x_train, y_train = datasets.load_mnist_ones_sevens("train")
    else:
        x_train, y_train = datasets.load_mnist_100k(progress=progress)
    if num_train is not None:
        x_train, y_train = x_train[:num_train], y_train[:num_train]
    x_test, y_test = datasets.load_mnist_ones_sevens("test", num_examples=num_test)
    return x_train, y_train, x_test, y_test


def build_model(x_train, y_train, temperature: float) -> tallmcmc.Model:
    """The tempered logistic-regression posterior with the flat prior."""
    data = {"covariates": jnp.asarray(x_train, jnp.float32), "response": jnp.asarray(y_train, jnp.float32)}
    return tallmcmc.Model(log_likelihood, flat_log_prior, data, temperature, position_shape=(x_train.shape[1],))


def build_test(key: str, args: argparse.Namespace, num_data: int) -> tallmcmc.AcceptanceTest:
    """The test ``key`` at the paper's MNIST settings (Table 5)."""
    if key == "minibatch_barker":
        return tallmcmc.minibatch_barker(args.batch_size, variance_rse=args.tail_guard)
    if key == "austere_adaptive":
        return tallmcmc.austere_adaptive(args.austere_nc_error_bound)
    if key == "austere_conservative":
        return tallmcmc.austere_conservative(error_bound=args.austere_error_bound, num_data=num_data)
    if key == "confidence_sampler":
        return tallmcmc.confidence_sampler(
            args.batch_size, gamma=args.confidence_gamma, p=args.confidence_p, delta=args.confidence_delta
        )
    raise ValueError(f"unknown method {key!r}")


def evaluation_indices(num_samples: int, eval_points: int) -> np.ndarray:
    """``eval_points`` draw indices evenly spaced over ``num_samples`` (all of them when there are fewer), the last included."""
    if eval_points >= num_samples:
        return np.arange(num_samples)
    return np.unique(np.round(np.linspace(0, num_samples - 1, eval_points)).astype(int))


def held_out_metrics(positions: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, block: int = 256):
    """Accuracy and mean log-likelihood (untempered) on the test set of each θ in ``positions`` (..., d)."""
    shape = positions.shape[:-1]
    thetas = np.asarray(positions, np.float32).reshape(-1, positions.shape[-1])
    x = np.asarray(x_test, np.float32)
    y = np.asarray(y_test, np.float32)[:, None]
    accuracy = np.empty(thetas.shape[0])
    log_lik = np.empty(thetas.shape[0])
    for start in range(0, thetas.shape[0], block):
        logits = (x @ thetas[start : start + block].T).astype(np.float64)  # (n_test, block)
        accuracy[start : start + block] = np.mean((logits > 0) == (y > 0.5), axis=0)
        # log σ(z) = −log(1 + e^{−z}); label 1 scores log σ(z), label 0 log σ(−z)
        signed = np.where(y > 0.5, logits, -logits)
        log_lik[start : start + block] = np.mean(-np.logaddexp(0.0, -signed), axis=0)
    return accuracy.reshape(shape), log_lik.reshape(shape)


def curves_on_grid(cumulative: np.ndarray, values: np.ndarray, points: int = 200):
    """Per-trial step curves (value of the latest evaluated draw) on a common log grid; (grid, mean, std).

    ``cumulative`` and ``values`` are (trials, evaluated draws); the grid runs from the largest first
    x to the smallest last x over trials.
    """
    low = max(float(cumulative[:, 0].max()), 1.0)
    high = float(cumulative[:, -1].min())
    grid = np.geomspace(low, max(high, low * 1.0001), points)
    rows = []
    for x, v in zip(cumulative, values):
        index = np.clip(np.searchsorted(x, grid, side="right") - 1, 0, x.size - 1)
        rows.append(v[index])
    rows = np.array(rows)
    return grid, rows.mean(axis=0), rows.std(axis=0, ddof=1) if rows.shape[0] > 1 else np.zeros(grid.size)


def schedules_supported() -> bool:
    """Whether :func:`tallmcmc.sample` takes ``temperature_schedule`` and ``step_size_schedule``."""
    parameters = inspect.signature(tallmcmc.sample).parameters
    return "temperature_schedule" in parameters and "step_size_schedule" in parameters


def _run_posterior(args: argparse.Namespace) -> int:
    """``--posterior``: the mnist-posterior experiment with its defaults and the options both commands share."""
    parser = argparse.ArgumentParser()
    mnist_posterior.add_arguments(parser)
    posterior_args = parser.parse_args([])
    for name in ("features", "num_train", "num_test", "batch_size"):
        value = getattr(args, name, None)
        if value is not None:
            setattr(posterior_args, name, value)
    if args.out != Path("runs") / NAME:  # an --out given on the command line is honoured
        posterior_args.out = args.out
    return mnist_posterior.run(posterior_args)


def run_annealed(model, step_size, test, start, args, samples: int, trials: int):
    """MHminibatch with K = model.temperature for ``--anneal-after`` samples, then the annealed K and step.

    Uses ``sample``'s temperature and step-size schedules when it has them; otherwise two consecutive
    ``sample`` calls, the second starting where the first ended. Returns (positions (trials, samples, d),
    test minibatch sizes (trials, samples), mechanism).
    """
    after = min(args.anneal_after, samples)
    if schedules_supported():
        temperatures = np.where(np.arange(samples) < after, model.temperature, args.anneal_temperature)
        factors = np.where(np.arange(samples) < after, 1.0, args.anneal_step_factor)
        result = tallmcmc.sample(
            model,
            tallmcmc.random_walk(step_size),
            test,
            initial_position=start,
            num_samples=samples,
            num_chains=trials,
            seed=args.seed + 1,
            progress=not args.no_progress,
            temperature_schedule=temperatures,
            step_size_schedule=factors,
        )
        return result.positions, result.data_used_by_test, "schedules"
    first = tallmcmc.sample(
        model,
        tallmcmc.random_walk(step_size),
        test,
        initial_position=start,
        num_samples=after,
        num_chains=trials,
        seed=args.seed + 1,
        progress=not args.no_progress,
    )
    if after == samples:
        return first.positions, first.data_used_by_test, "two calls"
    cooled = dataclasses.replace(model, temperature=args.anneal_temperature)
    second = tallmcmc.sample(
        cooled,
        tallmcmc.random_walk(step_size * args.anneal_step_factor),
        test,
        initial_positions=jnp.asarray(first.positions[:, -1]),
        num_samples=samples - after,
        num_chains=trials,
        seed=args.seed + 2,
        progress=not args.no_progress,
    )
    positions = np.concatenate([first.positions, second.positions], axis=1)
    sizes = np.concatenate([first.data_used_by_test, second.data_used_by_test], axis=1)
    return positions, sizes, "two calls"


def parse_method_trials(entries, keys, default: int) -> dict[str, int]:
    """``KEY=T`` entries as {key: trials} for every key (``default`` where not named)."""
    trials = {key: default for key in keys}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if not sep or key not in METHOD_KEYS:
            raise ValueError(f"--method-trials: expected KEY=T with KEY one of {', '.join(METHOD_KEYS)}; got {entry!r}")
        trials[key] = int(value)
        if trials[key] < 1:
            raise ValueError(f"--method-trials: {key} needs at least one trial; got {value}")
    return trials


# ----------------------------------------------------------------------------------------------------------------
# the run


def run(args: argparse.Namespace) -> int:
    """Run the chosen tests, print Table 2 beside the paper's, write summary.json and Figures 3-6.

    With ``--posterior``, run :mod:`tallmcmc.reproduce.mnist_posterior` instead.
    """
    if args.posterior:
        return _run_posterior(args)
    began_all = time.perf_counter()
    out = output_folder(args.out)
    paper = PAPER_SETTINGS[args.data]
    samples = args.samples or paper["samples"]
    trials_default = args.trials or paper["trials"]
    step_size = args.step_size or paper["step_size"]
    if args.austere_error_bound is None:
        args.austere_error_bound = paper["austere_error_bound"]
    if args.austere_nc_error_bound is None:
        args.austere_nc_error_bound = paper["austere_nc_error_bound"]
    keys = selected(args.methods, METHOD_KEYS)
    trials_of = parse_method_trials(args.method_trials or [], keys, trials_default)

    began = time.perf_counter()
    x_train, y_train, x_test, y_test = load_data(args.data, args.num_train, args.num_test, not args.no_progress)
    num_data, dimension = x_train.shape
    print(
        f"MNIST-{args.data}: {num_data:,} training and {x_test.shape[0]:,} test points, d = {dimension} "
        f"({time.perf_counter() - began:.1f} s to load)",
        flush=True,
    )
    model = build_model(x_train, y_train, args.temperature)
    start = jnp.zeros(dimension, jnp.float32)
    proposal = tallmcmc.random_walk(step_size)
    evaluate = evaluation_indices(samples, args.eval_points)

    per_method: dict[str, dict] = {}
    curves: dict[str, dict] = {}
    histograms: dict[str, np.ndarray] = {}
    for key in keys:
        trials = trials_of[key]
        began = time.perf_counter()
        test = build_test(key, args, num_data)
        build_seconds = time.perf_counter() - began
        driver = AUTO_DRIVERS.get(key, "vmap") if args.driver == "auto" else args.driver
        result = tallmcmc.sample(
            model,
            proposal,
            test,
            initial_position=start,
            num_samples=samples,
            num_chains=trials,
            seed=args.seed,
            progress=not args.no_progress,
            driver=driver,
        )
        wall = time.perf_counter() - began
        sizes = np.asarray(result.data_used_by_test, float)  # (trials, samples)
        used = np.asarray(result.data_used, float)
        accuracy, log_lik = held_out_metrics(result.positions[:, evaluate], x_test, y_test)
        cumulative = np.cumsum(sizes, axis=1)[:, evaluate]
        cumulative_all = (np.cumsum(used, axis=1) + num_data)[:, evaluate]  # + the trial's start check
        tail = max(1, evaluate.size // 10)
        bounds = np.asarray(result.info["error_bound"], float)
        subsampled = ~np.asarray(result.info["used_full_data"]) & (bounds > 0)
        per_trial = [
            {
                "minibatch_size": float(sizes[c].mean()),
                "data_used": float(used[c].mean() + num_data / samples),
                "acceptance_rate": float(np.mean(result.accepted[c])),
                "full_data_fraction": float(np.mean(result.info["used_full_data"][c])),
                "final_accuracy": float(accuracy[c, -tail:].mean()),
                "final_test_log_likelihood": float(log_lik[c, -tail:].mean()),
                "total_test_points": float(sizes[c].sum()),
                "total_data_points": float(used[c].sum() + num_data),
                # the test's own per-step error bound (MHminibatch: Corollary 1's estimate) on subsampled steps
                "median_error_bound": float(np.median(bounds[c][subsampled[c]])) if subsampled[c].any() else 0.0,
            }
            for c in range(trials)
        ]
        design = None
        if key == "austere_conservative":
            design = test.name  # austere_conservative(m=..., epsilon=...)
        per_method[key] = {
            "display_name": DISPLAY_NAMES[key],
            "test_name": test.name,
            "trials": trials,
            **summarise(per_trial),
            "driver": result.driver,
            "seconds_per_step": result.seconds_per_step,
            "compile_seconds": result.compile_seconds,
            "wall_seconds": wall,
            "design_seconds": build_seconds,
            "austere_design": design,
            "per_trial": per_trial,
        }
        curves[key] = {
            "cumulative": cumulative,
            "cumulative_all": cumulative_all,
            "accuracy": accuracy,
            "log_likelihood": log_lik,
        }
        histograms[key] = sizes[0]
        stats = per_method[key]
        print(
            f"  {DISPLAY_NAMES[key]:>14} ({test.name}), {trials} trial(s) × {samples}: mean minibatch "
            f"{mean_pm_std([t['minibatch_size'] for t in per_trial])}, all data/step "
            f"{stats['mean_data_used']:.0f}, accept {stats['acceptance_rate']:.3f}, final accuracy "
            f"{stats['final_accuracy']:.4f}, {result.seconds_per_step * 1e3:.1f} ms/step, {wall:.0f} s",
            flush=True,
        )

    anneal = None
    if not args.no_anneal:
        began = time.perf_counter()
        trials = args.anneal_trials or trials_default
        positions, sizes, mechanism = run_annealed(
            model, step_size, build_test("minibatch_barker", args, num_data), start, args, samples, trials
        )
        accuracy, log_lik = held_out_metrics(positions[:, evaluate], x_test, y_test)
        after = min(args.anneal_after, samples)
        before = evaluate < after
        anneal = {
            "mechanism": mechanism,
            "trials": trials,
            "anneal_after": after,
            "temperature": [args.temperature, args.anneal_temperature],
            "step_size": [step_size, step_size * args.anneal_step_factor],
            "evaluated_draws": evaluate,
            "accuracy_mean": accuracy.mean(axis=0),
            "accuracy_std": accuracy.std(axis=0, ddof=1) if trials > 1 else np.zeros(evaluate.size),
            "log_likelihood_mean": log_lik.mean(axis=0),
            "mean_minibatch_size_before": float(sizes[:, :after].mean()),
            "mean_minibatch_size_after": float(sizes[:, after:].mean()) if after < samples else None,
            "accuracy_at_switch": float(accuracy[:, before].mean(axis=0)[-1]) if before.any() else None,
            "final_accuracy": float(accuracy[:, -max(1, evaluate.size // 10) :].mean()),
            "wall_seconds": time.perf_counter() - began,
        }
        print(
            f"  annealed MHminibatch ({mechanism}): K {args.temperature:g} → {args.anneal_temperature:g} after "
            f"{after} samples, step × {args.anneal_step_factor:g}: minibatch {anneal['mean_minibatch_size_before']:.1f}"
            f" → {anneal['mean_minibatch_size_after'] or float('nan'):.1f}, accuracy at the switch "
            f"{anneal['accuracy_at_switch'] or float('nan'):.4f}, final {anneal['final_accuracy']:.4f} "
            f"({anneal['wall_seconds']:.0f} s)",
            flush=True,
        )

    sweep = None
    if not args.no_sweep:
        sweep = {}
        for size in args.sweep_step_sizes:
            began = time.perf_counter()
            result = tallmcmc.sample(
                model,
                tallmcmc.random_walk(size),
                build_test("minibatch_barker", args, num_data),
                initial_position=start,
                num_samples=samples,
                num_chains=1,
                seed=args.seed + 3,
                progress=not args.no_progress,
            )
            sizes = np.asarray(result.data_used_by_test[0], float)
            sweep[size] = {
                "mean_minibatch_size": float(sizes.mean()),
                "sizes": sizes,
                "acceptance_rate": result.acceptance_rate,
                "wall_seconds": time.perf_counter() - began,
            }
            print(
                f"  MHminibatch step {size:g}: mean minibatch {sizes.mean():.1f}, accept {result.acceptance_rate:.3f}"
                + (f" (paper, 100k: {PAPER_FIGURE_6[size]})" if size in PAPER_FIGURE_6 else ""),
                flush=True,
            )

    summary = {
        "settings": {
            "data": args.data,
            "num_data": num_data,
            "num_test": int(x_test.shape[0]),
            "dimension": dimension,
            "temperature": args.temperature,
            "samples": samples,
            "trials": trials_of,
            "step_size": step_size,
            "step_size_meaning": "standard deviation per coordinate (the paper's code; its text says covariance σI)",
            "batch_size": args.batch_size,
            "tail_guard": args.tail_guard,
            "austere_error_bound": args.austere_error_bound,
            "austere_nc_error_bound": args.austere_nc_error_bound,
            "confidence_gamma": args.confidence_gamma,
            "confidence_p": args.confidence_p,
            "confidence_delta": args.confidence_delta,
            "prior": "flat (uniform)",
            "start": "theta = 0",
            "seed": args.seed,
            "evaluated_draws_per_trial": int(evaluate.size),
        },
        "methods": per_method,
        "anneal": anneal,
        "step_size_sweep": None
        if sweep is None
        else {str(size): {k: v for k, v in entry.items() if k != "sizes"} for size, entry in sweep.items()},
        "paper": {
            "table_2": PAPER_TABLE_2[args.data],
            "figure_6": PAPER_FIGURE_6,
            "austere_conservative_design": PAPER_AUSTERE_DESIGN[args.data],
            "settings": paper,
        },
        "curves": {
            key: {
                "cumulative_test_points_mean": c["cumulative"].mean(axis=0),
                "accuracy_mean": c["accuracy"].mean(axis=0),
                "test_log_likelihood_mean": c["log_likelihood"].mean(axis=0),
            }
            for key, c in curves.items()
        },
        "wall_seconds": time.perf_counter() - began_all,
    }
    print_table(per_method, args.data)
    summary["wall_seconds"] = time.perf_counter() - began_all
    path = write_summary(out, summary)
    figures = plot_figures(out, args.data, curves, histograms, anneal, sweep)
    print_written(path, *figures, seconds=time.perf_counter() - began_all)
    return 0


def summarise(per_trial: list[dict]) -> dict:
    """Means and sample standard deviations over trials of the per-trial statistics."""
    out = {}
    for name in (
        "minibatch_size",
        "data_used",
        "acceptance_rate",
        "full_data_fraction",
        "final_accuracy",
        "final_test_log_likelihood",
        "median_error_bound",
    ):
        values = np.array([t[name] for t in per_trial], float)
        out[f"mean_{name}" if name in ("minibatch_size", "data_used") else name] = float(values.mean())
        out[f"std_{name}"] = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return out


def print_table(per_method: dict[str, dict], data: str) -> None:
    """Table 2 with the paper's numbers beside ours and our all-data counts."""
    rows = []
    for key, stats in per_method.items():
        paper = PAPER_TABLE_2[data].get(key)
        trials = stats["per_trial"]
        rows.append(
            [
                stats["display_name"],
                "—" if paper is None else f"{paper[0]:.1f} ± {paper[1]:.1f}",
                mean_pm_std([t["minibatch_size"] for t in trials]),
                mean_pm_std([t["data_used"] for t in trials]),
                f"{stats['acceptance_rate']:.3f}",
                f"{stats['final_accuracy']:.4f}",
                str(stats["trials"]),
                f"{stats['seconds_per_step'] * 1e3:.1f}",
                f"{stats['wall_seconds']:.0f}",
            ]
        )
    print(
        f"\nTable 2 (MNIST-{data}): average minibatch size per step (± std over trials); 'all data' adds the "
        "full passes and start checks"
    )
    print(
        format_table(
            [
                "method",
                "paper",
                "ours (test's minibatch)",
                "ours (all data)",
                "accept",
                "accuracy",
                "trials",
                "ms/step",
                "wall s",
            ],
            rows,
        )
    )


def _log_bins(values: list[np.ndarray]) -> np.ndarray:
    largest = max(float(np.max(v)) for v in values)
    smallest = min(float(np.min(v)) for v in values)
    return np.logspace(math.log10(max(smallest, 1.0)) - 0.05, math.log10(max(largest, 2.0)) + 0.05, 40)


def plot_figures(out: Path, data: str, curves, histograms, anneal, sweep) -> list[Path]:
    """Figure 3 (accuracy and test log-likelihood against data used; the annealed run), Figure 4 or 5, Figure 6."""
    paths = []
    panels = 3 if anneal is not None else 2
    figure, axes = new_figure(1, panels, figsize=(4.6 * panels, 3.8))
    for key, c in curves.items():
        for axis, values in ((axes[0], c["accuracy"]), (axes[1], c["log_likelihood"])):
            grid, mean, std = curves_on_grid(c["cumulative"], values)
            axis.plot(grid, mean, label=DISPLAY_NAMES[key])
            axis.fill_between(grid, mean - std, mean + std, alpha=0.25)
    for axis, label in ((axes[0], "test accuracy"), (axes[1], "mean test log-likelihood")):
        axis.set_xscale("log")
        axis.set_xlabel("cumulative training points used by the test")
        axis.set_ylabel(label)
        axis.set_title(f"MNIST-{data}")
    axes[0].set_ylim(0.4, 1.0)
    axes[0].legend(fontsize=8)
    if anneal is not None:
        axis = axes[2]
        draws = np.asarray(anneal["evaluated_draws"]) + 1
        mean, std = np.asarray(anneal["accuracy_mean"]), np.asarray(anneal["accuracy_std"])
        axis.plot(draws, mean, color="C0", label="MHminibatch")
        axis.fill_between(draws, mean - std, mean + std, alpha=0.25, color="C0")
        axis.axvline(anneal["anneal_after"], ls="--", color="0.4")
        axis.set_xlabel("sample")
        axis.set_ylabel("test accuracy")
        axis.set_ylim(0.4, 1.0)
        axis.set_title(
            f"K {anneal['temperature'][0]:g} → {anneal['temperature'][1]:g} after {anneal['anneal_after']} samples"
        )
    paths.append(save_figure(figure, out, f"figure3_accuracy_{data}.png"))

    keys = list(histograms)
    if keys:
        figure, axes = new_figure(1, len(keys), figsize=(3.6 * len(keys), 3.2), sharex=True, sharey=True)
        axes = np.atleast_1d(axes)
        bins = _log_bins(list(histograms.values()))
        for axis, key in zip(axes, keys):
            axis.hist(histograms[key], bins=bins, color="C1")
            axis.set_xscale("log")
            axis.set_yscale("log")
            axis.set_title(f"{DISPLAY_NAMES[key]} (mean {histograms[key].mean():.0f})")
            axis.set_xlabel("minibatch size")
        axes[0].set_ylabel("steps")
        number = 4 if data == "100k" else 5
        paths.append(save_figure(figure, out, f"figure{number}_minibatch_sizes_{data}.png"))

    if sweep:
        sizes = sorted(sweep)
        figure, axes = new_figure(1, len(sizes), figsize=(3.6 * len(sizes), 3.2), sharex=True, sharey=True)
        axes = np.atleast_1d(axes)
        bins = _log_bins([sweep[s]["sizes"] for s in sizes])
        for axis, size in zip(axes, sizes):
            axis.hist(sweep[size]["sizes"], bins=bins, color="C2")
            axis.set_xscale("log")
            axis.set_yscale("log")
            axis.set_title(f"σ = {size:g} (mean {sweep[size]['mean_minibatch_size']:.1f})")
            axis.set_xlabel("minibatch size")
        axes[0].set_ylabel("steps")
        paths.append(save_figure(figure, out, f"figure6_step_sizes_{data}.png"))
    return paths
