"""Neural network with SGHMC ± the minibatch test (Chen et al. 2016, "Neural Network Optimization", its appendix).

The 2016 paper samples the weights of a fully connected network (input,
two sigmoid hidden layers, softmax) on HIGGS with SGHMC as the proposer of
its minibatch acceptance test, and compares SGHMC with and without the test
against AdaGrad. Here, on the shipped flight-delay data
(:func:`tallmcmc.datasets.load_flight_delays`: 261,877 training and 65,469
held-out flights, 36 features, 23.7 % delayed; HIGGS cannot be installed
offline, ``docs/datasets.md``):

* network 36 → ``--hidden`` (32, 32; the paper gives no widths) sigmoid
  units → one Bernoulli logit (the identified form of a 2-class softmax,
  whose two logits have one redundant direction); 2,273 weights, each with
  the prior N(0, ``--prior-scale``² = 1); started from W ~ N(0, 1/fan-in),
  biases 0. The paper's dropout and batch normalisation are left out: they
  make the network's output random or minibatch-dependent, so the
  likelihood is no longer a fixed function of the weights and there is no
  posterior for a test to target.
* m = 200 for every method; temperature K_i = max(1, 1000/(i+1)^0.5) for
  the samplers (``temperature_schedule``); the paper's η_i = 0.01/(i+1)^0.4.
* ``sghmc_test``: :func:`tallmcmc.sghmc` (α = 0.1, β̂ = ½ηV̂ from the
  minibatch's empirical Fisher) under :func:`tallmcmc.minibatch_barker`
  (m = 200, σ = 1, Algorithm 1 as printed, no tail guard), the proposal
  ratio taken as 0 as the paper did (``allow_inexact_proposal=True``: the
  chain does not target the posterior).
* ``sghmc``: the same SGHMC under :func:`tallmcmc.always_accept`.
* ``adagrad``: ``optax.adagrad`` at rate 0.01/(i+1)^0.4 on the mean
  per-flight loss −(1/N)(Σ log p(yᵢ|xᵢ, θ) + log p₀(θ)) (the MAP objective),
  accumulator started at 0 (Duchi et al.'s AdaGrad; optax's default 0.1
  would slow its first steps on this scale), the same minibatches.
* ``hamiltonian_test``: the exact alternative, :func:`tallmcmc.minibatch_hamiltonian`
  (L = 1 leapfrog step on minibatch gradients, momentum persistence
  ρ = 1 − α = 0.9, ε_i = √η_i: the move SGHMC discretises, made exact)
  under the same minibatch Barker test.
* ``hamiltonian_exact``: the same move under the exact Metropolis test (one
  full pass per step).

The scale of η. :func:`tallmcmc.sghmc`'s step acts on ∇log π_K, a sum over
the N data divided by K; the paper's η is a learning rate on the *mean*
per-datum log-likelihood (it is AdaGrad's rate too). We take
η_ours,i = η_i · K_i / N: the drift is then η_i times the mean gradient,
what the paper's optimiser does, and SGHMC's injected noise 2(α − β̂)η_ours
is the one whose stationary law is π_{K_i}, the target the test is run at.
The paper also rescales the gradient as AdaGrad does before SGHMC
(``--sghmc-rescale adagrad``: ``sghmc(rescale="adagrad")`` with η = η_i,
which that rescaling makes scale-free). The noise is not rescaled (as
printed), so its variance 2αη, about 0.002 per coordinate at the start,
swamps a drift that AdaGrad shrinks as 1/√t: the weights diffuse and the
held-out log-likelihood of SGHMC alone falls to −3.9 within 2 passes
(measured, ``docs/REPRODUCTIONS.md``). It is therefore not the default.

The default run (20 passes per method) took 5.5 minutes on two shared CPU
cores, most of it SGHMC's empirical-Fisher gradients.

What is counted. The x-axis of every curve is passes over the training
data: every point each method touched (SGHMC's minibatch, the test's
minibatches, the Hamiltonian move's 2L minibatches, the exact test's full
pass), from ``result.info["data_used"]``, divided by N. The evaluations
(a fixed random subset of ``--train-eval`` training rows and the whole
held-out set) are not training and are not counted; nor is a start check
(``check_starts=False``: the start is a fresh initialisation). Each method
runs until it has used ``--passes`` passes, in segments of a constant
number of steps (the compiled step is reused); the log-likelihood (mean per
flight, untempered) and accuracy of the draw at the end of each segment
are the curves. The final "averaged predictive" averages the predicted
probabilities of the last ``--average-last`` evaluated draws (for AdaGrad,
of its last iterates).

TunaMH is not run: it needs a bound cᵢM(θ, θ′) on every datum's
log-likelihood change, which a sigmoid network admits only as a product of
layer norms, so loose that its expected batch exceeds N.

References
----------
.. [1] Chen, H., Seita, D., Pan, X., Jiang, B. and Canny, J. (2016). A
   simple minibatch acceptance test for MCMC (2016 version), Section
   "Neural Network Optimization" and Appendix "Neural Network Experiment
   Details".
.. [2] Chen, T., Fox, E. and Guestrin, C. (2014). Stochastic gradient
   Hamiltonian Monte Carlo. ICML 2014.
.. [3] Duchi, J., Hazan, E. and Singer, Y. (2011). Adaptive subgradient
   methods for online learning and stochastic optimization. JMLR 12.
"""

from __future__ import annotations

import argparse
import collections
import math
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc import datasets
from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices
from tallmcmc.reproduce._common import (
    add_common_arguments,
    format_table,
    new_figure,
    output_folder,
    print_written,
    save_figure,
    write_summary,
)

NAME = "nn"
HELP = (
    "neural network (Chen et al. 2016, 'Neural Network Optimization'): SGHMC ± minibatch test vs AdaGrad vs exact "
    "minibatch HMC on flight delays"
)

