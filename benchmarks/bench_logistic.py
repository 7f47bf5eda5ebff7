"""Untempered logistic regression: exact vs naive vs control-variate minibatch Barker, and NumPyro (issue 8).

Data: ``tallmcmc.examples.logistic_regression.simulate(N, d, seed)``: xᵢ ~ N(0, I_d) float32,
β* ~ N(0, I/4), yᵢ ~ Bernoulli(σ(xᵢᵀβ*)) (numpy ``default_rng(seed)``). Prior β ~ N(0, I), Bernoulli-logit
likelihood, K = 1 (untempered), 4 chains. tallmcmc chains start at the mode (no warm-up); NumPyro chains start at
the mode too (``init_to_value``) and run their own warm-up (step size, diagonal mass matrix).

Methods (same data, same prior):

* tallmcmc: exact Barker (full data) with the Laplace random walk, the Laplace independence t₅ proposal and the
  proxy-HMC proposal (ε 0.5, L 3, Laplace preconditioner); naive minibatch Barker (b = 100) with the Laplace random
  walk; control-variate (second-order Taylor at the mode) minibatch Barker with the same three proposals.
* TunaMH (``tallmcmc.tuna``, issue 10; skip with ``--skip-tuna``): on the raw log-likelihood with the bound
  cᵢ = ‖xᵢ‖, M = ‖β′ − β‖ and a Laplace RW shrunk to ``--tuna-raw-scale`` (at the full step it never accepts), and on
  the second-order control-variate residuals (cᵢ = ‖xᵢ‖³/(12√3), M = ‖δ‖ max(‖u‖, ‖u′‖)²) with the Laplace RW and
  the proxy-HMC proposal. Its data: B per step (Poisson) and one pass for the cᵢ (in the setup passes).
* NumPyro NUTS (full data) and ``HMCECS(NUTS(model), num_blocks=B, proxy=HMCECS.taylor_proxy({"beta": mode}))``
  with ``numpyro.plate("N", N, subsample_size=m)`` (``pip install -e '.[bench]'``).
* BlackJAX SGLD and SGHMC (``pip install -e '.[bench]'``; skip with ``--skip-sgmcmc``), each with BlackJAX's
  control-variate gradient estimator ``blackjax.sgmcmc.gradients.control_variates`` centred at our mode, minibatch
  ``--sgmcmc-batch`` rows drawn with replacement per step, ``sghmc``'s default 10 integration steps; chains start at
  the mode, no warm-up. Run at the step sizes BlackJAX's docs suggest (``SGMCMC_DOC_STEPS``) and at the largest step
  of a geometric grid (from the largest doc step down by ``--sgmcmc-grid-factor``) whose bias — the larger of
  max |mean − ref| / ref sd and max |sd / ref sd − 1| (``--sgmcmc-rule mean``: the first only) — is ≤
  ``--sgmcmc-bias``; the ratio of our best control-variate row at equal or lower bias is printed beside each.
  Timings: the compiled scan only (compiled ahead of time), fastest of ``--sgmcmc-repeats`` runs of the same draws;
  then our control-variate rows and the peers' search picks are re-timed one after the other (``--sgmcmc-retime``
  rounds, fastest kept: "ESS/s interleaved"), since the load of a shared machine drifts within a run.

Data counted (points touched per chain-step, and one-off passes over N):

* tallmcmc: ``SamplingResult.data_used`` (the test's minibatches, full passes for the exact test) and
  ``setup_data_used`` (mode search incl. its start check, Hessian and Newton polish; the control variate; the
  sampler's start check).
* SGLD / SGHMC: the minibatch's rows per step (SGHMC reuses one minibatch for its 10 inner steps), as our
  ``data_used`` counts rows read; the per-datum gradient evaluations are printed beside it (2 per row and inner step:
  at the position and at the centre). One-off: the mode (the same passes as ours) and 1 pass for the full-data
  gradient at the centre that ``control_variates`` computes when it is built.
* NUTS: N × ``num_steps`` (leapfrog steps, one full-data gradient each) per step; warm-up likewise; 1 pass at init.
* HMCECS (numpyro/infer/hmc_gibbs.py, contrib/ecs_proxies.py, read in numpyro 0.22): per step, the block update
  evaluates value, gradient and Hessian of the new block's m/B log-likelihoods at the reference point, the
  Gibbs (pseudo-marginal) test evaluates the estimator at the m subsample points, an accepted block refreshes
  value and gradient on the m points, then NUTS takes ``num_steps`` leapfrog steps on the m points:
  m/B + m + m·P(accept block) + m·num_steps. One-off: the mode (given as reference, same passes as ours), 3 passes
  in ``taylor_proxy`` (full-data log-likelihood sum, its gradient, its Hessian by forward-over-reverse), the
  initial subsample's Taylor terms (3m) and the init gradient (m) per chain.

Reference posterior: a long NumPyro NUTS run (``--reference nuts``) or exact-Metropolis independence sampler with
the Gaussian Laplace proposal (``--reference independence``), cached in ``--cache-dir`` keyed by N, d, seed and length.
Errors: max over coordinates of |mean − reference mean| / reference sd, and / MCSE where
MCSE² = MCSE²(method) + MCSE²(reference), MCSE = sd / √(ArviZ "mean" ESS).
ESS: ArviZ bulk ESS, minimum over the d coordinates. "ESS/s": sampling phase only, compilation excluded;
NumPyro also with its warm-up charged at the sampling rate per leapfrog step ("w/ warm-up").
"ESS per 10⁶ points": ESS over every point touched (setup, warm-up, sampling; all chains).

    python benchmarks/bench_logistic.py --sizes 100000 --dimension 10 --draws 2000
    python benchmarks/bench_logistic.py --sizes 10000000 --draws-exact 100 --skip-naive --skip-nuts \
        --reference independence --reference-draws 150
    python benchmarks/bench_logistic.py --sizes 1000000 --draws 20000 --skip-naive --skip-nuts --skip-tuna \
        --reference independence --reference-draws 10000 --exact-proposals HMC --draws-exact 30 \
        --sgmcmc-steps 100000 --sghmc-steps 150000 --sghmc-thin 15
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc.examples import logistic_regression
from tallmcmc.interop import arviz as arviz_bridge

CHAINS = 4
_COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
_clocks: list[dict] = []


def _on_duration(event, duration, **_):
    if event in _COMPILE_EVENTS:
        for clock in _clocks:
            clock["seconds"] += duration


jax.monitoring.register_event_duration_secs_listener(_on_duration)


class compile_clock:
    """Seconds JAX spends tracing, lowering and compiling inside a ``with`` block."""

    def __enter__(self):
        self.clock = {"seconds": 0.0}
        _clocks.append(self.clock)
        return self.clock

    def __exit__(self, *exc):
        _clocks.remove(self.clock)


def coordinate_stats(draws):
    """Bulk ESS and MCSE of the mean (sd / √mean-ESS) per coordinate; draws (chain, draw, d)."""
    draws = np.asarray(draws, dtype=np.float64)
    ess = arviz_bridge.ess(draws, method="bulk")
    ess_mean = arviz_bridge.ess(draws, method="mean")
    mcse = draws.std((0, 1), ddof=1) / np.sqrt(ess_mean)
    return ess, mcse


def summarise(
    name,
    draws,
    reference,
    *,
    seconds,
    per_step,
    setup_points,
    total_points,
    num_data,
    accept=float("nan"),
    seconds_with_warmup=None,
    ms_per_step=None,
    note="",
):
    draws = np.asarray(draws, dtype=np.float64)
    ess, mcse = coordinate_stats(draws)
    mean = draws.mean((0, 1))
    gap = np.abs(mean - reference["mean"])
    ratio = draws.std((0, 1)) / reference["sd"]
    row = dict(
        method=name,
        per_step=float(per_step),
        setup_passes=setup_points / num_data,
        accept=float(accept),
        ess_min=float(ess.min()),
        seconds=float(seconds),
        ess_per_s=float(ess.min() / seconds),
        ess_per_million=float(ess.min() / total_points * 1e6),
        max_err_sd=float(np.max(gap / reference["sd"])),
        max_err_mcse=float(np.max(gap / np.sqrt(mcse**2 + reference["mcse"] ** 2))),
        sd_ratio=[float(ratio.min()), float(ratio.max())],
        err_sd_noise=float(np.max(np.sqrt(mcse**2 + reference["mcse"] ** 2) / reference["sd"])),
        draws_per_chain=int(draws.shape[1]),
        ms_per_step=ms_per_step,
        note=note,
    )
    if seconds_with_warmup is not None:
        row["ess_per_s_warmup"] = float(ess.min() / seconds_with_warmup)
    return row


# ----------------------------------------------------------------------------------------------- NumPyro


def numpyro_model(covariates, response, subsample_size=None):
    import numpyro
    import numpyro.distributions as dist

    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([covariates.shape[1]]).to_event(1))
    with numpyro.plate("N", covariates.shape[0], subsample_size=subsample_size):
        x = numpyro.subsample(covariates, event_dim=1)
        y = numpyro.subsample(response, event_dim=0)
        numpyro.sample("obs", dist.Bernoulli(logits=x @ beta), obs=y)


def run_numpyro(
    kind,
    covariates,
    response,
    start,
    *,
    num_warmup,
    num_samples,
    seed,
    chain_method="vectorized",
    subsample_size=1000,
    num_blocks=100,
):
    """NUTS or HMCECS; returns draws (chain, draw, d) and the counts. Compilation is kept out of the timings:
    the seconds JAX reports spending on tracing, lowering and compiling
    (``jax.monitoring`` duration events) during each call are subtracted from its wall time."""
    from numpyro.infer import HMCECS, MCMC, NUTS, init_to_value

    num_data = covariates.shape[0]
    inner = NUTS(numpyro_model, init_strategy=init_to_value(values={"beta": start}))
    if kind == "nuts":
        kernel, kwargs, fields = inner, {}, ("num_steps",)
    else:
        kernel = HMCECS(inner, num_blocks=num_blocks, proxy=HMCECS.taylor_proxy({"beta": start}))
        kwargs, fields = {"subsample_size": subsample_size}, ("hmc_state.num_steps", "accept_prob")
        chain_method = "sequential"  # HMCECS.init does not take a batch of keys (numpyro 0.22)
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=CHAINS,
        chain_method=chain_method,
        progress_bar=False,
    )
    with compile_clock() as clock:
        began = time.perf_counter()
        mcmc.warmup(jax.random.key(seed), covariates, response, extra_fields=fields, collect_warmup=True, **kwargs)
        jax.block_until_ready(mcmc.last_state)
        warmup_wall = time.perf_counter() - began
    warmup_compile = clock["seconds"]
    warm = {k: np.asarray(v) for k, v in mcmc.get_extra_fields(group_by_chain=True).items()}
    mcmc.post_warmup_state = mcmc.last_state
    with compile_clock() as clock:
        began = time.perf_counter()
        mcmc.run(mcmc.post_warmup_state.rng_key, covariates, response, extra_fields=fields, **kwargs)
        jax.block_until_ready(mcmc.last_state)
        wall = time.perf_counter() - began
    compile_run = clock["seconds"]
    seconds = wall - compile_run
    extra = {k: np.asarray(v) for k, v in mcmc.get_extra_fields(group_by_chain=True).items()}
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)["beta"])
    steps, warm_steps = extra[fields[0]], warm[fields[0]]
    if kind == "nuts":
        per_step = num_data * steps.mean()
        warmup_points = num_data * warm_steps.sum()
        setup_points = num_data  # init potential + gradient at the (common) start
        accept = float("nan")
    else:
        m, block = subsample_size, (subsample_size - 1) // num_blocks + 1
        gibbs = extra["accept_prob"]
        per_step = block + m + m * gibbs.mean() + m * steps.mean()
        warmup_points = (block + m + m * warm["accept_prob"] + m * warm_steps).sum()
        setup_points = 3 * num_data + CHAINS * (3 * m + m)
        accept = float(gibbs.mean())
    seconds_with_warmup = seconds + warmup_wall - warmup_compile
    return dict(
        draws=draws,
        seconds=seconds,
        per_step=float(per_step),
        warmup_points=float(warmup_points),
        setup_points=float(setup_points),
        sample_points=float(per_step * steps.size),
        accept=accept,
        seconds_with_warmup=seconds_with_warmup,
        warmup_wall=warmup_wall,
        compile_run=compile_run,
        warmup_compile=warmup_compile,
        num_steps=float(steps.mean()),
        warmup_num_steps=float(warm_steps.mean()),
        max_steps=int(steps.max()),
        ms_per_step=1e3 * seconds / num_samples,
    )


# ----------------------------------------------------------------------------------------------- BlackJAX SG-MCMC

#: Step sizes BlackJAX's documentation suggests (blackjax 1.7.1): 1e-3 is the one in the docstrings of ``blackjax.sgld``
#: and ``blackjax.sghmc`` (and their API pages); 4.5e-5 (SGLD) and 4.5e-6 (SGHMC, ``num_integration_steps=10``) are
#: the constant steps of the Sampling Book's MNIST MLP example (book/models/mlp.md, batch 512, N = 60,000).
SGMCMC_DOC_STEPS = {"SGLD": (1e-3, 4.5e-5), "SGHMC": (1e-3, 4.5e-6)}


def sgmcmc_bias(row):
    """One number for "how biased": the larger of max |mean − ref| / ref sd and max |sd / ref sd − 1|."""
    return float(max(row["max_err_sd"], abs(row["sd_ratio"][0] - 1.0), abs(row["sd_ratio"][1] - 1.0)))


def sgmcmc_sampler(kind, covariates, response, centre, *, batch, num_draws, thin, num_integration_steps=10):
    """BlackJAX ``sgld`` / ``sghmc`` with ``blackjax.sgmcmc.gradients.control_variates`` centred at ``centre``, built
    as BlackJAX's docs build them; the user's loop is a ``lax.scan`` over steps (minibatches drawn with replacement
    by ``jax.random.choice``, as the Sampling Book's ``batch_data``), thinned, ``vmap``-ed over the chains and compiled
    ahead of time (the step size is an argument, so one compilation serves every step size).

    Returns ``(run, setup_seconds, compile_seconds)``; ``run(keys, starts, step_size)`` gives draws (chain, draw, d).
    The control-variate estimator costs one full-data gradient at the centre when it is built (1 pass over N); each
    step evaluates the per-datum gradient at the current position and at the centre on one minibatch of ``batch``
    rows (SGHMC: on the same minibatch at each of its ``num_integration_steps`` inner steps).
    """
    import blackjax
    from blackjax.sgmcmc.gradients import control_variates, grad_estimator

    num_data = covariates.shape[0]

    def logprior_fn(beta):
        return jnp.sum(jax.scipy.stats.norm.logpdf(beta))

    def loglikelihood_fn(beta, datum):
        x, y = datum
        return jax.nn.log_sigmoid((2.0 * y - 1.0) * jnp.dot(x, beta))

    began = time.perf_counter()
    grad_fn = control_variates(grad_estimator(logprior_fn, loglikelihood_fn, num_data), centre, (covariates, response))
    jax.block_until_ready(grad_fn(centre, (covariates[:1], response[:1])))
    setup_seconds = time.perf_counter() - began
    if kind == "SGLD":
        sampler = blackjax.sgld(grad_fn)
    else:
        sampler = blackjax.sghmc(grad_fn, num_integration_steps=num_integration_steps)

    def chain(key, start, covariates, response, step_size):
        def one_step(position, key):
            key_batch, key_step = jax.random.split(key)
            index = jax.random.choice(key_batch, num_data, (batch,))
            return sampler.step(key_step, position, (covariates[index], response[index]), step_size), None

        def kept(position, key):
            position, _ = jax.lax.scan(one_step, position, jax.random.split(key, thin))
            return position, position

        return jax.lax.scan(kept, start, jax.random.split(key, num_draws))[1]

    keys = jax.random.split(jax.random.key(0), CHAINS)
    starts = jnp.broadcast_to(centre, (CHAINS,) + centre.shape)
    began = time.perf_counter()
    compiled = (
        jax.jit(jax.vmap(chain, in_axes=(0, 0, None, None, None)))
        .lower(keys, starts, covariates, response, jnp.float32(1e-6))
        .compile()
    )
    compile_seconds = time.perf_counter() - began

    def run(keys, starts, step_size):
        return compiled(keys, starts, covariates, response, jnp.float32(step_size))

    return run, setup_seconds, compile_seconds


def run_sgmcmc_peers(args, covariates, response, mode, reference, num_data):
    """SGLD and SGHMC rows: at BlackJAX's doc steps and at the largest step of a geometric grid whose bias is within
    ``--sgmcmc-bias`` (see :func:`sgmcmc_bias`; ``--sgmcmc-rule mean`` looks at the mean error only)."""
    rows, grids, timers = [], {}, {}
    for kind in args.sgmcmc_kinds:
        kind_rows, grids[kind], kind_timers = run_sgmcmc_kind(
            kind, args, covariates, response, mode, reference, num_data
        )
        rows += kind_rows
        timers.update(kind_timers)
    return rows, grids, timers


def retime_interleaved(rows, timers, rounds):
    """Time the same runs again, one after the other, ``rounds`` times (the same draws: only the seconds change), and
    keep each one's fastest: ``ess_per_s_interleaved``. On a shared machine the load drifts over a long run, so
    the rows' own timings (taken minutes apart) can mislead a ratio; these are taken side by side."""
    if rounds <= 0:
        return
    best = {}
    for _ in range(rounds):
        for method in [r["method"] for r in rows]:
            best[method] = min(best.get(method, float("inf")), timers[method]())
    for r in rows:
        r["seconds_interleaved"] = best[r["method"]]
        r["ess_per_s_interleaved"] = r["ess_min"] / best[r["method"]]
    print(
        f"  interleaved re-timing ({rounds} rounds, fastest kept): "
        + "; ".join(
            f"{r['method']}: {r['seconds_interleaved']:.2f} s, {r['ess_per_s_interleaved']:.3g} ESS/s" for r in rows
        ),
        flush=True,
    )


def run_sgmcmc_kind(kind, args, covariates, response, mode, reference, num_data):
    """One peer's rows (doc steps, the step search's pick) and its step grid."""
    batch = args.sgmcmc_batch
    rows, timers = [], {}
    steps = args.sghmc_steps if kind == "SGHMC" and args.sghmc_steps else args.sgmcmc_steps
    thin = args.sghmc_thin if kind == "SGHMC" and args.sghmc_thin else args.sgmcmc_thin
    num_draws = steps // thin
    run, setup_seconds, compile_seconds = sgmcmc_sampler(
        kind,
        covariates,
        response,
        mode.position,
        batch=batch,
        num_draws=num_draws,
        thin=thin,
        num_integration_steps=args.sghmc_integration_steps,
    )
    inner = args.sghmc_integration_steps if kind == "SGHMC" else 1
    setup_points = mode.data_used + num_data  # the mode (as ours), the full-data gradient at the centre
    starts = jnp.broadcast_to(mode.position, (CHAINS,) + mode.position.shape)
    cache = {}

    def measure(step_size, seed, repeats=1):
        if step_size in cache and cache[step_size]["timings"] >= repeats:
            return cache[step_size]
        keys = jax.random.split(jax.random.key(seed), CHAINS)
        seconds = float("inf")
        for _ in range(repeats):  # the same keys, so the same draws: only the timing differs; the fastest counts
            began = time.perf_counter()
            draws = np.asarray(jax.block_until_ready(run(keys, starts, step_size)))
            seconds = min(seconds, time.perf_counter() - began)
        finite = bool(np.isfinite(draws).all()) and float(np.abs(draws - np.asarray(mode.position)).max()) < 1e3
        where = "position and centre" if inner == 1 else f"{inner} inner steps × position and centre, one minibatch"
        note = (
            f"{kind} from blackjax {blackjax_version()}, control-variate gradients centred at the mode; batch "
            f"{batch} rows with replacement per step, {2 * inner * batch:,} per-datum gradient evaluations per "
            f"step ({where}); {steps} steps per chain kept every {thin}; fastest of {repeats} timings of the same "
            f"draws; compile {compile_seconds:.1f} s (removed), centre gradient {setup_seconds:.1f} s"
        )
        if finite:
            row = summarise(
                f"BlackJAX {kind}-CV, step {step_size:.3g}",
                draws,
                reference,
                seconds=seconds,
                per_step=batch,
                setup_points=setup_points,
                total_points=setup_points + batch * steps * CHAINS,
                num_data=num_data,
                ms_per_step=1e3 * seconds / steps,
                note=note,
            )
        else:
            nan = float("nan")
            row = dict(
                method=f"BlackJAX {kind}-CV, step {step_size:.3g}",
                per_step=float(batch),
                setup_passes=setup_points / num_data,
                accept=nan,
                ess_min=nan,
                seconds=seconds,
                ess_per_s=nan,
                ess_per_million=nan,
                max_err_sd=float("inf"),
                max_err_mcse=float("inf"),
                sd_ratio=[nan, nan],
                draws_per_chain=num_draws,
                ms_per_step=1e3 * seconds / steps,
                note=note + "; DIVERGED (non-finite or |β − mode| > 1e3)",
            )
        row.update(
            kind=kind,
            step_size=float(step_size),
            gradient_evaluations_per_step=2 * inner * batch,
            thin=thin,
            steps_per_chain=steps,
            diverged=not finite,
            timings=repeats,
        )
        row["bias"] = sgmcmc_bias(row) if finite else float("inf")
        cache[step_size] = row
        print(
            f"  {row['method']}: bias {row['bias']:.3g} (err/sd {row['max_err_sd']:.3g}, sd ratio "
            f"{row['sd_ratio'][0]:.3f}–{row['sd_ratio'][1]:.3f}), ESS {row['ess_min']:.0f}, "
            f"{row['ess_per_s']:.3g} ESS/s, {row['ms_per_step']:.3g} ms/step",
            flush=True,
        )
        return row

    def timer(step_size, seed):
        keys = jax.random.split(jax.random.key(seed), CHAINS)

        def seconds():
            began = time.perf_counter()
            np.asarray(jax.block_until_ready(run(keys, starts, step_size)))
            return time.perf_counter() - began

        return seconds

    def passes(row):
        if row["diverged"]:
            return False
        if args.sgmcmc_rule == "mean":
            return row["max_err_sd"] <= args.sgmcmc_bias
        return row["bias"] <= args.sgmcmc_bias

    for step_size in SGMCMC_DOC_STEPS[kind]:
        row = dict(measure(step_size, args.seed + 21, args.sgmcmc_repeats), role="doc step")
        row["method"] += " (BlackJAX docs)"
        rows.append(row)
    grid, passed = [], []
    step_size = max(SGMCMC_DOC_STEPS[kind])
    while step_size >= args.sgmcmc_grid_min and len(passed) < 2:
        row = measure(step_size, args.seed + 21)
        grid.append(row)
        passed = passed + [row] if passes(row) else []
        step_size /= args.sgmcmc_grid_factor
        if not row["diverged"] and row["ess_min"] < args.sgmcmc_min_ess:
            break  # smaller steps mix slower still: their bias cannot be measured to the limit in this budget
    chosen = [row for row in grid if passes(row)]
    if chosen:
        step_size = max(r["step_size"] for r in chosen)
        row = dict(measure(step_size, args.seed + 21, args.sgmcmc_repeats), role="largest step within bias")
        row["method"] += f" (largest ≤ {args.sgmcmc_bias:g} on grid)"
        rows.append(row)
        timers[row["method"]] = timer(step_size, args.seed + 21)
    else:
        print(f"  {kind}: no step on the grid down to {args.sgmcmc_grid_min:g} met the bias limit", flush=True)
        measured = [r for r in grid if not r["diverged"] and r["ess_min"] >= args.sgmcmc_min_ess]
        if measured:  # the closest it gets
            step_size = min(measured, key=lambda r: r["bias"])["step_size"]
            row = dict(measure(step_size, args.seed + 21, args.sgmcmc_repeats), role="least biased on grid")
            row["method"] += " (least biased on grid)"
            rows.append(row)
            timers[row["method"]] = timer(step_size, args.seed + 21)
    mean_only = [r for r in grid if not r["diverged"] and r["max_err_sd"] <= args.sgmcmc_bias]
    if args.sgmcmc_rule == "mean+sd" and mean_only:  # what the mean error alone would have picked
        step_size = max(r["step_size"] for r in mean_only)
        if not chosen or step_size > max(r["step_size"] for r in chosen):
            row = dict(measure(step_size, args.seed + 21, args.sgmcmc_repeats), role="largest step, mean only")
            row["method"] += f" (largest err/sd ≤ {args.sgmcmc_bias:g}, sd not checked)"
            rows.append(row)
            timers[row["method"]] = timer(step_size, args.seed + 21)
    return rows, grid, timers


def blackjax_version():
    import blackjax

    return getattr(blackjax, "__version__", "?")


def print_sgmcmc(peers, grids, rows, args):
    """The peers beside our control-variate rows; ratios at equal or lower bias."""
    ours = [dict(r, bias=sgmcmc_bias(r)) for r in rows if r["method"].startswith("CV minibatch")]
    rule = "max(err/sd, |sd ratio − 1|)" if args.sgmcmc_rule == "mean+sd" else "err/sd"
    print(
        f"\nStochastic-gradient peers (BlackJAX {blackjax_version()}), bias = max(max err/sd, max |sd ratio − 1|); "
        f"step chosen by {rule} ≤ {args.sgmcmc_bias:g} on a grid ÷{args.sgmcmc_grid_factor:.3g} from the largest doc "
        f"step"
    )
    print(
        "| method | step | points/step | gradient evals/step | setup passes | ESS min | ESS per 1000 steps | ms/step "
        "| ESS/s | ESS/s interleaved | ESS per 10⁶ points | max err/sd | err/sd noise (1 MCSE) | sd / reference | bias "
        "| ours (best CV row at ≤ its bias) | × ESS/s | × ESS/s interleaved | × ESS per 10⁶ points |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---:|")

    def steps(r):
        return r.get("steps_per_chain", r["draws_per_chain"])

    def interleaved(r):
        return f"{r['ess_per_s_interleaved']:.3g}" if "ess_per_s_interleaved" in r else ""

    def common(r):
        return (
            f"{r['per_step']:,.0f} | {r.get('gradient_evaluations_per_step', '')} | {r['setup_passes']:.1f} | "
            f"{r['ess_min']:.0f} | {1e3 * r['ess_min'] / steps(r):.3g} | {r['ms_per_step']:.3g} | "
            f"{r['ess_per_s']:.3g} | {interleaved(r)} | {r['ess_per_million']:.3g} | {r['max_err_sd']:.3f} | "
            f"{r.get('err_sd_noise', float('nan')):.3f} | {r['sd_ratio'][0]:.3f}–{r['sd_ratio'][1]:.3f} | "
            f"{r['bias']:.3g}"
        )

    for r in ours:
        print(f"| {r['method']} | | {common(r)} | | | | |")
    for r in peers:
        better = [o for o in ours if o["bias"] <= r["bias"]]
        if better and not r["diverged"]:
            best = max(better, key=lambda o: o.get("ess_per_s_interleaved", o["ess_per_s"]))
            both = "ess_per_s_interleaved" in best and "ess_per_s_interleaved" in r
            versus = (
                f"{best['method'][len('CV minibatch Barker + ') :]} ({best['bias']:.3f}) | "
                f"{best['ess_per_s'] / r['ess_per_s']:.3g} | "
                + (f"{best['ess_per_s_interleaved'] / r['ess_per_s_interleaved']:.3g}" if both else "")
                + f" | {best['ess_per_million'] / r['ess_per_million']:.3g}"
            )
        elif r["diverged"]:
            versus = "(diverged) | | | "
        else:
            versus = "none at ≤ its bias | | | "
        print(f"| {r['method']} | {r['step_size']:.3g} | {common(r)} | {versus} |")
    for kind, grid in grids.items():
        print(
            f"  {kind} grid (step: bias, err/sd, sd ratio, ESS min, ESS/s): "
            + "; ".join(
                f"{g['step_size']:.3g}: "
                + (
                    "diverged"
                    if g["diverged"]
                    else f"{g['bias']:.3f}, {g['max_err_sd']:.3f}, {g['sd_ratio'][0]:.2f}–"
                    f"{g['sd_ratio'][1]:.2f}, ESS {g['ess_min']:.0f}, {g['ess_per_s']:.3g}"
                )
                for g in grid
            )
        )
    for kind in grids:
        print(f"  {kind}: " + next(r["note"] for r in peers if r["kind"] == kind))


# ----------------------------------------------------------------------------------------------- reference


def reference_posterior(kind, model, mode, covariates, response, *, draws, warmup, seed, cache_dir, chain_method):
    num_data, d = covariates.shape
    path = (
        pathlib.Path(cache_dir).expanduser()
        / f"reference_{kind}_N{num_data}_d{d}_seed{seed}_{draws}x{CHAINS}_w{warmup}.npz"
    )
    if path.exists():
        saved = np.load(path)
        out = {k: saved[k] for k in saved.files}
        out["cached"] = True
        return out, path
    began = time.perf_counter()
    if kind == "nuts":
        run = run_numpyro(
            "nuts",
            covariates,
            response,
            mode.position,
            num_warmup=warmup,
            num_samples=draws,
            seed=seed + 1000,
            chain_method=chain_method,
        )
        samples, seconds = run["draws"], run["seconds"] + run["warmup_wall"] + run["compile_run"]
    else:
        result = tallmcmc.sample(
            model,
            tallmcmc.laplace_independence(mode),
            tallmcmc.exact_metropolis(),
            initial_position=mode.position,
            num_samples=draws,
            num_chains=CHAINS,
            progress=False,
            seed=seed + 1000,
        )
        samples, seconds = np.asarray(result.positions), result.sampling_seconds + result.compile_seconds
    ess, mcse = coordinate_stats(samples)
    out = dict(
        mean=samples.mean((0, 1)),
        sd=samples.std((0, 1)),
        mcse=mcse,
        ess=ess,
        seconds=np.float64(time.perf_counter() - began),
        sampling_seconds=np.float64(seconds),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **out)
    out["cached"] = False
    return out, path


# ----------------------------------------------------------------------------------------------- main


def print_table(rows, num_data, d):
    exact = {r["proposal"]: r["ess_per_s"] for r in rows if r["method"].startswith("exact Barker")}
    hmcecs = next((r["ess_per_s"] for r in rows if r["method"].startswith("NumPyro HMCECS")), None)
    print(
        "\n| method | points/step | setup passes | accept | draws/chain | ESS min | ESS/s | × exact (same proposal) "
        "| × HMCECS | ESS/s w/ warm-up | ESS per 10⁶ points | max err/sd | max err/MCSE | sd / reference | ms/step |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for r in rows:
        base = exact.get(r.get("proposal"))
        times_exact = (
            f"{r['ess_per_s'] / base:.3g}" if base and r.get("proposal") and not r["method"].startswith("exact") else ""
        )
        times_hmcecs = f"{r['ess_per_s'] / hmcecs:.3g}" if hmcecs else ""
        warm = f"{r['ess_per_s_warmup']:.3g}" if "ess_per_s_warmup" in r else ""
        accept = "" if np.isnan(r["accept"]) else f"{r['accept']:.2f}"
        print(
            f"| {r['method']} | {r['per_step']:,.0f} | {r['setup_passes']:.1f} | {accept} | {r['draws_per_chain']} | "
            f"{r['ess_min']:.0f} | {r['ess_per_s']:.3g} | {times_exact} | {times_hmcecs} | {warm} | "
            f"{r['ess_per_million']:.3g} | {r['max_err_sd']:.3f} | {r['max_err_mcse']:.2f} | "
            f"{r['sd_ratio'][0]:.3f}–{r['sd_ratio'][1]:.3f} | {r['ms_per_step']:.3g} |"
        )
    for r in rows:
        if r.get("note") and "kind" not in r:  # the SG-MCMC peers' notes follow their own table
            print(f"  {r['method']}: {r['note']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--dimension", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="data seed")
    parser.add_argument("--draws", type=int, default=2000, help="kept draws per chain (control-variate tests)")
    parser.add_argument("--draws-exact", type=int, default=None, help="draws per chain for the exact test")
    parser.add_argument("--draws-naive", type=int, default=None, help="draws per chain for the naive test")
    parser.add_argument("--skip-naive", action="store_true", help="skip the naive minibatch test (slow at large N)")
    parser.add_argument(
        "--exact-proposals",
        nargs="*",
        default=["RW", "t5", "HMC"],
        choices=["RW", "t5", "HMC"],
        help="proposals run with the exact (full-data) Barker test",
    )
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--reference", choices=["nuts", "independence"], default="nuts")
    parser.add_argument("--reference-draws", type=int, default=2000)
    parser.add_argument("--reference-warmup", type=int, default=1000)
    parser.add_argument("--skip-nuts", action="store_true")
    parser.add_argument("--skip-hmcecs", action="store_true")
    parser.add_argument("--nuts-draws", type=int, default=1000)
    parser.add_argument("--nuts-warmup", type=int, default=500)
    parser.add_argument(
        "--chain-method",
        nargs="+",
        default=["vectorized"],
        choices=["vectorized", "sequential"],
        help="NUTS chain method(s); HMCECS always runs sequentially",
    )
    parser.add_argument("--hmcecs-draws", type=int, default=1000)
    parser.add_argument("--hmcecs-warmup", type=int, default=500)
    parser.add_argument("--hmcecs-subsample", type=int, default=1000)
    parser.add_argument("--hmcecs-blocks", type=int, default=100)
    parser.add_argument("--skip-tuna", action="store_true", help="skip the TunaMH rows")
    parser.add_argument("--tuna-chi", type=float, default=0.1, help="χ of TunaMH on control-variate residuals")
    parser.add_argument("--tuna-raw-chi", type=float, default=1e-3, help="χ of TunaMH on the raw log-likelihood")
    parser.add_argument(
        "--tuna-raw-scale",
        type=float,
        default=0.1,
        help="TunaMH on the raw log-likelihood uses the Laplace RW with this fraction of 2.38/√d",
    )
    parser.add_argument("--draws-tuna-raw", type=int, default=None, help="draws per chain for raw TunaMH")
    parser.add_argument("--skip-sgmcmc", action="store_true", help="skip the BlackJAX SGLD / SGHMC rows")
    parser.add_argument("--sgmcmc-kinds", nargs="+", default=["SGLD", "SGHMC"], choices=["SGLD", "SGHMC"])
    parser.add_argument(
        "--sgmcmc-steps",
        type=int,
        default=20_000,
        help="SGLD / SGHMC steps per chain (no warm-up: they start at the mode, as ours)",
    )
    parser.add_argument("--sgmcmc-thin", type=int, default=10, help="keep every this many SGLD / SGHMC steps")
    parser.add_argument("--sghmc-steps", type=int, default=None, help="SGHMC steps per chain (default --sgmcmc-steps)")
    parser.add_argument("--sghmc-thin", type=int, default=None, help="SGHMC thinning (default --sgmcmc-thin)")
    parser.add_argument(
        "--sgmcmc-retime",
        type=int,
        default=2,
        help="rounds of interleaved re-timing of our control-variate rows and the peers' search picks "
        "(not their doc steps; 0: none)",
    )
    parser.add_argument(
        "--sgmcmc-repeats",
        type=int,
        default=2,
        help="the rows in the table: fastest of this many timings of the same draws",
    )
    parser.add_argument("--sgmcmc-batch", type=int, default=100, help="SGLD / SGHMC minibatch (rows per step)")
    parser.add_argument("--sghmc-integration-steps", type=int, default=10, help="blackjax.sghmc's default, 10")
    parser.add_argument("--sgmcmc-bias", type=float, default=0.05, help="bias limit of the step search, in sd")
    parser.add_argument(
        "--sgmcmc-rule",
        choices=["mean+sd", "mean"],
        default="mean+sd",
        help="step search: limit max(err/sd, |sd ratio − 1|) or err/sd only",
    )
    parser.add_argument(
        "--sgmcmc-grid-factor",
        type=float,
        default=10**0.25,
        help="the step grid: the largest doc step divided by this, repeatedly, until two steps in "
        "a row meet the bias limit",
    )
    parser.add_argument("--sgmcmc-grid-min", type=float, default=1e-10)
    parser.add_argument(
        "--sgmcmc-min-ess",
        type=float,
        default=2000,
        help="the step search stops at a step whose min ESS is below this (below it the noise of "
        "err/sd and of the sd ratio, max over d coordinates, nears the 0.05 limit)",
    )
    parser.add_argument("--cache-dir", default="~/.cache/tallmcmc/bench")
    parser.add_argument(
        "--json", default=None, help="write the rows here (default: <cache-dir>/results_N<N>_d<d>.json)"
    )
    args = parser.parse_args()
    d = args.dimension
    try:
        import numpyro  # noqa: F401

        have_numpyro = True
    except ImportError:
        have_numpyro = False
        print("NumPyro NUTS / HMCECS: not run (pip install -e '.[bench]' to add them)")
    if not args.skip_sgmcmc:
        try:
            import blackjax  # noqa: F401
        except ImportError:
            args.skip_sgmcmc = True
            print("BlackJAX SGLD / SGHMC: not run (blackjax is not installed; pip install -e '.[bench]' to add them)")
    if args.reference == "nuts" and not have_numpyro:
        args.reference = "independence"
    for num_data in args.sizes:
        covariates, response = logistic_regression.simulate(num_data, d, seed=args.seed)
        model = logistic_regression.model(covariates, response)
        covariates_j, response_j = jnp.asarray(covariates), jnp.asarray(response)
        began = time.perf_counter()
        mode = tallmcmc.find_mode(model, jnp.zeros(d, jnp.float32))
        mode_seconds = time.perf_counter() - began
        began = time.perf_counter()
        cv = tallmcmc.taylor_control_variate(model, mode.position)
        cv_seconds = time.perf_counter() - began
        covariance = tallmcmc.laplace_covariance(mode)
        print(f"\nload average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(
            f"N = {num_data:,}, d = {d}: mode {mode.data_passes:.0f} passes, {mode.iterations} iterations, "
            f"{mode_seconds:.1f} s; control variate {cv_seconds:.1f} s (both incl. compilation)",
            flush=True,
        )
        reference, path = reference_posterior(
            args.reference,
            model,
            mode,
            covariates_j,
            response_j,
            draws=args.reference_draws,
            warmup=args.reference_warmup,
            seed=args.seed,
            cache_dir=args.cache_dir,
            chain_method=args.chain_method[0],
        )
        print(
            f"reference: {args.reference}, {args.reference_draws} x {CHAINS}"
            + (f" after {args.reference_warmup} warm-up" if args.reference == "nuts" else "")
            + f"; min ESS {reference['ess'].min():.0f}; {float(reference['seconds']):.0f} s"
            + (" (cached: " + str(path) + ")" if reference["cached"] else f" (saved: {path})"),
            flush=True,
        )
        options = dict(initial_position=mode.position, num_chains=CHAINS, progress=False, seed=1)
        independence = tallmcmc.laplace_independence(mode, degrees_of_freedom=5)
        hamiltonian = tallmcmc.proxy_hamiltonian(cv, 0.5, 3, preconditioner=covariance)
        walk = tallmcmc.laplace_random_walk(mode)
        minibatch = tallmcmc.minibatch_barker(args.batch_size, control_variate=cv)
        runs = [
            ("exact Barker + Laplace RW", "RW", walk, tallmcmc.exact_barker(), args.draws_exact),
            ("exact Barker + independence t₅", "t5", independence, tallmcmc.exact_barker(), args.draws_exact),
            ("exact Barker + proxy HMC (ε 0.5, L 3)", "HMC", hamiltonian, tallmcmc.exact_barker(), args.draws_exact),
            (
                "naive minibatch Barker + Laplace RW",
                "RW",
                walk,
                tallmcmc.minibatch_barker(args.batch_size),
                args.draws_naive,
            ),
            ("CV minibatch Barker + Laplace RW", "RW", walk, minibatch, None),
            ("CV minibatch Barker + independence t₅", "t5", independence, minibatch, None),
            ("CV minibatch Barker + proxy HMC (ε 0.5, L 3)", "HMC", hamiltonian, minibatch, None),
        ]
        if not args.skip_tuna:  # TunaMH (issue 10): exact, Poisson minibatch; the example's own bound
            cv_bound = logistic_regression.tuna_bound(model, control_variate=cv)
            cv_tuna = tallmcmc.tuna(args.tuna_chi, cv_bound, control_variate=cv)
            small_walk = tallmcmc.laplace_random_walk(mode, scale=args.tuna_raw_scale * 2.38 / np.sqrt(d))
            runs += [
                (
                    f"TunaMH (χ {args.tuna_raw_chi:g}) + Laplace RW × {args.tuna_raw_scale:g}",
                    "RW small",
                    small_walk,
                    tallmcmc.tuna(args.tuna_raw_chi, logistic_regression.tuna_bound(model)),
                    args.draws_tuna_raw,
                ),
                (f"CV TunaMH (χ {args.tuna_chi:g}) + Laplace RW", "RW", walk, cv_tuna, None),
                (f"CV TunaMH (χ {args.tuna_chi:g}) + proxy HMC (ε 0.5, L 3)", "HMC", hamiltonian, cv_tuna, None),
            ]
        if args.skip_naive:
            runs = [run for run in runs if not run[0].startswith("naive")]
        runs = [run for run in runs if not run[0].startswith("exact") or run[1] in args.exact_proposals]
        rows, timers = [], {}
        for name, proposal_key, proposal, test, draws in runs:
            result = tallmcmc.sample(model, proposal, test, num_samples=draws or args.draws, **options)
            if name.startswith("CV minibatch"):  # for the interleaved re-timing beside the SG-MCMC peers
                timers[name] = lambda p=proposal, t=test, n=draws or args.draws: (
                    tallmcmc.sample(model, p, t, num_samples=n, **options).sampling_seconds
                )
            result.setup_data_used.setdefault(mode.name, mode.data_used)
            row = summarise(
                name,
                result.positions,
                reference,
                seconds=result.sampling_seconds,
                per_step=result.data_used.mean(),
                setup_points=sum(result.setup_data_used.values()),
                total_points=result.total_data_used,
                num_data=num_data,
                accept=result.acceptance_rate,
                ms_per_step=1e3 * result.seconds_per_step,
            )
            row["proposal"] = proposal_key
            rows.append(row)
            print(
                f"  {name}: {row['ess_per_s']:.3g} ESS/s, {row['per_step']:,.0f} points/step, "
                f"{row['ms_per_step']:.3g} ms/step, err/MCSE {row['max_err_mcse']:.2f}",
                flush=True,
            )
        if have_numpyro and not args.skip_nuts:
            for method in args.chain_method:
                run = run_numpyro(
                    "nuts",
                    covariates_j,
                    response_j,
                    mode.position,
                    num_warmup=args.nuts_warmup,
                    num_samples=args.nuts_draws,
                    seed=args.seed + 7,
                    chain_method=method,
                )
                note = (
                    f"{method} chains; mean num_steps {run['num_steps']:.2f} (warm-up {run['warmup_num_steps']:.2f}), "
                    f"max {run['max_steps']}; warm-up {args.nuts_warmup}: {run['warmup_wall'] - run['warmup_compile']:.1f} s "
                    f"(+ {run['warmup_compile']:.1f} s compilation, removed; sampling: {run['compile_run']:.1f} s "
                    f"removed); starts at the mode (mode not charged)"
                )
                rows.append(
                    summarise(
                        f"NumPyro NUTS ({method})",
                        run["draws"],
                        reference,
                        seconds=run["seconds"],
                        per_step=run["per_step"],
                        setup_points=run["setup_points"],
                        total_points=run["setup_points"] + run["warmup_points"] + run["sample_points"],
                        num_data=num_data,
                        seconds_with_warmup=run["seconds_with_warmup"],
                        ms_per_step=run["ms_per_step"],
                        note=note,
                    )
                )
                print(f"  NUTS ({method}): {rows[-1]['ess_per_s']:.3g} ESS/s; {note}", flush=True)
        if have_numpyro and not args.skip_hmcecs:
            run = run_numpyro(
                "hmcecs",
                covariates_j,
                response_j,
                mode.position,
                num_warmup=args.hmcecs_warmup,
                num_samples=args.hmcecs_draws,
                seed=args.seed + 11,
                subsample_size=args.hmcecs_subsample,
                num_blocks=args.hmcecs_blocks,
            )
            note = (
                f"m = {args.hmcecs_subsample}, {args.hmcecs_blocks} blocks, Taylor proxy (degree 2) at our mode, "
                f"sequential chains; mean num_steps {run['num_steps']:.2f} (warm-up {run['warmup_num_steps']:.2f}), "
                f"max {run['max_steps']}; 'accept' = mean block-update acceptance probability; warm-up "
                f"{args.hmcecs_warmup} incl. proxy setup: {run['warmup_wall'] - run['warmup_compile']:.1f} s "
                f"(+ {run['warmup_compile']:.1f} s compilation, removed; sampling: {run['compile_run']:.1f} s removed)"
            )
            setup = run["setup_points"] + mode.data_used
            rows.append(
                summarise(
                    "NumPyro HMCECS + Taylor proxy",
                    run["draws"],
                    reference,
                    seconds=run["seconds"],
                    per_step=run["per_step"],
                    setup_points=setup,
                    total_points=setup + run["warmup_points"] + run["sample_points"],
                    num_data=num_data,
                    accept=run["accept"],
                    seconds_with_warmup=run["seconds_with_warmup"],
                    ms_per_step=run["ms_per_step"],
                    note=note,
                )
            )
            print(f"  HMCECS: {rows[-1]['ess_per_s']:.3g} ESS/s; {note}", flush=True)
        peers, grids = [], {}
        if not args.skip_sgmcmc:
            peers, grids, peer_timers = run_sgmcmc_peers(args, covariates_j, response_j, mode, reference, num_data)
            rows += peers
            retime_interleaved(
                [r for r in rows if r["method"] in timers or r["method"] in peer_timers],
                {**timers, **peer_timers},
                args.sgmcmc_retime,
            )
        print(
            f"\nN = {num_data:,}, d = {d}; reference {args.reference} ({args.reference_draws} x {CHAINS}); "
            f"ms/step = wall per step of all {CHAINS} chains together (tallmcmc vmaps them; NumPyro per its chain method)"
        )
        print_table(rows, num_data, d)
        cv_rows = [r for r in rows if r["method"].startswith("CV")]
        print(
            "CV minibatch Barker, points/step and ms/step: "
            + "; ".join(f"{r['proposal']} {r['per_step']:.0f} pts, {r['ms_per_step']:.3g} ms" for r in cv_rows)
        )
        if peers:
            print_sgmcmc(peers, grids, rows, args)
        out = pathlib.Path(args.json or pathlib.Path(args.cache_dir).expanduser() / f"results_N{num_data}_d{d}.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            json.dumps(
                dict(
                    num_data=num_data,
                    dimension=d,
                    reference=args.reference,
                    reference_draws=args.reference_draws,
                    load=os.getloadavg(),
                    rows=rows,
                ),
                indent=1,
                default=float,
            )
        )
        print(f"rows written to {out}; load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
