"""AustereMH: the sequential t-test of Korattikara, Chen and Welling (2014).

The Metropolis test ``u < α`` is written per datum as ``μ > μ₀`` with

    μ  = (1/N) Σᵢ lᵢ,   lᵢ = (1/K)[log p(xᵢ|θ′) − log p(xᵢ|θ)],
    μ₀ = (1/N) · (log u − log_ratio_offset),

(``log_ratio_offset = log p₀(θ′) − log p₀(θ) + log q(θ|θ′) − log q(θ′|θ)``;
the lᵢ are already tempered by :meth:`tallmcmc.Model.log_likelihood_ratios`).
AustereMH draws the data without replacement in stages of ``m`` points and,
after each stage of n points, computes

    t = (l̄ − μ₀) / s,   s = (s_l/√n) · √(1 − (n − 1)/(N − 1)),

(s_l the sample standard deviation, the second factor the finite-population
correction) and the one-sided Student-t tail δ = 1 − F_{n−1}(|t|). If δ < ε
(or n = N, where the decision is exact) it accepts iff l̄ > μ₀.

Randomness: u is drawn from the first key of ``jax.random.split(rng_key)``, the
order of the data from the second (the tests fix μ₀ through this).

Three ways to set (m, ε) are offered:

* :func:`austere` — fixed, given (m, ε);
* :func:`austere_conservative` — AustereMH(c): (m, ε) chosen once by
  :func:`choose_austere_parameters` so that the *worst-case* error over the
  standardized gap μ_std stays below an error bound;
* :func:`austere_adaptive` — AustereMH(nc): every step first makes a full
  pass over the data to compute μ and σ_l, hence μ_std, and uses the (m, ε)
  that is cheapest *at that* μ_std among the designs whose error there is
  below the bound (a table precomputed on the host).

The designs themselves are computed by :mod:`tallmcmc.acceptance.austere_design`.

References
----------
.. [1] Korattikara, A., Chen, Y. and Welling, M. (2014). Austerity in MCMC
   land: cutting the Metropolis-Hastings budget. ICML 2014, Algorithm 1,
   Sections 4-5 and Appendix.
.. [2] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
   minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 6 and
   Appendix C.2.1 (the grid of m and ε searched).
.. [3] Broadie, M., Glasserman, P. and Kou, S. (1997). A continuity correction
   for discrete barrier options. Mathematical Finance 7(4).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc._checks import error_probability, open_unit_interval, optional_integer_at_least
from tallmcmc.acceptance.austere_design import (
    DEFAULT_BATCH_SIZES,
    DEFAULT_EPSILONS,
    AustereDesign,
    adaptive_design_table,
    check_grid,
    choose_austere_parameters,
)
from tallmcmc.acceptance.base import AcceptanceTest, Decision, StepMachine, info_for, is_bad
from tallmcmc.acceptance.sequential import (
    LoopRule,
    checked_batch_size,
    estimated_log_ratio,
    full_data_log_ratios,
    machine_test,
    metropolis_threshold,
    minibatch_test_init,
    sample_variance,
    sequential_decision,
    sequential_machine,
    with_control_variate,
)
from tallmcmc.model import Model


class AdaptiveContext(NamedTuple):
    """What :func:`austere_adaptive` fixes before its loop: the test's ``context``.

    ``log_u`` and ``threshold`` (N·μ₀) of the Metropolis test, the batch
    ``size`` and the threshold ``epsilon`` chosen from the standardised gap,
    whether the step is decided ``exact``-ly by the full pass, and that pass's
    ``mean`` of the lᵢ.
    """

    log_u: jax.Array
    threshold: jax.Array
    size: jax.Array
    epsilon: jax.Array
    exact: jax.Array
    mean: jax.Array


def student_t_tail(t: jax.Array, degrees_of_freedom: jax.Array) -> jax.Array:
    """One-sided tail 1 − F_ν(|t|) of Student's t.

    ½ I_{ν/(ν+t²)}(ν/2, ½) for ν ≤ 200. For larger ν the argument ν/(ν+t²)
    is within float32 rounding of 1 and the incomplete beta function loses
    accuracy, so the two-term expansion in 1/ν
    Φ̄(|t|) + φ(t)[(t³ + t)/(4ν) + (3t⁷ − 7t⁵ − 5t³ − 3t)/(96ν²)] is used there.
    Its accuracy against SciPy's float64 tail is recorded in
    ``benchmarks/RESULTS.md`` and checked by ``tests/acceptance/test_baselines.py``.
    """
    nu = degrees_of_freedom
    t = jnp.abs(t)
    safe_nu = jnp.minimum(nu, 200.0)
    beta_form = 0.5 * jax.scipy.special.betainc(safe_nu / 2, jnp.asarray(0.5, nu.dtype), safe_nu / (safe_nu + t**2))
    density = jnp.exp(-0.5 * t**2) / jnp.sqrt(2 * jnp.pi).astype(t.dtype)
    expansion = jax.scipy.special.ndtr(-t) + density * (
        (t**3 + t) / (4 * nu) + (3 * t**7 - 7 * t**5 - 5 * t**3 - 3 * t) / (96 * nu**2)
    )
    return jnp.where(nu > 200, expansion, beta_form)


def _t_statistics(state, num_data: int, dtype, threshold):
    """Variance of N·l̄ (with the finite-population correction) and the t-test's tail δ."""
    n = state.count.astype(dtype)
    correction = jnp.maximum(1 - (n - 1) / (num_data - 1), 0.0) if num_data > 1 else jnp.zeros((), dtype)
    # variance of N·l̄ (the estimate of Δ − offset): N² s_l²/n · (1 − (n−1)/(N−1))
    variance = float(num_data) ** 2 * sample_variance(state) / jnp.maximum(n, 1) * correction
    t = (float(num_data) * state.mean - threshold) / jnp.sqrt(variance)
    tail = student_t_tail(t, jnp.maximum(n - 1, 1))
    return variance, tail


