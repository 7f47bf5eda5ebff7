"""Checking a sampler against a target whose moments are known.

:func:`check_posterior_moments` is the one check that every kernel's
statistical test uses (the emcee practice): it compares the draws' mean and
variance per coordinate with the truth, with tolerances set from the Monte
Carlo standard error, i.e. from the effective sample size across chains
(ArviZ's rank-normalised bulk ESS), not from a hand-picked number.
:func:`run_and_check` runs a sampler with :func:`tallmcmc.sample` and applies
that check to its draws. :func:`repeated_decisions` is the decision-level
counterpart: many independent decisions of one test at one pair (θ, θ′), to
compare their frequency with the exact acceptance probability.
:func:`simulation_based_calibration` checks a sampler against posteriors it
is not told (Talts et al. 2018): ranks of prior draws among its draws on data
simulated from them must be uniform; :func:`calibration_power` says how likely
its chi-square test is to see a given error (``docs/calibration.md``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from tallmcmc._checks import removed_name
from tallmcmc._sbc import (
    CalibrationProblem,
    CalibrationResult,
    calibration_power,
    simulation_based_calibration,
)
from tallmcmc.acceptance.base import AcceptanceTest
from tallmcmc.interop.arviz import ess as arviz_ess
from tallmcmc.interop.arviz import rhat as arviz_rhat
from tallmcmc.model import Model
from tallmcmc.proposals.base import Proposal
from tallmcmc.sampling import SamplingResult, sample

__all__ = [
    "CalibrationProblem",
    "CalibrationResult",
    "MomentCheck",
    "calibration_power",
    "ReferenceErrors",
    "check_posterior_moments",
    "reference_errors",
    "repeated_decisions",
    "run_and_check",
    "simulation_based_calibration",
]


@dataclasses.dataclass
class MomentCheck:
    """The numbers behind a :func:`check_posterior_moments` verdict, per coordinate."""

    mean: np.ndarray
    variance: np.ndarray
    true_mean: np.ndarray
    true_variance: np.ndarray
    effective_sample_size: np.ndarray
    mean_z: np.ndarray  # (mean − truth) / MCSE
    variance_z: np.ndarray
    passed: bool

    def __str__(self) -> str:
        rows = [
            f"coordinate {i}: mean {m:.4g} (true {tm:.4g}, z {mz:+.2f}), variance {v:.4g} "
            f"(true {tv:.4g}, z {vz:+.2f}), ESS {e:.0f}"
            for i, (m, tm, mz, v, tv, vz, e) in enumerate(
                zip(
                    self.mean,
                    self.true_mean,
                    self.mean_z,
                    self.variance,
                    self.true_variance,
                    self.variance_z,
                    self.effective_sample_size,
                )
            )
        ]
        return ("passed" if self.passed else "FAILED") + "\n" + "\n".join(rows)


def check_posterior_moments(
    draws: np.ndarray,
    true_mean: np.ndarray,
    true_variance: np.ndarray,
    *,
    num_standard_errors: float = 4.0,
    minimum_effective_sample_size: float = 100.0,
) -> MomentCheck:
    """Compare draws with a known mean and variance within Monte Carlo error.

    Parameters
    ----------
    draws
        Array ``(chain, draw, d)`` (or ``(chain, draw)`` for d = 1).
    true_mean, true_variance
        The target's marginal means and variances, shape ``(d,)``.
    num_standard_errors
        Tolerance in standard errors. The mean's standard error is
        ``sd/√ESS``; the variance's is ``var·√(2/ESS)`` (exact for a Gaussian
        target, whose fourth central moment is 3σ⁴).
    minimum_effective_sample_size
        Fail if a coordinate's ESS is below this (a check with no power is
        no check).

    Returns
    -------
    MomentCheck
        With ``passed`` and the z-scores; ``str()`` of it is a readable report.
    """
    draws = np.asarray(draws, dtype=float)
    if draws.ndim == 2:
        draws = draws[..., None]
    if draws.ndim != 3:
        raise ValueError(f"draws must have shape (chain, draw, d); got {draws.shape}")
    true_mean = np.broadcast_to(np.asarray(true_mean, float), draws.shape[-1:])
    true_variance = np.broadcast_to(np.asarray(true_variance, float), draws.shape[-1:])
    ess = arviz_ess(draws, method="bulk")
    mean = draws.mean(axis=(0, 1))
    variance = draws.reshape(-1, draws.shape[-1]).var(axis=0, ddof=1)
    safe_ess = np.maximum(ess, 1.0)
    mean_z = (mean - true_mean) / (np.sqrt(true_variance) / np.sqrt(safe_ess))
    variance_z = (variance - true_variance) / (true_variance * np.sqrt(2.0 / safe_ess))
    passed = bool(
        np.all(np.abs(mean_z) <= num_standard_errors)
        and np.all(np.abs(variance_z) <= num_standard_errors)
        and np.all(ess >= minimum_effective_sample_size)
    )
    return MomentCheck(mean, variance, true_mean, true_variance, ess, mean_z, variance_z, passed)


class ReferenceErrors(NamedTuple):
    """Draws against a reference run's moments, per coordinate (:func:`reference_errors`)."""

    z_mean: np.ndarray  # (mean − reference) / √(MCSE² + reference MCSE²)
    z_sd: np.ndarray  # (sd − reference) / √(its standard error² + reference's²)
    sd_ratio: np.ndarray  # sd / reference sd
    r_hat: np.ndarray  # ArviZ's rank-normalised r̂ of the draws


