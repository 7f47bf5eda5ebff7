"""MNIST 1s vs 7s, the untempered posterior (beyond the paper): our samplers against a NumPyro NUTS reference.

The paper's MNIST runs (``tallmcmc reproduce mnist``) use K = 100 and a flat,
improper prior: a tempered search, not posterior inference. Here the target
is the Bayesian logistic regression posterior itself: K = 1, prior
β ~ N(0, I), MNIST-13k (the 13,007 training 1s and 7s; label 1.0 = seven),
tested on the 2,163 MNIST test 1s and 7s.

Features (``--features``):

* ``pca50``: the training pixels are centred by their training mean and
  projected on the first ``--components`` (50) principal components of the
  training set (NumPy SVD); each component is divided by its training
  standard deviation (so the N(0, I) prior is on the same scale for every
  component), and a column of ones (intercept) is prepended: d = 51. The test
  set is mapped with the training mean, components and scales.
* ``raw``: the 784 pixels in [0, 1], no intercept and no preprocessing (the
  paper's design matrix); 132 pixels are 0 in every training image and are
  identified by the prior alone.

Reference: NumPyro NUTS (``pip install -e '.[bench]'``), 4 chains,
``--nuts-warmup`` warm-up and ``--nuts-draws`` draws each, split r̂ and bulk
ESS reported, draws cached as ``.npz`` under ``--cache-dir`` (default
``tallmcmc.datasets.cache_dir()/mnist_posterior``) keyed by the features, N,
d, seed and lengths. ``--nuts-mass adapt`` (NumPyro's default: diagonal
mass matrix adapted in warm-up, chains started by ``init_to_uniform``) is
the default for ``pca50``; ``--nuts-mass laplace`` fixes the dense inverse
mass matrix to our Laplace covariance H⁻¹ and starts at the mode, the
default for ``raw``, where a diagonal mass matrix needs ~2⁶ leapfrog steps a
draw (condition number of H⁻¹ ≈ 10³) and a dense one cannot be estimated from
the warm-up draws in 784 dimensions. NUTS is exact whatever the mass matrix;
the preconditioner only changes its speed.

Our samplers, all started at the mode, no warm-up, ``--chains`` chains
(``vmap``), b = ``--batch-size``:

* ``exact-rw``: exact Barker test + Laplace random walk (2.38/√d · L ξ);
* ``exact-hmc``: exact Barker test + proxy HMC (ε 0.5, L 3 by default:
  ``--hmc-step-size``, ``--hmc-steps``; Laplace preconditioner);
* ``naive-rw``: minibatch Barker without control variate (tail guard on,
  ``variance_rse = 0.35``) + Laplace random walk;
* ``naive-rw-noguard``: the same with ``variance_rse=None`` (Algorithm 1 as
  printed: the earlier measurement's setting);
* ``cv-rw``, ``cv-t5``, ``cv-hmc``: minibatch Barker on the residuals of the
  second-order (per-datum curvature) Taylor control variate at the mode, with
  the Laplace random walk, the Laplace independence Student-t₅ proposal and
  proxy HMC;
* ``cv-rw-noguard``: ``cv-rw`` with ``variance_rse=None`` (not in the default
  list of methods): what the residual spread alone would ask for.

Reported per method: data per step (points touched by each chain-step;
"all data/step" adds the one-off passes: mode search, control variate,
start check, and for NUTS its warm-up, N per leapfrog step), acceptance,
min and median bulk ESS over coordinates, ESS/s (min bulk ESS over the
sampling seconds, compilation excluded), the posterior predictive's test
accuracy and log-loss (p̄(x) = mean over draws of σ(xᵀβ), at most
``--predictive-draws`` draws), and max/median over coordinates of
|mean − reference mean| / reference sd, of the same over the MCSE
(√(MCSE² + MCSE²_ref), MCSE = sd/√ESS_mean), and the range of
sd / reference sd.

Control-variate residual spread: ``N²·Var(rᵢ)`` over all N residuals for
``--residual-pairs`` pairs (θ, θ′) at the posterior scale: θ from the
reference draws (the Laplace approximation without a reference) and θ′ a
Laplace random-walk step from θ ("RW") or an independent reference draw
("indep."), for the per-datum second-order control variate and the
first-order one (which has the spread of every shared-curvature option). The
minibatch Barker test needs N²·Var(rᵢ)/b ≲ σ² = 1, so N²·Var(rᵢ) is about
the minibatch it ends with; the second-order residual is O(‖u‖²‖δ‖) with
‖u‖², ‖δ‖² ~ d/N, so this spread grows like d³/N.

References
----------
.. [1] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
   minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 6.2
   and Appendix C.3 (the data and the model, tempered there).
.. [2] Hoffman, M. D. and Gelman, A. (2014). The No-U-Turn sampler. JMLR 15
   (the reference, as implemented by NumPyro: Phan, Pradhan and Jankowiak 2019).
.. [3] Bardenet, R., Doucet, A. and Holmes, C. (2017). On Markov chain Monte
   Carlo methods for tall data. JMLR 18 (Taylor control variates).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, init_to_uniform, init_to_value

import tallmcmc
from tallmcmc import datasets
from tallmcmc.examples import logistic_regression
from tallmcmc.interop import arviz as arviz_bridge
from tallmcmc.reproduce._common import (
    add_common_arguments,
    format_table,
    new_figure,
    output_folder,
    print_written,
    save_figure,
    write_summary,
)

NAME = "mnist-posterior"
HELP = "MNIST 1s vs 7s, untempered posterior (K = 1, N(0, I) prior): our samplers vs a NumPyro NUTS reference"

METHODS = {
    "exact-rw": "exact Barker + Laplace RW",
    "exact-hmc": "exact Barker + proxy HMC",
    "naive-rw": "naive minibatch Barker (guard) + Laplace RW",
    "naive-rw-noguard": "naive minibatch Barker (no guard) + Laplace RW",
    "cv-rw": "CV minibatch Barker + Laplace RW",
    "cv-rw-noguard": "CV minibatch Barker (no guard) + Laplace RW",
    "cv-t5": "CV minibatch Barker + independence t5",
    "cv-hmc": "CV minibatch Barker + proxy HMC",
}
#: Random-walk methods mix ~d times slower per step and get ``--draws-rw`` draws per chain.
RANDOM_WALK = ("exact-rw", "naive-rw", "naive-rw-noguard", "cv-rw", "cv-rw-noguard")
HMC_STEP, HMC_STEPS = 0.5, 3
CACHE_VERSION = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the experiment's options to ``parser``."""
    parser.add_argument(
        "--features",
        choices=("pca50", "raw"),
        default="pca50",
        help="standardised principal components + intercept, or the 784 raw pixels",
    )
    parser.add_argument("--components", type=int, default=50, help="principal components kept (pca50)")
    parser.add_argument("--num-train", type=int, default=None, help="keep the first NUM training points (default: all)")
    parser.add_argument("--num-test", type=int, default=None, help="keep the first NUM test points (default: all)")
    parser.add_argument("--chains", type=int, default=4, help="chains per method (and for NUTS)")
    parser.add_argument("--draws", type=int, default=4000, help="draws per chain (t5, HMC methods)")
    parser.add_argument("--draws-rw", type=int, default=20000, help="draws per chain (random-walk methods)")
    parser.add_argument("--batch-size", type=int, default=100, help="minibatch Barker's first batch and increment")
    parser.add_argument(
        "--methods",
        nargs="*",
        choices=tuple(METHODS),
        default=None,
        metavar="KEY",
        help="our methods to run (default: all but cv-rw-noguard): " + ", ".join(METHODS),
    )
    parser.add_argument("--hmc-step-size", type=float, default=HMC_STEP, help="proxy HMC's leapfrog step ε")
    parser.add_argument("--hmc-steps", type=int, default=HMC_STEPS, help="proxy HMC's leapfrog steps L")
    parser.add_argument("--skip-nuts", action="store_true", help="no NUTS reference (errors against none)")
    parser.add_argument("--nuts-draws", type=int, default=1000, help="NUTS draws per chain")
    parser.add_argument("--nuts-warmup", type=int, default=1000, help="NUTS warm-up steps per chain")
    parser.add_argument(
        "--nuts-mass",
        choices=("adapt", "laplace"),
        default=None,
        help="NUTS mass matrix: NumPyro's adapted diagonal, or the Laplace covariance fixed "
        "(default: adapt for pca50, laplace for raw)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="where NUTS draws are cached (default: tallmcmc.datasets.cache_dir()/mnist_posterior)",
    )
    parser.add_argument("--residual-pairs", type=int, default=20, help="(θ, θ′) pairs for N²·Var(rᵢ)")
    parser.add_argument(
        "--predictive-draws",
        type=int,
        default=2000,
        help="draws (all chains, evenly thinned) in the posterior predictive",
    )
    add_common_arguments(parser, NAME, seed=0, seed_help="seed of the chains (NUTS uses seed + 1000)")