METHOD_KEYS = ("sghmc_test", "sghmc", "adagrad", "hamiltonian_test", "hamiltonian_exact")
DISPLAY_NAMES = {
    "sghmc_test": "SGHMC + minibatch test",
    "sghmc": "SGHMC alone",
    "adagrad": "AdaGrad",
    "hamiltonian_test": "minibatch HMC + minibatch test",
    "hamiltonian_exact": "minibatch HMC + exact test",
}
#: Methods that run an acceptance test (acceptance rates and the test's data are plotted for them).
TESTED = ("sghmc_test", "hamiltonian_test", "hamiltonian_exact")
CHAIN_SEED = 2016

#: The paper's settings (Appendix "Neural Network Experiment Details").
PAPER_SETTINGS = {
    "data": "HIGGS, 10^6 rows, 28 features",
    "architecture": "input, two sigmoid hidden layers (widths not given), softmax; dropout and batch normalisation",
    "batch_size": 200,
    "learning_rate": "0.01/(i+1)^0.4 (SGHMC's eta and AdaGrad's step)",
    "friction": 0.1,
    "beta_hat": "1/2 eta V(theta), empirical Fisher",
    "temperature": "max(1, 1000/(i+1)^0.5)",
    "gradient_rescaling": "AdaGrad's, before SGHMC",
}
#: The paper's qualitative claims (Section "Neural Network Optimization"; it gives no numbers).
PAPER_CLAIMS = {
    "test_beats_adagrad": "SGHMC with our minibatch MH test achieves higher log likelihood than the baseline (AdaGrad)",
    "test_limited_benefit": "By comparing SGHMC with and without our minibatch MH test, we see that our MH test has "
    "limited benefit",
    "acceptance_high": "Because we decrease the step size quickly, the acceptance rate of SGHMC is already high, so "
    "there is little need to test",
}
#: docs/datasets.md: maximum-likelihood logistic regression on the default split (held-out rows).
LOGISTIC_REGRESSION = {"test_log_likelihood": -0.509, "test_accuracy": 0.765}
#: Acceptance and test-data traces: points per segment (one per block of steps).
TRACE_BINS = 10
#: Acceptance rate above which we call the test's acceptance "high" (a Barker-type test accepts a small move that
#: changes log π by Δ with probability 1/(1 + e^(−Δ)), ½ at Δ = 0: only moves that raise log π clearly go above it).
HIGH_ACCEPTANCE = 0.9