def reference_errors(positions, mean, sd, mcse_mean=0.0, mcse_sd=0.0) -> ReferenceErrors:
    """Compare draws with a reference whose moments are themselves Monte Carlo estimates (a long NUTS run).

    ``positions``: the draws ``(chain, draw, …)``, any pytree, flattened per draw as
    :func:`jax.flatten_util.ravel_pytree` orders it; ``mean``, ``sd``, ``mcse_mean``, ``mcse_sd``: the reference's, per
    flat coordinate. The mean's standard error is sd/√ESS (bulk ESS); the sd's is sd·√((κ − 1)/(4·ESS)) with κ the
    draws' kurtosis (the delta method on the variance, right for tails heavier than a Gaussian's); the reference's
    MCSEs are added in quadrature. Unlike :func:`check_posterior_moments` (exact moments), no verdict: the caller
    sets the tolerance.
    """
    flat = np.asarray(jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(positions), np.float64)
    ess = arviz_ess(flat, method="bulk")
    got_mean, got_sd = flat.mean(axis=(0, 1)), flat.std(axis=(0, 1))
    kurtosis = np.mean((flat - got_mean) ** 4, axis=(0, 1)) / got_sd**4
    z_mean = (got_mean - mean) / np.hypot(got_sd / np.sqrt(ess), mcse_mean)
    z_sd = (got_sd - sd) / np.hypot(got_sd * np.sqrt((kurtosis - 1) / (4 * ess)), mcse_sd)
    return ReferenceErrors(z_mean, z_sd, got_sd / np.asarray(sd), np.ravel(arviz_rhat(flat)))


def run_and_check(
    model: Model,
    proposal: Proposal,
    test: AcceptanceTest,
    true_mean: np.ndarray,
    true_variance: np.ndarray,
    *,
    initial_positions: Any,
    num_samples: int,
    seed: int = 0,
    num_standard_errors: float = 4.0,
    minimum_effective_sample_size: float = 100.0,
    **sample_options: Any,
) -> tuple[SamplingResult, MomentCheck]:
    """Run a sampler and compare its draws with a known mean and variance.

    One chain per row of ``initial_positions``, run by :func:`tallmcmc.sample`
    (no progress bar), then checked by :func:`check_posterior_moments`.

    Parameters
    ----------
    model
        The target (:class:`tallmcmc.Model`).
    proposal, test
        The sampler, e.g. ``tallmcmc.random_walk(0.1)`` and
        ``tallmcmc.minibatch_barker(50)``.
    true_mean, true_variance
        The target's marginal means and variances, shape ``(d,)``.
    initial_positions
        Array ``(chain, d)``: one start per chain; its length sets the number
        of chains.
    num_samples
        Steps per chain (all kept).
    seed
        Seed of :func:`tallmcmc.sample`'s random stream.
    num_standard_errors, minimum_effective_sample_size
        As in :func:`check_posterior_moments`.
    **sample_options
        Passed on to :func:`tallmcmc.sample` (e.g. ``allow_inexact_proposal``).

    Returns
    -------
    result : SamplingResult
        The run, for further checks (acceptance rate, data used).
    check : MomentCheck
        The verdict; ``str()`` of it is a readable report.
    """
    starts = jnp.asarray(initial_positions)
    result = sample(
        model,
        proposal,
        test,
        initial_positions=starts,
        num_samples=num_samples,
        num_chains=starts.shape[0],
        seed=seed,
        progress=False,
        **sample_options,
    )
    check = check_posterior_moments(
        result.positions,
        true_mean,
        true_variance,
        num_standard_errors=num_standard_errors,
        minimum_effective_sample_size=minimum_effective_sample_size,
    )
    return result, check