# ---------------------------------------------------------------------------------------------- data


def features(kind: str, x_train, x_test, components: int = 50):
    """Design matrices (float32) for ``pca50`` (standardised PCs of the training set, intercept first) or ``raw``."""
    if kind == "raw":
        return np.asarray(x_train, np.float32), np.asarray(x_test, np.float32), {}
    x_train = np.asarray(x_train, np.float64)
    mean = x_train.mean(0)
    _, singular, vt = np.linalg.svd(x_train - mean, full_matrices=False)
    k = min(components, vt.shape[0])
    scale = singular[:k] / math.sqrt(max(len(x_train) - 1, 1))
    scale = np.where(scale > 0, scale, 1.0)

    def project(x):
        z = ((np.asarray(x, np.float64) - mean) @ vt[:k].T) / scale
        return np.hstack([np.ones((len(z), 1)), z]).astype(np.float32)

    explained = float(np.sum(singular[:k] ** 2) / np.sum(singular**2))
    return project(x_train), project(x_test), {"explained_variance": explained, "components": k}


def load(args):
    x_train, y_train = datasets.load_mnist_ones_sevens("train")
    x_test, y_test = datasets.load_mnist_ones_sevens("test", num_examples=args.num_test)
    if args.num_train is not None:
        x_train, y_train = x_train[: args.num_train], y_train[: args.num_train]
    a_train, a_test, info = features(args.features, x_train, x_test, args.components)
    info["constant_columns"] = int(np.sum(a_train.std(0) == 0))
    return a_train, np.asarray(y_train, np.float32), a_test, np.asarray(y_test, np.float32), info


