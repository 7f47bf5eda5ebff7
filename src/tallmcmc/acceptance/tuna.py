r"""TunaMH: the exact minibatch Metropolis–Hastings test of Zhang, Cooper and De Sa (2020).

Write the tempered target as :math:`π(θ) ∝ p_0(θ) \exp(-\sum_i U_i(θ))` with
:math:`U_i(θ) = -\log p(x_i \mid θ)/K`. TunaMH needs a bound

.. math:: |U_i(θ) - U_i(θ')| \le c_i\, M(θ, θ') \quad\text{for every } i, θ, θ',

with :math:`c_i \ge 0` fixed per datum and :math:`M` symmetric. With
:math:`C = \sum_i c_i`, :math:`λ = χ C^2 M^2` and

.. math:: φ_i = \tfrac12\,(U_i(θ') - U_i(θ) + c_i M), \qquad
          φ'_i = \tfrac12\,(U_i(θ) - U_i(θ') + c_i M)

(both in :math:`[0, c_i M]` by the bound), one step

1. draws :math:`B \sim \mathrm{Poisson}(λ + C M)`;
2. draws B indices i, each with probability :math:`c_i / C`, and keeps each
   with probability :math:`(λ c_i + C φ_i)/(λ c_i + C c_i M)`;
3. accepts θ′ with probability
   :math:`\min\{1,\; \frac{p_0(θ') q(θ\mid θ')}{p_0(θ) q(θ'\mid θ)}
   \prod_{i \text{ kept}} \frac{λ c_i + C φ'_i}{λ c_i + C φ_i}\}`.

Why it is exact (``docs/tuna.md``): by Poisson thinning the number of times
datum i is kept is Poisson with rate :math:`a_i = λ c_i/C + φ_i`,
independently over i. The move θ → θ′ and the reverse move θ′ → θ (rates
:math:`a'_i = λ c_i/C + φ'_i`) see the same kept counts :math:`s_i`, and the
ratio of their probabilities is
:math:`\prod_i (a'_i/a_i)^{s_i} e^{-\sum_i (a'_i - a_i)}`; since
:math:`\sum_i (a'_i - a_i) = \sum_i [U_i(θ) - U_i(θ')]` the exponential is the
inverse likelihood ratio, so Metropolis–Hastings on (θ, s) with the ratio of
step 3 has the posterior as its θ-marginal. χ trades the batch size
(:math:`E B = χ C^2 M^2 + C M`) against the noise of the log ratio, whose
variance is at most about :math:`1/χ`.

Details of this implementation:

* The bound is a :class:`TunaBound`, built once before sampling (its one pass
  over the data is counted in ``SamplingResult.setup_data_used``). Its
  constants :math:`\tilde c_i` bound the **untempered** log-likelihood,
  :math:`c_i = \tilde c_i / K` is formed at each step, so a bound serves every
  temperature. The shipped examples build theirs:
  ``tuna_bound(model, ...)`` in :mod:`tallmcmc.examples.logistic_regression`,
  :mod:`~tallmcmc.examples.gaussian_mixture`,
  :mod:`~tallmcmc.examples.gaussian_mean` and
  :mod:`~tallmcmc.examples.weighted_mean`.
* Indices are drawn from a Walker alias table (Vose's construction, on the
  host in float64, once): O(1) per draw. The table and the c̃ᵢ
  (:class:`TunaTables`, 12 bytes per datum) are one copy shared by every
  chain, read by the step from the bound; JAX hands such large closed-over
  arrays to the compiled code as arguments (the history of that choice and
  its measurements: ``docs/tuna.md``).
* Under ``jit`` the random B is met by a ``while_loop`` over chunks of
  ``chunk_size`` draws; a step costs ⌈(B + 1)/chunk_size⌉ iterations. The
  step is a :class:`~tallmcmc.acceptance.base.StepMachine` (one chunk per
  ``advance``), so the asynchronous driver lets each chain start its next
  step when its own B is met. B is
  drawn in the same loop as the number of arrivals of a unit-rate Poisson
  process in [0, λ + CM] (exponential gaps, the time left carried with
  Kahan compensation), which compiles far faster than
  ``jax.random.poisson`` and needs no bound on B.
* When the Poisson mean λ + CM exceeds ``max_expected_batch`` (default N)
  the step takes the exact full-data Metropolis test instead. The switch
  depends on (θ, θ′) only through the symmetric M, so each branch satisfies
  detailed balance on its own and the mixture is exact; it keeps a far
  proposal (a chain started far from the posterior) from asking for
  millions of draws.
* Every drawn index is checked against the bound: a step that meets
  :math:`|U_i(θ') - U_i(θ)| > c_i M (1 + 10^{-3})` rejects, flags
  ``non_finite`` and reports the largest ratio :math:`|U_i(θ') - U_i(θ)|/(c_i M)`
  it saw in ``error_bound``; :func:`tallmcmc.sample` then raises a
  ``ValueError`` naming the ``bound`` (:meth:`TunaBound.check_info`).
  Differences within the slack (rounding) are clipped to the bound.
* ``data_used`` is B per step (each drawn index is one evaluation of the
  per-datum log ratio, repeats included), or N on a full-data step.
* With ``control_variate`` the test runs on control-variate residuals (the
  proxy sum joins the data-free part of Δ, as for the other subsampling
  tests), and the bound must hold for the residuals:
  ``tallmcmc.examples.logistic_regression.tuna_bound(model, control_variate=cv)``
  gives one.

References
----------
.. [1] Zhang, R., Cooper, A. F. and De Sa, C. (2020). Asymptotically optimal
   exact minibatch Metropolis-Hastings. NeurIPS 2020, Algorithm 3.
.. [2] Walker, A. J. (1977). An efficient method for generating discrete
   random variables with general distributions. ACM TOMS 3(3).
.. [3] Vose, M. D. (1991). A linear algorithm for generating random numbers
   with a given distribution. IEEE Trans. Softw. Eng. 17(9).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc._checks import integer_at_least, positive_finite, removed_name
from tallmcmc.acceptance.base import AcceptanceTest, Decision, StepMachine, decide_by_machine, info_for, is_bad
from tallmcmc.acceptance.sequential import with_control_variate
from tallmcmc.model import Model, Position

__all__ = ["TunaBound", "TunaBoundViolation", "tuna", "tuna_bound"]

#: A drawn datum whose |Uᵢ(θ′) − Uᵢ(θ)| exceeds cᵢ M by more than this fraction violates the bound;
#: within it (float32 rounding of two log-likelihoods) the difference is clipped to ±cᵢ M.
BOUND_SLACK = 1e-3


# ---------------------------------------------------------------------------------------------- the bound


@dataclasses.dataclass(frozen=True, eq=False)
class TunaBound:
    """Per-datum constants c̃ᵢ and a distance M with |log p(xᵢ|θ′) − log p(xᵢ|θ)| ≤ c̃ᵢ M(θ, θ′).

    Build it with :func:`tuna_bound` (or an example's ``tuna_bound(model)``); pass it to
    :func:`tuna`. The constants bound the *untempered* per-datum
    log-likelihood (or its control-variate residual, if ``control_variate``
    is set); the test divides them by the temperature K.

    Attributes
    ----------
    constants
        (N,) float64 NumPy array of c̃ᵢ ≥ 0.
    distance
        ``distance(position, proposed) -> scalar`` M(θ, θ′) ≥ 0, symmetric in
        its arguments, traceable by JAX.
    total
        C̃ = Σᵢ c̃ᵢ (float64).
    data_used
        Data points touched to compute the constants (one pass: N).
    name
        Key of its setup cost in ``SamplingResult.setup_data_used``.
    control_variate
        The :class:`tallmcmc.ControlVariate` whose residuals the bound is
        for, or ``None`` for the log-likelihood itself.
    """

    constants: np.ndarray
    distance: Callable[[Position, Position], jax.Array]
    total: float
    data_used: int
    name: str
    control_variate: Any = None
    # the alias table: draw j uniform in [0, N), keep it with probability ``alias_probability[j]``,
    # else take ``alias_index[j]`` (a datum with c̃ᵢ = 0 has probability 0 and is never the alias)
    alias_probability: jax.Array | None = None
    alias_index: jax.Array | None = None
    device_constants: jax.Array | None = None

    @property
    def tables(self) -> TunaTables:
        """The per-datum arrays a step reads, one copy shared by every chain (closed over by the step; JAX
        passes closed-over arrays larger than ``jax_embedded_constants_max_bytes`` to the executable as
        arguments rather than embedding them)."""
        return TunaTables(self.alias_probability, self.alias_index, self.device_constants)

    @property
    def num_data(self) -> int:
        return int(self.constants.shape[0])

    def check_info(self, info: dict) -> None:
        """Raise :class:`TunaBoundViolation` (a ``ValueError``) if any step of a run found this bound violated
        (called by :func:`tallmcmc.sample`).

        TunaMH marks such a step by rejecting it, ``non_finite`` and an
        ``error_bound`` > 1 (the largest |Uᵢ(θ′) − Uᵢ(θ)| / (cᵢ M) it saw).
        """
        ratios = np.asarray(info["error_bound"])
        violated = np.asarray(info["non_finite"]) & (ratios > 1.0)
        if violated.any():
            raise TunaBoundViolation(self.name, int(violated.sum()), violated.size, float(ratios[violated].max()))


class TunaBoundViolation(ValueError):
    """A run's steps found a :class:`TunaBound` violated (raised by :meth:`TunaBound.check_info`).

    Attributes
    ----------
    bound_name
        The bound's ``name``.
    violated, steps
        How many steps found it violated, of how many.
    worst
        The largest |Uᵢ(θ′) − Uᵢ(θ)| / (cᵢ M(θ, θ′)) seen (> 1).
    """

    def __init__(self, bound_name: str, violated: int, steps: int, worst: float):
        self.bound_name, self.violated, self.steps, self.worst = bound_name, violated, steps, worst
        super().__init__(
            f"{self.summary}. The `bound` passed to tallmcmc.tuna ({bound_name!r}) does not hold for this model, so the "
            "chain is not exact. Fix the constants or the distance of the bound (tallmcmc.acceptance.tuna.tuna_bound), "
            "or, for a shipped example, use its own bound (tallmcmc.examples.<example>.tuna_bound(model), e.g. "
            "tallmcmc.examples.logistic_regression.tuna_bound). A bound that holds in exact arithmetic can still fail "
            "where the values are float32 and the differences tiny (control-variate residuals at large N): run in "
            "float64 (jax.config.update('jax_enable_x64', True) and float64 data; docs/tuna.md, 'Bounds and float32')"
        )

    @property
    def summary(self) -> str:
        """What was found, in one clause."""
        return (
            f"the TunaMH bound was violated at {self.violated} of {self.steps} steps: a drawn datum had "
            f"|U_i(θ′) − U_i(θ)| up to {self.worst:.4g} times c_i·M(θ, θ′)"
        )


class TunaStepState(NamedTuple):
    """One TunaMH step under way: what the step fixed at its start, then the loop's running values.

    ``distance`` M, ``lam`` λ = χC²M², ``full`` (the full-data branch), ``bad_distance``, the keys of
    u and of the draws; then the chunk ``index``, the Poisson time ``left`` (with its compensation),
    the ``count`` B so far, the compensated ``log_sum``, the ``worst`` violation ratio seen,
    ``nan_seen`` and ``done``.
    """

    distance: jax.Array
    lam: jax.Array
    full: jax.Array
    bad_distance: jax.Array
    uniform_key: jax.Array
    draw_key: jax.Array
    index: jax.Array
    left: jax.Array
    left_error: jax.Array
    count: jax.Array
    log_sum: jax.Array
    compensation: jax.Array
    worst: jax.Array
    nan_seen: jax.Array
    done: jax.Array


class TunaTables(NamedTuple):
    """The alias table and the constants c̃ᵢ on the device (3 arrays of length N, shared by all chains)."""

    alias_probability: jax.Array
    alias_index: jax.Array
    constants: jax.Array


def _alias_table(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vose's alias table for the probabilities ∝ ``weights`` (≥ 0, not all 0), in float64: (probability, alias)."""
    count = weights.shape[0]
    scaled = (weights / weights.sum() * count).tolist()
    probability = [1.0] * count
    alias = list(range(count))
    small = [int(i) for i in np.flatnonzero(np.asarray(scaled) < 1.0)]
    large = [int(i) for i in np.flatnonzero(np.asarray(scaled) >= 1.0)]
    while small and large:
        low = small.pop()
        high = large[-1]
        probability[low] = scaled[low]
        alias[low] = high
        scaled[high] -= 1.0 - scaled[low]
        if scaled[high] < 1.0:
            large.pop()
            small.append(high)
    probability, alias = np.asarray(probability, np.float64), np.asarray(alias, np.int64)
    # what is left (rounding) keeps probability 1, except a datum of weight 0: it must never be drawn
    empty = weights == 0
    probability[empty] = 0.0
    alias[empty & (alias == np.arange(count))] = int(np.argmax(weights))
    return probability, alias


def tuna_bound(
    constants,
    distance: Callable[[Position, Position], jax.Array],
    *,
    data_used: int | None = None,
    name: str = "tuna bound",
    control_variate=None,
    dtype=None,
) -> TunaBound:
    """A :class:`TunaBound` from per-datum constants c̃ᵢ and a distance M (builds the alias table once).

    Parameters
    ----------
    constants
        (N,) array of c̃ᵢ ≥ 0 with |log p(xᵢ|θ′) − log p(xᵢ|θ)| ≤ c̃ᵢ M(θ, θ′)
        for every θ, θ′ (untempered). A datum with c̃ᵢ = 0 is never drawn:
        its log-likelihood must not depend on θ.
    distance
        ``distance(position, proposed) -> scalar``: M, symmetric, ≥ 0.
    data_used
        Data points touched to compute ``constants`` (default N: one pass).
    name
        How ``SamplingResult.setup_data_used`` names its cost.
    control_variate
        Set it when the bound is for the residuals of this control variate;
        :func:`tuna` then requires the same ``control_variate``.
    dtype
        Float dtype of the constants on the device (default: JAX's default float).

    Returns
    -------
    TunaBound
    """
    values = np.asarray(constants, dtype=np.float64)
    if values.ndim != 1 or values.shape[0] == 0:
        raise ValueError(f"constants must be a non-empty 1-d array (one c_i per datum); got shape {values.shape}")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError("constants must be finite and >= 0 (c_i bounds |log p(x_i|θ′) − log p(x_i|θ)| / M)")
    if not callable(distance):
        raise TypeError("distance must be a function distance(position, proposed) -> scalar M(θ, θ′)")
    num_data = values.shape[0]
    data_used = num_data if data_used is None else integer_at_least(data_used, "data_used", 0)
    dtype = jnp.zeros(()).dtype if dtype is None else dtype
    if np.any(values > 0):
        probability, alias = _alias_table(values)
    else:  # C = 0: nothing is ever drawn (B ~ Poisson(0))
        probability, alias = np.ones(num_data), np.arange(num_data)
    return TunaBound(
        constants=values,
        distance=distance,
        total=float(values.sum()),
        data_used=data_used,
        name=name,
        control_variate=control_variate,
        alias_probability=jnp.asarray(probability, dtype),
        alias_index=jnp.asarray(alias, jnp.int32),
        device_constants=jnp.asarray(values, dtype),
    )


# ---------------------------------------------------------------------------------------------- the test


def _compensated_add(total, compensation, value):
    """Kahan summation: ``total + value`` with the rounding error carried in ``compensation``."""
    corrected = value - compensation
    new_total = total + corrected
    return new_total, (new_total - total) - corrected


def step_terms(log_ratios, c, cm, lam, total):
    """Keep probabilities and kept log-ratio terms of TunaMH for drawn data.

    Parameters
    ----------
    log_ratios
        lᵢ = Uᵢ(θ) − Uᵢ(θ′) (tempered log-likelihood ratio of each drawn datum),
        already clipped to [−cᵢM, cᵢM].
    c, cm
        cᵢ and cᵢ M (tempered).
    lam, total
        λ = χ C² M² and C.

    Returns
    -------
    (keep_probability, log_term)
        (λcᵢ + Cφᵢ)/(λcᵢ + C cᵢ M) and log[(λcᵢ + Cφ′ᵢ)/(λcᵢ + Cφᵢ)], with
        φᵢ = ½(cᵢM − lᵢ), φ′ᵢ = ½(cᵢM + lᵢ).
    """
    phi = 0.5 * (cm - log_ratios)
    denominator = lam * c + total * phi
    keep = denominator / (lam * c + total * cm)
    # φ′ − φ = lᵢ: log(1 + C lᵢ / (λcᵢ + Cφᵢ)), accurate when λcᵢ ≫ Cφᵢ
    return keep, jnp.log1p(total * log_ratios / denominator)


def tuna(
    chi: float,
    bound: TunaBound,
    *,
    chunk_size: int = 64,
    max_expected_batch: float | None = None,
    control_variate=None,
) -> AcceptanceTest:
    """The TunaMH acceptance test (Zhang, Cooper & De Sa 2020): exact, with a Poisson minibatch.

    Parameters
    ----------
    chi
        χ > 0: the expected batch is χC²M² + CM and the log acceptance ratio
        has variance at most about 1/χ. Small χ: small batches, lower
        acceptance; large χ: the test approaches full-data Metropolis.
    bound
        A :class:`TunaBound` for the model (built once, e.g. by
        :func:`tuna_bound` or :func:`tallmcmc.examples.logistic_regression.tuna_bound`).
    chunk_size
        Draws evaluated per ``while_loop`` iteration (static).
    max_expected_batch
        When λ + CM exceeds it, the step uses the exact full-data Metropolis
        test (N points) instead; default N. The switch is symmetric in
        (θ, θ′), so the chain stays exact.
    control_variate
        Optional :func:`tallmcmc.taylor_control_variate`: the test then runs on
        the residuals, and ``bound`` must be built for them (the same object).

    Returns
    -------
    AcceptanceTest
        ``info.statistic`` is the log acceptance ratio of the extended chain
        (the exact Δ on a full-data step); ``data_used`` B (or N);
        ``error_bound`` 0, or the largest violation ratio (> 1) on a step
        that found the bound violated (the step rejects and flags
        ``non_finite``; :func:`tallmcmc.sample` raises).

    References
    ----------
    .. [1] Zhang, R., Cooper, A. F. and De Sa, C. (2020). Asymptotically
       optimal exact minibatch Metropolis-Hastings. NeurIPS 2020.
    """
    return _build(
        chi,
        bound,
        chunk_size=chunk_size,
        max_expected_batch=max_expected_batch,
        control_variate=control_variate,
        terms=step_terms,
    )


def _build(chi, bound, *, chunk_size, max_expected_batch, control_variate, terms) -> AcceptanceTest:
    """:func:`tuna` with the per-datum rule ``terms`` as a parameter (the tests pass wrong rules to it)."""
    chi = positive_finite(chi, "chi", "TunaMH's batch-size/acceptance trade-off: E B = χC²M² + CM")
    if not isinstance(bound, TunaBound):
        raise TypeError(
            "bound must be a TunaBound: build one with tallmcmc.acceptance.tuna.tuna_bound(constants, distance) or "
            "an example's own, such as tallmcmc.examples.logistic_regression.tuna_bound(model)"
        )
    chunk_size = integer_at_least(chunk_size, "chunk_size")
    if max_expected_batch is not None:
        max_expected_batch = positive_finite(
            max_expected_batch, "max_expected_batch", "the expected batch above which a step uses all N points"
        )
    if bound.control_variate is not control_variate:
        raise ValueError(
            "bound and control_variate do not match: a TunaMH bound for control-variate residuals must be built for "
            "the same control_variate that is passed to tallmcmc.tuna (and a bound for the raw log-likelihood must "
            "be used without one)"
        )
    total_untempered = bound.total

    def init(model: Model, position: Position) -> tuple:
        if model.num_data != bound.num_data:
            raise ValueError(
                f"bound was built for N = {bound.num_data} data points, the model has N = {model.num_data}; "
                "build the bound from the model you sample"
            )
        distance = bound.distance(position, position)
        if isinstance(distance, jax.core.Tracer):  # inside jit: checked on the concrete start already
            return ()
        distance = np.asarray(distance)
        if distance.shape != () or not np.isfinite(distance) or distance < 0:
            raise ValueError(
                f"bound.distance(position, position) must be a finite scalar >= 0; got {distance!r}. "
                "distance(θ, θ′) is M(θ, θ′) of the bound |U_i(θ) − U_i(θ′)| ≤ c_i M(θ, θ′)"
            )
        return ()

    def start(rng_key, model: Model, position, proposed, log_ratio_offset, cache) -> TunaStepState:
        dtype = log_ratio_offset.dtype
        limit = float(model.num_data) if max_expected_batch is None else max_expected_batch
        temperature = jnp.asarray(model.temperature, dtype)
        total = jnp.asarray(total_untempered, dtype) / temperature  # C
        distance = jnp.asarray(bound.distance(position, proposed), dtype)  # M
        bad_distance = ~jnp.isfinite(distance) | (distance < 0)
        distance = jnp.where(bad_distance, 0.0, distance)
        span = total * distance  # CM
        lam = chi * span**2
        expected = lam + span
        skip = (log_ratio_offset == -jnp.inf) | bad_distance
        full = (expected > limit) & ~skip
        uniform_key, draw_key = jax.random.split(rng_key)
        # B ~ Poisson(λ + CM) is drawn inside the loop as the number of arrivals of a unit-rate Poisson
        # process in [0, λ + CM]: each chunk draws ``chunk_size`` exponential gaps; the time left is kept
        # with a compensated subtraction so that float32 loses nothing over many chunks
        horizon = jnp.where(full | skip, -1.0, expected).astype(dtype)
        zero = jnp.zeros((), dtype)
        state = TunaStepState(
            distance,
            lam,
            full,
            bad_distance,
            uniform_key,
            draw_key,
            jnp.zeros((), jnp.int32),
            horizon,
            zero,
            jnp.zeros((), jnp.int32),
            zero,
            zero,
            zero,
            jnp.zeros((), bool),
            jnp.zeros((), bool),
        )
        return state._replace(done=~going(state, model.num_data))

    def going(state: TunaStepState, num_data: int) -> jax.Array:
        return jnp.where(state.full, state.index * chunk_size < num_data, state.left >= 0)

    def advance(state: TunaStepState, model: Model, position, proposed, log_ratio_offset, cache) -> TunaStepState:
        """One chunk of ``chunk_size`` draws (the body of ``decide``'s loop)."""
        dtype = log_ratio_offset.dtype
        num_data = model.num_data
        tables = bound.tables  # one copy for all chains (JAX passes large closed-over arrays as arguments)
        temperature = jnp.asarray(model.temperature, dtype)
        total = jnp.asarray(total_untempered, dtype) / temperature  # C
        full, distance, lam, index = state.full, state.distance, state.lam, state.index
        lanes = jnp.arange(chunk_size, dtype=jnp.int32)
        gap_key, pick_key, alias_key, keep_key = jax.random.split(jax.random.fold_in(state.draw_key, index), 4)
        gaps = jax.random.exponential(gap_key, (chunk_size,), dtype)
        arrivals = jnp.cumsum(gaps)
        positions = index * chunk_size + lanes
        valid = jnp.where(full, positions < num_data, arrivals <= state.left)
        column = jax.random.randint(pick_key, (chunk_size,), 0, num_data)
        stay = jax.random.uniform(alias_key, (chunk_size,), dtype) < tables.alias_probability[column]
        drawn = jnp.where(stay, column, tables.alias_index[column])
        indices = jnp.where(full, jnp.minimum(positions, num_data - 1), drawn)
        ratios = model.log_likelihood_ratios_at(position, proposed, indices).astype(dtype)  # lᵢ = Uᵢ(θ) − Uᵢ(θ′)
        c = tables.constants[indices].astype(dtype) / temperature
        cm = c * distance
        checked = valid & ~full & ~jnp.isnan(ratios)
        excess = jnp.where(checked & (ratios != 0), jnp.abs(ratios) / cm, 0.0)  # inf where cᵢM = 0 < |lᵢ|
        nan_seen = state.nan_seen | jnp.any(valid & jnp.isnan(ratios))
        clipped = jnp.clip(ratios, -cm, cm)
        keep_probability, log_terms = terms(clipped, c, cm, lam, total)
        kept = jax.random.uniform(keep_key, (chunk_size,), dtype) < keep_probability
        values = jnp.where(full, ratios, jnp.where(kept, log_terms, 0.0))
        log_sum, compensation = _compensated_add(
            state.log_sum, state.compensation, jnp.sum(jnp.where(valid, values, 0.0))
        )
        left, left_error = _compensated_add(state.left, state.left_error, -arrivals[-1])
        count = state.count + jnp.sum(valid).astype(jnp.int32)
        new = state._replace(
            index=index + 1,
            left=left,
            left_error=left_error,
            count=count,
            log_sum=log_sum,
            compensation=compensation,
            worst=jnp.maximum(state.worst, jnp.max(excess)),
            nan_seen=nan_seen,
        )
        return new._replace(done=~going(new, num_data))

    def done(state: TunaStepState) -> jax.Array:
        return state.done

    def finish(state: TunaStepState, model: Model, position, proposed, log_ratio_offset, cache) -> Decision:
        dtype = log_ratio_offset.dtype
        violated = state.worst > 1.0 + BOUND_SLACK
        statistic = state.log_sum + log_ratio_offset
        bad = is_bad(statistic) | violated | state.bad_distance | state.nan_seen
        log_u = jnp.log(jax.random.uniform(state.uniform_key, dtype=dtype))
        accepted = (log_u < statistic) & ~bad
        info = info_for(
            statistic,
            state.count,
            used_full_data=state.full,
            non_finite=bad,
            error_bound=jnp.where(violated, state.worst, 0.0),
        )
        return Decision(accepted, cache, info)

    machine = StepMachine(start, advance, done, finish)

    # no cache: the tables are read from the bound, one copy shared by every chain
    test = AcceptanceTest(
        init,
        decide_by_machine(machine),
        f"tuna(chi={chi:g})",
        setup=(bound,),
        keeps_cache_on_reject=True,
        machine=machine,
    )
    return with_control_variate(test, control_variate)


# ---------------------------------------------------------------------------------------------- old names

#: The example bounds that lived here until 0.1.0, each now its example module's ``tuna_bound``: old name → new.
_MOVED_TO_EXAMPLES = {
    f"{example}_bound": f"tallmcmc.examples.{example}.tuna_bound"
    for example in ("gaussian_mean", "gaussian_mixture", "logistic_regression", "weighted_mean")
}


def __getattr__(name: str):
    """The example bounds' old names (removed after 0.1.0): an ``AttributeError`` that names where each moved.

    ``tallmcmc.acceptance.tuna.logistic_regression_bound`` is now
    ``tallmcmc.examples.logistic_regression.tuna_bound``, and likewise for
    ``gaussian_mixture_bound``, ``gaussian_mean_bound`` and ``weighted_mean_bound``.
    Nothing is imported: this core module imports no example.
    """
    raise removed_name(__name__, name, _MOVED_TO_EXAMPLES)
