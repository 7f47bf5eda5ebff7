"""What :func:`tallmcmc.sample_tall` says of its own run: :class:`TallDiagnosis` (``result.diagnosis``).

Every setup pass by source, warm-up's measurements and the decision with its reason, the data per step, the error
bounds, r̂ and ESS (ArviZ's), whether warm-up settled, and the problems that make the run warn
(:func:`diagnose`): r̂ above :data:`RHAT_LIMIT`, ESS for the sd far below the bulk ESS, proposals almost never
accepted, a warm-up that did not settle, with the advice to run longer (:func:`run_longer`) where that is the cheap
way; and where a float32 run finds a problem, how much float32 rounds Δ (:func:`float32_rounding`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from tallmcmc import flat_positions
from tallmcmc._device import to_device
from tallmcmc.choice_of_test import LOW_ACCEPTANCE, TestChoice
from tallmcmc.control_variate import ControlVariate
from tallmcmc.interop import arviz as arviz_bridge
from tallmcmc.model import Model, rows_of
from tallmcmc.proposals.base import Proposal
from tallmcmc.run_warnings import VACUOUS_ERROR_BOUND
from tallmcmc.sampling import SamplingResult
from tallmcmc.sampling.continuation import starts_of

__all__ = [
    "KinkedCoordinates",
    "NonFiniteCurvature",
    "Rounding",
    "TallDiagnosis",
    "diagnose",
    "float32_rounding",
    "kinked_coordinates",
    "non_finite_curvature",
    "run_longer",
    "sd_mixing_ratio",
    "sticky_tails",
]

#: A warm-up has settled when, over its second half, every chain's proxy acceptance is within this of the target.
SETTLED_TOLERANCE = 0.15
#: ... and the chains' adapted step factors are within this ratio of each other.
SETTLED_FACTOR_RATIO = 3.0
#: The diagnosis warns about r̂ above this (Vehtari et al. 2021).
RHAT_LIMIT = 1.01
#: The bulk ESS a run's advice to run longer aims at (Vehtari et al. 2021: 100 per chain for 4 chains). Where the
#: run fell short, the advice says how many draws a chain would take to reach it at the run's own rate ...
TARGET_ESS = 400
#: ... and where that is more than this many times the draws the run made, that a longer run is the costly way.
LONGER_RUN_LIMIT = 20
#: What to do about a posterior far from its Laplace approximation (the diagnosis says it where warm-up measured it).
FAR_FROM_LAPLACE = (
    "A posterior far from Gaussian around its mode (a curved ridge, as between a hierarchical scale and non-centred "
    "group effects; a funnel, as a horseshoe's scales make; or a likelihood that is not smooth) needs either a "
    "parametrisation in which it is closer to Gaussian (for groups with many rows each, the centred one) or a "
    "sampler that adapts to its shape with full-data gradients, such as NumPyro's NUTS (docs/sample_tall.md, 'When "
    "the posterior is far from its Laplace approximation')"
)


#: The diagnosis reports a problem where a coordinate's tail ESS (ArviZ's, of its 5% and 95% quantiles) is below this
#: fraction of its bulk ESS: the chains reach the tails rarely and stay there long when they do. Measured with the
#: plain proxy-HMC move (``docs/sample_tall.md``, "When the tails mix slower than the bulk"): 0.14-0.46 on 24 seeds of
#: the N = 1,000 normal mixture, whose sds then come out up to 9% narrow or 19% wide; 0.57-0.95 on near-Gaussian
#: linear regressions (N = 2,000, d = 1, 3 and 9, 48 runs at 4 x 500 and 4 x 2,000 draws); 0.58-0.90 on the mixture
#: drawn with the momentum tempered (seeds 1-12), whose draws match NUTS. Until 2026-12-01 the check read the sd's
#: ESS instead (:func:`sd_mixing_ratio`, still reported): 0.17-0.67 on the same mixture runs (it missed five of 24
#: whose sds were 6-7% narrow, z to -5.7) and 0.41-0.91 on the regressions (a false alarm on two runs of 48).
TAIL_ESS_RATIO_LIMIT = 0.5
#: ... and where that coordinate's tail ESS per kept draw is also below this: its tails mix slower than the default
#: move's do on posteriors it fits, not merely slower than an unusually efficient bulk. The tail ratio alone is noisy
#: on short runs (an ESS of 5% quantile indicators): on the N = 2,000 logistic regression (d = 10, exact path) it read
#: below ½ on 2 of 12 runs at 4 x 500 draws and 3 of 12 at 4 x 100, on the linear regression (d = 9) on 3 of 12 at
#: 4 x 100; those runs' tail ESS per draw was 0.17-0.43 (one, at 4 x 100, below this limit), the mixture's
#: 0.002-0.18 (24 runs at 4 x 2,000 and 12 at 4 x 500), a near-Gaussian posterior's at least 0.37 at 4 x 500 or more
#: (``docs/sample_tall.md``, "When the tails mix slower than the bulk"). A chain whose bulk mixes slowly too (a
#: random walk, the minibatch Barker test's ⅓ cap) passes the second condition at once, and is judged by the ratio.
TAIL_ESS_PER_DRAW_LIMIT = 0.25
#: Where a float32 run's diagnosis finds a problem, the float32 rounding of Δ for a proposal-sized move from a chain's
#: last position is measured against float64 (:func:`float32_rounding`); above this root sum of squares it is named as
#: a cause. Found by the 2026-11-29 third user-model audit: a Poisson regression with a count of 2.1·10⁸ (terms of
#: ~4·10⁹ that cancel) accepted 0.3% in float32 and blamed the posterior's shape, and accepts 100% in float64; on a
#: 20,000-row copy the rounding measures 96, on an ordinary logistic regression 10⁻⁵ (docs/sample_tall.md, "When
#: float32 rounds Δ").
ROUNDING_NOISE_LIMIT = 0.1
_ROUNDING_STREAM = 0x20D  # the move at which float32_rounding measures Δ's rounding


def _passes(passes: float) -> str:
    """A count of passes over the data in words: three significant figures, 8,000 rather than 8e+03."""
    return f"{passes:,.0f}" if abs(passes) >= 1000 else f"{passes:.3g}"


@dataclasses.dataclass
class TallDiagnosis:
    """What :func:`sample_tall` decided, what it measured and what the run says about itself.

    Attributes
    ----------
    decision
        ``"minibatch"`` (the minibatch test on control-variate residuals),
        ``"exact"`` (exact Metropolis with the proxy proposal), ``"tuna"``
        (TunaMH on the residuals) or ``"random walk"`` (no Laplace
        approximation, or one whose proposals warm-up measured to be rejected:
        exact Metropolis with a covariance-adapted random walk); or
        ``"minibatch, then exact"``: the kept draws began with the minibatch
        test, which then cost more than the exact test (``switched_at``).
    reason
        Why, in words, with the numbers.
    mode, control_variate
        The setup objects (``None`` where not built).
    choice
        The :class:`TestChoice` made from the warm-up's measurements (``None``
        on the random-walk path).
    setup_passes
        One-off passes over N by source (mode, control variate, the start
        check: ``"start check (subsample)"``, or ``"start check"`` where N ≤
        :data:`START_CHECK_ROWS` or on the random-walk path).
    warmup_passes, sampling_passes
        Data used by warm-up (its second half is the measured window) and
        by the kept draws, in passes over N (all chains).
    data_fraction
        Mean data points per kept step, as a fraction of N.
    error_bound_median, vacuous_fraction
        Of the kept subsampled steps: the median ``error_bound`` and the fraction
        at or above :data:`tallmcmc.run_warnings.VACUOUS_ERROR_BOUND` (NaN without any).
    r_hat_max, ess_bulk_min
        Over every coordinate of the draws (ArviZ rank-normalised r̂ and bulk ESS).
    warmup_settled
        Whether warm-up reached its target in every chain with consistent step
        factors (``None`` without a proxy proposal).
    problems
        The findings that say the result may be wrong (also warned about).
    past_first_stage, stopping_batch_size
        Of the kept steps of a sequential minibatch test (Barker or penalty),
        the fraction that grew their minibatch past the first stage for its
        variance (the first stage's estimated Var(Δ*) at least ½σ²) and did
        not read all N (NaN under another test), and a ``batch_size`` at
        which 90% of them would have stopped at once. Where a step's stop is
        random it selects Δ* on skewed residuals (``docs/minibatch_error.md``,
        "Skewed log ratios"). Reported, not a problem: whether the draws move
        depends on how the skew follows the moves' direction, which a run
        cannot see (``docs/sample_tall.md``, "When the minibatch grows past
        its first stage").
    ess_tail_ratio_min, ess_tail_per_draw_min
        Over every coordinate, ArviZ's tail ESS (of the 5% and 95%
        quantiles) over the bulk ESS, and over the kept draws; a coordinate
        below both :data:`TAIL_ESS_RATIO_LIMIT` and
        :data:`TAIL_ESS_PER_DRAW_LIMIT` is a problem (the chains visit the
        tails rarely).
    ess_sd_ratio_min
        Over every coordinate, ArviZ's ESS for the sd (of the squared
        deviations) over the bulk ESS. Reported, not a problem: it reads low
        on right draws of near-Gaussian posteriors too
        (:data:`TAIL_ESS_RATIO_LIMIT`).
    proposal, test
        What made the kept draws (the last of them): ``tallmcmc.sample(model,
        d.proposal, d.test, resume=result, num_samples=…)`` continues the run,
        as does ``sample_tall(model, resume=result, num_samples=…)``.
    switched_at
        Where the kept draws switched from the minibatch test to the exact
        test: the number of kept draws per chain made before (``None``: no
        switch; :data:`KEPT_CHECKS`).
    seconds
        Wall time by phase, in seconds: ``"setup"`` (mode, covariance,
        control variate), ``"look for outlying rows"`` (with a second
        warm-up, where it ran one), ``"warm-up"``, ``"TunaMH pilot"``,
        ``"kept draws"`` (on the random-walk path, with that walk's own
        warm-up) and ``"checks after the draws"`` (the diagnosis, the float32
        rounding check, the look for other modes); compilation is in the phase
        that waited for it. Phases that did not run are absent.
    setup_fallback
        Why :func:`tallmcmc.fast_setup` gave up and the full-data
        :func:`tallmcmc.find_mode` found the mode (its passes are in
        ``setup_passes``); ``None`` where it did not, or did not run. Warned
        about, unless the look for outlying rows found the cause and held
        those rows (then only printed, with ``progress=True``).
    momentum_temperature
        The kept draws' proxy-HMC momentum temperature λ: 1, or
        :data:`tallmcmc.tall_tempering.TEMPERED_MOMENTUM` where the plain move's
        warm-up accepted less than :data:`tallmcmc.tall_tempering.TEMPER_BELOW`
        of its moves (``None`` on the random-walk path).
    """

    decision: str
    reason: str
    mode: Any = None
    control_variate: ControlVariate | None = None
    choice: TestChoice | None = None
    setup_passes: dict[str, float] = dataclasses.field(default_factory=dict)
    warmup_passes: float = 0.0
    sampling_passes: float = 0.0
    data_fraction: float = float("nan")
    error_bound_median: float = float("nan")
    vacuous_fraction: float = float("nan")
    r_hat_max: float = float("nan")
    ess_bulk_min: float = float("nan")
    warmup_settled: bool | None = None
    problems: list[str] = dataclasses.field(default_factory=list)
    proposal: Any = None
    test: Any = None
    ess_sd_ratio_min: float = float("nan")
    ess_tail_ratio_min: float = float("nan")
    ess_tail_per_draw_min: float = float("nan")
    past_first_stage: float = float("nan")
    stopping_batch_size: int | None = None
    switched_at: int | None = None
    setup_fallback: str | None = None
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    momentum_temperature: float | None = None

    def __repr__(self) -> str:
        """One line: the decision and the run's own verdict (``str`` gives the reasons and every figure)."""
        problems = f"{len(self.problems)} problem(s), see str()" if self.problems else "no problems"
        return (
            f"TallDiagnosis(decision={self.decision!r}, setup {sum(self.setup_passes.values()):.3g} passes, "
            f"r̂ max {self.r_hat_max:.3f}, bulk ESS min {self.ess_bulk_min:.0f}, {problems})"
        )

    def __str__(self) -> str:
        lines = [f"decision: {self.decision} — {self.reason}"]
        setup = ", ".join(f"{name} {_passes(passes)}" for name, passes in self.setup_passes.items())
        lines.append(f"setup passes over N: {_passes(sum(self.setup_passes.values()))} ({setup})")
        if self.setup_fallback is not None:
            lines.append(f"fast_setup fell back to find_mode: {self.setup_fallback}")
        if self.seconds:
            phases = ", ".join(f"{phase} {seconds:.3g}" for phase, seconds in self.seconds.items())
            lines.append(f"wall time: {sum(self.seconds.values()):.3g} s ({phases})")
        lines.append(
            f"data per kept step: {100 * self.data_fraction:.3g}% of N; warm-up {_passes(self.warmup_passes)} "
            f"passes, kept draws {_passes(self.sampling_passes)} passes"
        )
        if np.isfinite(self.error_bound_median):
            lines.append(
                f"error bound: median {self.error_bound_median:.3g}, {100 * self.vacuous_fraction:.3g}% of subsampled "
                f"steps ≥ {VACUOUS_ERROR_BOUND}"
                + (
                    f"; {100 * self.past_first_stage:.3g}% past the first stage for their variance"
                    + (
                        f" (batch_size={self.stopping_batch_size:,} would stop most at once)"
                        if self.past_first_stage > 0
                        else ""
                    )
                    if np.isfinite(self.past_first_stage)
                    else ""
                )
            )
        lines.append(
            f"r̂ max {self.r_hat_max:.4g}, bulk ESS min {self.ess_bulk_min:.0f}, tail ESS / bulk ESS min "
            f"{self.ess_tail_ratio_min:.2f} (per draw {self.ess_tail_per_draw_min:.2f}), ESS of the sd / bulk ESS min "
            f"{self.ess_sd_ratio_min:.2f}"
        )
        if self.warmup_settled is not None:
            lines.append(
                f"warm-up's step settled (proxy acceptance on target): {'yes' if self.warmup_settled else 'NO'}"
            )
        lines.extend(f"problem: {problem}" for problem in self.problems)
        return "\n".join(lines)