# ---------------------------------------------------------------------------------------------- statistics


def ess_and_mcse(draws):
    """Bulk ESS, split r̂ and MCSE of the mean (sd/√ESS_mean) per coordinate; draws (chain, draw, d)."""
    draws = np.asarray(draws, np.float64)
    bulk, mean_ess = arviz_bridge.ess(draws, method="bulk"), arviz_bridge.ess(draws, method="mean")
    rhat = arviz_bridge.rhat(draws)
    # A coordinate that never moved (every proposal rejected) has no effective draws; ArviZ reports its
    # rank-normalised ESS as the number of draws.
    frozen = np.all(draws == draws[:1, :1], axis=(0, 1))
    bulk, mean_ess = np.where(frozen, 0.0, bulk), np.where(frozen, 0.0, mean_ess)
    with np.errstate(divide="ignore", invalid="ignore"):
        mcse = draws.std((0, 1), ddof=1) / np.sqrt(mean_ess)
    return bulk, rhat, mcse


def predictive(draws, x_test, y_test, max_draws: int):
    """Test accuracy and log-loss of the posterior predictive p̄(x) = mean σ(xᵀβ) over (thinned) draws."""
    flat = np.asarray(draws).reshape(-1, np.asarray(draws).shape[-1])
    if len(flat) > max_draws:
        flat = flat[np.linspace(0, len(flat) - 1, max_draws).round().astype(int)]
    logits = jnp.asarray(x_test) @ jnp.asarray(flat, jnp.float32).T  # (n, S)
    # log p̄ = logmeanexp(log σ), in float32 on the device, then float64 here.
    log_p1 = np.asarray(jax.nn.logsumexp(jax.nn.log_sigmoid(logits), axis=1), np.float64) - math.log(flat.shape[0])
    log_p0 = np.asarray(jax.nn.logsumexp(jax.nn.log_sigmoid(-logits), axis=1), np.float64) - math.log(flat.shape[0])
    y = np.asarray(y_test, np.float64)
    accuracy = float(np.mean((log_p1 > log_p0) == (y == 1)))
    log_loss = float(-np.mean(y * log_p1 + (1 - y) * log_p0))
    return accuracy, log_loss


