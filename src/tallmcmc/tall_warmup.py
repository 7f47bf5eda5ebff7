"""``sample_tall``'s warm-up: the proxy-HMC move and the test built from the setup, the chains' starts and their
check, the warm-up itself, and the choice of test measured on its steps.

The looks that may warm up again (:mod:`tallmcmc.tall_outlying_looks`, :mod:`tallmcmc.tall_tempering`) and the kept
draws (:mod:`tallmcmc.tall_kept_draws`) build on these pieces; :mod:`tallmcmc.automatic` runs the path.
``docs/sample_tall.md`` has the derivations and the measurements.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc import flat_positions
from tallmcmc._device import to_device
from tallmcmc.acceptance.minibatch_barker import minibatch_barker
from tallmcmc.acceptance.penalty import minibatch_penalty
from tallmcmc.choice_of_test import TestChoice, barker_acceptance, choose_test
from tallmcmc.control_variate import ControlVariate
from tallmcmc.mode import DEFAULT_CHUNK_ROWS
from tallmcmc.model import Model, Position, check_model, per_datum_program, rows_of
from tallmcmc.proposals.base import Proposal
from tallmcmc.proposals.proxy import proxy_hamiltonian, tuned_step
from tallmcmc.sampling import SamplingResult, WarmupResult, warmup
from tallmcmc.sampling.warmup_phase import compile_warmup
from tallmcmc.setup_fast import placeholder_control_variate
from tallmcmc.sharding import to_host

#: The integration time of the proxy-HMC move: a quarter period of the Laplace-preconditioned proxy dynamics.
INTEGRATION_TIME = math.pi / 2
#: The steps it starts with (warm-up then adapts the step, keeping ε·L, and may go down to one).
NUM_LEAPFROG_STEPS = 3
#: How its trajectory is integrated: the Gaussian part of the proxy exactly, the rest by kicks
#: (:func:`tallmcmc.proxy_hamiltonian`'s ``integrator="split"``; ``docs/warmup.md``, "The split integrator").
INTEGRATOR = "split"
#: The proxy-HMC move's ``momentum_temperature`` λ in the first warm-up (:func:`tallmcmc.proxy_hamiltonian`): 1, the
#: plain move (``benchmarks/bench_tempered_momentum.py`` sets it to measure every warm-up at another λ).
MOMENTUM_TEMPERATURE = 1.0
#: The step is drawn from ε·U(1 − j, 1 + j): integration times in [0.4π, 0.6π], far from half a period (π).
STEP_SIZE_JITTER = 0.2
#: ``minibatch_test="auto"`` keeps the penalty test when the mean of its bound on the CLT error of the acceptance
#: probability over the measurement window is at most this. Measured (docs/penalty.md, "Where the penalty test is
#: used"): 0.0013 on the logistic regression at N = 10⁶, 0.015 at N = 10⁷ in float32 (rounding noise in the
#: residuals; the posterior within 1.9 MCSE there), at most 0.008 on the other tall targets tried, and 0.04 on the
#: N = 1,000 mixture, where both minibatch tests break detailed balance at some pairs from the posterior's tails.
PENALTY_ERROR_LIMIT = 0.02
#: ``sample_tall`` checks the model at each chain's start on this many rows (a fixed, seeded subsample, the same rows
#: for every start) instead of all N; with N at most this, ``sample``'s own full check runs (docs/sample_tall.md,
#: "The start check").
START_CHECK_ROWS = 2**14
_START_CHECK_BLOCK = DEFAULT_CHUNK_ROWS  # rows gathered and evaluated at once (a divisor of START_CHECK_ROWS)
_START_CHECK_STREAM = 0x57A27  # the start check's rows, apart from every other seed
_STARTS_STREAM = 0x57A275  # the chains' starts


class RunShape(NamedTuple):
    """What every run of :func:`sample_tall`'s path shares: kept draws and warm-up steps per chain, the seed,
    :func:`tallmcmc.sample`'s options (``num_chains``, ``progress`` and the user's) and the progress printer."""

    num_samples: int
    num_warmup: int
    seed: int
    options: dict[str, Any]
    say: Callable[..., None]
    #: whether the minibatch test's kept draws are run in segments and their cost looked at (:data:`~tallmcmc.tall_kept_draws.KEPT_CHECKS`):
    #: on one device, without a mesh, a checkpoint file or another driver
    watch_kept: bool = False
    #: a saved run of ``sample_tall`` that this call continues (``resume=``): the setup and warm-up are redone to
    #: rebuild its proposal and test, and its chains go on instead of new kept draws
    resume: SamplingResult | None = None


def warmed_up(
    model: Model,
    mode,
    covariance: np.ndarray,
    control_variate: ControlVariate,
    batch_size: int,
    minibatch_test: str,
    run: RunShape,
    keep_going: Callable[[dict], bool] | None = None,
    momentum_temperature: float | None = None,
    test=None,
) -> tuple[WarmupResult, Proposal, Any]:
    """The warm-up: proxy HMC on the Laplace approximation under the minibatch test, from starts checked on a
    subsample (counted as ``"start check (subsample)"``); the warmed chains, the proposal and the test.
    ``keep_going``: as for :func:`tallmcmc.warmup`; ``momentum_temperature``: the move's λ (``None``:
    :data:`MOMENTUM_TEMPERATURE`); ``test``: another test than the minibatch one (``None``: the minibatch test)."""
    proposal, warmup_test, starts = warmup_pieces(
        control_variate,
        covariance,
        mode.position,
        batch_size,
        minibatch_test,
        run.options["num_chains"],
        run.seed,
        momentum_temperature,
    )
    warmup_test = warmup_test if test is None else test
    starts = inside_support(model, mode.position, starts)
    checked = _check_starts(model, starts, run.seed)  # None: too few rows to subsample, sample's full check runs
    run.say("sample_tall: warm-up with the minibatch test, measuring what it costs ...", flush=True)
    warmed = warmup(
        model,
        proposal,
        warmup_test,
        initial_positions=starts,
        num_warmup=run.num_warmup,
        seed=run.seed,
        check_starts=checked is None,
        keep_going=keep_going,
        **{k: v for k, v in run.options.items() if k not in ("num_chunks", "checkpoint", "checkpoint_every")},
    )
    if checked is not None:
        warmed = dataclasses.replace(
            warmed, setup_data_used={"start check (subsample)": checked, **warmed.setup_data_used}
        )
    return warmed, proposal, warmup_test


def measured_choice(
    model: Model,
    warmed: WarmupResult,
    warmup_test,
    control_variate: ControlVariate,
    minibatch_test: str,
    batch_size: int,
    residual_cost: float | None,
) -> tuple[TestChoice, Any, str]:
    """What the warm-up's measurement window says: the test choice, the minibatch test the kept draws would run
    (under ``"auto"``, the Barker test where the penalty test's CLT error bound was above
    :data:`PENALTY_ERROR_LIMIT`), and the measurement in words."""
    pool = warmed.states.cache
    window = warmup_window(warmed)
    minibatch, note = warmup_test, ""
    if minibatch_test == "auto":
        error = float(np.mean(window["error_bound"]))
        if error > PENALTY_ERROR_LIMIT:  # Δ* too far from normal to trust the penalty: the Barker test smooths it
            minibatch = minibatch_barker(min(batch_size, model.num_data), control_variate=control_variate)
            window = {**window, "accepted": barker_acceptance(window["statistic"])}
            note = (
                f"; the minibatch test is the Barker test (its acceptance predicted from the window's Δ*): the "
                f"penalty test's mean CLT error bound in warm-up was {error:.2g} > {PENALTY_ERROR_LIMIT}"
            )
        else:
            note = f"; the minibatch test is the penalty test (mean CLT error bound {error:.2g})"
    choice = choose_test(
        window,
        model.num_data,
        to_host(pool) if hasattr(pool, "fourth") else None,
        control_variate,
        residual_cost=residual_cost,
        proposal_points=proposal_rows(control_variate, warmed.step_size_factor),
    )
    return choice, minibatch, choice.describe(model.num_data) + note


def proposal_rows(control_variate: ControlVariate, factors) -> float:
    """Rows the tuned proxy-HMC move reads per step, on average over the chains: (L + 1) evaluations of the outlying
    rows where its proxy follows them (``ControlVariate.outlying_in_proxy``), L the number of steps each chain's
    step factor gives (as :func:`tallmcmc.proposals.proxy.proxy_hamiltonian` tunes it); 0 otherwise."""
    if not control_variate.proposal_rows or factors is None:
        return 0.0
    factors = np.asarray(to_host(factors), np.float64)
    _, steps = tuned_step(INTEGRATION_TIME / NUM_LEAPFROG_STEPS, NUM_LEAPFROG_STEPS, factors, xp=np)
    return float(np.mean(steps + 1)) * control_variate.proposal_rows


def exact_choice(model: Model, warmed: WarmupResult, plain: TestChoice) -> tuple[TestChoice, None, str]:
    """What a warm-up under the exact test measures, for the choice ``plain`` (the exact test) made on the first
    warm-up: its window's acceptance is the Metropolis acceptance itself, not an estimate from Δ*, and sets the exact
    test's cost per effective draw; the minibatch test's figures stay the first warm-up's. As
    :func:`measured_choice` returns it, with no minibatch test (the kept draws run the exact test)."""
    acceptance = float(np.mean(to_host(warmup_window(warmed)["accepted"])))
    choice = plain.with_metropolis_acceptance(acceptance, model.num_data)
    measured = (
        f"{plain.describe(model.num_data)}; warmed up again under the exact test, which accepted "
        f"{100 * acceptance:.3g}%: ≈ {choice.exact_cost:,.0f} plain points per effective draw"
    )
    return choice, None, measured


def warmup_points(warmed: WarmupResult) -> int:
    """Every data point a warm-up touched: its steps' and its start check's (on a subsample, or on all N where N is at
    most :data:`START_CHECK_ROWS`)."""
    steps = int(np.sum(to_host(warmed.info["data_used"])))
    checks = sum(int(warmed.setup_data_used.get(name, 0)) for name in ("start check (subsample)", "start check"))
    return steps + checks


def warmup_pieces(
    control_variate: ControlVariate,
    covariance: np.ndarray,
    center: Position,
    batch_size: int,
    minibatch_test: str,
    num_chains: int,
    seed: int,
    momentum_temperature: float | None = None,
) -> tuple[Proposal, Any, Position]:
    """The warm-up's proposal (proxy HMC preconditioned by ``covariance``, its momentum tempered by
    ``momentum_temperature``, ``None``: :data:`MOMENTUM_TEMPERATURE` as it is when called), its minibatch test and the
    chains' starts (Laplace draws around ``center``)."""
    proposal = proxy_hamiltonian(
        control_variate,
        INTEGRATION_TIME / NUM_LEAPFROG_STEPS,
        NUM_LEAPFROG_STEPS,
        preconditioner=covariance,
        step_size_jitter=STEP_SIZE_JITTER,
        integrator=INTEGRATOR,
        momentum_temperature=MOMENTUM_TEMPERATURE if momentum_temperature is None else momentum_temperature,
    )
    first_minibatch = min(batch_size, control_variate.num_data)
    warmup_test = (minibatch_barker if minibatch_test == "barker" else minibatch_penalty)(
        first_minibatch, control_variate=control_variate
    )
    return proposal, warmup_test, chain_starts(center, covariance, num_chains, seed)


