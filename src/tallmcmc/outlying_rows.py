r"""Outlying rows: residuals a minibatch cannot estimate, summed exactly at every step instead.

A Taylor control variate leaves each datum a residual :math:`r_i` (:mod:`tallmcmc.control_variate`); a minibatch
test estimates their sum from b of them. Where a few rows inform a direction of the posterior that the rest barely
do — a rare category's indicator, a covariate value far out (a leverage point) — the posterior is wide in that
direction, the expansion is poor along it, and those rows' residuals are orders of magnitude larger than the rest:
the residuals' kurtosis is in the thousands (6,200–8,400 in the fifth user-model audit's one-hot logistic regression
at N = 10⁶), the minibatch Barker test's tail guard asks for tens of thousands of them per step, and
:func:`tallmcmc.sample_tall` rightly took the exact test: 41–76 s where an ordinary model of that size takes 4.

Those rows are few, so they can be **summed exactly at every step** and left out of the sample: with O the outlying
rows,

.. math::

    \Delta^* = \text{(data-free part)} + \sum_{i\in O} r_i + N\,\overline{\tilde r}_{\text{minibatch}},
    \qquad \tilde r_i = \begin{cases} 0 & i\in O\\ r_i & i\notin O,\end{cases}

unbiased for Δ as before (the minibatch is drawn from all N rows, a row of O counting 0), with the variance and the
tail weight of the other rows only: a stratified estimator with one stratum taken whole. Each step costs m = |O| more
residuals, and the test's decisions keep their meaning (:func:`tallmcmc.acceptance.sequential.with_control_variate`
adds the sum to the data-free part of Δ; the test sees :meth:`ResidualModel.log_likelihood_ratios_at
<tallmcmc.control_variate.ResidualModel.log_likelihood_ratios_at>`'s zeros).

Which rows: :func:`find_outlying_rows` evaluates every row's residual at a few pairs of posterior draws (one pass of
:data:`PAIRS` residuals per row), ranks the rows by their standardised fourth powers, and keeps the m that minimise the
residuals a step is predicted to need, m + b(m), with b(m) the minibatch the Barker test's two rules ask for on the
other rows (their spread, N²·Var(r̃ᵢ), and the tail guard's (κ − 1)/0.35² for their kurtosis κ, counted as if the
guard always acted; :mod:`tallmcmc.run_warnings`), never more than :data:`MAX_ROWS` (their data are copied to sit beside the step). A
prediction only: ``sample_tall`` then warms up again with the rows held — where the prediction made out of sample
(:attr:`OutlyingRows.size_out_of_sample`) could pay — and measures what the test really uses before it keeps it
(``docs/sample_tall.md``, "Rows the minibatch cannot estimate").

Rows whose Taylor proxies misfit the posterior also make the proxy proposals' moves rejected, whatever the test: a
proxy can follow them exactly instead (``with_outlying_rows(..., in_proxy=True)``), and
:func:`find_rows_for_the_proxy` finds them from every row's residual at pairs as the moves see them
(``docs/sample_tall.md``, "Rows the proxy cannot follow").
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc.control_variate import ControlVariate, taylor_control_variate
from tallmcmc.model import Model, Position, rows_of
from tallmcmc.program_cache import Traced
from tallmcmc.run_warnings import TAIL_GUARD_VARIANCE_RSE
from tallmcmc.sharding import row_sharding

__all__ = [
    "MAX_ROWS",
    "OutlyingRows",
    "RowsForTheProxy",
    "choose_outlying_rows",
    "choose_rows_for_the_proxy",
    "find_outlying_rows",
    "find_rows_for_the_proxy",
    "row_residuals",
    "with_outlying_rows",
]

#: Pairs of posterior draws at which every row's residual is evaluated (a pass of this many residuals per row).
PAIRS = 4
#: Pairs at which :func:`sample_tall <tallmcmc.sample_tall>` looks for the rows a proxy should follow (a pass of this
#: many residuals per row, only where the proxy misfits, before a warm-up again that costs far more).
PROXY_PAIRS = 8
#: The most rows held (their data are copied beside the step, and each step evaluates all of them).
MAX_ROWS = 2**14
#: ... and at most this fraction of N.
MAX_FRACTION = 1 / 8
#: Rows are held only where the predicted residuals per step fall to at most this fraction of those without holding.
MIN_GAIN = 0.5
#: The root mean square of the summed residual between pairs that the rows a proxy follows
#: (:func:`choose_rows_for_the_proxy`) should bring the rest to, out of sample: a log-ratio of spread τ between an
#: independent proposal and the posterior is accepted about 2Φ(−τ/2) of the time where it is normal, 80% at τ = 0.5.
PROXY_MISFIT = 0.5
_CHUNK_ROWS = 2**15  # rows evaluated per compiled call of the pass


class OutlyingRows(NamedTuple):
    """What :func:`find_outlying_rows` found.

    Attributes
    ----------
    indices
        The rows to sum exactly, sorted (empty where holding rows is not predicted to pay).
    size, size_without
        Residuals per step predicted with those rows held (m + b(m)) and without (b(0)).
    kurtosis, kurtosis_without
        The other rows' residual kurtosis (pooled over the pairs), with and without.
    data_used
        Residuals evaluated: :data:`PAIRS` · N.
    size_out_of_sample
        ``size`` predicted on residuals the ranking did not see: at each pair, the m rows that the other pairs rank
        highest held (NaN with one pair). Near ``size`` where the same rows are outlying at every pair (a rare
        category's); far above it where heavy tails are spread over many rows, each outlying at some pairs only,
        so that the rows held at these pairs are not those of the next step.
    """

    indices: np.ndarray
    size: float
    size_without: float
    kurtosis: float
    kurtosis_without: float
    data_used: int
    size_out_of_sample: float = float("nan")

    def describe(self) -> str:
        """The prediction in words."""
        return (
            f"{self.indices.size:,} rows held: residual kurtosis of the others ≈ {self.kurtosis:.3g} (all rows: "
            f"{self.kurtosis_without:.3g}), ≈ {self.size:,.0f} residuals per step predicted against "
            f"≈ {self.size_without:,.0f}"
        )


def _residual_chunk(residual_model, data, positions, proposed, first, rows: int):
    chunk = jax.tree_util.tree_map(lambda leaf: jax.lax.dynamic_slice_in_dim(leaf, first, rows, 0), data)

    def one(position, new):
        return residual_model.log_likelihood_ratios(position, new, chunk)  # the data never enter as a constant

    return jax.vmap(one)(positions, proposed)


def row_residuals(model: Model, control_variate: ControlVariate, positions: Position, proposed: Position) -> np.ndarray:
    """Every row's residual r̃ᵢ(θₖ, θ′ₖ) at each pair k: a (K, N) NumPy array (K = leading axis of ``positions``).

    One compiled program evaluates :data:`_CHUNK_ROWS` rows at all K pairs; the data are its argument, and so is
    what the residuals close over (the control variate's centre and sums: traced once, the trace's constants passed
    in, so that other data of the same shapes compile nothing new). The control variate's own outlying rows, if it
    has any, count 0 as in the test.
    """
    residual_model = control_variate.residual_model(model)
    num_data = model.num_data
    step = min(_CHUNK_ROWS, num_data)
    traced = Traced.of(
        lambda data, p, q, first: _residual_chunk(residual_model, data, p, q, first, step),
        model.data,
        positions,
        proposed,
        np.int32(0),
    )
    program = jax.jit(traced.replay)
    constants = traced.constants
    out = np.empty((jax.tree_util.tree_leaves(positions)[0].shape[0], num_data), np.float64)
    for first in range(0, num_data, step):
        first = min(first, num_data - step)  # the last chunk overlaps the one before: the same values again
        out[:, first : first + step] = np.asarray(program(constants, model.data, positions, proposed, np.int32(first)))
    if control_variate.num_outlying:
        out[:, np.asarray(control_variate.outlying_indices)] = 0.0
    return out


def _powers(x: np.ndarray) -> tuple[np.ndarray, ...]:
    """x, x², x³, x⁴ by products (``x**3`` and ``x**4`` go through ``pow``: 4.4 s of the 8.9 s a choice at N = 10⁷
    took)."""
    square = x * x
    return x, square, square * x, square * square


def _moments_with_rows_held(values: np.ndarray, top: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pair, the variance and fourth central moment over all N rows when the last j rows of ``top`` (candidates,
    in ascending order of score) count 0, for j = 0 … len(top): two (K, len(top) + 1) arrays. The other rows' sums
    are formed apart (the outliers never enter a sum they are later subtracted from), one pair at a time."""
    num_pairs, num_data = values.shape
    most = top.size
    held = np.arange(most + 1)
    others = np.ones(num_data, bool)
    others[top] = False
    variance, fourth = np.empty((num_pairs, most + 1)), np.empty((num_pairs, most + 1))
    for pair in range(num_pairs):
        row = values[pair]
        shift = float(np.median(row))  # about the bulk: little cancellation in the powers
        bulk = [float(np.sum(power)) for power in _powers(row[others] - shift)]
        candidates = _powers(row[top] - shift)
        # column j: the last j candidates held, each a 0, i.e. −shift about the shift
        s1, s2, s3, s4 = (
            (total + np.concatenate([[0.0], np.cumsum(power)])[::-1] + held * (-shift) ** exponent) / num_data
            for exponent, (total, power) in enumerate(zip(bulk, candidates), start=1)
        )
        variance[pair] = np.maximum(s2 - s1**2, 0.0)
        fourth[pair] = np.maximum(s4 - 4 * s1 * s3 + 6 * s1**2 * s2 - 3 * s1**4, 0.0)
    return variance, fourth


def _predicted_sizes(variance: np.ndarray, fourth: np.ndarray, num_data: int, batch_size: int):
    """Residuals per step the minibatch Barker test is predicted to draw (its spread rule and its tail guard) for
    each column's pooled moments, and the pooled kurtosis."""
    pooled_variance = variance.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        kurtosis = np.where(pooled_variance > 0, fourth.mean(axis=0) / (variance**2).mean(axis=0), 1.0)
    spread = num_data**2 * pooled_variance
    spread_size = spread / (1.0 + spread / num_data)
    # the guard as if it always acted: whether it stands down is decided step by step, on minibatches that may hold
    # the few rows a pair here left quiet
    guard_size = (kurtosis - 1.0) / TAIL_GUARD_VARIANCE_RSE**2
    size = np.minimum(np.maximum.reduce([np.full_like(spread, batch_size), spread_size, guard_size]), num_data)
    return size, kurtosis


def choose_outlying_rows(
    residuals: np.ndarray, batch_size: int = 100, max_rows: int | None = None, *, out_of_sample: bool = True
) -> OutlyingRows:
    """The rows to hold, from every row's residuals at a few pairs (``residuals``, (K, N); see the module docstring).

    Rows are ranked by Σₖ zₖᵢ⁴, zₖᵢ their residual standardised over the rows at pair k; of the first j = 0 …
    ``max_rows`` (default :data:`MAX_ROWS`, at most N/8) the j with the fewest predicted residuals per step, j + b(j),
    is taken, unless that is more than :data:`MIN_GAIN` of b(0) (no rows then). ``out_of_sample``: also predict
    :attr:`OutlyingRows.size_out_of_sample` for those rows (a ranking and the moments again per pair: 0.9 s of 3.3 s at
    N = 10⁷; NaN without, or with one pair).
    """
    residuals = np.asarray(residuals, np.float64)
    if residuals.ndim != 2 or not np.all(np.isfinite(residuals)):
        raise ValueError("residuals: a finite (pairs, N) array of every row's residual at each pair")
    num_pairs, num_data = residuals.shape
    most = max(min(MAX_ROWS if max_rows is None else int(max_rows), int(num_data * MAX_FRACTION)), 0)
    score = np.zeros(num_data)
    for pair in residuals:  # Σₖ zₖᵢ⁴, a pair at a time
        score += _fourth_powers(pair)
    top = np.argpartition(score, num_data - most)[num_data - most :] if most else np.zeros((0,), np.int64)
    top = top[np.argsort(score[top], kind="stable")]  # the candidates, least outlying first
    variance, fourth = _moments_with_rows_held(residuals, top)
    size, kurtosis = _predicted_sizes(variance, fourth, num_data, batch_size)
    cost = size + np.arange(size.shape[0])
    best = int(np.argmin(cost))
    if cost[best] > MIN_GAIN * cost[0]:
        best = 0
    indices = np.sort(top[top.size - best :]) if best else np.zeros((0,), np.int64)
    tested = float("nan")
    if out_of_sample and num_pairs > 1:  # with nothing held, b(0) either way
        tested = _out_of_sample_size(residuals, score, best, batch_size) if best else float(cost[0])
    return OutlyingRows(
        indices.astype(np.int32),
        float(cost[best]),
        float(cost[0]),
        float(kurtosis[best]),
        float(kurtosis[0]),
        num_pairs * num_data,
        tested,
    )


class RowsForTheProxy(NamedTuple):
    """What :func:`find_rows_for_the_proxy` found.

    Attributes
    ----------
    indices
        The rows a proxy should follow exactly, sorted (``with_outlying_rows(..., in_proxy=True)``).
    misfit
        The root mean square over the pairs of the other rows' summed residual with them held, out of sample (NaN
        with one pair).
    misfit_without
        The same with no row held.
    data_used
        Residuals evaluated: K · N.
    """

    indices: np.ndarray
    misfit: float
    misfit_without: float
    data_used: int

    def describe(self) -> str:
        """What it found, in words."""
        return (
            f"{self.indices.size:,} rows followed: the others' summed residual between pairs ≈ {self.misfit:.3g} in root "
            f"mean square, out of sample (all rows: {self.misfit_without:.3g})"
        )


def choose_rows_for_the_proxy(residuals: np.ndarray, max_rows: int | None = None) -> RowsForTheProxy:
    """The rows a proxy should follow, from every row's residual at K pairs (``residuals``, (K, N)).

    Between a pair (θ, θ′) the summed residual is log[π(θ′)/π̃(θ′)] − log[π(θ)/π̃(θ)], whose spread is what rejects
    the moves that follow the proxy π̃. Rows are ranked by Σₖ rₖᵢ²; of the first ``max_rows`` (default
    :data:`MAX_ROWS`, at most N/8) as many are taken as bring the root mean square over the pairs of the others'
    summed residual to :data:`PROXY_MISFIT` **out of sample** — at each pair k, the rows held are those the other
    pairs rank highest (held in sample, rows chosen for their large residuals at these very pairs looked enough
    where the next pairs' other small groups were not: 44% accepted where 80% was predicted, on the seventh audit's
    Poisson intercepts at N = 10⁵) — or, where none does, as many as bring it lowest.
    """
    residuals = np.asarray(residuals, np.float64)
    if residuals.ndim != 2 or not np.all(np.isfinite(residuals)):
        raise ValueError("residuals: a finite (pairs, N) array of every row's residual at each pair")
    num_pairs, num_data = residuals.shape
    most = max(min(MAX_ROWS if max_rows is None else int(max_rows), int(num_data * MAX_FRACTION)), 0)
    indices, misfit, without = _rows_for_the_proxy(residuals, most)
    return RowsForTheProxy(indices, misfit, without, num_pairs * num_data)


def _rows_for_the_proxy(residuals: np.ndarray, most: int) -> tuple[np.ndarray, float, float]:
    num_pairs, num_data = residuals.shape
    squares = residuals * residuals
    score = squares.sum(axis=0)
    total = residuals.sum(axis=1)
    if num_pairs == 1 or not most:
        return np.zeros((0,), np.int32), float("nan"), float(np.sqrt(np.mean(total**2)))
    summed = np.empty((num_pairs, most + 1))
    for pair in range(num_pairs):
        others = score - squares[pair]  # Σ rⱼᵢ² over the other pairs
        top = np.argpartition(others, num_data - most)[num_data - most :]
        top = top[np.argsort(-others[top], kind="stable")]
        summed[pair] = total[pair] - np.concatenate([[0.0], np.cumsum(residuals[pair, top])])
    misfit = np.sqrt(np.mean(summed**2, axis=0))
    within = np.flatnonzero(misfit <= PROXY_MISFIT)
    held = int(within[0]) if within.size else int(np.argmin(misfit))
    rows = np.argpartition(score, num_data - held)[num_data - held :] if held else np.zeros((0,), np.int64)
    return np.sort(rows).astype(np.int32), float(misfit[held]), float(misfit[0])


def _fourth_powers(values: np.ndarray) -> np.ndarray:
    """zᵢ⁴, zᵢ the values standardised over the rows."""
    spread = values.std()
    z = (values - values.mean()) / (spread if spread > 0 else 1.0)
    z *= z
    return z * z


def _out_of_sample_size(residuals: np.ndarray, score: np.ndarray, held: int, batch_size: int) -> float:
    """m + b(m) with, at each pair k, the ``held`` (> 0) rows of highest score over the other pairs held (see
    :attr:`OutlyingRows.size_out_of_sample`)."""
    num_pairs, num_data = residuals.shape
    variance, fourth = np.empty((num_pairs, 1)), np.empty((num_pairs, 1))
    for pair in range(num_pairs):
        others = score - _fourth_powers(residuals[pair])  # Σ zⱼᵢ⁴ over the other pairs
        rows = np.argpartition(others, num_data - held)[num_data - held :]
        moments = _moments_with_rows_held(residuals[pair : pair + 1], rows)
        variance[pair], fourth[pair] = moments[0][0, -1], moments[1][0, -1]
    size, _ = _predicted_sizes(variance, fourth, num_data, batch_size)
    return float(size[-1]) + held


def find_outlying_rows(
    model: Model,
    control_variate: ControlVariate,
    positions: Position,
    proposed: Position,
    *,
    batch_size: int = 100,
    max_rows: int | None = None,
    out_of_sample: bool = True,
) -> OutlyingRows:
    """The rows whose residuals a minibatch cannot estimate, from every row's residual at K pairs of draws.

    Parameters
    ----------
    model, control_variate
        The model (its data on one device) and the control variate whose residuals are measured.
    positions, proposed
        K pairs (θₖ, θ′ₖ), positions stacked on a leading axis: draws from (near) the posterior, such as warm-up
        draws far enough apart to be nearly independent (``sample_tall`` takes two chains' draws at the start and
        end of warm-up's second half).
    batch_size
        The minibatch test's first minibatch b₀.
    max_rows
        The most rows held (default :data:`MAX_ROWS`; never more than N/8).
    out_of_sample
        Also predict :attr:`OutlyingRows.size_out_of_sample` (see :func:`choose_outlying_rows`).

    Returns
    -------
    OutlyingRows
        The rows and the prediction; ``data_used`` K·N residuals (one pass).
    """
    residuals = _finite_residuals(model, control_variate, positions, proposed, "find_outlying_rows")
    return choose_outlying_rows(residuals, batch_size, max_rows, out_of_sample=out_of_sample)


def _finite_residuals(model: Model, control_variate: ControlVariate, positions, proposed, name: str) -> np.ndarray:
    """:func:`row_residuals`, refused on a mesh and where one is not finite (named as ``name``'s arguments)."""
    if row_sharding(model.data, name) is not None:
        raise ValueError(f"model: {name} needs the data on one device (not split over a mesh)")
    residuals = row_residuals(model, control_variate, positions, proposed)
    if not np.all(np.isfinite(residuals)):
        raise ValueError(
            "positions, proposed: a residual is not finite at these pairs; pass draws where the model's "
            "log-likelihood is finite for every row (from the posterior, or the Laplace approximation near it)"
        )
    return residuals


def find_rows_for_the_proxy(
    model: Model, control_variate: ControlVariate, positions: Position, proposed: Position, *, max_rows=None
) -> RowsForTheProxy:
    """The rows a proxy should follow exactly, from every row's residual at K pairs of draws (one pass of K·N).

    Parameters
    ----------
    model, control_variate
        The model (its data on one device) and the control variate whose proxy misfits.
    positions, proposed
        K pairs (θₖ, θ′ₖ) stacked on a leading axis, as its moves see them: θ a chain's state, θ′ where a move from
        it lands — for proxy HMC of integration time π/2 preconditioned by the Laplace covariance, nearly a draw from
        the proxy (``sample_tall`` pairs warm-up states with Laplace draws).
    max_rows
        The most rows (default :data:`MAX_ROWS`; never more than N/8).

    Returns
    -------
    RowsForTheProxy
        See :func:`choose_rows_for_the_proxy`.
    """
    residuals = _finite_residuals(model, control_variate, positions, proposed, "find_rows_for_the_proxy")
    return choose_rows_for_the_proxy(residuals, max_rows)


def with_outlying_rows(
    control_variate: ControlVariate, model: Model, indices: Any, *, in_proxy: bool = False
) -> ControlVariate:
    """``control_variate`` with the rows at ``indices`` summed exactly at every step (see the module docstring).

    Parameters
    ----------
    control_variate
        Built for ``model`` (:func:`tallmcmc.taylor_control_variate`, or ``sample_tall``'s).
    model
        Its model; the rows' data are gathered from ``model.data`` (on one device).
    indices
        Distinct integers in [0, N); an empty set gives ``control_variate`` without outlying rows.

    Returns
    -------
    ControlVariate
        The same expansion, with ``outlying_indices`` (sorted) and ``outlying_rows``. Every subsampling test that
        takes it evaluates those m residuals at every step (``data_used`` m more) and draws its minibatch as before;
        AustereMH and the confidence sampler, which read every residual in full passes, refuse it.
        With ``in_proxy`` also ``outlying_in_proxy``: the proxy proposals follow those rows' own log-likelihoods
        instead of their Taylor proxies (:meth:`ControlVariate.proposal_log_likelihood
        <tallmcmc.control_variate.ControlVariate.proposal_log_likelihood>`), which reads the m rows at every
        evaluation of a trajectory and takes their share of G (and of H̄) out of the proxy: one pass over the m rows,
        ``data_used`` m more.

    Parameters
    ----------
    in_proxy
        Whether the proxy proposals follow the rows exactly too (default ``False``: only the test sums them). Where
        their Taylor proxies are what the posterior does not look like (few rows informing a direction: a small
        group's intercept) the moves that follow them are rejected, whatever the test; following them exactly
        keeps those moves. The test's Δ is the same either way.
    """
    control_variate.check_model(model)
    if row_sharding(model.data, "with_outlying_rows") is not None:
        raise ValueError("model: with_outlying_rows needs the data on one device (not split over a mesh)")
    rows = np.unique(np.asarray(indices).ravel())
    if rows.size != np.asarray(indices).size or (rows.size and (rows[0] < 0 or rows[-1] >= model.num_data)):
        raise ValueError(f"indices: distinct integers in [0, N = {model.num_data:,}), e.g. OutlyingRows.indices")
    if rows.size == 0:
        return dataclasses.replace(control_variate, outlying_indices=None, outlying_rows=None)
    on_device = jnp.asarray(rows.astype(np.int32))
    held = dataclasses.replace(
        control_variate,
        outlying_indices=on_device,
        outlying_rows=rows_of(model.data, on_device),
        outlying_gradient_sum=None,
        outlying_hessian_sum=None,
    )
    if not in_proxy:
        return held
    # their Taylor part: the same expansion built on those rows alone (one pass over m rows); a shared curvature
    # gives each row A/N, so only their gradients are needed. Its own checks of the curvature are the expansion's,
    # already made: a sum over a few rows is singular in every direction they do not inform
    per_datum = control_variate.order == 2 and control_variate.curvature == "per_datum"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = taylor_control_variate(
            dataclasses.replace(model, data=held.outlying_rows), control_variate.center, order=2 if per_datum else 1
        )
    return dataclasses.replace(
        held,
        outlying_gradient_sum=alone.gradient_sum,
        outlying_hessian_sum=alone.hessian_sum if per_datum else None,
        data_used=control_variate.data_used + rows.size,
    )