def row_for(name, draws, reference, *, seconds, per_step, all_per_step, accept, x_test, y_test, max_draws, extra=None):
    draws = np.asarray(draws, np.float64)
    ess, rhat, mcse = ess_and_mcse(draws)
    accuracy, log_loss = predictive(draws, x_test, y_test, max_draws)
    row = dict(
        method=name,
        per_step=float(per_step),
        all_per_step=float(all_per_step),
        accept=float(accept),
        draws_per_chain=int(draws.shape[1]),
        ess_min=float(ess.min()),
        ess_median=float(np.median(ess)),
        rhat_max=float(rhat.max()),
        seconds=float(seconds),
        ess_per_s=float(ess.min() / seconds),
        accuracy=accuracy,
        log_loss=log_loss,
    )
    if reference is not None:
        gap = np.abs(draws.mean((0, 1)) - reference["mean"])
        z = gap / reference["sd"]
        zm = gap / np.sqrt(mcse**2 + reference["mcse"] ** 2)
        ratio = draws.std((0, 1)) / reference["sd"]
        row.update(
            err_sd_max=float(z.max()),
            err_sd_median=float(np.median(z)),
            err_mcse_max=float(zm.max()),
            err_mcse_median=float(np.median(zm)),
            sd_ratio_min=float(ratio.min()),
            sd_ratio_median=float(np.median(ratio)),
            sd_ratio_max=float(ratio.max()),
        )
    row.update(extra or {})
    return row


# ---------------------------------------------------------------------------------------------- NUTS


_COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
_clock = {"seconds": 0.0, "registered": False}


def _compile_seconds() -> float:
    """Seconds JAX has spent compiling since the first call (a ``jax.monitoring`` listener)."""
    if not _clock["registered"]:

        def listener(event, duration, **_):
            if event in _COMPILE_EVENTS:
                _clock["seconds"] += duration

        jax.monitoring.register_event_duration_secs_listener(listener)
        _clock["registered"] = True
    return _clock["seconds"]


def _numpyro_model(covariates, response):
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([covariates.shape[1]]).to_event(1))
    numpyro.sample("obs", dist.Bernoulli(logits=covariates @ beta), obs=response)