def compile_warmup_ahead(
    model: Model, start: Position, batch_size: int, minibatch_test: str, num_chains: int, num_warmup: int, seed: int
) -> bool:
    """Compile the warm-up's chain program on placeholders of what the setup will return (:func:`tallmcmc.fast_setup`,
    or :func:`tallmcmc.find_mode` and :func:`tallmcmc.taylor_control_variate`: the same kind of control variate),
    while it runs (:mod:`tallmcmc.sampling.ahead`); whether it compiled one."""
    placeholder = placeholder_control_variate(model, start)
    covariance = np.eye(flat_positions.dimension(start))
    proposal, warmup_test, starts = warmup_pieces(
        placeholder, covariance, placeholder.center, batch_size, minibatch_test, num_chains, seed
    )
    return compile_warmup(
        model, proposal, warmup_test, initial_positions=starts, num_warmup=num_warmup, num_chains=num_chains, seed=seed
    )


def warmup_window(warmed: WarmupResult) -> dict[str, np.ndarray]:
    """The measurement window: the second half of warm-up, where the step has settled."""
    half = warmed.num_warmup // 2
    return {name: values[:, half:] for name, values in warmed.info.items()}


def final_positions(warmed: WarmupResult) -> Position:
    """The chains' positions after warm-up (with a mesh, the first data shard's copy)."""
    positions = warmed.states.position
    if warmed.mesh is None:
        return positions
    return jax.tree_util.tree_map(lambda leaf: np.asarray(to_host(leaf))[0], positions)