#: ``repeated_decisions``'s compiled programs by (model, test, repetitions, warm-up, seed, dtype), the model and
#: test held with them (so their ids cannot be reused): another pair of the same model and test compiles nothing.
_DECISION_PROGRAMS: dict[tuple, tuple] = {}
_DECISION_PROGRAMS_KEPT = 8


def repeated_decisions(
    model: Model,
    test: AcceptanceTest,
    position,
    proposed,
    repetitions: int,
    *,
    warmup_decisions: int = 0,
    seed: int = 7,
    compiler_options: dict | None = None,
):
    """``repetitions`` independent decisions of ``test`` at the pair (``position``, ``proposed``).

    The decisions are vmapped over keys split from ``jax.random.key(seed)``
    and share one cache: ``test.init``'s, after ``warmup_decisions``
    sequential decisions at the same pair (a chain's earlier steps, for a
    test that learns across steps, such as the minibatch Barker test's tail
    pool). The warm-up decisions count as rejections, as for a chain that
    stays at ``position``: a test whose cache describes the accepted state
    (``keeps_cache_on_reject=False``, such as an exact test's cached
    log-likelihood) keeps its initial cache. The data-free part of Δ is 0
    (flat prior, symmetric proposal).
    The compiled program is kept for the last few (model, test) pairs, so
    further pairs of the same model and test compile nothing.
    ``compiler_options``: XLA's options for that program, as ``jax.jit``
    takes them (``None``: the process's); a test suite that compiles with
    quick-to-compile options process-wide gives a long-running check XLA's
    defaults back with it.

    Returns
    -------
    Decision
        With a leading axis of length ``repetitions`` on every field.
    """
    dtype = jnp.result_type(*jax.tree_util.tree_leaves(position), float)
    options = tuple(sorted((compiler_options or {}).items()))
    key = (id(model), id(test), repetitions, warmup_decisions, seed, str(dtype), options)
    cached = _DECISION_PROGRAMS.get(key)
    if cached is not None and cached[0] is model and cached[1] is test:  # the objects are held: ids not reused
        return cached[2](position, proposed)
    zero = jnp.zeros((), dtype)

    @functools.partial(jax.jit, compiler_options=dict(options) or None)
    def run(position, proposed):
        def one(cache, key):
            # a chain that stays at ``position``: each earlier decision counts as a rejection, so a cache that
            # describes the accepted state (an exact test's log-likelihood there) is not carried
            decision = test.decide(key, model, position, proposed, zero, cache)
            return (decision.cache if test.keeps_cache_on_reject else cache), None

        cache = test.init(model, position)
        if warmup_decisions:
            keys = jax.random.split(jax.random.fold_in(jax.random.key(seed), 1), warmup_decisions)
            cache = jax.lax.scan(one, cache, keys)[0]
        keys = jax.random.split(jax.random.key(seed), repetitions)
        return jax.vmap(lambda key: test.decide(key, model, position, proposed, zero, cache))(keys)

    if len(_DECISION_PROGRAMS) >= _DECISION_PROGRAMS_KEPT:
        _DECISION_PROGRAMS.pop(next(iter(_DECISION_PROGRAMS)))
    _DECISION_PROGRAMS[key] = (model, test, run)
    return run(position, proposed)


def __getattr__(name: str):
    """``gaussian_mean_problem`` was removed after 0.1.0: an ``AttributeError`` that names where it moved.

    It is :func:`tallmcmc.examples.gaussian_mean.calibration_problem`; nothing is imported (this core module
    imports no example).
    """
    raise removed_name(__name__, name, {"gaussian_mean_problem": "tallmcmc.examples.gaussian_mean.calibration_problem"})