def run_nuts(covariates, response, *, mass, mode, covariance, chains, warmup, draws, seed):
    """NumPyro NUTS; returns the draws (chain, draw, d), timings and leapfrog counts."""
    if mass == "laplace":
        kernel = NUTS(
            _numpyro_model,
            inverse_mass_matrix=jnp.asarray(covariance),
            dense_mass=True,
            adapt_mass_matrix=False,
            init_strategy=init_to_value(values={"beta": jnp.asarray(mode)}),
        )
    else:
        kernel = NUTS(_numpyro_model, init_strategy=init_to_uniform)
    mcmc = MCMC(
        kernel, num_warmup=warmup, num_samples=draws, num_chains=chains, chain_method="vectorized", progress_bar=False
    )
    x, y = jnp.asarray(covariates), jnp.asarray(response)
    compiled = _compile_seconds()
    began = time.perf_counter()
    mcmc.warmup(jax.random.key(seed), x, y, extra_fields=("num_steps",), collect_warmup=True)
    jax.block_until_ready(mcmc.last_state)
    warmup_seconds = time.perf_counter() - began
    warmup_compile = _compile_seconds() - compiled
    warm_steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["num_steps"])
    mcmc.post_warmup_state = mcmc.last_state
    compiled = _compile_seconds()
    began = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, x, y, extra_fields=("num_steps",))
    jax.block_until_ready(mcmc.last_state)
    wall = time.perf_counter() - began
    run_compile = _compile_seconds() - compiled
    steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["num_steps"])
    positions = np.asarray(mcmc.get_samples(group_by_chain=True)["beta"])
    return dict(
        draws=positions,
        seconds=np.float64(wall - run_compile),
        warmup_seconds=np.float64(warmup_seconds - warmup_compile),
        compile_seconds=np.float64(warmup_compile + run_compile),
        num_steps=steps,
        warmup_num_steps=warm_steps,
    )


def reference_posterior(args, covariates, response, mode, covariance, mass):
    """The NUTS reference, from the cache when there (keyed by the features, N, d, seed, lengths and mass)."""
    folder = Path(args.cache_dir) if args.cache_dir is not None else datasets.cache_dir() / "mnist_posterior"
    num_data, d = covariates.shape
    digest = hashlib.sha1(np.ascontiguousarray(covariates).tobytes() + np.ascontiguousarray(response).tobytes())
    key = (
        f"nuts-v{CACHE_VERSION}-{args.features}-N{num_data}-d{d}-{mass}-seed{args.seed}-"
        f"{args.chains}x{args.nuts_draws}-w{args.nuts_warmup}-{digest.hexdigest()[:10]}"
    )
    path = folder.expanduser() / f"{key}.npz"
    if path.exists():
        saved = np.load(path)
        run = {k: saved[k] for k in saved.files}
        cached = True
    else:
        run = run_nuts(
            covariates,
            response,
            mass=mass,
            mode=mode,
            covariance=covariance,
            chains=args.chains,
            warmup=args.nuts_warmup,
            draws=args.nuts_draws,
            seed=args.seed + 1000,
        )
        output_folder(path.parent)
        np.savez(path, **run)
        cached = False
    ess, rhat, mcse = ess_and_mcse(run["draws"])
    reference = dict(mean=run["draws"].mean((0, 1)), sd=run["draws"].std((0, 1)), mcse=mcse, ess=ess, rhat=rhat)
    return run, reference, path, cached


# ---------------------------------------------------------------------------------------------- residuals