def chain_starts(
    center: Position, covariance: np.ndarray, num_chains: int, seed: int, stream: int = _STARTS_STREAM
) -> Position:
    """One start per chain drawn from N(centre, covariance): dispersed as the posterior, so r̂ can see a stuck chain.

    Drawn on the host (NumPy, seeded by ``seed`` on a stream of its own) and shaped like ``center`` there: a few
    numbers, which JAX would compile several small programs to draw (0.4 s of a first run, measured).
    """
    leaves, structure = jax.tree_util.tree_flatten(center)
    flat = np.concatenate([np.ravel(np.asarray(leaf, np.float64)) for leaf in leaves])
    factor = np.linalg.cholesky(np.asarray(covariance, np.float64))
    noise = np.random.default_rng([stream, int(seed) % (1 << 64)]).standard_normal((num_chains, flat.size))
    draws = flat + noise @ factor.T
    parts, first = [], 0
    for leaf in leaves:
        size = int(np.size(leaf))
        dtype = jnp.result_type(leaf, float)
        parts.append(np.asarray(draws[:, first : first + size].reshape(num_chains, *np.shape(leaf)), dtype))
        first += size
    return jax.tree_util.tree_unflatten(structure, parts)


def inside_support(model: Model, center: Position, starts: Position) -> Position:
    """``starts`` (one per chain, drawn around ``center``), each whose log-prior is not finite replaced by ``center``.

    Near a scale at the edge of its support the starts can fall where the density underflows: a horseshoe
    regression (the eleventh user-model audit) at N = 2,000 has a local mode whose Laplace covariance sends a local
    scale's logarithm tens of units down, where the coefficient it scales has a log-prior of −inf in float32; at N =
    2·10⁴ the mode search runs off (the global scale at 10⁻¹⁰) and the random walk's starts, 0.1 away, fall there
    too. ``sample`` would refuse them with an error about ``initial_positions`` the user never passed; from the centre
    the run goes on and its diagnosis says what went wrong."""
    num_chains = int(jax.tree_util.tree_leaves(starts)[0].shape[0])
    chains = [jax.tree_util.tree_map(lambda leaf: leaf[chain], starts) for chain in range(num_chains)]  # noqa: B023
    # jitted, not eager: one program, the one check_model compiles for each start next, where an eager log-prior
    # compiled one small program per operation (four for the logistic example's, 0.2-0.6 s of a first run)
    log_prior = jax.jit(model.log_prior)
    try:
        finite = [bool(np.isfinite(float(log_prior(start)))) for start in chains]
    except Exception:  # noqa: BLE001 (a log-prior that cannot be traced: the starts as drawn; check_model names why)
        return starts
    if all(finite) or not np.isfinite(float(log_prior(center))):
        return starts  # all inside, or the centre no better: sample's check says what is wrong
    inside = [start if ok else center for start, ok in zip(chains, finite, strict=True)]
    return jax.tree_util.tree_map(lambda *leaves: np.stack([np.asarray(leaf) for leaf in leaves]), *inside)