def _t_rule(num_data: int, dtype, threshold, batch_size, epsilon, *, chunk_size: int, first_stage: int) -> LoopRule:
    """The sequential t-test's loop with (possibly traced) stage size m and threshold ε."""
    batch_size = jnp.asarray(batch_size, jnp.int32)
    epsilon = jnp.asarray(epsilon, dtype)

    def stop(state):
        _, tail = _t_statistics(state, num_data, dtype, threshold)
        at_stage = (state.count % batch_size) == 0
        return at_stage & (tail < epsilon)

    def next_stage(count, stage):
        return (count // batch_size + 1) * batch_size

    return LoopRule(chunk_size, first_stage, next_stage, stop)


def _t_result(state, num_data: int, log_ratio_offset, threshold):
    """(estimate, variance, tail) at the loop's end: Δ*, its estimated variance, δ (0 once all N are used)."""
    variance, tail = _t_statistics(state, num_data, log_ratio_offset.dtype, threshold)
    estimate = estimated_log_ratio(state, num_data, log_ratio_offset)
    return estimate, variance, jnp.where(state.count >= num_data, 0.0, tail)


def austere(batch_size: int, epsilon: float, *, chunk_size: int | None = None, control_variate=None) -> AcceptanceTest:
    """The AustereMH sequential t-test with fixed stage size m and threshold ε.

    Algorithm 1 of Korattikara et al. (2014), with the details of the module
    docstring: data drawn without replacement, stages n = m, 2m, …, the
    finite-population correction in the standard error, the Student-t tail
    with n − 1 degrees of freedom, and the exact decision at n = N.

    Parameters
    ----------
    batch_size
        m: points per stage (``2 <= batch_size <= N``).
    epsilon
        ε ∈ (0, 1): the test stops at the first stage whose one-sided tail
        probability δ = 1 − F_{n−1}(|t|) is below ε.
    chunk_size
        Points evaluated per loop iteration (default ``batch_size``; a larger
        chunk is masked to the exact stage sizes).
    control_variate
        Optional :func:`tallmcmc.taylor_control_variate`: the test then runs on
        the residuals of the Taylor proxy and adds the proxy's exact sum to Δ
        (:func:`~tallmcmc.acceptance.sequential.with_control_variate`).

    Returns
    -------
    AcceptanceTest
        Its :class:`~tallmcmc.acceptance.base.AcceptanceInfo` reports ``statistic`` =
        N·l̄ + offset (the estimate of Δ, so that accept ⇔ statistic > log u),
        ``variance`` = the estimated variance of that estimate (with the
        finite-population correction; 0 at n = N), ``error_bound`` = the tail
        δ at the stage where the test stopped (0 at n = N), ``data_used`` =
        ``data_used_by_test`` = n.

    References
    ----------
    .. [1] Korattikara, A., Chen, Y. and Welling, M. (2014). Austerity in MCMC
       land: cutting the Metropolis-Hastings budget. ICML 2014, Algorithm 1.
    .. [2] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
       minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 6.
    """
    batch_size = checked_batch_size(batch_size)
    epsilon_value = open_unit_interval(epsilon, "epsilon", "a threshold on the t-test's tail probability")
    chunk_size = optional_integer_at_least(chunk_size, "chunk_size") or batch_size

    init = minibatch_test_init(batch_size)
    machine = _fixed_design_machine(lambda num_data: (batch_size, epsilon_value, chunk_size))
    return with_control_variate(machine_test(machine, init, "austere"), control_variate)


def _fixed_design_machine(design_for) -> StepMachine:
    """AustereMH with a fixed design: ``design_for(N) -> (m, ε, chunk_size)`` (host values)."""

    def prepare(rng_key, model: Model, position, proposed, log_ratio_offset, cache):
        log_u, threshold, order_key = metropolis_threshold(rng_key, log_ratio_offset)  # threshold = N·μ₀
        return (log_u, threshold), order_key, log_ratio_offset == -jnp.inf

    def rule(context, model: Model, log_ratio_offset) -> LoopRule:
        batch_size, epsilon, chunk_size = design_for(model.num_data)
        _, threshold = context
        return _t_rule(
            model.num_data,
            log_ratio_offset.dtype,
            threshold,
            batch_size,
            epsilon,
            chunk_size=min(chunk_size, model.num_data),
            first_stage=batch_size,
        )

    def conclude(context, state, model: Model, position, proposed, log_ratio_offset, cache) -> Decision:
        log_u, threshold = context
        estimate, variance, tail = _t_result(state, model.num_data, log_ratio_offset, threshold)
        return sequential_decision(
            state, model.num_data, estimate, estimate > log_u, cache, variance=variance, error_bound=tail
        )

    return sequential_machine(prepare, rule, conclude)


def austere_conservative(
    error_bound: float,
    batch_sizes=DEFAULT_BATCH_SIZES,
    epsilons=DEFAULT_EPSILONS,
    *,
    num_data: int | None = None,
    standardized_gaps=None,
    gap_weights=None,
    look_spacing: float = 0.1,
    chunk_size: int | None = None,
    control_variate=None,
) -> AcceptanceTest:
    """AustereMH(c): the sequential t-test with (m, ε) from the conservative grid search.

    (m, ε) is chosen once by :func:`choose_austere_parameters` (worst-case
    error over μ_std at most ``error_bound``, least expected data use) and
    kept for every step; no full pass over the data is ever made.

    Parameters
    ----------
    error_bound
        Bound on the worst-case probability of a wrong accept/reject decision.
    batch_sizes, epsilons
        The grid searched (Seita et al. 2017, Appendix C.2.1).
    num_data
        N; if given the design is chosen now (and appears in the test's name),
        otherwise when the test first meets a model.
    standardized_gaps, gap_weights, look_spacing
        Passed to :func:`choose_austere_parameters`.
    chunk_size
        Points evaluated per loop iteration (default: the chosen m).
    control_variate
        Optional :func:`tallmcmc.taylor_control_variate`: the test then runs on
        the residuals of the Taylor proxy and adds the proxy's exact sum to Δ
        (:func:`~tallmcmc.acceptance.sequential.with_control_variate`).

    Returns
    -------
    AcceptanceTest

    References
    ----------
    .. [1] Korattikara, A., Chen, Y. and Welling, M. (2014). Austerity in MCMC
       land: cutting the Metropolis-Hastings budget. ICML 2014, Section 5.
    .. [2] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
       minibatch acceptance test for Metropolis-Hastings. UAI 2017, Appendix C.2.1.
    """
    batch_sizes, epsilons = check_grid(batch_sizes, epsilons)
    error_bound = error_probability(error_bound)
    chunk_size = optional_integer_at_least(chunk_size, "chunk_size")
    gaps_key = None if standardized_gaps is None else tuple(np.asarray(standardized_gaps, float).ravel().tolist())
    weights_key = None if gap_weights is None else tuple(np.asarray(gap_weights, float).ravel().tolist())

    @functools.lru_cache(maxsize=8)
    def design_for(size: int) -> AustereDesign:
        return choose_austere_parameters(
            error_bound,
            size,
            batch_sizes,
            epsilons,
            standardized_gaps=gaps_key,
            gap_weights=weights_key,
            look_spacing=look_spacing,
        )

    name = "austere_conservative"
    if num_data is not None:
        design = design_for(int(num_data))
        name = f"austere_conservative(m={design.batch_size}, epsilon={design.epsilon})"

    def init(model: Model, position) -> tuple:
        if min(batch_sizes) > model.num_data:
            raise ValueError(
                f"every batch size of the grid exceeds the number of data points N = {model.num_data}; "
                "pass smaller batch_sizes"
            )
        design_for(model.num_data)
        return ()

    def fixed_design(size: int):
        design = design_for(size)
        batch_size = min(design.batch_size, size)
        return batch_size, design.epsilon, chunk_size or batch_size

    machine = _fixed_design_machine(fixed_design)
    return with_control_variate(machine_test(machine, init, name), control_variate)


def austere_adaptive(
    error_bound: float,
    batch_sizes=DEFAULT_BATCH_SIZES,
    epsilons=DEFAULT_EPSILONS,
    *,
    standardized_gaps=None,
    look_spacing: float = 0.1,
    chunk_size: int | None = None,
    control_variate=None,
) -> AcceptanceTest:
    """AustereMH(nc): per-step (m, ε) chosen from the step's own standardized gap.

    Each step draws u, makes a **full pass** over the data to get μ and the
    full-data standard deviation σ_l of the lᵢ, computes μ_std =
    (μ − μ₀)√(N − 1)/σ_l, looks up the cheapest design of the grid whose error
    at that μ_std is at most ``error_bound`` (:func:`adaptive_design_table`,
    computed once per N on the host), and runs the sequential t-test with it.
    Where no design of the grid qualifies (|μ_std| near 0) the step decides
    exactly from the full pass it has already made.

    A bound on the error *at every μ_std* is weaker than it sounds: the design
    chosen for each μ_std errs at about the bound's rate everywhere, so even
    hopeless downhill moves are accepted that often, and the posterior is
    visibly widened unless the bound is small (``benchmarks/RESULTS.md``
    records how much on a conjugate Gaussian model).

    The full pass is counted in ``data_used`` (N extra points) and not in
    ``data_used_by_test``, which counts the sequential test's points (N when
    the exact fallback decided), as the papers' tables do.

    Parameters
    ----------
    error_bound
        Bound on the probability of a wrong decision at the step's μ_std.
    batch_sizes, epsilons
        The grid (Seita et al. 2017, Appendix C.2.1).
    standardized_gaps, look_spacing
        Passed to :func:`adaptive_design_table`.
    chunk_size
        Points evaluated per loop iteration (default: the smallest batch size;
        stages are honoured exactly whatever it is).
    control_variate
        Optional :func:`tallmcmc.taylor_control_variate`: the test then runs on
        the residuals of the Taylor proxy and adds the proxy's exact sum to Δ
        (:func:`~tallmcmc.acceptance.sequential.with_control_variate`).

    Returns
    -------
    AcceptanceTest

    References
    ----------
    .. [1] Korattikara, A., Chen, Y. and Welling, M. (2014). Austerity in MCMC
       land: cutting the Metropolis-Hastings budget. ICML 2014, Section 5.
    .. [2] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
       minibatch acceptance test for Metropolis-Hastings. UAI 2017, Section 6
       and Appendix C.2.1.
    """
    batch_sizes, epsilons = check_grid(batch_sizes, epsilons)
    error_bound = error_probability(error_bound)
    chunk_size = optional_integer_at_least(chunk_size, "chunk_size") or min(batch_sizes)
    gaps_key = None if standardized_gaps is None else tuple(np.asarray(standardized_gaps, float).ravel().tolist())

    @functools.lru_cache(maxsize=8)
    def table_for(size: int):
        sizes = tuple(min(b, size) for b in batch_sizes)
        return adaptive_design_table(
            error_bound, size, sizes, epsilons, standardized_gaps=gaps_key, look_spacing=look_spacing
        )

    def init(model: Model, position) -> tuple:
        if model.num_data < 2:
            raise ValueError("austere_adaptive needs N >= 2 data points")
        table_for(model.num_data)
        return ()

    def prepare(rng_key, model: Model, position, proposed, log_ratio_offset, cache):
        num_data = model.num_data
        dtype = log_ratio_offset.dtype
        gaps, sizes, thresholds = table_for(num_data)
        values = full_data_log_ratios(model, position, proposed).astype(dtype)
        mean, spread = model.mean_and_std_over_data(values)
        # the sequential test draws u from the same key, so μ₀ here is its μ₀
        log_u, threshold, order_key = metropolis_threshold(rng_key, log_ratio_offset)  # threshold = N·μ₀
        gap = (float(num_data) * mean + log_ratio_offset - log_u) / float(num_data)  # μ − μ₀
        standardized = jnp.abs(gap) * math.sqrt(num_data - 1) / spread
        standardized = jnp.where(jnp.isnan(standardized), 0.0, standardized)
        index = jnp.clip(jnp.searchsorted(jnp.asarray(gaps, dtype), standardized, side="right") - 1, 0, gaps.size - 1)
        size = jnp.asarray(sizes)[index]
        epsilon = jnp.asarray(thresholds, dtype)[index]
        exact = size >= num_data
        context = AdaptiveContext(log_u, threshold, jnp.maximum(size, 2), epsilon, exact, mean)
        return context, order_key, exact | (log_ratio_offset == -jnp.inf)

    def rule(context: AdaptiveContext, model: Model, log_ratio_offset) -> LoopRule:
        num_data = model.num_data
        return _t_rule(
            num_data,
            log_ratio_offset.dtype,
            context.threshold,
            context.size,
            context.epsilon,
            chunk_size=min(chunk_size, num_data),
            first_stage=min(min(batch_sizes), num_data),
        )

    def conclude(
        context: AdaptiveContext, state, model: Model, position, proposed, log_ratio_offset, cache
    ) -> Decision:
        num_data = model.num_data
        exact = context.exact
        estimate, variance, tail = _t_result(state, num_data, log_ratio_offset, context.threshold)
        exact_estimate = float(num_data) * context.mean + log_ratio_offset
        estimate = jnp.where(exact, exact_estimate, estimate)
        accepted = estimate > context.log_u
        used = jnp.where(exact, num_data, state.count)
        bad = state.non_finite | is_bad(estimate)
        info = info_for(
            estimate,
            num_data + used,
            data_used_by_test=used,
            variance=jnp.where(exact | (state.count < 2) | (state.count >= num_data), 0.0, variance),
            error_bound=jnp.where(exact, 0.0, tail),
            used_full_data=used >= num_data,
            non_finite=bad,
        )
        return Decision(accepted & ~bad, cache, info)

    machine = sequential_machine(prepare, rule, conclude, start_is_full_pass=True)
    return with_control_variate(machine_test(machine, init, "austere_adaptive"), control_variate)