def residual_spread(model, cv_by_order, mode, covariance, reference_draws, pairs: int, seed: int):
    """Median and 10-90% range of N²·Var(rᵢ) (and N·max|rᵢ|) over pairs, per control variate and move."""
    rng = np.random.default_rng(seed)
    d = covariance.shape[0]
    chol = np.linalg.cholesky(covariance)
    if reference_draws is not None:
        flat = np.asarray(reference_draws, np.float64).reshape(-1, d)
        picks = rng.choice(len(flat), size=(pairs, 2), replace=False)
        start, other = flat[picks[:, 0]], flat[picks[:, 1]]
    else:
        start = np.asarray(mode) + rng.standard_normal((pairs, d)) @ chol.T
        other = np.asarray(mode) + rng.standard_normal((pairs, d)) @ chol.T
    walk = start + (2.38 / math.sqrt(d)) * rng.standard_normal((pairs, d)) @ chol.T
    num_data = model.num_data
    out = {}
    for label, cv in cv_by_order.items():
        residuals = jax.jit(lambda a, b, data, cv=cv: cv.residual_model(model).log_likelihood_ratios(a, b, data))
        for move, ends in (("rw", walk), ("indep", other)):
            spreads, ranges = [], []
            for a, b in zip(start, ends):
                r = residuals(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32), model.data)
                spreads.append(num_data**2 * float(jnp.var(r)))
                ranges.append(num_data * float(jnp.max(jnp.abs(r))))
            out[f"{label}/{move}"] = dict(
                median=float(np.median(spreads)),
                p10=float(np.percentile(spreads, 10)),
                p90=float(np.percentile(spreads, 90)),
                range_median=float(np.median(ranges)),
            )
    return out


# ---------------------------------------------------------------------------------------------- run