def _check_starts(model: Model, starts: Position, seed: int) -> int | None:
    """Check the model at each chain's start on :data:`START_CHECK_ROWS` fixed rows; the points touched.

    The rows are drawn once from ``seed`` (without replacement, the same for
    every start); at each start the log-prior and each of those rows'
    log-likelihoods must be finite scalars (:func:`tallmcmc.check_model` on
    them, the offending row named by its index in the data). Returns
    ``None``, checking nothing, where ``sample``'s full check is to run
    instead: N ≤ :data:`START_CHECK_ROWS` (the subsample would be every row),
    or data that this process cannot gather rows of (split over processes).
    Why a subsample is enough here: ``docs/sample_tall.md``, "The start check".

    Raises
    ------
    ValueError
        Naming the chain whose start fails, the subsample and the first
        offending row, with ``check_model``'s explanation.
    """
    num_data = model.num_data
    leaves = jax.tree_util.tree_leaves(model.data)
    if num_data <= START_CHECK_ROWS or not all(getattr(leaf, "is_fully_addressable", True) for leaf in leaves):
        return None
    generator = np.random.default_rng([_START_CHECK_STREAM, int(seed) % (1 << 64)])
    rows = np.sort(generator.choice(num_data, START_CHECK_ROWS, replace=False))
    # gathered and evaluated in blocks of fast_setup's first subsample (DEFAULT_CHUNK_ROWS rows for d ≤ 64), so that
    # the programs fast_setup compiled for its own start check serve this one too (two programs fewer per process)
    blocks = [
        rows_of(model.data, to_device(rows[first : first + _START_CHECK_BLOCK], np.int32))
        for first in range(0, len(rows), _START_CHECK_BLOCK)
    ]
    evaluate = per_datum_program(model)  # compiled once per log-likelihood in a process

    def summary(position, data):  # check_model's evaluate_data: (count, first bad row of the data, its value, sum)
        values = np.concatenate([np.asarray(evaluate(position, block)) for block in data])
        bad = np.flatnonzero(~np.isfinite(values))
        first = int(bad[0]) if bad.size else 0
        return bad.size, int(rows[first]), values[first] if bad.size else 0.0, values.sum()

    datum_shape = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype), blocks[0])
    # the model on the whole subsample (check_model names its N), joined on the host and transferred: no program
    checked = model.with_data(
        jax.tree_util.tree_map(lambda *parts: to_device(np.concatenate([np.asarray(part) for part in parts])), *blocks)
    )
    num_chains = int(jax.tree_util.tree_leaves(starts)[0].shape[0])
    for chain in range(num_chains):
        start = jax.tree_util.tree_map(lambda leaf: leaf[chain], starts)  # noqa: B023 (used within this iteration)
        try:
            check_model(
                checked,
                start,
                f"the start of chain {chain}",
                evaluate_data=summary,
                datum_shape=datum_shape,
                data=blocks,
            )
        except ValueError as error:
            raise ValueError(
                f"sample_tall: the model fails at a chain's start, checked on {len(rows):,} of the N = {num_data:,} "
                "rows (the same rows for every chain; each start is a draw from the Laplace approximation around the "
                f"mode, near which the setup's full passes found every row finite): {error}. The model breaks down within "
                "the posterior's spread around its mode: fix the log-likelihood or the prior there (log-space "
                "formulas, an unconstrained parametrisation), or run tallmcmc.sample with starts of your own"
            ) from error
    return num_chains * len(rows)