class Rounding(NamedTuple):
    """What float32 does to Δ between two positions (:func:`float32_rounding`): the sd of its rounding error over
    the data, the datum that contributes most, and that datum's error."""

    noise: float
    worst: int
    worst_error: float

    def problem(self) -> str:
        return (
            f"in float32 the per-datum log-likelihoods round: for a proposal-sized move from a chain's last position, "
            f"Δ differs from its float64 value by {self.noise:.3g} (root sum of squares over the data; the tests decide "
            f"on a scale of 1), {self.worst_error:.3g} of it from datum {self.worst:,} alone (terms of large "
            "magnitude that cancel, such as a count of 10⁸ in a Poisson likelihood); the acceptance and r̂ below may "
            "say more about that rounding than about the posterior. Rerun in float64: jax.config.update("
            "'jax_enable_x64', True) before building the model, with float64 data (docs/sample_tall.md, 'When "
            "float32 rounds Δ')"
        )


def float32_rounding(model: Model, result: SamplingResult, covariance: np.ndarray | None = None) -> Rounding | None:
    """The rounding of Δ = Σᵢ lᵢ(θ₁) − lᵢ(θ₀) in float32, measured against the same differences in float64 (four
    passes over N): θ₀ is chain 0's last position, θ₁ a move from it drawn from N(0, ``covariance``) (a proposal's
    size), or without one chain 1's last position. ``None`` where the run is not float32, has neither, or its model
    cannot run in float64 (or not on one device).

    Chains stuck by rounding may all sit on the same float32 value of a term (the 2026-11-29 audit's count of 10⁸
    pinned every chain to one value of its linear predictor), so two chains' positions can miss what a move shows.
    """
    state = result.last_state
    if state is None or state.mesh_shape is not None or (covariance is None and state.num_chains < 2):
        return None
    positions = starts_of(state)
    if any(np.asarray(leaf).dtype != np.float32 for leaf in jax.tree_util.tree_leaves(positions)):
        return None
    first = jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[0], positions)
    if covariance is not None:
        flat, unravel = ravel_pytree(first)
        move = np.random.default_rng(_ROUNDING_STREAM).multivariate_normal(np.zeros(flat.shape[0]), covariance)
        second = unravel(jnp.asarray(np.asarray(flat, np.float64) + move, np.float32))
    else:
        second = jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[1], positions)

    def differences(data, dtype):
        values = jax.jit(lambda position, data: model.per_datum_log_likelihood(position, data))
        at = [jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf, dtype), p) for p in (first, second)]
        return np.asarray(values(at[1], data) - values(at[0], data), np.float64)

    def widened(leaf):
        leaf = np.asarray(leaf)
        return jnp.asarray(leaf, np.float64) if np.issubdtype(leaf.dtype, np.floating) else jnp.asarray(leaf)

    try:
        single = differences(model.data, np.float32)
        with jax.enable_x64(True):
            double = differences(jax.tree_util.tree_map(widened, model.data), np.float64)
    except Exception:  # a model that cannot run in float64 or on rows held here: nothing to say
        return None
    error = single - double
    if error.shape != (model.num_data,) or not np.all(np.isfinite(error)):
        return None
    worst = int(np.argmax(np.abs(error)))
    return Rounding(float(np.sqrt(np.sum(error**2))), worst, float(abs(error[worst])))