def run(args: argparse.Namespace) -> int:
    began_all = time.perf_counter()
    out = output_folder(args.out)
    progress = not getattr(args, "no_progress", False)
    x_train, y_train, x_test, y_test, info = load(args)
    num_data, d = x_train.shape
    print(
        f"MNIST 1s vs 7s, {args.features}: N = {num_data:,}, d = {d}, test {len(x_test):,}; K = 1, prior N(0, I)"
        + (
            f"; {info['components']} PCs explain {100 * info['explained_variance']:.1f}% of the pixel variance"
            if "components" in info
            else f"; {info['constant_columns']} constant columns"
        ),
        flush=True,
    )
    model = logistic_regression.model(x_train, y_train)
    began = time.perf_counter()
    mode = tallmcmc.find_mode(model, jnp.zeros(d, jnp.float32))
    mode_seconds = time.perf_counter() - began
    covariance = np.asarray(tallmcmc.laplace_covariance(mode), np.float64)
    began = time.perf_counter()
    cv = tallmcmc.taylor_control_variate(model, mode.position, batch_size=4096)
    cv_seconds = time.perf_counter() - began
    cv1 = tallmcmc.taylor_control_variate(model, mode.position, order=1, batch_size=4096)
    print(
        f"mode: {mode.data_passes:.0f} passes, {mode.iterations} iterations, {mode_seconds:.1f} s; "
        f"control variate {cv_seconds:.1f} s; Laplace sd {np.sqrt(np.diag(covariance)).min():.3f}–"
        f"{np.sqrt(np.diag(covariance)).max():.3f}",
        flush=True,
    )

    summary = dict(
        features=args.features,
        num_data=num_data,
        dimension=d,
        num_test=len(x_test),
        chains=args.chains,
        batch_size=args.batch_size,
        info=info,
        mode_passes=float(mode.data_passes),
        mode_seconds=mode_seconds,
        cv_seconds=cv_seconds,
    )

    # NUTS reference
    reference, rows, nuts = None, [], None
    mass = args.nuts_mass or ("laplace" if args.features == "raw" else "adapt")
    if args.skip_nuts:
        print("NumPyro NUTS reference: not run")
    else:
        began = time.perf_counter()
        nuts, reference, path, cached = reference_posterior(args, x_train, y_train, mode.position, covariance, mass)
        steps, warm = nuts["num_steps"], nuts["warmup_num_steps"]
        per_step = num_data * float(steps.mean())
        total = num_data * (float(steps.sum()) + float(warm.sum()) + args.chains)
        print(
            f"NUTS reference ({mass} mass, {args.chains} x {args.nuts_draws} after {args.nuts_warmup} warm-up): "
            f"max r̂ {reference['rhat'].max():.4f}, bulk ESS min {reference['ess'].min():.0f} / median "
            f"{np.median(reference['ess']):.0f}; mean leapfrog steps {steps.mean():.1f} (warm-up {warm.mean():.1f}); "
            f"sampling {float(nuts['seconds']):.1f} s, warm-up {float(nuts['warmup_seconds']):.1f} s, "
            f"compilation {float(nuts['compile_seconds']):.1f} s"
            + (f" (cached: {path})" if cached else f" (saved: {path}; {time.perf_counter() - began:.0f} s)"),
            flush=True,
        )
        nuts_row = row_for(
            f"NumPyro NUTS ({mass} mass)",
            nuts["draws"],
            reference,
            seconds=float(nuts["seconds"]),
            per_step=per_step,
            all_per_step=total / steps.size,
            accept=float("nan"),
            x_test=x_test,
            y_test=y_test,
            max_draws=args.predictive_draws,
            extra=dict(
                key="nuts",
                leapfrog_steps=float(steps.mean()),
                warmup_leapfrog_steps=float(warm.mean()),
                warmup_seconds=float(nuts["warmup_seconds"]),
                cached=cached,
            ),
        )
        rows.append(nuts_row)
        summary["reference"] = dict(
            mass=mass,
            path=path,
            rhat_max=float(reference["rhat"].max()),
            ess_bulk_min=float(reference["ess"].min()),
            ess_bulk_median=float(np.median(reference["ess"])),
        )

    # residual spread of the control variates at the posterior scale
    began = time.perf_counter()
    spread = residual_spread(
        model,
        {"order2": cv, "order1": cv1},
        mode.position,
        covariance,
        None if nuts is None else nuts["draws"],
        args.residual_pairs,
        args.seed,
    )
    summary["residual_spread"] = spread
    print(
        f"N²·Var(rᵢ) ({args.residual_pairs} pairs, {time.perf_counter() - began:.0f} s; the minibatch test needs "
        f"≲ b = {args.batch_size}):"
    )
    print(
        format_table(
            ["control variate", "move", "median", "10%", "90%", "N·max|rᵢ|"],
            [
                [
                    k.split("/")[0],
                    k.split("/")[1],
                    f"{v['median']:.4g}",
                    f"{v['p10']:.3g}",
                    f"{v['p90']:.3g}",
                    f"{v['range_median']:.3g}",
                ]
                for k, v in spread.items()
            ],
        ),
        flush=True,
    )

    # our samplers
    setup = {mode.name: mode.data_used}
    walk = tallmcmc.laplace_random_walk(mode)
    hamiltonian = tallmcmc.proxy_hamiltonian(cv, args.hmc_step_size, args.hmc_steps, preconditioner=covariance)
    independence = tallmcmc.laplace_independence(mode, degrees_of_freedom=5)
    recipes = {
        "exact-rw": (walk, tallmcmc.exact_barker()),
        "exact-hmc": (hamiltonian, tallmcmc.exact_barker()),
        "naive-rw": (walk, tallmcmc.minibatch_barker(args.batch_size)),
        "naive-rw-noguard": (walk, tallmcmc.minibatch_barker(args.batch_size, variance_rse=None)),
        "cv-rw": (walk, tallmcmc.minibatch_barker(args.batch_size, control_variate=cv)),
        "cv-rw-noguard": (walk, tallmcmc.minibatch_barker(args.batch_size, variance_rse=None, control_variate=cv)),
        "cv-t5": (independence, tallmcmc.minibatch_barker(args.batch_size, control_variate=cv)),
        "cv-hmc": (hamiltonian, tallmcmc.minibatch_barker(args.batch_size, control_variate=cv)),
    }
    for key in [key for key in METHODS if key != "cv-rw-noguard"] if args.methods is None else args.methods:
        proposal, test = recipes[key]
        draws = args.draws_rw if key in RANDOM_WALK else args.draws
        began = time.perf_counter()
        result = tallmcmc.sample(
            model,
            proposal,
            test,
            initial_position=mode.position,
            num_samples=draws,
            num_chains=args.chains,
            seed=args.seed,
            progress=progress,
        )
        for name, used in setup.items():
            result.setup_data_used.setdefault(name, used)
        steps = result.num_chains * result.num_draws
        row = row_for(
            METHODS[key],
            result.positions,
            reference,
            seconds=result.sampling_seconds,
            per_step=float(result.data_used.mean()),
            all_per_step=result.total_data_used / steps,
            accept=result.acceptance_rate,
            x_test=x_test,
            y_test=y_test,
            max_draws=args.predictive_draws,
            extra=dict(
                key=key,
                setup_passes=result.setup_data_passes,
                compile_seconds=float(result.compile_seconds),
                ms_per_step=1e3 * result.seconds_per_step,
                full_steps=float(np.mean(result.data_used >= num_data)),
            ),
        )
        rows.append(row)
        print(
            f"  {row['method']}: {row['per_step']:,.0f} points/step, ESS/s {row['ess_per_s']:.3g}, "
            f"{row['ms_per_step']:.3g} ms/step, {time.perf_counter() - began:.0f} s"
            + (f", max err/sd {row['err_sd_max']:.3f}" if reference is not None else ""),
            flush=True,
        )
    summary["methods"] = rows

    print_results(rows, num_data, reference is not None)
    paths = [write_summary(out, summary)]
    if reference is not None:
        paths.append(figure(rows, nuts["draws"], reference, out))
    print_written(*paths, seconds=time.perf_counter() - began_all)
    return 0