QUICK = {
    "num_train": 2000,
    "num_test": 1000,
    "train_eval": 1000,
    "hidden": [8, 8],
    "passes": 2.0,
    "evaluations": 2,
    "average_last": 2,
    "probe_steps": 0,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the experiment's options to ``parser``."""
    parser.add_argument(
        "--passes",
        type=float,
        default=20.0,
        help="passes over the training data per method (every point touched, the tests' included)",
    )
    parser.add_argument(
        "--hidden",
        type=int,
        nargs=2,
        default=[32, 32],
        metavar=("H1", "H2"),
        help="widths of the two sigmoid hidden layers (the paper gives none)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=200,
        help="m: SGHMC's and AdaGrad's minibatch, the test's first minibatch and increment, the "
        "Hamiltonian move's minibatch (paper: 200)",
    )
    parser.add_argument(
        "--learning-rate",
        type=float,
        default=0.01,
        help="η₀ of η_i = η₀/(i+1)^decay, a learning rate on the mean per-datum log-likelihood "
        "(SGHMC's and AdaGrad's; paper: 0.01)",
    )
    parser.add_argument("--decay", type=float, default=0.4, help="exponent of the step schedule (paper: 0.4)")
    parser.add_argument("--friction", type=float, default=0.1, help="SGHMC's α (paper: 0.1)")
    parser.add_argument(
        "--initial-temperature",
        type=float,
        default=1000.0,
        help="K₀ of K_i = max(1, K₀/(i+1)^temperature-decay) (paper: 1000)",
    )
    parser.add_argument("--temperature-decay", type=float, default=0.5, help="paper: 0.5")
    parser.add_argument(
        "--prior-scale",
        type=float,
        default=1.0,
        help="standard deviation of the Gaussian prior on every weight and bias",
    )
    parser.add_argument(
        "--sghmc-rescale",
        choices=("none", "adagrad"),
        default="none",
        help="none: SGHMC on ∇log π_K with η_ours = η_i·K_i/N (consistent noise); adagrad: the paper's AdaGrad "
        "rescaling of the gradient, η = η_i, noise not rescaled (it then swamps the drift, see the description)",
    )
    parser.add_argument(
        "--no-fisher",
        action="store_true",
        help="β̂ = 0 instead of the empirical Fisher estimate (cheaper; the paper estimates it)",
    )
    parser.add_argument(
        "--on-reject",
        choices=("flip", "keep", "zero"),
        default="flip",
        help="SGHMC's velocity after a rejection by the test (the paper does not say)",
    )
    parser.add_argument(
        "--tail-guard",
        type=float,
        default=None,
        metavar="RSE",
        help="the minibatch test's tail guard variance_rse (a tallmcmc addition; default off, Algorithm 1 as printed)",
    )
    parser.add_argument("--hamiltonian-steps", type=int, default=1, help="L of the minibatch Hamiltonian move")
    parser.add_argument(
        "--momentum-persistence",
        type=float,
        default=0.9,
        help="ρ of the minibatch Hamiltonian move (1 − α matches SGHMC's friction)",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=METHOD_KEYS,
        default=None,
        metavar="KEY",
        help="methods to run, in this order (default: all): "
        + ", ".join(f"{key} ({DISPLAY_NAMES[key]})" for key in METHOD_KEYS),
    )
    parser.add_argument(
        "--evaluations",
        type=int,
        default=40,
        help="evaluation points per method at 200 points per step (segments of constant length; "
        "a method that reads more per step gets proportionally fewer)",
    )
    parser.add_argument(
        "--probe-steps",
        type=int,
        default=300,
        help="after each tested run, steps at K = 1 with the step size of the step where the schedule "
        "reaches K = 1 (the test's cost there; 0: none)",
    )
    parser.add_argument(
        "--average-last",
        type=int,
        default=10,
        help="evaluated draws whose predicted probabilities are averaged for the final predictive",
    )
    parser.add_argument("--num-train", type=int, default=None, help="keep only the first NUM training rows")
    parser.add_argument("--num-test", type=int, default=None, help="keep only the first NUM held-out rows")
    parser.add_argument(
        "--train-eval",
        type=int,
        default=20000,
        help="training rows (a fixed random subset) on which the training curves are evaluated",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke-test size (for the options not given): "
        + ", ".join(f"{k.replace('_', '-')} {v}" for k, v in QUICK.items()),
    )
    add_common_arguments(parser, NAME, seed=CHAIN_SEED, seed_help="seed of the start, the chains and AdaGrad's batches")


# ----------------------------------------------------------------------------------------------------------------
# the network


def init_params(key: jax.Array, widths) -> list[dict]:
    """Layers ``[{"w": (fan_in, fan_out), "b": (fan_out,)}, ...]``, W ~ N(0, 1/fan_in), b = 0; the last is one logit."""
    params = []
    for k, (fan_in, fan_out) in zip(jax.random.split(key, len(widths) - 1), zip(widths[:-1], widths[1:])):
        params.append(
            {
                "w": jax.random.normal(k, (fan_in, fan_out), jnp.float32) / np.sqrt(fan_in),
                "b": jnp.zeros((fan_out,), jnp.float32),
            }
        )
    return params


def logits(params, x):
    """The network's logit of "delayed" for rows ``x`` (..., 36): sigmoid hidden layers, a linear output."""
    h = x
    for layer in params[:-1]:
        h = jax.nn.sigmoid(h @ layer["w"] + layer["b"])
    return (h @ params[-1]["w"] + params[-1]["b"])[..., 0]


#: :func:`logits` compiled once per shape of rows (every method's evaluations share it).
_jitted_logits = jax.jit(logits)


def log_likelihood(params, row):
    """log p(y | x, θ) of one flight ``row = {"x": (36,), "y": ()}`` (Bernoulli on the logit)."""
    z = logits(params, row["x"])
    return row["y"] * jax.nn.log_sigmoid(z) + (1.0 - row["y"]) * jax.nn.log_sigmoid(-z)


def gaussian_log_prior(scale: float):
    """log p₀(θ) of independent N(0, scale²) weights and biases (up to a constant)."""

    def log_prior(params):
        return -0.5 * sum(jnp.sum(leaf**2) for leaf in jax.tree_util.tree_leaves(params)) / scale**2

    return log_prior


def build_model(x, y, params, prior_scale: float, temperature: float) -> tallmcmc.Model:
    """The tempered posterior of the network's weights given rows ``x``, labels ``y``."""
    data = {"x": jnp.asarray(x, jnp.float32), "y": jnp.asarray(y, jnp.float32)}
    return tallmcmc.Model(log_likelihood, gaussian_log_prior(prior_scale), data, temperature, position_shape=params)


def metrics(z, y) -> tuple[float, float]:
    """(mean log-likelihood per row, accuracy) of logits ``z`` for labels ``y``."""
    log_lik = jnp.mean(y * jax.nn.log_sigmoid(z) + (1.0 - y) * jax.nn.log_sigmoid(-z))
    return float(log_lik), float(jnp.mean((z > 0) == (y > 0.5)))


def probability_metrics(p, y) -> tuple[float, float]:
    """(mean log-likelihood, accuracy) of predicted probabilities ``p`` (an average over draws) for labels ``y``."""
    p = np.clip(np.asarray(p, np.float64), 1e-12, 1 - 1e-12)
    y = np.asarray(y, np.float64)
    return float(np.mean(y * np.log(p) + (1 - y) * np.log1p(-p))), float(np.mean((p > 0.5) == (y > 0.5)))


# ----------------------------------------------------------------------------------------------------------------
# schedules


def temperatures(steps: np.ndarray, initial: float, decay: float) -> np.ndarray:
    """K_i = max(1, K₀/(i+1)^decay) at 0-based steps i."""
    return np.maximum(1.0, initial / (steps + 1.0) ** decay)


def step_factors(steps: np.ndarray, decay: float) -> np.ndarray:
    """(i+1)^−decay at 0-based steps i (η_i/η₀)."""
    return (steps + 1.0) ** (-decay)


# ----------------------------------------------------------------------------------------------------------------
# running the methods


class Recorder:
    """Evaluates the position at each segment's end and keeps the curves and the last predicted probabilities."""

    def __init__(self, x_eval, y_eval, x_test, y_test, average_last: int):
        self.y_eval, self.y_test = jnp.asarray(y_eval), jnp.asarray(y_test)
        x_eval, x_test = jnp.asarray(x_eval), jnp.asarray(x_test)
        self._logits = lambda params: (_jitted_logits(params, x_eval), _jitted_logits(params, x_test))
        self.curve = collections.defaultdict(list)
        self.last = collections.deque(maxlen=max(1, average_last))

    def record(self, params, keep: bool = True, **fields) -> None:
        """Evaluate ``params``, append the metrics and ``fields`` to the curves; ``keep`` its predictions for
        :meth:`averaged`."""
        z_eval, z_test = self._logits(params)
        train_ll, train_acc = metrics(z_eval, self.y_eval)
        test_ll, test_acc = metrics(z_test, self.y_test)
        for name, value in dict(
            train_log_likelihood=train_ll,
            train_accuracy=train_acc,
            test_log_likelihood=test_ll,
            test_accuracy=test_acc,
            **fields,
        ).items():
            self.curve[name].append(value)
        if keep:
            self.last.append((np.asarray(jax.nn.sigmoid(z_eval)), np.asarray(jax.nn.sigmoid(z_test))))

    def averaged(self) -> dict:
        train = np.mean([p for p, _ in self.last], axis=0)
        test = np.mean([p for _, p in self.last], axis=0)
        train_ll, train_acc = probability_metrics(train, self.y_eval)
        test_ll, test_acc = probability_metrics(test, self.y_test)
        spread = float(np.mean(np.std([p for _, p in self.last], axis=0)))
        return {
            "draws": len(self.last),
            "train_log_likelihood": train_ll,
            "train_accuracy": train_acc,
            "test_log_likelihood": test_ll,
            "test_accuracy": test_acc,
            "predictive_spread": spread,
        }


def sampler_for(key: str, args, num_data: int):
    """(proposal, test, step_size_factor(steps), allow_inexact_proposal) of a sampler method."""
    b, alpha = args.batch_size, args.friction
    k0 = args.initial_temperature
    base = lambda steps: step_factors(steps, args.decay)
    if args.sghmc_rescale == "adagrad":  # scale-free gradient: η = η_i as printed
        sghmc_step, sghmc_factor = args.learning_rate, base
    else:  # η_ours = η_i K_i / N: a learning rate η_i on the mean per-datum log-likelihood
        sghmc_step = args.learning_rate * k0 / num_data
        sghmc_factor = lambda steps: base(steps) * temperatures(steps, k0, args.temperature_decay) / k0
    test = tallmcmc.minibatch_barker(b, variance_rse=args.tail_guard)
    if key in ("sghmc", "sghmc_test"):
        proposal = tallmcmc.sghmc(
            sghmc_step,
            alpha,
            b,
            fisher=not args.no_fisher,
            rescale=None if args.sghmc_rescale == "none" else "adagrad",
            on_reject=args.on_reject,
        )
        return proposal, tallmcmc.always_accept() if key == "sghmc" else test, sghmc_factor, key == "sghmc_test"
    # ε_i = √η_i on the ∇log π_K scale (SGHMC's η is ε² of the leapfrog it discretises)
    eta = args.learning_rate * k0 / num_data
    factor = lambda steps: np.sqrt(base(steps) * temperatures(steps, k0, args.temperature_decay) / k0)
    proposal = tallmcmc.minibatch_hamiltonian(
        math.sqrt(eta), args.hamiltonian_steps, b, momentum_persistence=args.momentum_persistence
    )
    return proposal, test if key == "hamiltonian_test" else tallmcmc.exact_metropolis(), factor, False


def minimum_data_per_step(key: str, args, num_data: int) -> int:
    """Points a step of ``key`` touches at least (to size the segments)."""
    b, steps = args.batch_size, args.hamiltonian_steps
    return {
        "sghmc": b,
        "adagrad": b,
        "sghmc_test": 2 * b,
        "hamiltonian_test": (2 * steps + 1) * b,
        "hamiltonian_exact": 2 * steps * b + num_data,
    }[key]


def segment_length(key: str, args, num_data: int) -> int:
    """Steps per segment: ``--evaluations`` points over the run for a method reading m points per step."""
    per_step = minimum_data_per_step(key, args, num_data)
    steps_total = args.passes * num_data / per_step
    per_evaluation = args.passes * num_data / args.batch_size / max(args.evaluations, 1)
    return max(1, min(int(math.ceil(per_evaluation)), int(math.ceil(steps_total))))


def show_progress(bar, passes: float) -> None:
    """Move the progress bar to ``passes`` (at most its total)."""
    bar.n = min(passes, bar.total)
    bar.refresh()


def run_sampler(key, args, model, start, recorder, budget, progress_bar) -> dict:
    """Run sampler ``key`` in segments until it has touched ``budget`` points; returns its statistics."""
    proposal, test, factor, inexact = sampler_for(key, args, model.num_data)
    length = segment_length(key, args, model.num_data)
    k0, decay = args.initial_temperature, args.temperature_decay
    result, step, used = None, 0, 0
    accepted, by_test, full_data, compile_seconds, sampling_seconds = [], [], [], 0.0, 0.0
    caught: list[str] = []
    trace = collections.defaultdict(list)
    began = time.perf_counter()
    while used < budget:
        steps = np.arange(step, step + length)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            result = tallmcmc.sample(
                model,
                proposal,
                test,
                start if result is None else None,
                num_samples=length,
                seed=args.seed,
                progress=False,
                num_chunks=1,
                check_starts=False,
                resume=None if result is None else result.last_state,
                temperature_schedule=temperatures(steps, k0, decay),
                step_size_schedule=factor(steps),
                allow_inexact_proposal=inexact,
            )
        caught.extend(str(w.message) for w in seen if str(w.message) not in caught)
        segment_used = int(np.sum(result.data_used))
        used += segment_used
        step += length
        compile_seconds += result.compile_seconds
        sampling_seconds += result.sampling_seconds
        accepted.append(float(np.mean(result.accepted)))
        by_test.append((float(np.mean(result.data_used_by_test)), float(np.max(result.data_used_by_test))))
        full_data.append(float(np.mean(result.info["used_full_data"])))
        for block in np.array_split(np.arange(length), min(TRACE_BINS, length)):  # finer than the evaluations
            trace["steps"].append(float(step + block.mean() + 1))
            trace["acceptance"].append(float(np.mean(result.accepted[0, block])))
            trace["test_data"].append(float(np.mean(result.data_used_by_test[0, block])))
        last = jax.tree_util.tree_map(lambda leaf: leaf[0, -1], result.positions)
        recorder.record(
            last,
            passes=used / model.num_data,
            steps=step,
            temperature=float(temperatures(np.array([step - 1]), k0, decay)[0]),
            acceptance=accepted[-1],
            test_data_mean=by_test[-1][0],
            test_data_max=by_test[-1][1],
            full_data_fraction=full_data[-1],
        )
        show_progress(progress_bar, used / model.num_data)
    clipped = getattr(result.final_state.proposal_state, "noise_clipped", None)
    return {
        "steps": step,
        "segment_length": length,
        "passes": used / model.num_data,
        "wall_seconds": time.perf_counter() - began,
        "compile_seconds": compile_seconds,
        "sampling_seconds": sampling_seconds,
        "seconds_per_step": sampling_seconds / max(step, 1),
        "acceptance_rate": float(np.average(accepted)),
        "acceptance_rate_second_half": float(np.mean(accepted[len(accepted) // 2 :])),
        "mean_test_data_per_step": float(np.mean([m for m, _ in by_test])),
        "max_test_data_per_step": float(np.max([m for _, m in by_test])),
        "full_data_fraction": float(np.mean(full_data)),
        "inexact_proposal": bool(result.inexact_proposal),
        "noise_clipped_steps": None if clipped is None else int(np.max(np.asarray(clipped))),
        "proposal": result.proposal_name,
        "test": result.test_name,
        "warnings": caught,
        "trace": {name: np.asarray(values) for name, values in trace.items()},
        "at_temperature_1": None
        if key not in ("sghmc_test", "hamiltonian_test") or args.probe_steps < 1
        else probe_at_temperature_1(args, model, proposal, test, factor, result, inexact),
    }


def probe_at_temperature_1(args, model, proposal, test, factor, result, inexact) -> dict:
    """What the test costs where the schedule reaches K = 1: ``--probe-steps`` steps from the run's end at K = 1.

    The temperature schedule reaches 1 at step i₁ = K₀^(1/decay) − 1 (10⁶ − 1 for the paper's), far beyond a
    default run; the probe continues the chain (not counted in its passes or curves) at K = 1 and the step size of
    step i₁, and records the acceptance and the points the test reads per step.
    """
    first = int(math.ceil(args.initial_temperature ** (1.0 / args.temperature_decay))) - 1
    length = result.num_draws  # the run's segment length: the compiled step is reused
    steps = np.full(length, first)
    accepted, by_test, full_data = [], [], []
    began = time.perf_counter()
    state = result.last_state
    while len(accepted) * length < args.probe_steps:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probe = tallmcmc.sample(
                model,
                proposal,
                test,
                None,
                num_samples=length,
                seed=args.seed,
                progress=False,
                num_chunks=1,
                check_starts=False,
                resume=state,
                temperature_schedule=np.ones(length),
                step_size_schedule=factor(steps),
                allow_inexact_proposal=inexact,
            )
        state = probe.last_state
        accepted.append(np.asarray(probe.accepted, float).ravel())
        by_test.append(np.asarray(probe.data_used_by_test, float).ravel())
        full_data.append(np.asarray(probe.info["used_full_data"], float).ravel())
    by_test = np.concatenate(by_test)
    return {
        "temperature": 1.0,
        "schedule_step": first,
        "step_size_factor": float(factor(steps[:1])[0]),
        "steps": int(by_test.size),
        "acceptance_rate": float(np.concatenate(accepted).mean()),
        "mean_test_data_per_step": float(by_test.mean()),
        "median_test_data_per_step": float(np.median(by_test)),
        "max_test_data_per_step": float(by_test.max()),
        "full_data_fraction": float(np.concatenate(full_data).mean()),
        "wall_seconds": time.perf_counter() - began,
    }


def run_adagrad(args, model, start, recorder, budget, progress_bar) -> dict:
    """AdaGrad (optax) on the mean per-datum loss with minibatches of m drawn as the samplers draw theirs."""
    import optax

    num_data, batch = model.num_data, args.batch_size
    log_prior = model.log_prior
    data = model.data

    def loss(params, indices):
        rows = jax.tree_util.tree_map(lambda leaf: jnp.take(leaf, indices, axis=0), data)
        per_datum = jax.vmap(log_likelihood, in_axes=(None, 0))(params, rows)
        return -(jnp.mean(per_datum) + log_prior(params) / num_data)

    optimizer = optax.adagrad(
        lambda i: args.learning_rate / (i + 1.0) ** args.decay, initial_accumulator_value=0.0, eps=1e-8
    )
    length = segment_length("adagrad", args, num_data)
    key = jax.random.key(args.seed + 1)

    @jax.jit
    def segment(params, state, first):
        def one(carry, i):
            params, state = carry
            indices = permuted_indices(permutation_keys(jax.random.fold_in(key, i)), jnp.arange(batch), num_data)
            updates, state = optimizer.update(jax.grad(loss)(params, indices), state, params)
            return (optax.apply_updates(params, updates), state), None

        (params, state), _ = jax.lax.scan(one, (params, state), first + jnp.arange(length))
        return params, state

    params, state = start, optimizer.init(start)
    step, used, first_seconds = 0, 0, None
    began = time.perf_counter()
    while used < budget:
        params, state = segment(params, state, step)
        jax.block_until_ready(params)
        if first_seconds is None:
            first_seconds = time.perf_counter() - began
        step += length
        used += length * batch
        recorder.record(params, passes=used / num_data, steps=step)
        show_progress(progress_bar, used / num_data)
    return {
        "steps": step,
        "segment_length": length,
        "passes": used / num_data,
        "wall_seconds": time.perf_counter() - began,
        "first_segment_seconds_with_compile": first_seconds,
        "inexact_proposal": False,
        "optimizer": "optax.adagrad(initial_accumulator_value=0, eps=1e-8)",
    }


# ----------------------------------------------------------------------------------------------------------------
# the experiment


def settings_of(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with ``--quick``'s sizes applied and checked."""
    if args.quick:  # the smoke-test sizes, for the options left at their defaults
        defaults = argparse.ArgumentParser()
        add_arguments(defaults)
        for name, value in QUICK.items():
            if getattr(args, name) == defaults.get_default(name):
                setattr(args, name, value)
    if args.passes <= 0:
        raise ValueError(f"--passes must be > 0; got {args.passes}")
    if args.evaluations < 1:
        raise ValueError(f"--evaluations must be ≥ 1; got {args.evaluations}")
    if min(args.hidden) < 1:
        raise ValueError(f"--hidden widths must be ≥ 1; got {args.hidden}")
    return args


def interpolate_at(curve: dict, passes: float, field: str = "test_log_likelihood") -> float:
    """``field`` of a curve linearly interpolated at ``passes`` (its last value beyond its end)."""
    x = np.asarray(curve["passes"], float)
    return float(np.interp(passes, x, np.asarray(curve[field], float)))


def evaluated_by(curve: dict, passes: float) -> bool:
    """Whether the curve has an evaluation after its start at or before ``passes`` (else interpolating there joins
    the start to a first evaluation far beyond it: a segment that overran its budget)."""
    x = np.asarray(curve["passes"], float)
    return bool(np.any((x > 0) & (x <= passes * (1 + 1e-9))))


def claims_of(curves: dict, per_method: dict) -> list[dict]:
    """The paper's claims beside ours, at equal passes (the fewest passes any compared method ran)."""
    claims = []

    def at_equal_passes(keys):
        common = min(curves[k]["passes"][-1] for k in keys)
        return common, {k: interpolate_at(curves[k], common) for k in keys}

    def verdict(keys, common, holds):  # None: a method was not evaluated by the common pass count
        return bool(holds) if all(evaluated_by(curves[k], common) for k in keys) else None

    if {"sghmc_test", "sghmc", "adagrad"} <= set(curves):
        common, ll = at_equal_passes(("sghmc_test", "sghmc", "adagrad"))
        claims.append(
            {
                "claim": "test_beats_adagrad",
                "paper": PAPER_CLAIMS["test_beats_adagrad"],
                "passes": common,
                "ours": {"sghmc_test": ll["sghmc_test"], "adagrad": ll["adagrad"]},
                "holds": verdict(("sghmc_test", "adagrad"), common, ll["sghmc_test"] > ll["adagrad"]),
            }
        )
        claims.append(
            {
                "claim": "both_beat_adagrad",
                "paper": "(the issue's question) SGHMC with and without the test both above AdaGrad at equal passes",
                "passes": common,
                "ours": ll,
                "holds": verdict(ll, common, ll["sghmc_test"] > ll["adagrad"] and ll["sghmc"] > ll["adagrad"]),
            }
        )
    if {"sghmc_test", "sghmc"} <= set(curves):
        common, ll = at_equal_passes(("sghmc_test", "sghmc"))
        difference = ll["sghmc_test"] - ll["sghmc"]
        claims.append(
            {
                "claim": "test_improves_on_sghmc_alone",
                "paper": PAPER_CLAIMS["test_limited_benefit"],
                "passes": common,
                "ours": {**ll, "difference": difference},
                "holds": verdict(ll, common, difference > 0),
            }
        )
    if "sghmc_test" in per_method:
        stats = per_method["sghmc_test"]
        claims.append(
            {
                "claim": "acceptance_high",
                "paper": PAPER_CLAIMS["acceptance_high"],
                "ours": {
                    "acceptance_rate": stats["acceptance_rate"],
                    "acceptance_rate_second_half": stats["acceptance_rate_second_half"],
                    "threshold": HIGH_ACCEPTANCE,
                },
                "holds": stats["acceptance_rate"] >= HIGH_ACCEPTANCE,
            }
        )
    if {"hamiltonian_test", "sghmc_test"} <= set(curves):
        common, ll = at_equal_passes(("hamiltonian_test", "sghmc_test"))
        claims.append(
            {
                "claim": "exact_alternative_vs_sghmc_test",
                "paper": "(not in the paper) the exact minibatch "
                "Hamiltonian move under the same test against SGHMC + test at equal passes",
                "passes": common,
                "ours": ll,
                "holds": verdict(ll, common, ll["hamiltonian_test"] >= ll["sghmc_test"]),
            }
        )
    return claims


def run(args: argparse.Namespace) -> int:
    """Run the experiment; write ``summary.json`` and the figures under ``args.out``."""
    began_all = time.perf_counter()
    args = settings_of(args)
    out = output_folder(args.out)
    keys = list(args.methods or METHOD_KEYS)

    flights = datasets.load_flight_delays()
    x_train, y_train = flights.x_train, flights.y_train
    x_test, y_test = flights.x_test, flights.y_test
    if args.num_train is not None:
        x_train, y_train = x_train[: args.num_train], y_train[: args.num_train]
    if args.num_test is not None:
        x_test, y_test = x_test[: args.num_test], y_test[: args.num_test]
    num_data = int(x_train.shape[0])
    if not 1 <= args.batch_size <= num_data:
        raise ValueError(
            f"--batch-size (batch_size) must be between 1 and the N = {num_data} training rows; got {args.batch_size}"
        )
    eval_rows = np.sort(
        np.random.default_rng(args.seed).choice(num_data, min(args.train_eval, num_data), replace=False)
    )
    widths = (x_train.shape[1], *args.hidden, 1)
    start = init_params(jax.random.key(args.seed), widths)
    dimension = int(sum(leaf.size for leaf in jax.tree_util.tree_leaves(start)))
    model = build_model(x_train, y_train, start, args.prior_scale, args.initial_temperature)
    budget = int(math.ceil(args.passes * num_data))
    base_rate = float(np.mean(y_train))
    constant = {
        "probability": base_rate,
        "test_log_likelihood": probability_metrics(np.full(y_test.shape, base_rate), y_test)[0],
        "test_accuracy": float(np.mean(y_test < 0.5)),
        "train_log_likelihood": probability_metrics(np.full(eval_rows.shape, base_rate), y_train[eval_rows])[0],
        "train_accuracy": float(np.mean(y_train[eval_rows] < 0.5)),
    }
    print(
        f"network {' → '.join(map(str, widths))} ({dimension} weights), N = {num_data} training rows, "
        f"{y_test.shape[0]} held out; {args.passes:g} passes per method; constant prediction: held-out "
        f"log-likelihood {constant['test_log_likelihood']:.4f}, accuracy {constant['test_accuracy']:.4f}",
        flush=True,
    )

    from tqdm import tqdm

    per_method, curves, averaged = {}, {}, {}
    for key in keys:
        recorder = Recorder(x_train[eval_rows], y_train[eval_rows], x_test, y_test, args.average_last)
        with tqdm(
            total=args.passes,
            desc=DISPLAY_NAMES[key],
            unit="pass",
            disable=args.no_progress,
            bar_format="{l_bar}{bar}| {n:.1f}/{total:g} passes [{elapsed}<{remaining}]",
        ) as bar:
            # every curve starts at the common start, 0 passes
            if key == "adagrad":
                recorder.record(start, keep=False, passes=0.0, steps=0)
            else:
                recorder.record(
                    start,
                    keep=False,
                    passes=0.0,
                    steps=0,
                    temperature=args.initial_temperature,
                    **dict.fromkeys(("acceptance", "test_data_mean", "test_data_max", "full_data_fraction"), math.nan),
                )
            if key == "adagrad":
                stats = run_adagrad(args, model, start, recorder, budget, bar)
            else:
                stats = run_sampler(key, args, model, start, recorder, budget, bar)
        curve = {name: np.asarray(values) for name, values in recorder.curve.items()}
        stats["display_name"] = DISPLAY_NAMES[key]
        stats["final"] = {
            name: float(curve[name][-1])
            for name in ("train_log_likelihood", "test_log_likelihood", "train_accuracy", "test_accuracy")
        }
        stats["averaged_predictive"] = averaged[key] = recorder.averaged()
        per_method[key], curves[key] = stats, curve
        print(
            f"  {DISPLAY_NAMES[key]}: {stats['steps']} steps, {stats['passes']:.2f} passes, held-out "
            f"log-likelihood {stats['final']['test_log_likelihood']:.4f} (averaged predictive "
            f"{averaged[key]['test_log_likelihood']:.4f}), accuracy {stats['final']['test_accuracy']:.4f}"
            + (
                f", acceptance {stats['acceptance_rate']:.3f}, test's data per step "
                f"{stats['mean_test_data_per_step']:.0f} (max {stats['max_test_data_per_step']:.0f})"
                if key in TESTED
                else ""
            )
            + f" ({stats['wall_seconds']:.0f} s)",
            flush=True,
        )
        probe = stats.get("at_temperature_1")
        if probe:
            print(
                f"    at K = 1 (schedule step {probe['schedule_step']}, {probe['steps']} steps from the end): "
                f"acceptance {probe['acceptance_rate']:.3f}, test's data per step {probe['mean_test_data_per_step']:.0f}"
                f" (median {probe['median_test_data_per_step']:.0f}, max {probe['max_test_data_per_step']:.0f}), "
                f"all N on {probe['full_data_fraction']:.1%} of steps",
                flush=True,
            )
        for message in stats.get("warnings", []):
            print(f"    warning: {message[:300]}", flush=True)

    claims = claims_of(curves, per_method)
    print_tables(per_method, claims)
    summary = {
        "settings": {
            "data": "flight delays (tallmcmc.datasets.load_flight_delays), standing in for HIGGS",
            "num_train": num_data,
            "num_test": int(y_test.shape[0]),
            "train_eval_rows": int(eval_rows.size),
            "widths": list(widths),
            "dimension": dimension,
            "output": "one Bernoulli logit (2-class softmax)",
            "prior": f"N(0, {args.prior_scale:g}^2) on every weight and bias",
            "start": "W ~ N(0, 1/fan_in), b = 0",
            "left_out": ["dropout", "batch normalisation"],
            "batch_size": args.batch_size,
            "learning_rate": args.learning_rate,
            "decay": args.decay,
            "friction": args.friction,
            "initial_temperature": args.initial_temperature,
            "temperature_decay": args.temperature_decay,
            "sghmc_rescale": args.sghmc_rescale,
            "fisher": not args.no_fisher,
            "on_reject": args.on_reject,
            "sghmc_step_scale": (
                "eta_ours = eta_i (AdaGrad-rescaled gradient)"
                if args.sghmc_rescale == "adagrad"
                else "eta_ours = eta_i * K_i / N (learning rate on the mean per-datum log-likelihood)"
            ),
            "hamiltonian_step": "epsilon_i = sqrt(eta_i * K_i / N)",
            "hamiltonian_steps": args.hamiltonian_steps,
            "momentum_persistence": args.momentum_persistence,
            "tail_guard": args.tail_guard,
            "passes": args.passes,
            "evaluations": args.evaluations,
            "average_last": args.average_last,
            "seed": args.seed,
            "quick": bool(args.quick),
            "passes_count": "every point touched by the method's steps (tests included); evaluations and start "
            "checks not counted",
        },
        "paper": {"settings": PAPER_SETTINGS, "claims": PAPER_CLAIMS},
        "references": {"constant_prediction": constant, "logistic_regression": LOGISTIC_REGRESSION},
        "methods": per_method,
        "claims": claims,
        "curves": curves,
        "wall_seconds": time.perf_counter() - began_all,
    }
    figures = plot_figures(out, curves, per_method, constant, summary["settings"])
    summary["wall_seconds"] = time.perf_counter() - began_all
    path = write_summary(out, summary)
    print_written(path, *figures, seconds=summary["wall_seconds"])
    return 0


def print_tables(per_method: dict, claims: list[dict]) -> None:
    """Per-method final figures, then the paper's claims beside ours."""
    rows = []
    for key, stats in per_method.items():
        final, avg = stats["final"], stats["averaged_predictive"]
        rows.append(
            [
                stats["display_name"],
                stats["steps"],
                f"{stats['passes']:.2f}",
                f"{final['train_log_likelihood']:.4f}",
                f"{final['test_log_likelihood']:.4f}",
                f"{avg['test_log_likelihood']:.4f}",
                f"{final['test_accuracy']:.4f}",
                f"{stats['acceptance_rate']:.3f}" if key in TESTED else "—",
                f"{stats['mean_test_data_per_step']:.0f}" if key in TESTED else "—",
                f"{stats['wall_seconds']:.0f}",
            ]
        )
    print(
        "\nFinal draw (held-out log-likelihood per flight, accuracy); 'averaged' = predictive averaged over the "
        "last evaluated draws"
    )
    print(
        format_table(
            [
                "method",
                "steps",
                "passes",
                "train ll",
                "held-out ll",
                "averaged",
                "accuracy",
                "accept",
                "test data/step",
                "wall s",
            ],
            rows,
        )
    )
    print("\nThe paper's claims beside ours (held-out log-likelihood at equal passes)")
    for claim in claims:
        ours = ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in claim["ours"].items())
        verdict = {True: "holds", False: "does not hold", None: "not comparable"}[claim["holds"]]
        print(
            f"  [{verdict}] {claim['claim']}"
            + (f" at {claim['passes']:.2f} passes" if "passes" in claim else "")
            + f": {ours}"
        )


def plot_figures(out: Path, curves: dict, per_method: dict, constant: dict, settings: dict) -> list[Path]:
    """Log-likelihood and accuracy against passes; the tests' acceptance and data per step against steps."""
    paths = []
    num_data = settings["num_train"]
    for kind, label, lines in (
        (
            "log_likelihood",
            "log-likelihood per flight",
            {
                "test": [
                    ("constant prediction", constant["test_log_likelihood"]),
                    ("logistic regression (docs/datasets.md)", LOGISTIC_REGRESSION["test_log_likelihood"]),
                ],
                "train": [("constant prediction", constant["train_log_likelihood"])],
            },
        ),
        (
            "accuracy",
            "accuracy",
            {
                "test": [("always on time", constant["test_accuracy"])],
                "train": [("always on time", constant["train_accuracy"])],
            },
        ),
    ):
        figure, axes = new_figure(1, 2, figsize=(11, 4))
        for axis, which, title in ((axes[0], "train", "training rows (fixed subset)"), (axes[1], "test", "held out")):
            for index, (key, curve) in enumerate(curves.items()):
                final = curve[f"{which}_{kind}"][-1]
                axis.plot(
                    curve["passes"],
                    curve[f"{which}_{kind}"],
                    marker=".",
                    ms=3,
                    color=f"C{index}",
                    label=f"{DISPLAY_NAMES[key]} ({final:.4f} at the end)",
                )
            for style, (name, value) in zip(("--", ":"), lines[which]):
                axis.axhline(value, ls=style, color="0.4", lw=1, label=name)
            axis.set_xlabel("passes over the training data (every point touched)")
            axis.set_ylabel(label)
            axis.set_title(title)
            values = np.concatenate([np.asarray(c[f"{which}_{kind}"], float) for c in curves.values()])
            reference = [v for _, v in lines[which]]
            low = min(np.nanpercentile(values, 10) if values.size else min(reference), min(reference))
            high = max(np.nanmax(values) if values.size else max(reference), max(reference))
            pad = max(0.1 * (high - low), 0.005)
            axis.set_ylim(low - pad, high + pad)
        axes[1].legend(fontsize=7)
        paths.append(save_figure(figure, out, f"nn_{kind}.png"))

    tested = [key for key in TESTED if key in per_method]
    figure, axes = new_figure(1, 2, figsize=(11, 4))
    last_step = 1.0
    for key in tested:
        color = f"C{list(curves).index(key)}"
        trace = per_method[key]["trace"]
        last_step = max(last_step, float(trace["steps"][-1]))
        axes[0].plot(trace["steps"], trace["acceptance"], color=color, lw=1, label=DISPLAY_NAMES[key])
        axes[1].plot(trace["steps"], trace["test_data"], color=color, lw=1, label=DISPLAY_NAMES[key])
        probe = per_method[key].get("at_temperature_1")
        if probe:
            last_step = max(last_step, probe["schedule_step"] + 1.0)
            axes[0].plot(
                [probe["schedule_step"] + 1],
                [probe["acceptance_rate"]],
                marker="*",
                ms=10,
                color=color,
                ls="none",
                label=f"{DISPLAY_NAMES[key]}, K = 1 probe",
            )
            axes[1].plot(
                [probe["schedule_step"] + 1],
                [probe["mean_test_data_per_step"]],
                marker="*",
                ms=10,
                color=color,
                ls="none",
                label=f"K = 1 probe (mean; max {probe['max_test_data_per_step']:.0f})",
            )
    if tested:
        temperature_axis = axes[0].twinx()
        grid = np.geomspace(1, last_step, 200)
        temperature_axis.plot(
            grid,
            temperatures(grid - 1, settings["initial_temperature"], settings["temperature_decay"]),
            color="0.5",
            ls="--",
        )
        temperature_axis.set_ylabel("temperature K_i (dashed)")
        temperature_axis.set_yscale("log")
    axes[0].set_xscale("log")
    axes[0].set_ylim(0, 1.02)
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("acceptance rate (blocks of steps)")
    axes[0].set_title("acceptance over time")
    axes[0].legend(fontsize=7, loc="lower left")
    axes[1].axhline(num_data, ls="--", color="0.4", lw=1, label="N")
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("points read by the test per step")
    axes[1].set_title("the tests' data per step (block means)")
    axes[1].legend(fontsize=7)
    paths.append(save_figure(figure, out, "nn_acceptance.png"))
    return paths