def _flat_draws(result) -> tuple[np.ndarray, np.ndarray]:
    """The kept draws as (chains, draws, d) float64, and which coordinates move. A coordinate that never moves in any
    chain (a Cholesky factor's unit corner) has no r̂ and no ESS of its sd: it is left out, so that its NaN cannot
    hide another coordinate's r̂ (max() of a list starting with NaN is NaN)."""
    flat = flat_positions.flat_draws(result.positions)  # on the host: an eager vmap compiled two programs
    return flat, np.ptp(flat.reshape(-1, flat.shape[-1]), axis=0) > 0


def _ess_ratios(flat: np.ndarray, varies: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each moving coordinate's bulk ESS, and its sd's ESS and its tail ESS over it (ArviZ's ``method="sd"`` and
    ``method="tail"``)."""
    moving = flat[..., varies]
    if not moving.size:
        return np.array([float(flat.shape[0] * flat.shape[1])]), np.array([np.nan]), np.array([np.nan])
    with warnings.catch_warnings():  # ArviZ divides by a chain's zero variance for chains that never moved
        warnings.simplefilter("ignore", RuntimeWarning)
        ess = np.ravel(arviz_bridge.ess(moving))
        sd_ratios = np.ravel(arviz_bridge.ess(moving, method="sd")) / ess
        tail_ratios = np.ravel(arviz_bridge.ess(moving, method="tail")) / ess
    return ess, sd_ratios, tail_ratios


def _smallest(ratios: np.ndarray) -> float:
    return float(np.nanmin(ratios)) if np.isfinite(ratios).any() else float("nan")


def sd_mixing_ratio(result) -> float:
    """The smallest ESS of a coordinate's sd over its bulk ESS in ``result``'s kept draws (NaN where none moves): the
    diagnosis's ``ess_sd_ratio_min``, reported."""
    return _smallest(_ess_ratios(*_flat_draws(result))[1])


def _sticky(
    ess: np.ndarray, tail_ratios: np.ndarray, num_draws: int, ratio_limit: float, per_draw_limit: float
) -> int | None:
    """The coordinate whose tails mixed slowest of those below both limits (``None``: none is)."""
    with np.errstate(invalid="ignore"):
        flagged = (tail_ratios < ratio_limit) & (ess * tail_ratios / num_draws < per_draw_limit)
    return int(np.argmin(np.where(flagged, tail_ratios, np.inf))) if flagged.any() else None


def sticky_tails(
    result, ratio_limit: float = TAIL_ESS_RATIO_LIMIT, per_draw_limit: float = TAIL_ESS_PER_DRAW_LIMIT
) -> tuple[float, float] | None:
    """Where some coordinate of ``result``'s kept draws has a tail ESS below ``ratio_limit`` of its bulk ESS and below
    ``per_draw_limit`` per draw (what :func:`diagnose` reports), the slowest one's tail ratio and tail ESS per draw;
    ``None`` where none has."""
    flat, varies = _flat_draws(result)
    ess, _, tail_ratios = _ess_ratios(flat, varies)
    num_draws = flat.shape[0] * flat.shape[1]
    worst = _sticky(ess, tail_ratios, num_draws, ratio_limit, per_draw_limit)
    if worst is None:
        return None
    return float(tail_ratios[worst]), float(ess[worst] * tail_ratios[worst] / num_draws)


def diagnose(result, decision, reason, mode, control_variate, choice, proposal, problems, num_warmup) -> TallDiagnosis:
    num_data = result.num_data
    info = result.info
    setup = {name: used / num_data for name, used in result.setup_data_used.items()}
    warmup = 0.0 if result.warmup_info is None else float(np.sum(result.warmup_info["data_used"])) / num_data
    subsampled = ~info["used_full_data"] & ~info["non_finite"] & (info["error_bound"] > 0)
    if subsampled.any():
        bounds = info["error_bound"][subsampled]
        median, vacuous = float(np.median(bounds)), float(np.mean(bounds >= VACUOUS_ERROR_BOUND))
    else:
        median = vacuous = float("nan")
    flat, varies = _flat_draws(result)
    names = np.array(_coordinate_names(result.positions))[varies]
    moving = flat[..., varies]
    with warnings.catch_warnings():  # ArviZ divides by a chain's zero variance for chains that never moved
        warnings.simplefilter("ignore", RuntimeWarning)
        rhat = np.ravel(arviz_bridge.rhat(moving)) if result.num_chains > 1 and moving.size else np.array([])
    ess, sd_ratios, tail_ratios = _ess_ratios(flat, varies)
    rhat = np.where(np.isnan(rhat), np.inf, rhat)  # a coordinate that moves without an r̂: chains stuck apart
    settled = None if proposal is None else _warmup_settled(result, proposal, num_warmup)
    problems = list(problems)
    acceptance = float(np.mean(info["accepted"]))
    rhat_max = float(np.max(rhat)) if rhat.size else float("nan")
    if rhat.size and rhat_max > RHAT_LIMIT:
        shown = f"{rhat_max:.3f}" if rhat_max < 100 else f"{rhat_max:.2g}"  # chains stuck apart: 6e+15, not 16 digits
        problems.append(
            f"r̂ = {shown} > {RHAT_LIMIT} on {names[int(np.argmax(rhat))]}"
            f"{f' and {int(np.sum(rhat > RHAT_LIMIT)) - 1} more coordinates' if np.sum(rhat > RHAT_LIMIT) > 1 else ''}"
            ": the chains disagree; "
            + (
                run_longer(float(np.min(ess)), int(flat.shape[1]), decision == "random walk")
                if acceptance >= LOW_ACCEPTANCE
                else "do not trust the draws (the acceptance rate says why)"
            )
        )
    if acceptance < LOW_ACCEPTANCE:
        problems.append(
            f"the kept steps accepted {100 * acceptance:.3g}% of their proposals: the proposal"
            + (" (a random walk)" if decision == "random walk" else ", built on the Laplace approximation at the mode,")
            + " does not fit this posterior, so the chains barely move and a longer run will not fix it. "
            + FAR_FROM_LAPLACE
        )
    num_draws = flat.shape[0] * flat.shape[1]
    tail_per_draw = ess * tail_ratios / num_draws
    worst = _sticky(ess, tail_ratios, num_draws, TAIL_ESS_RATIO_LIMIT, TAIL_ESS_PER_DRAW_LIMIT)
    if worst is not None:
        problems.append(
            f"{names[worst]}'s tails mixed far slower than its bulk (tail ESS {tail_ratios[worst]:.2f} of the bulk "
            f"ESS {ess[worst]:.0f}, {tail_per_draw[worst]:.2f} per draw; 0.57-0.95 and 0.37-0.88 per draw on "
            "posteriors close to Gaussian): the chains rarely reach the posterior's "
            "tails, which are heavier than the Laplace approximation the proposal follows, and stay there long when "
            "they do, so sds and tail quantiles may be off by more than the bulk ESS suggests; "
            + ("compare a much longer run (num_samples), or " if acceptance >= LOW_ACCEPTANCE else "")
            + "sample this posterior with full-data gradients: minibatch_hamiltonian(ε, 3, N, "
            "minibatch='trajectory', preconditioner=laplace_covariance(mode)) under exact_metropolis(), or NUTS "
            "(docs/sample_tall.md, 'When the tails mix slower than the bulk')"
        )
    if np.isfinite(vacuous) and vacuous > 0.5:
        problems.append(
            f"the minibatch test's error bound was ≥ {VACUOUS_ERROR_BOUND} on {100 * vacuous:.0f}% of its steps: its "
            "decisions may be far from the exact test's"
        )
    if settled is False:
        problems.append(
            "warm-up did not settle (the chains' proxy acceptance is off its target or their step factors disagree): "
            "raise num_warmup"
        )
    past, stopping = _past_first_stage(result)
    return TallDiagnosis(
        decision=decision,
        reason=reason,
        mode=mode,
        control_variate=control_variate,
        choice=choice,
        setup_passes=setup,
        warmup_passes=warmup,
        sampling_passes=float(np.sum(info["data_used"])) / num_data,
        data_fraction=float(np.mean(info["data_used"])) / num_data,
        error_bound_median=median,
        vacuous_fraction=vacuous,
        r_hat_max=rhat_max,
        ess_bulk_min=float(np.min(ess)),
        warmup_settled=settled,
        problems=problems,
        ess_sd_ratio_min=_smallest(sd_ratios),
        ess_tail_ratio_min=_smallest(tail_ratios),
        ess_tail_per_draw_min=_smallest(tail_per_draw),
        past_first_stage=past,
        stopping_batch_size=stopping if np.isfinite(past) else None,
    )


def _past_first_stage(result: SamplingResult) -> tuple[float, int]:
    """(fraction of the kept steps past the first stage for their variance, a batch_size most of them stop at) for
    the sequential minibatch tests; (NaN, 0) for any other test.

    The first stage is the fewest points a step with finite ratios read; a step is past it when it read more and not
    all N. Only steps grown for their variance count: those whose first stage's Var(Δ*), estimated from the stop's
    as s²·b/b₀·(1 − b₀/N)/(1 − b/N), is at least ½ (σ² = 1), where the stop is random and so selects. Steps the
    tail guard grew (a first stage far below σ², a minibatch sized by the chain's pooled kurtosis) are left out:
    their size is set mostly by the chain's earlier steps, and their cost is the data-use warning's business
    (``docs/sample_tall.md``, "When the minibatch grows during the kept draws"). The batch_size suggested is the
    90th percentile of the points the counted steps read, rounded up to tens.
    """
    if not str(result.test_name).startswith(("minibatch_barker", "minibatch_penalty")):
        return float("nan"), 0
    used = np.asarray(result.info["data_used_by_test"])
    finite = ~np.asarray(result.info["non_finite"], bool)  # a step that met a non-finite ratio may stop early
    read = used[(used > 0) & finite]
    if read.size == 0:
        return float("nan"), 0
    first = int(read.min())
    num_data = result.num_data
    grown = (used > first) & finite & ~np.asarray(result.info["used_full_data"], bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        at_first = (
            np.asarray(result.info["variance"], np.float64)
            * used
            / first
            * (1.0 - first / num_data)
            / (1.0 - used / num_data)
        )
    grown &= np.nan_to_num(at_first, nan=0.0) >= 0.5
    if not grown.any():
        return 0.0, first
    suggested = int(math.ceil(np.quantile(used[grown], 0.9) / 10.0) * 10)
    return float(np.mean(grown)), min(suggested, num_data)


def run_longer(ess_min: float, draws: int, random_walk: bool = False) -> str:
    """The advice for chains that disagree but accept: run longer, with how much longer at the run's own rate
    (``random_walk``: the kept draws' proposal was the adapted random walk, not the Laplace approximation's)."""
    advice = "run longer (num_samples, num_warmup) before trusting the draws"
    if not (np.isfinite(ess_min) and 0 < ess_min < TARGET_ESS):
        return advice
    needed = math.ceil(draws * TARGET_ESS / ess_min)
    advice += (
        f": the least bulk ESS is {ess_min:.0f} from {draws:,} draws a chain, so a bulk ESS of {TARGET_ESS} would take "
        f"about num_samples={needed:,}"
    )
    if needed > LONGER_RUN_LIMIT * draws:
        advice += (
            f", over {LONGER_RUN_LIMIT} times this run: "
            + (
                "a random walk mixes slowly in many dimensions"
                if random_walk
                else "the proposal, built on the Laplace approximation at the mode, fits this posterior poorly"
            )
            + ", and a sampler that follows its gradient is the cheaper way (full-data "
            "gradients: minibatch_hamiltonian(ε, 3, N, minibatch='trajectory', preconditioner=laplace_covariance(mode)) "
            "under exact_metropolis(), or NumPyro's NUTS; docs/sample_tall.md, 'When the posterior is far from its "
            "Laplace approximation')"
        )
    return advice


#: Where the mode search did not converge, a transformed coordinate (a positive scale's logarithm, say) whose
#: unconstrained value ended beyond this is named: e^{±15} is 3·10^{∓7}-fold off its start. A horseshoe regression's
#: search (the eleventh user-model audit, 2026-12-02) ended with the global scale's logarithm at −22.8 (τ ≈ 10⁻¹⁰)
#: and the signals' local scales' at +21 to +22; its other coordinates within ±7.
RAN_OFF_LIMIT = 15.0


def ran_off(model, position) -> str | None:
    """Where ``position`` (a mode search's end) has transformed coordinates beyond :data:`RAN_OFF_LIMIT` on the
    unconstrained scale, those coordinates and their constrained values in words (``"tau → 1.2e-10, lam[0] →
    4.3e+09"``); ``None`` where none has, or the model says nothing of constraints (no ``constrain``: a coordinate
    that is not transformed may be large and right). A coordinate counts as transformed where its site keeps its
    shape and its constrained value differs from the unconstrained one."""
    constrain = getattr(model, "constrain", None)
    if constrain is None or not isinstance(position, dict):
        return None
    constrained = constrain(position)
    if not isinstance(constrained, dict):
        return None
    said = []
    for name, value in position.items():
        value, meant = np.asarray(value), np.asarray(constrained.get(name, value))
        # reshaped (a Cholesky factor), or not transformed
        if meant.shape != value.shape or np.array_equal(meant, value):
            continue
        for index in zip(*np.nonzero(np.abs(np.atleast_1d(value)) > RAN_OFF_LIMIT)):
            label = name + (f"[{', '.join(map(str, index))}]" if value.ndim else "")
            said.append(f"{label} → {np.atleast_1d(meant)[index]:.2g}")
    return ", ".join(said[:6]) + (f" and {len(said) - 6} more" if len(said) > 6 else "") if said else None


#: Rows per block of :func:`non_finite_curvature`'s pass.
_CURVATURE_BLOCK = 4096


class NonFiniteCurvature(NamedTuple):
    """Where the Hessian of −log π at a point is not finite (:func:`non_finite_curvature`): the rows whose
    log-likelihood's Hessian is not finite there, how many of those also have a log-likelihood or gradient that is
    not finite, whether the log-prior's Hessian is not finite, and the data points the pass touched."""

    rows: np.ndarray
    value_or_gradient_not_finite: int
    prior: bool
    data_used: int

    def words(self) -> str:
        """The finding, and what to do, in words for a warning."""
        if self.rows.size:
            first = ", ".join(f"{row:,}" for row in self.rows[:5]) + (" …" if self.rows.size > 5 else "")
            where = (
                f"the log-likelihood's second derivatives are NaN or infinite at {self.rows.size:,} "
                f"row{'s' if self.rows.size > 1 else ''} ({first})"
                + (
                    ", whose log-likelihoods and gradients are finite there"
                    if not self.value_or_gradient_not_finite
                    else f", {self.value_or_gradient_not_finite:,} of which also have a log-likelihood or gradient that is not "
                    "finite"
                )
                + (", and the log-prior's are too" if self.prior else "")
            )
        elif self.prior:
            where = "the log-prior's second derivatives are NaN or infinite there"
        else:
            where = "no single row's second derivatives are NaN or infinite there (their sum overflows)"
        return (
            f"{where}: a log density written so that its second derivative under- or overflows, e.g. NumPyro's "
            "Bernoulli(probs=Φ(η)) for a probit link in float32 (at η < −9.0, y·log p's second derivative divides "
            "0 by p², which underflows to 0; at η > 5.2, NumPyro clamps p below 1, so a row with y = 0 there stops "
            "pulling: a posterior wrong for any sampler, NUTS's means 11 sd off on the audit's data). "
            "Write the term so that it stays finite: jax.scipy.special.log_ndtr(x) in place of log(norm.cdf(x)) "
            "(a censored normal's term), and for a probit numpyro.factor of log_ndtr(η) where y = 1 and "
            "log_ndtr(−η) where y = 0 (docs/sample_tall.md, 'Second derivatives that are not finite')"
        )


def non_finite_curvature(model: Model, position) -> NonFiniteCurvature | None:
    """Which rows make the Hessian of −log π at ``position`` not finite (one pass over N: each row's log-likelihood,
    gradient and Hessian-vector product with a vector of ones, in blocks: a NaN or infinite entry of a row's Hessian
    makes that product so), and whether the log-prior's Hessian is not finite there. ``None`` on a model whose data
    are not all held by this process (nothing to say of rows held elsewhere), or whose rows cannot be evaluated one
    at a time in blocks (a diagnosis never stops the run).

    For the diagnosis of a mode search that stopped on a Hessian that is not finite: the path then has no Laplace
    approximation, and the usual cause is a likelihood written in a way whose second derivative underflows in
    float32 at rows predicted with near certainty (the twelfth user-model audit's probit regression, 2026-12-02).
    """
    if model.num_data != int(jax.tree_util.tree_leaves(model.data)[0].shape[0]):
        return None
    flat, unravel = flat_positions.ravel(position)

    @jax.jit
    def finite(theta, data):
        def one(datum):
            def term(t):
                return model.log_likelihood(unravel(t), datum)

            value, gradient = jax.value_and_grad(term)(theta)
            product = jax.jvp(jax.grad(term), (theta,), (jnp.ones_like(theta),))[1]
            return jnp.isfinite(value) & jnp.all(jnp.isfinite(gradient)), jnp.all(jnp.isfinite(product))

        rows = jax.lax.map(one, data, batch_size=_CURVATURE_BLOCK)
        prior = jnp.all(jnp.isfinite(jax.hessian(lambda t: model.log_prior(unravel(t)))(theta)))
        return rows, prior

    try:
        (first, second), prior = jax.device_get(finite(flat, model.data))
    except Exception:  # a diagnosis never stops the run: a model whose rows cannot be mapped over says nothing here
        return None
    rows = np.flatnonzero(~np.asarray(second))
    return NonFiniteCurvature(rows, int(np.sum(~np.asarray(first)[rows])), not bool(prior), model.num_data)


#: Rows a kink check evaluates at most (a fixed random subsample where N is larger: kinks are the likelihood's form,
#: which a few thousand rows show as well as all of them).
KINK_CHECK_ROWS = 4096
#: Coordinates a kink check looks at, at most (each row's Hessian is d × d there).
KINK_CHECK_MAX_DIMENSION = 64
#: The share of the checked rows that move with a coordinate (first derivative not 0) whose second derivative in it
#: is exactly 0, from which that coordinate's log-likelihood is called piecewise linear (a kink at every datum).
KINK_SHARE = 0.9
_KINK_CHECK_STREAM = 0x4B1E4  # the check's rows, apart from every other seed


class KinkedCoordinates(NamedTuple):
    """Coordinates in which the log-likelihood is piecewise linear — a kink at every datum — (:func:`kinked_coordinates`):
    their names, the share of the checked rows moving with each whose second derivative in it is exactly 0, and the
    rows checked (:attr:`data_used`, the data points the check touched, is their number)."""

    names: list[str]
    shares: np.ndarray
    rows_checked: int

    @property
    def data_used(self) -> int:
        """The data points the check touched: one per row checked."""
        return self.rows_checked

    def words(self) -> str:
        """The finding, and what to do, in words for a warning."""
        shown = ", ".join(self.names[:5]) + (f" and {len(self.names) - 5} more" if len(self.names) > 5 else "")
        share = float(np.min(self.shares))
        how = "every one" if share == 1 else f"{100 * share:.0f}% or more"
        return (
            f"the log-likelihood is piecewise linear in {shown}: its second derivative there is exactly 0 at {how} "
            f"of the {self.rows_checked:,} rows checked whose first derivative is not, a kink at every datum "
            "(|y − μ| terms, as in dist.Laplace, dist.AsymmetricLaplace or dist.AsymmetricLaplaceQuantile for quantile regression), so the Hessian does not measure the posterior's "
            "curvature and there is no Laplace approximation to build on. The exact random walk it runs instead is "
            "right but costs N per step; for a faster path write a smooth likelihood (e.g. dist.StudentT for a "
            "robust regression) (docs/sample_tall.md, 'When the posterior is far from its Laplace approximation')"
        )


def kinked_coordinates(model: Model, position, seed: int = 0) -> KinkedCoordinates | None:
    """The coordinates in which the log-likelihood is piecewise linear at ``position``: for each coordinate, among
    :data:`KINK_CHECK_ROWS` rows (all of them where N is smaller; else a fixed random subsample drawn from ``seed``)
    those whose log-likelihood's first derivative in it is not 0, the share whose second derivative in it is exactly 0
    (each row's gradient and Hessian, in blocks). A coordinate whose share is at least :data:`KINK_SHARE` (over at
    least 10 rows) is named. ``None`` where there are more than :data:`KINK_CHECK_MAX_DIMENSION` coordinates, the
    data are not all held by this process, or the rows cannot be evaluated one at a time (a diagnosis never stops
    the run).

    For the diagnosis of a mode search that ended with no Laplace approximation: a likelihood with |y − μ| terms
    (Laplace, asymmetric Laplace: robust and quantile regression) has a Hessian of 0 in its location coordinates
    almost everywhere, so Newton's method sees only the prior's curvature there and stops where the Hessian is not
    positive definite or far from the mode (the thirteenth user-model audit's quantile regression, 2026-12-02). A
    smooth likelihood's second derivative is 0 in a coordinate only at rows that coordinate does not move (a group
    effect at the other groups' rows), which the share leaves out.
    """
    num_data = model.num_data
    leaves = jax.tree_util.tree_leaves(model.data)
    if num_data != int(leaves[0].shape[0]) or not all(getattr(leaf, "is_fully_addressable", True) for leaf in leaves):
        return None
    flat, unravel = flat_positions.ravel(position)
    if flat.size > KINK_CHECK_MAX_DIMENSION:
        return None
    if num_data > KINK_CHECK_ROWS:
        generator = np.random.default_rng([_KINK_CHECK_STREAM, int(seed) % (1 << 64)])
        rows = np.sort(generator.choice(num_data, KINK_CHECK_ROWS, replace=False))
        data = rows_of(model.data, to_device(rows, np.int32))
    else:
        data = model.data

    @jax.jit
    def derivatives(theta, data):
        def one(datum):
            def term(t):
                return model.log_likelihood(unravel(t), datum)

            gradient = jax.grad(term)(theta)
            return gradient != 0, (gradient != 0) & (jnp.diagonal(jax.hessian(term)(theta)) == 0)

        moving, flat_there = jax.lax.map(one, data, batch_size=_CURVATURE_BLOCK)
        return jnp.sum(moving, axis=0), jnp.sum(flat_there, axis=0)

    try:
        moving, flat_there = (np.asarray(part) for part in jax.device_get(derivatives(flat, data)))
    except Exception:  # a diagnosis never stops the run: a model whose rows cannot be mapped over says nothing here
        return None
    checked = int(jax.tree_util.tree_leaves(data)[0].shape[0])
    shares = flat_there / np.maximum(moving, 1)
    kinked = np.flatnonzero((moving >= 10) & (shares >= KINK_SHARE))
    if not kinked.size:
        return KinkedCoordinates([], np.zeros(0), checked)
    names = _coordinate_names(jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[None, None], position))
    return KinkedCoordinates([names[index] for index in kinked], shares[kinked], checked)


def _coordinate_names(positions) -> list[str]:
    """Names of the flattened coordinates of ``positions`` (leading axes chain, draw), in ``ravel_pytree``'s order.

    ``"tau"``, ``"u[3]"``, ``"L[1, 0]"`` for a dict, ``"theta_1[0]"`` for a tuple (ArviZ's names,
    :func:`tallmcmc.interop.arviz.named_variables`), ``"coordinate 34"`` for a single array.
    """
    leaves = jax.tree_util.tree_flatten_with_path(positions)[0]
    names = []
    for path, leaf in leaves:
        shape = np.shape(leaf)[2:]
        label = ".".join(str(key.key) if hasattr(key, "key") else f"theta_{getattr(key, 'idx', key)}" for key in path)
        for index in np.ndindex(*shape) if shape else [()]:
            if not label:
                names.append(f"coordinate {len(names)}")
            else:
                names.append(label + (f"[{', '.join(map(str, index))}]" if index else ""))
    return names


def _warmup_settled(result: SamplingResult, proposal: Proposal, num_warmup: int) -> bool | None:
    """Second half of the adaptation (the first ``num_warmup`` warm-up steps): each chain's proxy acceptance near
    the target, and the chains' step factors consistent."""
    if result.warmup_info is None or result.step_size_factor is None or proposal.proxy_target is None:
        return None
    second_half = result.warmup_info["proxy_acceptance"][:, num_warmup // 2 : num_warmup]  # the warm-up's own steps
    if second_half.size == 0 or not np.all(np.isfinite(second_half)):
        return None
    near = np.all(np.abs(second_half.mean(axis=1) - proposal.proxy_target) <= SETTLED_TOLERANCE)
    factors = np.asarray(result.step_size_factor, np.float64)
    consistent = factors.max() / factors.min() <= SETTLED_FACTOR_RATIO
    return bool(near and consistent)