def print_results(rows, num_data: int, with_reference: bool) -> None:
    headers = [
        "method",
        "data/step",
        "% of N",
        "all data/step",
        "accept",
        "ESS min",
        "ESS med",
        "ESS/s",
        "test acc",
        "log-loss",
    ]
    if with_reference:
        headers += ["max err/sd", "med err/sd", "max err/MCSE", "sd/ref (min–max)"]
    table = []
    for r in rows:
        line = [
            r["method"],
            f"{r['per_step']:,.0f}",
            f"{100 * r['per_step'] / num_data:.1f}",
            f"{r['all_per_step']:,.0f}",
            "" if math.isnan(r["accept"]) else f"{r['accept']:.2f}",
            f"{r['ess_min']:.0f}",
            f"{r['ess_median']:.0f}",
            f"{r['ess_per_s']:.3g}",
            f"{r['accuracy']:.4f}",
            f"{r['log_loss']:.4f}",
        ]
        if with_reference:
            line += [
                f"{r['err_sd_max']:.3f}",
                f"{r['err_sd_median']:.3f}",
                f"{r['err_mcse_max']:.2f}",
                f"{r['sd_ratio_min']:.3f}–{r['sd_ratio_max']:.3f}",
            ]
        table.append(line)
    print()
    print(format_table(headers, table))


def figure(rows, reference_draws, reference, out):
    """Per-coordinate |mean − ref mean| / ref sd and sd / ref sd of every method, sorted."""
    fig, (left, right) = new_figure(1, 2, figsize=(11, 4))
    for r in rows:
        if r.get("key") == "nuts":
            continue
        left.plot(np.sort([r["err_sd_median"], r["err_sd_max"]]), [0.5, 1.0], marker="o", label=r["method"])
    left.set_xlabel("|mean − NUTS mean| / NUTS sd (median, max over coordinates)")
    left.set_yticks([0.5, 1.0], ["median", "max"])
    left.legend(fontsize=7)
    for i, r in enumerate(rows):
        if r.get("key") == "nuts":
            continue
        right.plot([r["sd_ratio_min"], r["sd_ratio_median"], r["sd_ratio_max"]], [i] * 3, marker="|")
    right.axvline(1.0, color="k", lw=0.5)
    right.set_yticks(range(len(rows)), [r["method"] for r in rows], fontsize=7)
    right.set_xlabel("sd / NUTS sd (min, median, max over coordinates)")
    return save_figure(fig, out, "errors.png")
